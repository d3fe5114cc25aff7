"""One host of a rollout: what it can end as, the recipe as its session's model, and its outcome.

`RecipeModel` makes the recipe's calls one turn at a time and decides from their recorded results, so a host's
transcript verifies and replays as any other and costs no tokens; `HostOutcome` is what the fleet's record and
recap say of the host. agent/fleet/rollout.py runs hosts with them, agent/fleet/recover.py restores one a killed
rollout left mid-way, agent/fleet/handoff.py hands a held one to the operator's model.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Generator

from agent.budget import Budget
from agent.fleet.recipe import Recipe
from agent.fleet.stats import bootstrap_gate
from agent.goal import Goal, HostEntry
from agent.model.protocol import AssistantTurn, ToolCall
from agent.text import clip
from tools.toolkit_sizes import Place, install_places, needs_for, shortfalls

# What a host's rollout ended as, Ansible's recap words where they mean the same.
OK, CHANGED, FAILED, HELD, UNREACHABLE, INTERRUPTED, NOT_RUN = (
    "ok", "changed", "failed", "held", "unreachable", "interrupted", "not run")
# Interrupted after a step had changed it, then put back from its backup: as it was, to be rolled over again.
RESTORED = "restored after interrupt"
# Its facts are what the canary ended with and its checks pass: nothing to do, nothing done (Ansible's `ok`).
ALREADY = "already at target"
# `agent fleet --check`: its facts match the preconditions, so a rollout would change it (nothing was).
WOULD_CHANGE = "would change"
COUNTS_AS_FAILED = (FAILED, UNREACHABLE)
UNREHEARSED = ("its backup's rehearsal found pins a restore could not fetch again: give the recipe's backup and "
               "restore index_url, a mirror that holds these versions")
ROLLBACK_REQUEST = "Roll this host back to its backup: {why}"
UNDRAIN_REQUEST = "Put this node back into its scheduler."


class _Failed(Exception):
    """A call of the plan whose result was not ok: why, as the host's reason."""


@dataclass
class CallSeen:
    tool: str
    ok: bool
    status: str
    content: str
    data: Any


class RecipeModel:
    """The recipe as a session's model: one call a turn, the next one chosen from the recorded results."""

    writes_summaries = False

    def __init__(self, recipe: Recipe, host: str, stop: threading.Event, check: bool = False):
        self.name = "recipe"
        self.recipe, self.host, self.stop = recipe, host, stop
        self.check = check  # `agent fleet --check`: the inspection and the checks only, never a change
        self.results: dict[str, CallSeen] = {}  # call id -> what the record says it did
        self.held: list[str] = []
        self.at_target = False  # its facts are the recipe's target (its checks decide, at the end)
        self.final_facts: dict | None = None  # what the host showed at the session's end, as read there
        self.failed: str | None = None  # why the host failed before its checks, if it did
        self.backup_id: str | None = None
        self.bench: dict[str, dict] = {}  # label -> run_bench data
        self.answers: dict[str, dict] = {}  # label -> check_outputs data
        self.changed = 0  # steps that ended ok
        self.begun = 0  # steps started (a step ends even when an interrupt comes while it runs)
        self.rolled_back: bool | None = None
        self.drained: str | None = None  # "ours", "someone else's" (left as it is), or "timed out"
        self.drain_id: str | None = None
        self.undrained: bool | None = None
        self.interrupted = False
        self._plan: Generator | None = None
        self._calls = 0
        self._last_id: str | None = None

    # -- listening to the session's events
    def listen(self, event: dict) -> None:
        if event.get("type") == "final_state" and event.get("host") == self.host:
            self.final_facts = event.get("inspect") if isinstance(event.get("inspect"), dict) else None
        if event.get("type") == "tool_result":
            self.results[event["call_id"]] = CallSeen(event.get("tool", ""), bool(event.get("ok")),
                                                      event.get("status", ""), event.get("content") or "",
                                                      event.get("data"))

    # -- the model protocol
    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        if self._plan is None:
            asked = str(messages[-1].get("content", "")) if messages and messages[-1].get("role") == "user" else ""
            self._plan = (self._rollback() if asked.startswith(ROLLBACK_REQUEST[:20]) else
                          self._undrain() if asked == UNDRAIN_REQUEST else self._apply())
            step = next(self._plan)
        else:
            seen = self.results.get(self._last_id or "")
            try:
                step = self._plan.send(seen)
            except StopIteration as done:  # pragma: no cover - the plans return through _final
                step = ("final", str(done.value))
        if step[0] == "final":
            self._plan = None
            return AssistantTurn(text=step[1], finish_reason="stop")
        tool, args = step
        self._calls += 1
        self._last_id = f"recipe_{self._calls}"
        return AssistantTurn(tool_calls=[ToolCall(id=self._last_id, name=tool, arguments=json.dumps(args))],
                             finish_reason="tool_calls")

    def _stopped(self) -> bool:
        if self.stop.is_set():
            self.interrupted = True
        return self.interrupted

    def _apply(self):
        try:
            yield from self._plan_steps()
        except _Failed as e:
            self.failed = str(e)
            yield ("final", f"failed: {e}")

    def _must(self, tool: str, args: dict, what: str):
        """One call of the plan and its recorded result; a result that is not ok ends the plan."""
        seen = yield (tool, args)
        if seen is None or not seen.ok:
            raise _Failed(f"{what} {seen.status if seen else 'did not run'}: {_first_line(seen)}")
        return seen

    def _plan_steps(self):
        h, recipe = self.host, self.recipe
        seen = yield from self._must("inspect_host", {"host": h}, "the inspection")
        facts = seen.data if isinstance(seen.data, dict) else {}
        self.held = recipe.preconditions.mismatches(facts)
        if self.held and recipe.target is not None and not recipe.target.mismatches(facts):
            self.held, self.at_target = [], True
            yield ("final", "already at target: its facts are what the canary ended with")
            return
        if not self.held:
            self.held = lacking_room(recipe, facts)
        if self.held:
            yield ("final", "held: " + "; ".join(self.held))
            return
        if self.check:
            yield ("final", f"would change: its facts match the preconditions; {len(recipe.steps)} step(s) would run")
            return
        if self._stopped():
            yield ("final", "stopped before the backup: the rollout was interrupted")
            return
        seen = yield from self._must("pip_freeze_backup", {"host": h, **recipe.backup}, "the backup")
        self.backup_id = (seen.data or {}).get("backup_id")
        if ((seen.data or {}).get("backup") or {}).get("rehearsed") is False:
            # Left unattended, a host whose restore could not fetch its pins would be left half-changed by any
            # failure: nothing is changed on it until the recipe names a mirror that holds them.
            self.held = [UNREHEARSED]
            yield ("final", "held: " + UNREHEARSED)
            return
        if recipe.drain is not None:
            try:
                seen = yield from self._must("drain_node", recipe.drain.call(h), "the drain")
            except _Failed as e:
                # A drain whose jobs outlived its timeout is in place, its id only in the tool's words: left so.
                self.drained = "timed out" if "stays drained" in str(e) else None
                raise
            self.drained = "ours" if (seen.data or {}).get("drained_by_us") else "someone else's"
            self.drain_id = (seen.data or {}).get("drain_id")
        if recipe.benchmark is not None:
            seen = yield from self._must("run_bench", recipe.benchmark.call(h, "before"), "the benchmark before")
            self.bench["before"] = seen.data
        if recipe.outputs is not None:
            seen = yield from self._must("check_outputs", recipe.outputs.call(h, "before"), "the answers before")
            self.answers["before"] = seen.data
        for i, step in enumerate(recipe.steps, start=1):
            if self._stopped():
                yield ("final", f"stopped before step {i} ({step.tool}): the rollout was interrupted")
                return
            self.begun += 1
            yield from self._must(step.tool, {"host": h, **step.args}, f"step {i} ({step.tool})")
            self.changed += 1
        if recipe.benchmark is not None:
            seen = yield from self._must("run_bench", recipe.benchmark.call(h, "after"), "the benchmark after")
            self.bench["after"] = seen.data
        if recipe.outputs is not None:
            seen = yield from self._must("check_outputs", recipe.outputs.call(h, "after"), "the answers after")
            self.answers["after"] = seen.data
        yield ("final", f"applied: {len(recipe.steps)} step{'s' * (len(recipe.steps) != 1)} ran")

    def _undrain(self):
        seen = yield ("undrain_node", {**self.recipe.drain.call(self.host, undrain=True), "drain_id": self.drain_id})
        self.undrained = bool(seen and seen.ok)
        yield ("final", "back in its scheduler" if self.undrained else f"the undrain failed: {_first_line(seen)}")

    def _rollback(self):
        seen = yield ("restore_backup", {"host": self.host, "backup_id": self.backup_id, **self.recipe.restore})
        self.rolled_back = bool(seen and seen.ok)
        yield ("final", "rolled back" if self.rolled_back else f"the rollback failed: {_first_line(seen)}")


def _first_line(seen: CallSeen | None) -> str:
    if seen is None:
        return "no result"
    text = seen.content.strip().splitlines()
    return clip(text[0] if text else seen.status, 300)


@dataclass
class HostOutcome:
    host: str
    status: str
    reason: str
    batch: int
    transcript: str | None = None
    last_hash: str | None = None
    gate: dict | None = None
    rolled_back: bool | None = None
    drained: str | None = None  # "ours" or "someone else's"
    undrained: bool | None = None
    steps_ok: int = 0
    steps_begun: int | None = None  # None where no session of this rollout ran the steps (read from a record)
    duration_s: float = 0.0
    bench: dict = field(default_factory=dict)  # label -> {median, values}
    handed_over: bool | None = None  # held, then handed to the model (`agent fleet --ask`)
    restored_first: str | None = None  # the transcript of its restore after a killed rollout, before this one

    def as_dict(self) -> dict:
        return {**{k: v for k, v in asdict(self).items() if v is not None}, "ended": self.ended()}

    def ended(self) -> str:
        """What the host is now, in words an operator reads in the recap and scripts read in fleet.jsonl: every
        status and rollback has one, so no host ends in a state with no name."""
        if self.status == FAILED:
            if self.rolled_back:
                return "failed, restored"
            if self.rolled_back is False:
                return "failed, NOT restored: half-changed, see its transcript"
            return "failed, unchanged" if not self.steps_ok else "failed"
        if self.status == INTERRUPTED and self.steps_begun == 0:
            left = ", LEFT DRAINED (undrain it by hand)" if self.drained == "ours" and not self.undrained else ""
            return "unchanged: interrupted before its first step" + left
        return {CHANGED: "upgraded", HELD: "held", OK: "unchanged", INTERRUPTED: "interrupted: look at it",
                NOT_RUN: "not run"}.get(self.status, self.status)


def host_goal(recipe: Recipe, entry: HostEntry) -> Goal:
    return Goal(goal=recipe.goal, hosts=[entry], authorizations=recipe.rules_for(entry.name),
                budget=Budget(turns=recipe.turns()), success=recipe.checks)


def without_answers(goal: Goal) -> Goal:
    """The goal's checks but those of the served model's answers: a host already at the target changes nothing, so
    it has no answers before a change to compare with."""
    return goal.model_copy(update={"success": [c for c in goal.success if c.outputs is None]})


def answers_said(model: RecipeModel) -> str:
    """What check_outputs found after the steps, against before, as the host's reason says it ('' without it)."""
    verdict = ((model.answers.get("after") or {}).get("comparison") or {}).get("verdict")
    return f", answers: {verdict}" if verdict else ""


def last_line_hash(path: Path) -> str | None:
    try:
        data = path.read_bytes().rstrip(b"\n")
    except OSError:
        return None
    return hashlib.sha256(data.rsplit(b"\n", 1)[-1]).hexdigest() if data else None


def gate_of(recipe: Recipe, results: dict[str, dict]) -> dict | None:
    """The recipe's benchmark gate on a host's run_bench results by label (`before`, `after`), or None without both."""
    bench = recipe.benchmark
    if bench is None or "before" not in results or "after" not in results:
        return None
    before, after = results["before"], results["after"]
    higher = ((after.get("comparison") or {}).get("higher_is_better"))
    result = bootstrap_gate([float(v) for v in before["values"]], [float(v) for v in after["values"]],
                            bench.gate.max_drop_percent, bench.gate.confidence, higher, metric=after.get("metric", ""))
    return result.as_dict()


def lacking_room(recipe: Recipe, inspection: dict) -> list[str]:
    """What the recipe's toolkit installs need free on this host and its filesystems lack, read from its
    inspection (df of /tmp, /var/tmp and /usr/local) before anything changes: the host is held, not failed and
    restored. A place the inspection did not measure is left to install_runfile's own check."""
    measured = {d["path"]: d for d in inspection.get("disk") or [] if isinstance(d, dict) and d.get("path")}
    lacking = []
    for step in recipe.steps:
        version = step.args.get("version")
        needs = needs_for(version) if step.tool == "install_runfile" and isinstance(version, str) else None
        if needs is None:
            continue
        places = []
        for path, need, why in install_places(needs, step.args.get("tmpdir"),
                                              str(step.args.get("toolkit_path") or f"/usr/local/cuda-{version}")):
            disk = measured.get(path)
            free = disk.get("free_bytes") if disk is not None else None
            if free is None and disk is not None and isinstance(disk.get("free_gib"), (int, float)):
                free = int(disk["free_gib"] * 2**30)  # recorded before df's exact figure was kept
            if free is not None:
                places.append(Place(path, need, why, disk.get("mount"), free))
        lacking += [f"too little room for CUDA {version}: {short} ({needs.source})" for short in shortfalls(places)]
    return lacking
