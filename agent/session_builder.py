"""Building a session from the command line or a goal file: hosts, model, gate, transcript."""

from __future__ import annotations

import os
import platform
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent
from agent.goal import Goal, GoalError, HostEntry, host_entry_for, load_goal
from agent.loop import Budget, Outcome, Session
from agent.model import Model, ModelError, OpenAIModel
from agent.safety import Approver, Authorization, SafetyPolicy
from agent.transcript import Redactor, TranscriptWriter, new_transcript_path
from tools import default_tools
from tools.base import ArgumentError, Registry
from tools.hosts import HostPool, HostSpec

DEFAULT_MODEL = "gpt-4.1"


class SessionConfigError(Exception):
    """Configuration that cannot work; one line, exit code 2."""


@dataclass
class Built:
    session: Session
    hosts: HostPool
    transcript: Path | None
    sims: dict[str, Any] = field(default_factory=dict)  # name -> tools.sim.Sim for simulated hosts


def host_spec(entry: HostEntry, sim_dir: Path | None = None, sim: Any = None) -> tuple[HostSpec, Any]:
    """A goal file's host entry as a HostSpec; a `sim` entry builds a fresh simulated GPU host
    (or uses the one given)."""
    if entry.transport == "sim":
        if sim is None:
            from tools.sim import build_sim

            from tools.sim.venv import SimBuildError

            root = (sim_dir or Path(tempfile.mkdtemp(prefix="upgrade-agent-sim-"))) / entry.name
            try:
                sim = build_sim(root)
            except SimBuildError as e:
                raise SessionConfigError(str(e)) from None
        return sim.host_spec(name=entry.name), sim
    spec = HostSpec(name=entry.name, transport=entry.transport, target=entry.target, sysroot=entry.sysroot,
                    path_prefix=list(entry.path_prefix), env=dict(entry.env), python=entry.python,
                    max_sessions=entry.max_sessions, trust_host_key=entry.trust_host_key)
    return spec, None


def host_entry_from_flag(value: str, trusted: list[str]) -> HostEntry:
    """`--host` values: 'local', 'sim', or an ssh target / alias (as in goal files)."""
    return host_entry_for(value, trusted[0] if trusted else None)


def make_model(name: str | None, base_url: str | None, timeout_s: float = 120.0) -> Model:
    name = name or os.environ.get("UPGRADE_AGENT_MODEL") or DEFAULT_MODEL
    try:
        return OpenAIModel(name, base_url=base_url, timeout_s=timeout_s)
    except ModelError as e:
        raise SessionConfigError(str(e)) from None


def versions() -> dict:
    import openai
    import paramiko
    import pydantic

    return {"upgrade_agent": agent.__version__, "python": platform.python_version(), "openai": openai.__version__,
            "paramiko": paramiko.__version__, "pydantic": pydantic.__version__}


def build_session(
    *,
    hosts: list[HostEntry],
    model: Model,
    mode: str,
    authorizations: list[Authorization] | None = None,
    approver: Approver | None = None,
    plan: bool = False,
    budget: Budget | None = None,
    transcript: Path | None,
    listeners: list | None = None,
    start_info: dict | None = None,
    sim_dir: Path | None = None,
    sims: dict[str, Any] | None = None,
    secrets: list[str] | None = None,
) -> Built:
    from prompts import system_prompt

    specs, built_sims = [], {}
    for entry in hosts:
        spec, sim = host_spec(entry, sim_dir, (sims or {}).get(entry.name))
        specs.append(spec)
        if sim is not None:
            built_sims[entry.name] = sim
    policy = SafetyPolicy(scope={s.name for s in specs}, mode=mode, approver=approver,
                          authorizations=list(authorizations or []), plan=plan)
    try:
        writer = TranscriptWriter(transcript, Redactor(secrets=secrets))
    except FileExistsError as e:
        raise SessionConfigError(str(e)) from None
    pool = HostPool(specs)
    info = {"versions": versions(), "host_specs": [_spec_info(s) for s in specs], **(start_info or {})}
    session = Session(model=model, registry=Registry(default_tools()), gate=policy, transcript=writer,
                      hosts=pool, system_prompt=system_prompt([describe_host(s, built_sims.get(s.name))
                                                               for s in specs]),
                      budget=budget, listeners=listeners, start_info=info)
    # Host-layer events (a host key trusted by the operator) belong in the record too.
    pool.on_event = lambda kind, data: session.emit(kind, **data)
    return Built(session=session, hosts=pool, transcript=transcript, sims=built_sims)


def describe_host(spec: HostSpec, sim: Any = None) -> str:
    """One line about a host for the system prompt: its name, and where its system paths lie."""
    if sim is not None:
        return (f"{spec.name} (a simulated GPU host: its system paths lie under {spec.sysroot}, e.g. "
                f"{spec.sys_path('/usr/local/cuda-12.8')}; it has no internet access, so NVIDIA's CUDA archive "
                f"is mirrored at {spec.sys_path('/srv/nvidia/compute/cuda')}/<version>/ (local_installers/ and "
                f"docs/sidebar/md5sum.txt, as on developer.download.nvidia.com) and PyTorch's wheel indexes at "
                f"{sim.index_urls['cu128']} and {sim.index_urls['cu130']}; its venv's python is first on PATH)")
    where = f", system paths under {spec.sysroot}" if spec.sysroot not in ("", "/") else ""
    return f"{spec.name} ({spec.transport}{', ' + spec.target if spec.target else ''}{where})"


def _spec_info(s: HostSpec) -> dict:
    return {"name": s.name, "transport": s.transport, "target": s.target, "sysroot": s.sysroot,
            "python": s.python}


def goal_budget(goal: Goal) -> Budget:
    b = goal.budget
    return Budget(max_turns=b.turns, max_tokens=b.tokens, max_wall_s=b.minutes * 60 if b.minutes else None)


def goal_message(goal: Goal) -> str:
    """The first user message of a scripted run: the goal and what will be checked at the end."""
    lines = [goal.goal.strip()]
    if goal.success:
        lines.append("\nAt the end these checks will be run:")
        for c in goal.success:
            lines.append(f"- {c.model_dump(exclude_none=True)}")
    lines.append("\nThis is a scripted run: nobody will answer questions, and steps the goal file does not "
                 "authorize will be refused.")
    return "\n".join(lines)


def exit_code_for(outcome: Outcome, session: Session, checks_ok: bool | None) -> int:
    from agent.cli import EXIT_BUDGET, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_REFUSED, EXIT_USAGE

    if outcome.status == "interrupted":
        return EXIT_INTERRUPTED
    if outcome.status == "budget":
        return EXIT_BUDGET
    if outcome.status == "model_error" and session.turns <= 1:
        return EXIT_USAGE  # the endpoint never answered: a configuration problem
    if outcome.status == "done" and (checks_ok is True or (checks_ok is None and not session.refused)):
        return EXIT_OK
    if session.refused and checks_ok is not True:
        return EXIT_REFUSED  # with no checks to say otherwise, a refused step may have been needed
    return EXIT_FAILED


# --------------------------------------------------------------------------- commands


def run_goal(args) -> int:
    from agent.ui import JsonLines, make_view

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
    from agent.report import write_report

    report = write_report(path)
    if not args.json:
        print(f"transcript: {path}\nreport:     {report}", file=sys.stderr)
    return code


def busy(view):
    """The view's live region while the session works (a no-op for views without one)."""
    import contextlib

    return view.busy() if hasattr(view, "busy") else contextlib.nullcontext()


def execute_goal(goal: Goal, session: Session) -> int:
    """Run the goal to its end, verify it, record the result, close the session; the exit code.

    The transcript is closed with its end event whatever happens on the way, checks included.
    """
    from agent.checks import capture_final_state, run_checks

    outcome = Outcome("crashed", "")
    try:
        try:
            outcome = session.send(goal_message(goal))
        except KeyboardInterrupt:
            outcome = Outcome("interrupted", "interrupted by the operator")
        checks_ok: bool | None = None
        try:
            if outcome.status != "interrupted" and not session.gate.plan:
                capture_final_state(session)
                checks_ok = run_checks(goal, session) if goal.success else None
        except KeyboardInterrupt:
            outcome = Outcome("interrupted", "interrupted by the operator during the final checks")
        code = exit_code_for(outcome, session, checks_ok)
        reason = {0: "goal met" if not session.gate.plan else "dry run complete", 3: "a needed step was refused",
                  4: outcome.reason, 130: outcome.reason}.get(code, outcome.reason if outcome.status != "done"
                                                              else "success checks failed")
        session.emit("goal_result", met=code == 0 and not session.gate.plan, exit_code=code, reason=reason,
                     checks_ok=checks_ok)
    except BaseException as e:
        session.close("crashed", f"{type(e).__name__}: {e}")
        raise
    session.close(outcome.status, outcome.reason)
    return code


def exec_one(args) -> int:
    """`agent exec HOST -- CMD`: one ssh_exec call through the same host layer and gate."""
    import json as _json

    from agent.loop import CallResult, LiveToolRunner, PreparedCall
    from agent.model import ToolCall
    from tools.ssh_exec import SSHExec

    command = " ".join(args.command).strip()
    if not command:
        raise SessionConfigError("no command given: agent exec HOST -- COMMAND")
    entry = host_entry_from_flag(args.host, args.trust_host_key)
    spec, _ = host_spec(entry)
    tool = SSHExec()
    try:
        parsed = tool.parse_args({"host": spec.name, "command": command, "timeout": args.timeout})
    except ArgumentError as e:
        raise SessionConfigError(str(e)) from None
    action = tool.action(parsed)
    policy = SafetyPolicy(scope={spec.name}, mode="scripted")
    decision = policy.decide(tool.name, action)
    if not decision.allowed:
        print(f"agent: {decision.message_for_model()}", file=sys.stderr)
        print("agent: `agent exec` runs read-only commands only; use `agent chat` to approve changes",
              file=sys.stderr)
        return 3
    pool = HostPool([spec])
    from tools.base import ArtifactStore, ToolContext

    def live(kind: str, data: dict) -> None:
        if not args.json and kind == "output":
            stream = sys.stdout if data.get("stream") == "stdout" else sys.stderr
            stream.write(data.get("text", ""))
            stream.flush()

    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), emit=live)
    try:
        result: CallResult = LiveToolRunner().run(PreparedCall(0, ToolCall("exec", tool.name, ""), tool, parsed,
                                                               action, decision), ctx)
    finally:
        pool.close()
    if not result.ok:
        print(f"agent: {result.error}", file=sys.stderr)
        return 1
    data = result.data or {}
    if args.json:
        print(_json.dumps(data))
    if data.get("timed_out"):
        print(f"agent: timed out after {args.timeout:g}s; the remote process was killed", file=sys.stderr)
    if data.get("connection_lost"):
        print("agent: connection lost during the command; it was not re-run", file=sys.stderr)
    code = data.get("exit_code")
    return code if isinstance(code, int) else 1
