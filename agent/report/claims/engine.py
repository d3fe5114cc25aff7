"""The claim check's engine: each sentence of the answer read by every kind of claim, with the host each
stretch of it names, and the findings kept once each, in the answer's order."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from agent.report.build import build_report
from agent.report.claims.answer import Reading, scope, sentences
from agent.report.claims.figures import figures
from agent.report.claims.findings import ClaimCheck, Finding
from agent.report.claims.record import Record
from agent.report.claims.steps import steps
from agent.report.claims.toolkits import toolkits
from agent.report.claims.versions import versions
from agent.report.data import Report

KINDS: tuple[Callable[[Reading], Iterator[Finding]], ...] = (figures, versions, toolkits, steps)


def check_claims(transcript: Path) -> ClaimCheck:
    """The claims of a transcript's final answer, checked against the same transcript."""
    return check_report(build_report(Path(transcript)))


def check_report(report: Report) -> ClaimCheck:
    check = ClaimCheck(answer=report.final_answer, answer_turn=report.final_answer_turn)
    if not report.final_answer:
        return check
    record = Record(report)
    seen: set[tuple[str, str]] = set()
    placed: list[tuple[int, Finding]] = []
    for start, sentence in sentences(report.final_answer, record.hosts):
        reading = Reading(sentence, record, scope(sentence, record.hosts))
        for kind in KINDS:
            for finding in kind(reading):
                if (finding.says, finding.record) not in seen:
                    seen.add((finding.says, finding.record))
                    placed.append((start + max(sentence.find(finding.quote), 0), finding))
    # In the answer's order, so that the findings read along with it.
    check.findings = [f for _, f in sorted(placed, key=lambda p: p[0])]
    return check
