"""Steps: "restored", "upgrade done", "the cuda symlink unchanged", a backup id, checked against
restore_backup's results, the goal's result, the inspections and the backups taken, of the host the words
name."""

from __future__ import annotations

import re
from typing import Iterator

from agent.report.claims.answer import NEGATED, Reading
from agent.report.claims.findings import Finding, count
from agent.report.claims.record import Record, outcome

_SYMLINK = re.compile(r"\bsymlink\s+(?:(?:is|are|was|were|stays|stayed|remains|remained|has\s+been|have\s+been)\s+)?"
                      r"(?P<state>unchanged|untouched|left\s+alone|not\s+moved|moved)\b", re.I)
_RESTORED = re.compile(r"\b(?P<neg>not\s+|never\s+)?(?:restored|rolled\s+back)\b", re.I)
_MAYBE = re.compile(r"\b(?:can|could|will|would|to|may|might|should|must)\s+(?:not\s+)?(?:be\s+)?$", re.I)
_DONE = re.compile(r"\b(?:upgrade|installation|migration|update)\s+(?:is\s+|was\s+|has\s+been\s+)?"
                   r"(?P<neg>not\s+)?(?:done|complete|completed|finished|successful|succeeded)\b", re.I)
_BACKUP_ID = re.compile(r"(?<![\w.-])(?P<id>[A-Za-z0-9][\w.-]*-\d{8}-\d{6}-[0-9a-f]{4})(?![\w-])")


def steps(rd: Reading) -> Iterator[Finding]:
    line = rd.line
    for m in _SYMLINK.finditer(line):
        if rd.conditional(m.start()):
            continue
        finding = _symlink_claim(m.group("state").lower(), m.group(0), rd.at(m.start()))
        if finding:
            yield finding
    for m in _RESTORED.finditer(line):
        before = line[max(0, m.start() - 32):m.start()]
        if not _MAYBE.search(before) and not rd.conditional(m.start()):
            yield _restore_claim(bool(m.group("neg") or NEGATED.search(before)), m.group(0), rd.at(m.start()))
    for m in _DONE.finditer(line):
        if not m.group("neg") and not rd.conditional(m.start()):
            finding = _done_claim(m.group(0), rd.at(m.start()))
            if finding:
                yield finding
    for m in _BACKUP_ID.finditer(line):
        # A backup id names its host: it is checked against the run's backups, whichever host the words name.
        ids = rd.rec.backup_ids
        says = f"the model says backup {m.group('id')}"
        if m.group("id") in ids:
            yield Finding("step", m.group(0), says, "pip_freeze_backup took it in this session", True)
        else:
            yield Finding("step", m.group(0), says, "no backup with this id was taken in this session"
                          + (f" (taken: {', '.join(sorted(ids))})" if ids else ""), False)


def _on(rec: Record) -> str:
    return f" on {rec.host}" if rec.host else ""


def _symlink_claim(state: str, quote: str, rec: Record) -> Finding | None:
    links = [(d.get("cuda_symlink"), where) for _, d, where in rec.inspections]
    done = [s for s in rec.installs if s.succeeded]
    before = links[0] if links else ((done[0].data.get("symlink_before"), done[0].where) if done else None)
    after = links[-1] if len(links) > 1 else ((done[-1].data.get("symlink_after"), done[-1].where) if done else None)
    if before is None or after is None:
        return None
    moved = before[0] != after[0]
    says = f"the model says the cuda symlink{_on(rec)} {'moved' if state == 'moved' else 'is unchanged'}"
    record = f"the record shows it at {before[0]} ({before[1]}) and at {after[0]} ({after[1]})"
    return Finding("step", quote, says, record, moved == (state == "moved"))


def _restore_claim(negative: bool, quote: str, rec: Record) -> Finding:
    says = f"the model says the backup{_on(rec)} was {'not ' if negative else ''}restored"
    ran = [s for s in rec.restores if s.succeeded]
    full = next((s for s in ran if s.data.get("restored")), None)
    if full:
        return Finding("step", quote, says, f"restore_backup restored {full.data.get('backup_id')} ({full.where})",
                       not negative)
    if ran:
        s = ran[-1]
        left = len(s.data.get("remaining_diff") or [])
        return Finding("step", quote, says, f"restore_backup ran but {count(left, 'difference')} remain ({s.where})",
                       negative)
    why = f" ({'; '.join(outcome(s) for s in rec.restores)})" if rec.restores else ""
    return Finding("step", quote, says, f"no restore_backup call succeeded{why}", negative)


def _done_claim(quote: str, rec: Record) -> Finding | None:
    says = f'the model says "{quote.strip()}"' + _on(rec)
    g = rec.report.goal_result
    if g is not None:
        verdict = g.get("verdict") or ("met" if g.get("met") else "not met")
        if verdict == "met":
            return Finding("step", quote, says, f"the goal was met ({g.get('reason')})", True)
        if verdict in ("not met", "not started"):
            return Finding("step", quote, says, f"the goal was not met ({g.get('reason')})", False)
        return None  # unverified or a dry run: the record cannot say
    changing = [s for s in rec.steps if s.risk in ("mutating", "destructive") and s.rule != "backup"]
    bad = [s for s in changing if not s.succeeded]
    if bad:
        return Finding("step", quote, says, f"{count(len(bad), 'step')} that change a host did not succeed: "
                       + "; ".join(outcome(s) for s in bad), False)
    if not changing:
        return Finding("step", quote, says, "no step that changes a host ran", False)
    return Finding("step", quote, says, f"every step that changes a host succeeded ({len(changing)})", True)
