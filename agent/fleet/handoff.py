"""A held host handed to the model: `agent fleet --ask`.

A host whose facts differ from the recipe's preconditions is held: the recipe was proven on another
machine, so its steps are not run there. With `--ask`, once the rollout's batches are done, the
operator is asked, host by host, whether to hand it to the model in a session of its own. That
session is interactive, as `agent chat` is: the operator approves every change, because none of the
recipe's rules was proven on this host, so none of them applies. The model reads the recipe's goal,
what differs, the canary's steps as a reference, and the checks that will be run.

The end is judged from the record, as a rollout's host is: the recipe's checks and final state
(`read_end`, agent/finish.py), and the benchmark gate from the session's own `before` and `after` run_bench
results. A host that fails them, with a verified backup from the session, is offered its
rollback: restore_backup of the session's first backup, asked of the operator like any change,
made by the fleet (not the model) as a request of its own, so the rollback is its own step.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

from agent.budget import Budget
from agent.fleet.host import (CHANGED, FAILED, HELD, INTERRUPTED, ROLLBACK_REQUEST, HostOutcome, RecipeModel, gate_of,
                              last_line_hash)
from agent.fleet.recipe import Recipe
from agent.goal import Goal, HostEntry

ASK_TURNS = 40  # the model's turns for one held host: inspecting, a backup, the steps, checks, benchmarks


def handoff_message(recipe: Recipe, host: str, held: list[str]) -> str:
    """The request the model reads: the recipe's goal on this host, why it was held, the canary's steps."""
    canary = recipe.learned_from.host if recipe.learned_from else None
    written = f", as it was written for the canary host {canary!r}" if canary and canary != host else ""
    lines = [f"The rollout's goal{written}; here it is for {host}, this session's only host:", recipe.goal.strip(), "",
             f"This host, {host}, was held from a fleet rollout: its facts differ from those of the canary host the "
             "rollout's recipe was learned on:"]
    lines += [f"- {why}" for why in held]
    lines += ["", "The recipe's steps as they ran and were verified on the canary. They are a reference, not a plan: "
              "inspect this host and check what it needs before each change (another driver may need other wheels "
              "or another toolkit, or no change at all):"]
    lines += [f"{i}. {s.tool} {json.dumps(s.args, sort_keys=True)}" for i, s in enumerate(recipe.steps, start=1)]
    if recipe.drain is not None:
        lines.append(f"The recipe drains the node from its scheduler after the backup (drain_node "
                     f"{json.dumps(recipe.drain.call(host))}) and undrains it at the end.")
    lines += ["", "The operator approves each change on this host; none of the recipe's authorizations applies here. "
              "A change also needs a verified backup of this host from this session: take one with pip_freeze_backup "
              "before the first change."]
    if recipe.benchmark is not None:
        b = recipe.benchmark
        call = {k: v for k, v in b.call(host, "before").items() if v is not None}
        lines.append(f"Benchmark before the first change and after the last, with run_bench and these arguments "
                     f"(label \"before\", then \"after\" with compare_to \"before\"): {json.dumps(call)}. The rollout's "
                     f"gate: after >= before - {b.gate.max_drop_percent:g}% at {b.gate.confidence:.0%} confidence; the "
                     "rollout computes it from those two results (a bootstrap interval of their runs) once you end.")
    if recipe.checks:
        lines.append("\nAt the end these checks will be run:")
        lines += [f"- {c.model_dump(exclude_none=True)}" for c in recipe.checks]
    lines.append("\nIf this host cannot be brought to the goal safely, change nothing and say why: it then stays held, "
                 "and the checks are not run.")
    return "\n".join(lines)


class HandedOver:
    """The session's model: the operator's model for the request, the recipe's own plan for a rollback.

    The rollback is the fleet's, not the model's: a fixed restore_backup of the session's first backup."""

    def __init__(self, model: Any, recipe: Recipe, host: str):
        self.model = model
        self.name = getattr(model, "name", "?")
        self.rollback = RecipeModel(recipe, host, threading.Event())
        self._rolling_back = False

    def listen(self, event: dict) -> None:
        self.rollback.listen(event)

    def complete(self, messages, tools, on_text=None):
        asked = str(messages[-1].get("content", "")) if messages and messages[-1].get("role") == "user" else ""
        if asked.startswith(ROLLBACK_REQUEST[:20]):
            self._rolling_back = True
        if self._rolling_back:
            turn = self.rollback.complete(messages, tools)
            self._rolling_back = bool(turn.tool_calls)
            return turn
        return self.model.complete(messages, tools, on_text=on_text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


class _Record:
    """What the session's record says of this host: the changes begun, and run_bench's results by label."""

    def __init__(self, host: str):
        self.host = host
        self.changes: list[str] = []  # the tools of the changes begun (their intents), the backups left out
        self.calls: dict[str, dict] = {}
        self.by_label: dict[str, dict] = {}

    def listen(self, event: dict) -> None:
        if event.get("type") == "intent" and event.get("host") == self.host and event.get("tool") != "pip_freeze_backup":
            self.changes.append(str(event.get("tool")))
        elif event.get("type") == "tool_call" and event.get("tool") == "run_bench":
            self.calls[event.get("call_id", "")] = event.get("arguments") or {}
        elif event.get("type") == "tool_result" and event.get("call_id") in self.calls and event.get("ok"):
            args, data = self.calls[event["call_id"]], event.get("data")
            if args.get("host") == self.host and isinstance(data, dict) and data.get("values"):
                self.by_label[str(args.get("label"))] = data


def run_handoff(recipe: Recipe, entry: HostEntry, held: HostOutcome, *, model: Any, approver: Any,
                transcript: Path, listeners: list, start_info: dict, sims: dict | None = None) -> HostOutcome:
    """The held host's session with the model; its outcome, as the recap shows it (status changed or failed, or
    held again when the model changed nothing)."""
    from agent.finish import read_end  # lazy: with a session
    from agent.loop import Outcome  # lazy: as above
    from agent.preflight import reach_hosts  # lazy: as above
    from agent.session_builder import build_session  # lazy: loads the model SDK

    began = time.monotonic()
    goal = Goal(goal=recipe.goal, hosts=[entry], budget=Budget(turns=ASK_TURNS), success=recipe.checks)
    session_model = HandedOver(model, recipe, entry.name)
    record = _Record(entry.name)
    reasons = held.reason.removeprefix("held: ").split("; ")
    built = build_session(hosts=[entry], model=session_model, mode="interactive", approver=approver,
                          budget=goal.budget, transcript=transcript,
                          listeners=[session_model.listen, record.listen, *listeners], sims=sims,
                          start_info={"goal": recipe.goal, "command": "fleet", "handed_over": held.reason,
                                      **start_info})
    session = built.session
    if hasattr(approver, "record_in"):
        approver.record_in(session)
    gate: dict | None = None
    checks_ok: bool | None = None
    rolled_back: bool | None = None
    with session.closing():
        unreached = reach_hosts(session.hosts, [entry.name])
        if unreached:
            session.ending = Outcome("preflight", unreached[0].problem)
            status, reason = FAILED, unreached[0].problem
        else:
            try:
                outcome = session.send(handoff_message(recipe, entry.name, reasons))
            except KeyboardInterrupt as e:
                from agent.errors import interruption_reason  # lazy: only on an interrupt

                outcome = Outcome("interrupted", interruption_reason(e))
            session.ending = outcome
            if outcome.status == "interrupted":
                read_end(session, goal, outcome)  # what the interrupted changes left on the host
                status, reason = INTERRUPTED, f"handed to the model; interrupted: {outcome.reason}"
            elif not record.changes:
                status, reason = HELD, (f"{held.reason}; handed to the model, which changed nothing"
                                        + (f" (its session ended {outcome.status})" if outcome.status != "done" else ""))
            else:
                checks_ok = read_end(session, goal, outcome)
                gate = gate_of(recipe, record.by_label)
                whys = _whys(outcome, checks_ok, gate, recipe)
                status = FAILED if whys else CHANGED
                reason = "handed to the model: " + ("; ".join(whys) if whys else "its changes passed the checks"
                                                    + (f", gate: {gate['detail']}" if gate else ""))
                first = _first_backup(session, entry.name)
                if whys and first is not None:
                    session_model.rollback.backup_id = first
                    session.send(ROLLBACK_REQUEST.format(why="; ".join(whys)))
                    rolled_back = session_model.rollback.rolled_back
                    reason += ("; rolled back" if rolled_back else
                               "; NOT ROLLED BACK (the operator declined, or the restore failed): see the transcript")
                    read_end(session, goal, outcome, run_checks=False)  # what the host shows after its rollback
        verdict = "met" if status == CHANGED else "held" if status == HELD else "not met"
        session.emit("goal_result", met=status == CHANGED, verdict=verdict,
                     exit_code=0 if status in (CHANGED, HELD) else 1, reason=reason, checks_ok=checks_ok,
                     fleet_status=status, gate=gate, rolled_back=rolled_back, handed_over=True)
    return HostOutcome(host=entry.name, status=status, reason=reason, batch=held.batch, transcript=str(transcript),
                       last_hash=last_line_hash(transcript), gate=gate, rolled_back=rolled_back,
                       duration_s=round(time.monotonic() - began, 3), handed_over=True,
                       bench={label: {"median": d.get("median"), "values": d.get("values")}
                              for label, d in record.by_label.items() if label in ("before", "after")})


def _first_backup(session, host: str) -> str | None:
    """The session's first verified backup of the host: its state before the model's first change."""
    records = [r for r in session.gate.ledger.all() if r.host == host and r.verified]
    return records[0].backup_id if records else None


def _whys(outcome, checks_ok: bool | None, gate: dict | None, recipe: Recipe) -> list[str]:
    whys = []
    if outcome.status != "done":
        whys.append(f"its session ended {outcome.status}: {outcome.reason}")
    if checks_ok is False:
        whys.append("a success check failed")
    if recipe.benchmark is not None and gate is None:
        whys.append("the benchmark gate could not be computed: the session has no run_bench result labelled "
                    "\"before\" and \"after\" on this host")
    elif gate is not None and not gate["passed"]:
        whys.append(f"the benchmark gate failed: {gate['detail']}")
    return whys
