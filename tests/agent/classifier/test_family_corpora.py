"""Each program family's corpus: commands with the class and the rule they must get.

`tests/data/classifier/families/FAMILY.tsv` holds, one per line, `COMMAND<TAB>CLASS<TAB>RULE`
(`#` lines are comments, `⏎` stands for a newline inside a command). The rule is the one
`agent classify` shows, so a line says both what the command is and why: "why is `sed -i`
mutating?" is answered by the line and by the family file that produced its rule. Lines
from red teams carry their origin in a comment above them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.safety.classifier import classify
from tools.base import RiskClass

FAMILIES = Path(__file__).resolve().parents[2] / "data" / "classifier" / "families"
NEWLINE = "\u23ce"


def corpus_lines() -> list[tuple[str, str, RiskClass, str]]:
    lines = []
    for path in sorted(FAMILIES.glob("*.tsv")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            command, cls, rule = line.split("\t")
            lines.append((f"{path.stem}:{number}", command.replace(NEWLINE, "\n"), RiskClass(cls), rule))
    return lines


LINES = corpus_lines()


def test_every_family_has_a_corpus():
    families = {p.stem for p in (Path(__file__).resolve().parents[3] / "agent" / "safety" / "classifier"
                                 / "families").glob("*.py")} - {"__init__"}
    assert families <= {p.stem for p in FAMILIES.glob("*.tsv")}, "a family without corpus lines"


@pytest.mark.parametrize("where, command, cls, rule", LINES, ids=[line[0] for line in LINES])
def test_corpus_line(where, command, cls, rule):
    risk = classify(command)
    assert (risk.cls, risk.rule) == (cls, rule), f"{where}: {command!r} -> {risk.cls.value} {risk.rule}: {risk.reason}"


def test_a_program_is_judged_by_one_family_only():
    """Which family judges a program never depends on import order: a second family is refused."""
    from agent.safety.classifier.registry import _HANDLERS

    with pytest.raises(ValueError, match="two families register `ls`"):
        _HANDLERS["ls"] = lambda an, cmd: None
    assert _HANDLERS.families["ls"] == "agent.safety.classifier.families.files"
    assert all(family.startswith("agent.safety.classifier.families.") for family in _HANDLERS.families.values())
