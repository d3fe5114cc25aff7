"""The red teams against the read sandbox and the classifier (tests/data/sandbox/redteam-*/attacks.tsv, of
2026-12-03, 2026-12-05, 2026-12-06 and 2026-12-06-files) recorded, at the end of each line's third column, what the classifier said then:
`[classifier: read-only]` or `[classifier refuses: RISK]`. A line it refused must stay refused: the sandbox
is the wall, but on a host where the operator turned it off the classifier is the only guard.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from agent.safety.classifier import classify
from tools.base import RiskClass

CORPORA = sorted((Path(__file__).resolve().parents[2] / "data" / "sandbox").glob("redteam-*/attacks.tsv"))
VERDICT = re.compile(r"\[classifier(?:: (read-only)| refuses: (\w+))\]\s*$")


def rows(attacks: Path) -> list[tuple[str, str | None]]:
    """(command, the class it was refused with, or None where it was read-only)."""
    found = []
    for line in attacks.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        command, _category, what = line.split("\t")
        verdict = VERDICT.search(what)
        assert verdict is not None, f"no recorded verdict: {line}"
        found.append((command, verdict.group(2)))
    return found


@pytest.mark.parametrize("attacks", CORPORA, ids=[p.parent.name for p in CORPORA])
def test_the_corpus_records_a_verdict_for_each_line(attacks):
    recorded = rows(attacks)
    assert len(recorded) >= 40
    # the 2026-12-06 lines (process lifetime and scheduling) were all judged read-only or mutating
    assert {cls for _, cls in recorded} >= {None, "mutating"}


@pytest.mark.parametrize("attacks", CORPORA, ids=[p.parent.name for p in CORPORA])
def test_no_line_refused_then_is_read_only_now(attacks):
    through = [f"{command}  (refused then: {cls}) -> {classify(command).rule}" for command, cls in rows(attacks)
               if cls is not None and classify(command).cls is RiskClass.READ_ONLY]
    assert not through, (f"{len(through)} attack lines of {attacks.parent.name} refused then are read-only now:\n"
                         + "\n".join(through))


def test_every_red_team_is_there():
    assert [p.parent.name for p in CORPORA] == ["redteam-2026-12-03", "redteam-2026-12-05", "redteam-2026-12-06",
                                                "redteam-2026-12-06-files"]
