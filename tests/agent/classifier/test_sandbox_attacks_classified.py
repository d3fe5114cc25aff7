"""The red team of 2026-12-03 against the read sandbox and the classifier (tests/data/sandbox/redteam-2026-12-03/
attacks.tsv) recorded, at the end of each line's third column, what the classifier said then:
`[classifier: read-only]` or `[classifier refuses: RISK]`. A line it refused must stay refused: the sandbox
is the wall, but on a host where the operator turned it off the classifier is the only guard.
"""

from __future__ import annotations

import re
from pathlib import Path

from agent.safety.classifier import classify
from tools.base import RiskClass

ATTACKS = Path(__file__).resolve().parents[2] / "data" / "sandbox" / "redteam-2026-12-03" / "attacks.tsv"
VERDICT = re.compile(r"\[classifier(?:: (read-only)| refuses: (\w+))\]\s*$")


def rows() -> list[tuple[str, str | None]]:
    """(command, the class it was refused with, or None where it was read-only)."""
    found = []
    for line in ATTACKS.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        command, _category, what = line.split("\t")
        verdict = VERDICT.search(what)
        assert verdict is not None, f"no recorded verdict: {line}"
        found.append((command, verdict.group(2)))
    return found


def test_the_corpus_records_a_verdict_for_each_line():
    recorded = rows()
    assert len(recorded) >= 300
    assert {cls for _, cls in recorded} >= {None, "mutating", "destructive"}


def test_no_line_refused_then_is_read_only_now():
    through = [f"{command}  (refused then: {cls}) -> {classify(command).rule}" for command, cls in rows()
               if cls is not None and classify(command).cls is RiskClass.READ_ONLY]
    assert not through, f"{len(through)} attack lines refused on 2026-12-03 are read-only now:\n" + "\n".join(through)
