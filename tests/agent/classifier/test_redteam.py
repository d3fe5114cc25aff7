"""The red teams' corpora: commands written by reviewers who had not read the classifier.

Each corpus directory under tests/data/classifier/ holds `attacks.tsv` (commands that change the
host or could: `COMMAND<TAB>CATEGORY<TAB>what it does`), `reads.tsv` and `probes.tsv` (read-only
discovery commands and Python version probes careful engineers run: `COMMAND<TAB>CATEGORY`), and
`remaining.tsv`: the attacks still judged read-only, each with why it is left (`COMMAND<TAB>WHY`).

An attack that comes out read-only and is not in remaining.tsv fails; so does a remaining.tsv line
that no longer comes out read-only (the list shrinks as holes close, it never hides a fixed one).
The reads and probes must run without asking at least as often as the issue asks: 95% and 90%.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.safety.classifier import classify
from tools.base import RiskClass

DATA = Path(__file__).resolve().parents[2] / "data" / "classifier"
CORPORA = sorted(p for p in DATA.glob("redteam-*") if (p / "attacks.tsv").exists())


def rows(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split("\t") for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def read_only(command: str) -> bool:
    return classify(command).cls is RiskClass.READ_ONLY


@pytest.mark.parametrize("corpus", CORPORA, ids=[p.name for p in CORPORA])
def test_no_attack_is_read_only_but_the_listed_remaining_ones(corpus):
    remaining = {row[0] for row in rows(corpus / "remaining.tsv")}
    through = [row for row in rows(corpus / "attacks.tsv") if read_only(row[0])]
    unlisted = [f"{row[0]}  [{row[1]}] -> {classify(row[0]).rule}" for row in through if row[0] not in remaining]
    assert not unlisted, f"{len(unlisted)} attacks of {corpus.name} come out read-only:\n" + "\n".join(unlisted)
    fixed = sorted(remaining - {row[0] for row in through})
    assert not fixed, "no longer read-only, so take them out of remaining.tsv:\n" + "\n".join(fixed)


def test_the_corpora_are_there():
    assert {p.name for p in CORPORA} >= {"redteam-2026-12", "redteam-2026-12b"}
    assert sum(len(rows(p / "attacks.tsv")) for p in CORPORA) > 1700


@pytest.mark.parametrize("name, share", [("reads", 0.95), ("probes", 0.90)])
def test_read_only_commands_run_without_asking(name, share):
    lines = [row[0] for corpus in CORPORA for row in rows(corpus / f"{name}.tsv")]
    asked = [f"{command}  -> {classify(command).rule}" for command in lines if not read_only(command)]
    assert lines
    measured = 1 - len(asked) / len(lines)
    assert measured >= share, (f"{name}: {measured:.1%} run without asking (at least {share:.0%} wanted); "
                               f"asked for:\n" + "\n".join(asked))
