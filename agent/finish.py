"""The end of a session, in one place: what the hosts show, the verdict, the report.

`agent run`, `agent demo`, `agent resume`, `agent chat` (when the operator leaves, however they leave)
and each host of `agent fleet` end here, inside the session's `closing()`:

1. `read_end` reads the final state of the hosts (`final_state` events): every host in scope at the end
   of a run, the hosts a change was started on when a chat ends or a run is interrupted (reads only, so
   a stopped run still records what it left behind), and runs the goal's success checks where the run
   got that far. What the report, the rollback advice and the claims check say about "after" comes from
   these readings, never from what the steps suggest.
2. `finish` turns the record into a verdict and an exit code (`judge`) and writes `goal_result`; a chat
   has no goal and gets no verdict.
3. After the session's end event, `write_end_report` builds the report from the whole record (every part
   of a resumed session) and writes it beside the transcript.

The fleet judges a host on its own terms (held, changed, the benchmark gate, its rollback), but reads the
end through the same `read_end`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agent.checks import verify_end
from agent.errors import interruption_reason
from agent.exit_codes import ExitCode
from agent.goal import Goal
from agent.loop import Outcome, Session
from agent.record.transcript import iter_events

if TYPE_CHECKING:
    from agent.report.data import Report

# The reasons agent.errors.interruption_reason gives a signal, and the exit code each one ends with.
_SIGNAL_REASONS = (("stopped by SIGTERM", ExitCode.TERMINATED), ("stopped by SIGHUP", ExitCode.HANGUP))
_CHANGES = ("mutating", "destructive")


@dataclass
class Verdict:
    code: ExitCode
    verdict: str  # met | not met | unverified | dry run | not started
    reason: str


def read_end(session: Session, goal: Goal | None, outcome: Outcome,
             failures: list[str] | None = None, run_checks: bool = True) -> bool | None:
    """Read what the hosts show at the end, and run the goal's checks where the session got that far;
    whether every check passed (None when none ran). A dry run changed nothing and reads nothing; a chat
    reads what it changed before the operator turned /plan on."""
    if session.gate.plan and goal is not None:
        return None
    if goal is None or outcome.status == "interrupted" or not run_checks:
        changed = sorted(session.changed_hosts & set(session.gate.scope))
        return verify_end(goal, session, hosts=changed, run_checks=False)
    return verify_end(goal, session, failures=failures)


def finish(session: Session, outcome: Outcome, goal: Goal | None = None) -> Verdict | None:
    """The end of a session inside its closing(): the final state read, then (with a goal) the verdict and
    its goal_result event. A Ctrl-C while the end is read stops the reading and is the outcome."""
    failures: list[str] = []
    checks_ok: bool | None = None
    try:
        # The model never answered and nothing ran: the hosts are as they were, and checks would only say so.
        idle = outcome.status == "model_error" and session.tool_calls == 0
        checks_ok = read_end(session, goal, outcome, failures, run_checks=not idle)
    except KeyboardInterrupt as e:
        outcome = Outcome("interrupted", f"{interruption_reason(e)} during the final checks")
    session.ending = outcome
    if goal is None:
        return None
    verdict = judge(outcome, session, checks_ok, failures)
    session.emit("goal_result", met=verdict.verdict == "met", verdict=verdict.verdict,
                 exit_code=int(verdict.code), reason=verdict.reason, checks_ok=checks_ok)
    return verdict


def write_end_report(path: Path) -> tuple["Report", Path]:
    """After the end event: the report built from the whole record, and the file it was written to."""
    from agent.report import build_report, write_report  # lazy: the report's modules load only at the end

    report = build_report(path)
    return report, write_report(path, report)


def plan_verdict(planned: list[tuple[str, str]]) -> Verdict:
    """What a real run would have done, from the gate's answers in the dry run: exit 0 when every change would
    run (or be asked for), 3 when one would be refused, so that `--plan` can check a goal file before it runs."""
    counts = {w: sum(1 for x, _ in planned if x == w) for w in ("would run", "would ask", "would be refused")}
    said = ", ".join(f"{n} would {w.removeprefix('would ')}" for w, n in counts.items() if n)
    refused = [subject for w, subject in planned if w == "would be refused"]
    if not planned:
        return Verdict(ExitCode.OK, "dry run", "dry run: no change was proposed; nothing was changed")
    if refused:
        return Verdict(ExitCode.REFUSED, "dry run", f"dry run: of {len(planned)} changes, {said}; a real run would be "
                       f"refused at `{_short(refused[0])}` (the reasons are in the transcript and above); nothing "
                       "was changed")
    return Verdict(ExitCode.OK, "dry run", f"dry run: of {len(planned)} changes, {said}; a real run would be allowed "
                   "every one; nothing was changed")


def judge(outcome: Outcome, session: Session, checks_ok: bool | None, failures: list[str] | None = None) -> Verdict:
    """What happened, in an exit code and a verdict whose reason names the real cause.

    Checks that pass prove the goal whatever failed on the way. Checks that fail are named; the code is 3
    only when a change the gate refused never ran afterwards (the refusal is named too), else 1. Without
    checks nothing proves the goal: a run whose steps failed, in which nothing ran, or in which a change
    stayed refused is not a success, and one whose steps all ran is done but unverified.
    """
    if outcome.status == "interrupted":
        # The verdict's code is the process's: a signal's own, Ctrl-C's otherwise.
        code = next((c for prefix, c in _SIGNAL_REASONS if outcome.reason.startswith(prefix)), ExitCode.INTERRUPTED)
        return Verdict(code, "not met", outcome.reason)
    if outcome.status == "budget":
        return Verdict(ExitCode.BUDGET, "not met", outcome.reason)
    if outcome.status == "model_error":
        # A setting that cannot work (no key, an unknown model) is configuration; the rest is the server.
        code = ExitCode.USAGE if outcome.kind == "config" else ExitCode.MODEL
        return Verdict(code, "not met", f"the model server failed: {outcome.reason}")
    if outcome.status == "cut_off":
        return Verdict(ExitCode.FAILED, "not met", f"the model's reply was cut off: {outcome.reason}")
    if session.gate.plan:
        if outcome.status != "done":
            return Verdict(ExitCode.FAILED, "dry run", outcome.reason)
        return plan_verdict(session.gate.planned)
    failed = session.failed_calls
    blocked = refused_changes(session)
    # A change the operator declined is their choice, not the safety layer's refusal (exit 3 says: fix the goal
    # file's authorizations): said as theirs, and the goal is simply not met.
    declined = bool(blocked) and all(d.rule == "declined" for d in blocked)
    refused_code = ExitCode.FAILED if declined else ExitCode.REFUSED
    why_refused = ("" if not blocked else
                   f"you declined the change `{_short(blocked[0].subject)}` on {blocked[0].host or '-'}" if declined
                   else f"the change `{_short(blocked[0].subject)}` on {blocked[0].host or '-'} was refused "
                        f"[{blocked[0].rule}]: {_short(blocked[0].reason, 200)}")
    if checks_ok is True:
        also = f" ({failed} step{'s' * (failed != 1)} failed on the way)" if failed else ""
        return Verdict(ExitCode.OK, "met", f"the success checks passed{also}{worse_answers(session)}"
                                           f"{out_of_service(session)}")
    if checks_ok is False:
        named = _checks_named(failures or [])
        if blocked:
            return Verdict(refused_code, "not met", f"{named}; {why_refused}")
        steps = f"; {failed} step{'s' * (failed != 1)} failed" if failed else ""
        return Verdict(ExitCode.FAILED, "not met", named + steps)
    if outcome.status != "done":
        return Verdict(ExitCode.FAILED, "not met", outcome.reason or outcome.status)
    if failed:
        return Verdict(ExitCode.FAILED, "not met", f"{failed} step{'s' * (failed != 1)} failed, and the goal file has "
                       "no success checks that could prove the goal anyway")
    if blocked:
        return Verdict(refused_code, "not met", f"{why_refused}; no success check says it was not needed")
    if session.refused:
        return Verdict(ExitCode.FAILED, "not met", f"{len(session.refused)} call(s) were refused and no success check "
                       "proves the goal")
    if session.tool_calls == 0:
        why = ("the model answered without calling a tool" if not session.calls_made else
               f"none of the model's {session.calls_made} call(s) could run")
        return Verdict(ExitCode.FAILED, "not met", f"nothing ran: {why}, and the goal file has no success checks")
    return Verdict(ExitCode.OK, "unverified", f"{session.tool_calls} step{'s' * (session.tool_calls != 1)} ran and "
                   f"none failed, but the goal file has no success checks: nothing proved the goal"
                   f"{worse_answers(session)}{out_of_service(session)}")


def worse_answers(session: Session) -> str:
    """What check_outputs measured, where it found the served model answering worse than before: said beside a
    goal met by checks that did not ask about answers (a faster server that answers worse is no upgrade to
    keep, and the operator reads the verdict first)."""
    worse = [r for r in (session.store.get("check_outputs") or {}).values()
             if isinstance(r, dict) and (r.get("comparison") or {}).get("accuracy_change", 0) < 0]
    if not worse:
        return ""
    r = worse[-1]
    c = r["comparison"]
    return (f"; but check_outputs found the served model answering worse on {r['host']}: {r['label']} "
            f"{r['correct']}/{r['questions']} right against {c['compare_to']}'s {c['accuracy_before']:.0%} "
            f"(no success check asks about answers: add an `outputs` check to fail such a run)")


def out_of_service(session: Session) -> str:
    """The scheduler nodes the end's reading found drained (cordoned), said beside a goal met: a node left out of its
    scheduler serves nobody, whether this session drained it and did not put it back, or someone else did."""
    from agent.checks import END_READ  # lazy: the end's reading loads with a goal's checks, not with this module
    from tools.drain_node import OUR_PREFIX  # lazy: as above

    said = []
    for host, inspect in sorted((session.store.get(END_READ) or {}).items()):
        for node in (inspect.get("schedulers") or []) if isinstance(inspect, dict) else []:
            if not node.get("drained"):
                continue
            reason = node.get("reason") or ""
            ours = reason.startswith(OUR_PREFIX) or node.get("kind") == "kubernetes" and bool(reason)
            said.append(f"{host} is still out of {node.get('kind')} ({node.get('state')}"
                        + (f": drained by this tool, '{reason}': undrain_node puts it back)" if ours else
                           f"{': ' + repr(reason) if reason else ''}: drained by someone else, left so)"))
    return "; but " + "; ".join(said) if said else ""


def refused_changes(session: Session) -> list:
    """The gate's refusals of changes that never ran later in the session (the same step on the same host,
    allowed afterwards, is no refusal of the goal). A refused read, or a change sent back to be checked
    first, is none either."""
    changes = [d for d in session.refused if d.risk.cls.value in _CHANGES and d.rule != "outcome-unknown"]
    if not changes:
        return []
    ran = _allowed_steps(session)
    return [d for d in changes if (d.host, d.subject) not in ran]


def _allowed_steps(session: Session) -> set[tuple[str | None, str]]:
    path = getattr(session.transcript, "path", None)
    if path is None or not Path(path).exists():
        return set()
    return {(ev.get("host"), ev.get("subject") or "") for ev in iter_events(Path(path))
            if ev.get("type") == "decision" and ev.get("verdict") == "allow"}


def _checks_named(failures: list[str]) -> str:
    if not failures:
        return "success checks failed"
    more = f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""
    return f"a success check failed: {_short(failures[0], 240)}{more}"


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."
