"""`agent run GOAL.yaml`: a scripted run to its end, its checks, its report and its exit code."""

from __future__ import annotations

import atexit
import contextlib
import gc
import os
import sys
from pathlib import Path
from typing import Iterator

from agent.errors import SessionConfigError, interruption_reason
from agent.finish import finish, write_end_report
from agent.goal import Goal, GoalError, HostEntry, load_goal
from agent.loop import Outcome, Session
from agent.preflight import Unreached, model_server_problem, reach_hosts
from agent.record.transcript import iter_events, new_transcript_path
from agent.report import check_report
from agent.session_builder import build_session, goal_budget, goal_message, make_model
from app.exit_codes import ExitCode
from app.ui import JsonLines, make_view
from app.ui.usage import session_usage_lines


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
        without_model = args.plan and no_model_configured(args, goal)
        if without_model:
            from agent.plan_model import AuthorizationsModel  # lazy: only a model-less plan

            model = AuthorizationsModel(goal)
        else:
            model = make_model(args.model or goal.model, args.base_url or goal.base_url, args.model_timeout)
        down = None if without_model else model_server_problem(args.base_url or goal.base_url
                                                               or os.environ.get("OPENAI_BASE_URL"))
        if down:  # said at once, before a sim is built or a host reached: nothing started, nothing to record
            print(f"agent: {down}: check --base-url / OPENAI_BASE_URL and that the server is running",
                  file=sys.stderr)
            return ExitCode.MODEL
        path = Path(args.transcript) if args.transcript else new_transcript_path("run")
        view = JsonLines() if args.json else make_view(verbosity=getattr(args, "verbosity", None))
        built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                              baselines=[] if without_model else goal.baselines(), plan=args.plan, budget=goal_budget(goal), transcript=path, listeners=[view],
                              start_info={"goal": goal.goal, "goal_file": str(Path(args.goal).absolute()),
                                          "command": "run"})
    with busy(view):
        code, unreached = execute_goal(goal, built.session)
    print_ending(path, unreached, args.json, server=getattr(model, "base_url", None), asked_a_model=not without_model)
    return code


def no_model_configured(args, goal: Goal) -> bool:
    """No model named anywhere a run reads one from: a plan then comes from the goal's authorizations."""
    return not (args.model or goal.model or args.base_url or goal.base_url
                or os.environ.get("OPENAI_BASE_URL") or os.environ.get("UPGRADE_AGENT_MODEL"))


def print_ending(path: Path, unreached: list[Unreached], json_out: bool, resumes: Path | None = None,
                 server: str | None = None, asked_a_model: bool = True) -> None:
    """After a run (or a resumed one): the report file, the hosts not reached, the claims check, the tokens and
    their cost, and where the transcript and report lie."""
    report, report_file = write_end_report(path)  # read once, for the report file and the claims check alike
    for problem in unreached:  # on stderr too, for a script that reads only that (the verdict line names them)
        print(f"agent: {problem.problem}", file=sys.stderr)
    if not json_out:
        # The model's final answer is its own words: what it says is compared with what was measured (a run
        # that never started has none to compare).
        for line in check_report(report).lines() if not unreached else []:
            print(line, file=sys.stderr)
        for line in session_usage_lines(iter_events(path), server) if asked_a_model else []:
            print(line, file=sys.stderr)
        also = f" (resumes {resumes})" if resumes else ""
        print(f"transcript: {path}{also}\nreport:     {report_file}", file=sys.stderr)
        from app.sessions import summary  # lazy: only at the end

        resume = (summary(path) or {}).get("resume")
        if resume:  # stopped part-way (Ctrl-C, a signal): the command that goes on, as `agent fleet` prints it
            print(f"go on:      {resume}", file=sys.stderr)


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
    """The end of a run (or of a resumed one), as every session ends (agent/finish.py): the final state read,
    the checks, the verdict from the record, the goal_result event. Inside the session's closing()."""
    return finish(session, outcome, goal).code


def preflight_failed(session: Session, unreached: list[Unreached]) -> ExitCode:
    """End a run whose hosts could not all be reached, before its first model turn: exit 2."""
    for problem in unreached:
        session.emit("preflight", host=problem.host, ok=False, problem=problem.problem)
    # The cause in the verdict's own line (a DNS typo, a refused port, a host key), not lines further down.
    reason = "not started: " + "; ".join(p.problem for p in unreached)
    session.emit("goal_result", met=False, verdict="not started", exit_code=int(ExitCode.USAGE), reason=reason,
                 checks_ok=None)
    session.ending = Outcome("preflight", reason)
    return ExitCode.USAGE
