"""`agent run GOAL.yaml`: a scripted run to its end, its checks, its report and its exit code."""

from __future__ import annotations

import atexit
import contextlib
import gc
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from agent.checks import verify_end
from agent.errors import SessionConfigError, interruption_reason
from agent.goal import Goal, GoalError, HostEntry, load_goal
from agent.loop import Outcome, Session
from agent.preflight import Unreached, reach_hosts
from agent.record.transcript import iter_events, new_transcript_path
from agent.report import build_report, check_report, write_report
from agent.session_builder import build_session, goal_budget, goal_message, make_model
from app.exit_codes import ExitCode
from app.ui import JsonLines, make_view
from app.ui.usage import session_usage_lines


@dataclass
class Verdict:
    code: ExitCode
    verdict: str  # met | not met | unverified | dry run | not started
    reason: str


# The reasons agent.errors.interruption_reason gives a signal, and the exit code each one ends with.
_SIGNAL_REASONS = (("stopped by SIGTERM", ExitCode.TERMINATED), ("stopped by SIGHUP", ExitCode.HANGUP))


def plan_verdict(planned: list[tuple[str, str]]) -> Verdict:
    """What a real run would have done, from the gate's answers in the dry run: exit 0 when every change would
    run (or be asked for), 3 when one would be refused, so that `--plan` can check a goal file before it runs."""
    counts = {w: sum(1 for x, _ in planned if x == w) for w in ("would run", "would ask", "would be refused")}
    said = ", ".join(f"{n} would {w.removeprefix('would ')}" for w, n in counts.items() if n)
    refused = [subject for w, subject in planned if w == "would be refused"]
    if not planned:
        return Verdict(ExitCode.OK, "dry run", "dry run: the model proposed no change; nothing was changed")
    if refused:
        first = refused[0] if len(refused[0]) <= 120 else refused[0][:117] + "..."
        return Verdict(ExitCode.REFUSED, "dry run", f"dry run: of {len(planned)} changes, {said}; a real run would be "
                       f"refused at `{first}` (the reasons are in the transcript and above); nothing was changed")
    return Verdict(ExitCode.OK, "dry run", f"dry run: of {len(planned)} changes, {said}; a real run would be allowed "
                   "every one; nothing was changed")


def judge(outcome: Outcome, session: Session, checks_ok: bool | None) -> Verdict:
    """What happened, in an exit code and a verdict: success only where the record shows it.

    Checks that pass prove the goal whatever failed on the way. Without checks nothing proves it:
    a run whose steps failed, in which nothing ran, or in which a step was refused is not a success,
    and one whose steps all ran is done but unverified.
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
    if checks_ok is True:
        also = f" ({failed} step{'s' * (failed != 1)} failed on the way)" if failed else ""
        return Verdict(ExitCode.OK, "met", f"the success checks passed{also}")
    if checks_ok is False:
        code = ExitCode.REFUSED if session.refused else ExitCode.FAILED
        return Verdict(code, "not met", "success checks failed" + (" after a needed step was refused"
                                                                   if session.refused else ""))
    if outcome.status != "done":
        return Verdict(ExitCode.FAILED, "not met", outcome.reason or outcome.status)
    if failed:
        return Verdict(ExitCode.FAILED, "not met", f"{failed} step{'s' * (failed != 1)} failed, and the goal file has "
                       "no success checks that could prove the goal anyway")
    if session.refused:
        return Verdict(ExitCode.REFUSED, "not met", "a step was refused, and no success check says it was not needed")
    if session.tool_calls == 0:
        return Verdict(ExitCode.FAILED, "not met", "nothing ran: the model answered without calling a tool, and the "
                       "goal file has no success checks")
    return Verdict(ExitCode.OK, "unverified", f"{session.tool_calls} step{'s' * (session.tool_calls != 1)} ran and "
                   "none failed, but the goal file has no success checks: nothing proved the goal")


def run_goal(args) -> int:
    # What is left when the run returns is the process's exit, and the interpreter's last collections
    # would walk every object the SDK's and pydantic's types made (about half a second on a small
    # machine) only to free memory that the exit frees anyway: frozen, they are not walked.
    atexit.register(gc.freeze)
    with start_up_uncollected():
        try:
            goal = load_goal(Path(args.goal))
        except GoalError as e:
            raise SessionConfigError(str(e)) from None
        trust_flagged_keys(goal, args.trust_host_key)
        model = make_model(args.model or goal.model, args.base_url or goal.base_url, args.model_timeout)
        path = Path(args.transcript) if args.transcript else new_transcript_path("run")
        view = JsonLines() if args.json else make_view(verbosity=getattr(args, "verbosity", None))
        built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                              plan=args.plan, budget=goal_budget(goal), transcript=path, listeners=[view],
                              start_info={"goal": goal.goal, "goal_file": str(Path(args.goal).absolute()),
                                          "command": "run"})
    with busy(view):
        code, unreached = execute_goal(goal, built.session)
    print_ending(path, unreached, args.json, server=getattr(model, "base_url", None))
    return code


def print_ending(path: Path, unreached: list[Unreached], json_out: bool, resumes: Path | None = None,
                 server: str | None = None) -> None:
    """After a run (or a resumed one): the report file, the hosts not reached, the claims check, the tokens and
    their cost, and where the transcript and report lie."""
    report = build_report(path)  # read once, for the report file and the claims check alike
    report_file = write_report(path, report)
    for problem in unreached:
        print(f"agent: {problem.problem}", file=sys.stderr)
    if not json_out:
        # The model's final answer is its own words: what it says is compared with what was measured.
        for line in check_report(report).lines():
            print(line, file=sys.stderr)
        for line in session_usage_lines(iter_events(path), server):
            print(line, file=sys.stderr)
        also = f" (resumes {resumes})" if resumes else ""
        print(f"transcript: {path}{also}\nreport:     {report_file}", file=sys.stderr)


@contextlib.contextmanager
def start_up_uncollected() -> Iterator[None]:
    """Start-up without the cyclic collector, and what it made frozen after it.

    Loading the SDK and building the session make about 170,000 objects (its types, their pydantic
    schemas) that live as long as the process: the collector walked them again each time it ran while
    they were made (a quarter of this part of the start-up), and would again in every full collection
    of the session. Frozen, they are not walked; the few thousand objects of garbage that start-up
    leaves in cycles stay uncollected, once.
    """
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def trust_flagged_keys(goal: Goal, fingerprints: list[str]) -> None:
    """`--trust-host-key FP` trusts FP for every SSH host of the goal: a fingerprint names one key, so
    it can only ever match the host that has that key."""
    trust_keys_of(goal.hosts, fingerprints)


def trust_keys_of(entries: list[HostEntry], fingerprints: list[str]) -> None:
    """As trust_flagged_keys, for host entries (a fleet's)."""
    for entry in entries:
        if entry.transport == "ssh" and fingerprints:
            entry.trust_host_key = ",".join(filter(None, [entry.trust_host_key, *fingerprints]))


def busy(view):
    """The view's live region while the session works (a no-op for views without one)."""
    return view.busy() if hasattr(view, "busy") else contextlib.nullcontext()


def execute_goal(goal: Goal, session: Session) -> tuple[int, list[Unreached]]:
    """Reach the hosts, run the goal to its end, verify it, record the result, close the session;
    the exit code and the hosts that could not be reached.

    The transcript is closed with its end event whatever happens on the way, checks included.
    """
    with session.closing():
        try:
            unreached = reach_hosts(session.hosts, goal.host_names())
        except KeyboardInterrupt as e:
            unreached, outcome = [], Outcome("interrupted", interruption_reason(e))
        else:
            if unreached:
                return preflight_failed(session, unreached), unreached
            outcome = None
        try:
            if outcome is None:
                outcome = session.send(goal_message(goal, plan=session.gate.plan))
        except KeyboardInterrupt as e:
            outcome = Outcome("interrupted", interruption_reason(e))
        return finish_run(goal, session, outcome), []


def finish_run(goal: Goal, session: Session, outcome: Outcome) -> ExitCode:
    """The end of a run (or of a resumed one): the final state and the checks, the verdict from the record,
    the goal_result event. Inside the session's closing(), which writes the end event whatever happens."""
    checks_ok: bool | None = None
    try:
        if outcome.status != "interrupted" and not session.gate.plan:
            checks_ok = verify_end(goal, session)
    except KeyboardInterrupt as e:
        outcome = Outcome("interrupted", f"{interruption_reason(e)} during the final checks")
    verdict = judge(outcome, session, checks_ok)
    session.emit("goal_result", met=verdict.verdict == "met", verdict=verdict.verdict,
                 exit_code=int(verdict.code), reason=verdict.reason, checks_ok=checks_ok)
    session.ending = outcome
    return verdict.code


def preflight_failed(session: Session, unreached: list[Unreached]) -> ExitCode:
    """End a run whose hosts could not all be reached, before its first model turn: exit 2."""
    for problem in unreached:
        session.emit("preflight", host=problem.host, ok=False, problem=problem.problem)
    names = ", ".join(p.host for p in unreached)
    reason = f"not started: {names} could not be reached before the first model turn"
    session.emit("goal_result", met=False, verdict="not started", exit_code=int(ExitCode.USAGE), reason=reason,
                 checks_ok=None)
    session.ending = Outcome("preflight", reason)
    return ExitCode.USAGE
