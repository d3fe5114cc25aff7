"""The fast and slow tiers of the suite (tests/slow_tier.txt lists the slow one).

The README's test command, `python3 -m pytest -q`, runs the fast tier: everything but the slow tier and
the GPU tests. `-m slow` runs the slow tier, and CI runs both. A run that names files or tests on its
command line runs what it names, slow or not: a slow test is never silently left out of a file the
developer asked for.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SLOW_TIER = Path(__file__).resolve().parent / "slow_tier.txt"
_left_out = 0


def slow_tests() -> set[str]:
    """The slow tier's test functions, as `path::name` relative to the repository."""
    lines = (line.strip() for line in SLOW_TIER.read_text().splitlines())
    return {line for line in lines if line and not line.startswith("#")}


def mark_and_select(config, items) -> None:
    global _left_out
    slow = slow_tests()
    for item in items:
        if item.nodeid.split("[", 1)[0] in slow:
            item.add_marker(pytest.mark.slow)
    asked = config.args_source is config.ArgsSource.ARGS or "slow" in (config.option.markexpr or "")
    if asked:
        return
    left_out = [item for item in items if item.get_closest_marker("slow")]
    if left_out:
        _left_out = len(left_out)
        config.hook.pytest_deselected(items=left_out)
        items[:] = [item for item in items if not item.get_closest_marker("slow")]


def summary(terminalreporter) -> None:
    if _left_out:
        terminalreporter.write_line(
            f"{_left_out} slow tests deselected (tests/slow_tier.txt): run them with `python3 -m pytest -q -m slow`; "
            "CI runs both tiers")
