"""Building a session from the command line or a goal file: hosts, model, gate, transcript."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import agent
from agent.budget import Budget
from agent.errors import SessionConfigError
from agent.goal import Goal, HostEntry
from agent.host_specs import describe_host, host_spec
from agent.loop import Session
from agent.model import Model, ModelError
from agent.model.openai_client import OpenAIModel
from agent.record.transcript import Redactor, TranscriptWriter, remember_session
from agent.safety.policy import Approver, Authorization, SafetyPolicy
from prompts import system_prompt
from tools import default_tools
from tools.base import Registry
from tools.hosts import HostPool, HostSpec

DEFAULT_MODEL = "gpt-4.1"


@dataclass
class Built:
    session: Session
    hosts: HostPool
    transcript: Path | None
    sims: dict[str, Any] = field(default_factory=dict)  # name -> tools.sim.Sim for simulated hosts


def make_model(name: str | None, base_url: str | None, timeout_s: float = 120.0) -> Model:
    name = name or os.environ.get("UPGRADE_AGENT_MODEL") or DEFAULT_MODEL
    try:
        return OpenAIModel(name, base_url=base_url, timeout_s=timeout_s)
    except ModelError as e:
        raise SessionConfigError(str(e)) from None


def versions() -> dict:
    return {"upgrade_agent": agent.__version__, "python": platform.python_version(),
            **{name: package_version(name) for name in ("openai", "paramiko", "pydantic")}}


def package_version(name: str) -> str:
    """A package's version: from the module when it is loaded, else from its installed metadata, so that
    a session without SSH hosts does not load paramiko only to read its version."""
    module = sys.modules.get(name)
    if module is None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:  # not installed as a distribution: ask the module
            module = importlib.import_module(name)
    return module.__version__


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
    baselines: list[str] | None = None,
) -> Built:
    specs, built_sims = [], {}
    for entry in hosts:
        spec, sim = host_spec(entry, sim_dir, (sims or {}).get(entry.name))
        specs.append(spec)
        if sim is not None:
            built_sims[entry.name] = sim
    policy = SafetyPolicy(scope={s.name for s in specs}, mode=mode, approver=approver,
                          authorizations=list(authorizations or []), plan=plan, baselines=list(baselines or []),
                          default_python={s.name: s.python or "python3" for s in specs})
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
    if transcript is not None and not info.get("fleet"):  # a rollout's hosts are listed through its own record
        remember_session(transcript)
    return Built(session=session, hosts=pool, transcript=transcript, sims=built_sims)


def _spec_info(s: HostSpec) -> dict:
    return {"name": s.name, "transport": s.transport, "target": s.target,
            "python": s.python}


def goal_budget(goal: Goal) -> Budget:
    return goal.budget


PLAN_NOTE = ("\nThis is a dry run (--plan), to check this goal file before a real run: make every call a real run "
             "would make, changes included, in the same order (the backup first). Read-only calls run, but a benchmark "
             "does not (make the call: it counts as measured for the plan). A change does not run: its result says what a real run would do with it (\"would run: authorized by "
             "authorizations[i]\" or \"would be refused\" and why). A written plan without the calls checks nothing. A "
             "refusal in a dry run does not end the plan: go on with the calls a real run would make once that step "
             "were allowed, so that each of them is checked too.")


def goal_message(goal: Goal, plan: bool = False) -> str:
    """The first user message of a scripted run: the goal, what the goal file allows, what will be checked."""
    lines = [goal.goal.strip(), "\nThis is a scripted run: nobody will answer questions. Read-only steps run. A step "
             "that changes a host runs only with a verified backup of that host from this session and a rule "
             "of the goal file that covers it exactly; every other change is refused."]
    if plan:
        lines.append(PLAN_NOTE)
    if goal.authorizations:
        lines.append("The goal file's authorizations (`*` matches any characters; a value a call gives must match "
                     "the rule's, or one of the rule's when it lists several):")
        lines += [f"- [{i}] {a.describe()}" for i, a in enumerate(goal.authorizations)]
    else:
        lines.append("The goal file authorizes no change: this run can only look.")
    if goal.success:
        lines.append("\nAt the end these checks will be run:")
        for c in goal.success:
            lines.append(f"- {c.model_dump(exclude_none=True)}")
    return "\n".join(lines)
