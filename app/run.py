"""`agent run GOAL.yaml`: a scripted run to its end, its checks, its report and its exit code."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from agent.checks import capture_final_state, run_checks
from agent.errors import SessionConfigError, interruption_reason
from agent.goal import Goal, GoalError, load_goal
from agent.loop import Outcome, Session
from agent.record.transcript import new_transcript_path
from agent.report import write_report
from agent.session_builder import build_session, goal_budget, goal_message, make_model
from app.exit_codes import ExitCode
from app.ui import JsonLines, make_view


def exit_code_for(outcome: Outcome, session: Session, checks_ok: bool | None) -> ExitCode:
    if outcome.status == "interrupted":
        return ExitCode.INTERRUPTED
    if outcome.status == "budget":
        return ExitCode.BUDGET
    if outcome.status == "model_error" and session.turns <= 1:
        return ExitCode.USAGE  # the endpoint never answered: a configuration problem
    if outcome.status == "done" and (checks_ok is True or (checks_ok is None and not session.refused)):
        return ExitCode.OK
    if session.refused and checks_ok is not True:
        return ExitCode.REFUSED  # with no checks to say otherwise, a refused step may have been needed
    return ExitCode.FAILED


def run_goal(args) -> int:
    try:
        goal = load_goal(Path(args.goal))
    except GoalError as e:
        raise SessionConfigError(str(e)) from None
    model = make_model(args.model or goal.model, args.base_url or goal.base_url, args.model_timeout)
    path = Path(args.transcript) if args.transcript else new_transcript_path("run")
    view = JsonLines() if args.json else make_view()
    built = build_session(hosts=goal.hosts, model=model, mode="scripted", authorizations=goal.authorizations,
                          plan=args.plan, budget=goal_budget(goal), transcript=path, listeners=[view],
                          start_info={"goal": goal.goal, "goal_file": str(args.goal), "command": "run"})
    with busy(view):
        code = execute_goal(goal, built.session)
    report = write_report(path)
    if not args.json:
        print(f"transcript: {path}\nreport:     {report}", file=sys.stderr)
    return code


def busy(view):
    """The view's live region while the session works (a no-op for views without one)."""
    return view.busy() if hasattr(view, "busy") else contextlib.nullcontext()


def execute_goal(goal: Goal, session: Session) -> int:
    """Run the goal to its end, verify it, record the result, close the session; the exit code.

    The transcript is closed with its end event whatever happens on the way, checks included.
    """
    with session.closing():
        try:
            outcome = session.send(goal_message(goal))
        except KeyboardInterrupt as e:
            outcome = Outcome("interrupted", interruption_reason(e))
        checks_ok: bool | None = None
        try:
            if outcome.status != "interrupted" and not session.gate.plan:
                capture_final_state(session)
                checks_ok = run_checks(goal, session) if goal.success else None
        except KeyboardInterrupt as e:
            outcome = Outcome("interrupted", f"{interruption_reason(e)} during the final checks")
        code = exit_code_for(outcome, session, checks_ok)
        reason = {ExitCode.OK: "goal met" if not session.gate.plan else "dry run complete",
                  ExitCode.REFUSED: "a needed step was refused", ExitCode.BUDGET: outcome.reason,
                  ExitCode.INTERRUPTED: outcome.reason}.get(code, outcome.reason if outcome.status != "done"
                                                            else "success checks failed")
        session.emit("goal_result", met=code is ExitCode.OK and not session.gate.plan, exit_code=int(code),
                     reason=reason, checks_ok=checks_ok)
        session.ending = outcome
    return code
