"""Replay: re-drive the loop with the model's turns and the tools' results taken from a transcript.

The loop, the validation and the safety gate run for real; only the model, the tools and
the operator's answers are stubbed from the record. The replay must make the same tool
calls and the same safety decisions, and send the model the same conversation (checked
through the request digests). The first difference stops the replay with a readable diff.

The transcript is read once, forward, keeping only the current turn's events, so memory
does not grow with the transcript beyond the message list itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from agent.batch import CallResult, PreparedCall
from agent.budget import Budget
from agent.journal import args_digest
from agent.loop import Outcome, Session
from agent.model import AssistantTurn, ModelError, ToolCall, Usage
from agent.record.transcript import TranscriptWriter, iter_events, verify
from agent.safety.ledger import BackupLedger
from agent.safety.policy import ApprovalAnswer, ApprovalRequest, Authorization, Declined, SafetyPolicy
from tools.base import Registry, ToolContext

# What must match between the record and the replay, per event type.
_COMPARED = {
    "tool_call": ("tool", "arguments", "error"),
    "decision": ("verdict", "rule", "risk", "host", "subject", "backup_id", "approved_by"),
    "intent": ("tool", "host", "args_digest"),  # compared where the record has them (older ones have none)
}
# Events that change the session's state outside a model turn: applied when the cursor passes them.
_STATE_EVENTS = ("resumed", "compaction")


class Divergence(Exception):
    def __init__(self, step: str, field: str, recorded, now):
        self.step, self.field, self.recorded, self.now = step, field, recorded, now
        super().__init__(self.render())

    def render(self) -> str:
        def show(v) -> str:
            return json.dumps(v, ensure_ascii=False, default=str) if not isinstance(v, str) else v

        return (f"replay differs at {self.step}: {self.field}\n"
                f"  recorded: {show(self.recorded)}\n"
                f"  now:      {show(self.now)}")


class _Cursor:
    """Reads the record forward, one turn at a time."""

    def __init__(self, events: Iterator[dict], on_operator_note=lambda ev: None):
        self._events = events
        self._peeked: dict | None = None
        self.turn_events: list[dict] = []
        self.end: dict | None = None
        # What the operator changed mid-session (a host added, dry run toggled) applies from here on.
        self._on_operator_note = on_operator_note

    def _next(self) -> dict | None:
        if self._peeked is not None:
            ev, self._peeked = self._peeked, None
        else:
            ev = next(self._events, None)
        if ev is not None and ev.get("type") == "session_end":
            self.end = ev
        if ev is not None and (ev.get("type") in _STATE_EVENTS or (
                ev.get("type") == "note" and ev.get("kind") in ("host_added", "plan"))):
            self._on_operator_note(ev)
        return ev

    def _peek(self) -> dict | None:
        if self._peeked is None:
            self._peeked = next(self._events, None)
            if self._peeked is not None and self._peeked.get("type") == "session_end":
                self.end = self._peeked
        return self._peeked

    def next_user_text(self) -> str | None:
        """Skip to the next operator message; None when the record has no more."""
        while True:
            ev = self._next()
            if ev is None or ev["type"] == "session_end":
                return None
            if ev["type"] == "note" and ev.get("kind") == "user":
                return ev["text"]

    def model_turn(self, turn: int) -> dict | None:
        """The recorded model_response of `turn`, buffering that turn's events; None if the send ended."""
        self.turn_events = []
        while True:
            ev = self._peek()
            if ev is None or ev["type"] == "session_end" or (ev["type"] == "note" and ev.get("kind") == "user"):
                return None
            self._next()
            if ev["type"] == "model_response" and ev["turn"] == turn:
                break
            if ev["type"] == "model_error" and ev["turn"] == turn:
                self.turn_events = [ev]
                return ev
        response = ev
        while True:  # the rest of this turn: calls, decisions, approvals, results
            nxt = self._peek()
            if nxt is None or nxt["type"] in ("model_request", "session_end") or (
                    nxt["type"] == "note" and nxt.get("kind") == "user"):
                break
            self.turn_events.append(self._next())
        return response

    def recorded(self, type_: str, index: int) -> dict | None:
        for ev in self.turn_events:
            if ev["type"] == type_ and ev.get("index") == index:
                return ev
        return None

    def approvals(self) -> list[dict]:
        return [ev for ev in self.turn_events if ev["type"] == "approval"]

    def exhausted(self) -> bool:
        """The record has nothing after this turn's events and no session_end: the process was killed here."""
        return self.end is None and self._peek() is None


def turn_from_event(ev: dict, rewrite: Callable[[str], str] = lambda text: text) -> AssistantTurn:
    """The assistant turn a recorded model_response event holds (its text and arguments rewritten)."""
    calls = [ToolCall(id=c["id"], name=c["name"], arguments=rewrite(c["arguments"])) for c in ev.get("tool_calls", [])]
    usage = ev.get("usage") or {}
    return AssistantTurn(text=rewrite(ev.get("text") or ""), tool_calls=calls,
                         usage=Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0),
                                     estimated=bool(usage.get("estimated"))),
                         latency_s=ev.get("latency_s", 0.0), finish_reason=ev.get("finish_reason"))


class ReplayModel:
    writes_summaries = False  # a compaction's summary comes from the record, never from this model

    def __init__(self, cursor: _Cursor, name: str):
        self.name = name
        self.cursor = cursor
        self.divergence: Divergence | None = None
        self._turn = 0
        self.record_ended = False  # the record has no more turns where the loop asked for one

    def complete(self, messages, tools, on_text=None) -> AssistantTurn:
        if self.divergence is not None:
            raise ModelError("replay stopped at the first difference")
        self._turn += 1
        ev = self.cursor.model_turn(self._turn)
        if ev is None:
            self.record_ended = True
            raise ModelError("the record has no more model turns here")
        if ev["type"] == "model_error":
            raise ModelError(ev["error"])
        return turn_from_event(ev)


# What a caller may answer instead of the record for a call: (turn, call, its recorded result) -> a result or None.
ResultFor = Callable[[int, PreparedCall, "dict | None"], "CallResult | None"]


class ReplayRunner:
    def __init__(self, cursor: _Cursor, result_for: ResultFor | None = None, turn: Callable[[], int] = lambda: 0):
        self.cursor = cursor
        # What a caller says instead of the record for some calls (resume: a change whose outcome is unknown).
        self.result_for = result_for or (lambda turn, prepared, recorded: None)
        self.turn = turn

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> CallResult:
        ev = self.cursor.recorded("tool_result", prepared.index)
        instead = self.result_for(self.turn(), prepared, ev)
        if instead is not None:
            return instead
        if ev is None:
            return CallResult(content="error: the record has no result for this call", ok=False,
                              error="missing from record", status="error")
        return CallResult(content=ev.get("content", ""), ok=bool(ev.get("ok")), data=ev.get("data"),
                          error=ev.get("error"), status=ev.get("status", "ok"))


class ReplayApprover:
    """The operator's recorded answers, in the order they were given."""

    def __init__(self, cursor: _Cursor, cut_short: bool = False):
        self.cursor = cursor
        self.cut_short = cut_short
        self._used: set[int] = set()

    def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        for ev in self.cursor.approvals():
            if ev["seq"] not in self._used:
                self._used.add(ev["seq"])
                if ev.get("reason"):  # a no with the operator's words: the model read them with the refusal
                    return Declined(ev["reason"], ApprovalAnswer(ev["answer"]))
                return ApprovalAnswer(ev["answer"])
        if self.cut_short and self.cursor.exhausted():
            # Killed while the question was open: nobody said no. Let the call reach the runner, which is
            # stubbed, so its result says it never ran rather than that the operator declined it.
            return ApprovalAnswer.YES
        return ApprovalAnswer.NO


class _Comparator:
    """Listens to the replayed session's events and compares them with the record."""

    def __init__(self, cursor: _Cursor, model: ReplayModel, start: dict, registry: Registry | None = None,
                 cut_short: bool = False):
        self.cursor, self.model = cursor, model
        self.start = start
        self.cut_short = cut_short
        self.compared = 0
        self.registry = registry
        self._arguments: dict[tuple, dict] = {}  # (turn, index) -> a call's arguments, as the record had them

    def __call__(self, event: dict) -> None:
        if self.model.divergence is not None:
            return
        t = event.get("type")
        if t not in _COMPARED:
            return
        step = f"turn {event['turn']}, call {event['index'] + 1} ({event.get('tool')})"
        rec = self.cursor.recorded(t, event["index"])
        if rec is None and t == "intent":
            return  # recorded before the journal existed
        if rec is None and self.cut_short and self.cursor.exhausted():
            return  # the process was killed before it wrote this step: nothing to compare it with
        if rec is None:
            self.model.divergence = Divergence(step, f"{t}: not in the record", None, _pick(event, t))
            return
        for key in _COMPARED[t]:
            now = event.get(key)
            if t == "tool_call" and key == "arguments":
                now = self._as_recorded(event.get("tool"), rec.get(key), now)
                self._arguments[(event["turn"], event["index"])] = now
            if t == "intent" and key == "args_digest" and (event["turn"], event["index"]) in self._arguments:
                # The digest of the arguments as the record had them (without those gained since, at their default).
                now = args_digest(event.get("tool", ""), self._arguments[(event["turn"], event["index"])])
            if rec.get(key) != now:
                self.model.divergence = Divergence(step, f"{t} {key}", rec.get(key), event.get(key))
                return
        if t != "intent":
            self.compared += 1


    def _as_recorded(self, tool: str | None, recorded, now):
        """A tool's arguments without those it gained after the record was made, where they are at their
        default: a session recorded before restore_backup had `system` replays as it ran."""
        if not (isinstance(recorded, dict) and isinstance(now, dict) and self.registry is not None):
            return now
        try:
            fields = self.registry.get(tool).Args.model_fields
        except Exception:  # noqa: BLE001 - an unknown tool is compared as it is
            return now
        return {k: v for k, v in now.items()
                if k in recorded or k not in fields or fields[k].is_required() or v != fields[k].get_default(
                    call_default_factory=True)}


def _pick(event: dict, t: str) -> dict:
    return {k: event.get(k) for k in _COMPARED[t]}


@dataclass
class ReplayReport:
    ok: bool
    turns: int
    compared: int
    message: str
    recorded_status: str | None
    status: str | None


def replay(path: Path, registry: Registry, verify_chain: bool = True) -> ReplayReport:
    """Replay one transcript against this code's loop, tools' schemas and safety gate."""
    if verify_chain:
        check = verify(path)
        if not check.ok:
            first = check.problems[0]
            return ReplayReport(False, 0, 0, f"{path}: the record is not intact: {first}"
                                + _step_of_line(path, first), check.status, None)
    events = iter_events(path)
    start = next(events, None)
    if start is None or start.get("type") != "session_start":
        return ReplayReport(False, 0, 0, f"{path}: does not start with a session_start event", None, None)
    return drive(start, events, registry)[0]


def offered_then(registry: Registry, start: dict) -> Registry:
    """The tools the recorded session offered, of this code's: a tool added since was unknown to it (a call
    of that name was refused as unknown, naming the tools offered then), and is in a replay too."""
    recorded = [t.get("function", {}).get("name") for t in start.get("tools") or [] if isinstance(t, dict)]
    if not recorded or not all(registry.get(name) for name in recorded):
        return registry  # an older record without its tools, or one naming a tool this code lacks: as it is
    return Registry([tool for tool in registry if tool.name in recorded])


def drive(start: dict, events: Iterator[dict], registry: Registry, result_for: ResultFor | None = None,
          cut_short: bool = False) -> tuple[ReplayReport, Session]:
    """Re-drive the session whose first event is `start` through the events that follow it: the report,
    and the session as it stands at the end of the record (its messages, its ledger).

    `cut_short`: the record may stop anywhere in its last turn (a process killed between two events of a
    batch); the steps of that turn the record does not hold are taken as they come, not compared, and
    the calls without a result get what `result_for` says."""
    policy_cfg = start.get("policy", {})

    def operator_note(ev: dict) -> None:
        if ev["type"] == "resumed":
            session.resume_from({k: v for k, v in ev.items() if k not in ("v", "seq", "t", "type", "prev")})
        elif ev["type"] == "compaction":
            session.compaction_recorded(ev)
        elif ev["kind"] == "host_added":
            policy.scope.add(ev["host"])
        elif ev["kind"] == "plan":
            policy.plan = bool(ev["plan"])

    registry = offered_then(registry, start)
    cursor = _Cursor(events, operator_note)
    model = ReplayModel(cursor, start.get("model", "recorded"))
    policy = SafetyPolicy(
        scope=set(policy_cfg.get("scope", start.get("hosts", []))),
        ledger=BackupLedger(),
        mode=policy_cfg.get("mode", start.get("mode", "scripted")),
        approver=ReplayApprover(cursor, cut_short),
        authorizations=[Authorization.model_validate(a) for a in policy_cfg.get("authorizations", [])],
        plan=bool(policy_cfg.get("plan", start.get("plan", False))),
        default_python=dict(policy_cfg.get("default_python") or {}),
        baselines=list(policy_cfg.get("baselines") or []),
    )
    b = start.get("budget") or {}
    budget = Budget.from_record({**b, "max_wall_s": None})
    comparator = _Comparator(cursor, model, start, registry, cut_short)
    session = Session(model=model, registry=registry, gate=policy, transcript=TranscriptWriter(None),
                      system_prompt=start.get("system_prompt", ""), budget=budget,
                      runner=ReplayRunner(cursor, result_for, turn=lambda: model._turn), listeners=[comparator],
                      start_info={},
                      compaction=False)
    recorded_digests = _DigestCheck(cursor, model)
    session.listeners.append(recorded_digests)
    status = None
    with session.closing():
        while model.divergence is None:
            text = cursor.next_user_text()
            if text is None:
                break
            outcome = session.send(text)
            status = outcome.status
            if model.record_ended:
                # The recorded request ended without an answer here (interrupted, or the session crashed):
                # go on with the next operator message, if the record has one.
                model.record_ended = False
                status = None
                continue
            nxt = cursor._peek()
            if model.divergence is None and nxt is not None and nxt["type"] in ("model_request", "model_response"):
                model.divergence = Divergence(f"turn {session.turns + 1}", "the record goes on, the replay stopped",
                                              f"turn {nxt.get('turn')}", f"ended: {outcome.status} ({outcome.reason})")
        session.ending = Outcome(status or "replayed", "")
    recorded_status = cursor.end.get("status") if cursor.end else None
    if model.divergence is not None:
        return ReplayReport(False, session.turns, comparator.compared, model.divergence.render(),
                            recorded_status, status), session
    return ReplayReport(True, session.turns, comparator.compared,
                        f"identical: {session.turns} turns, {comparator.compared} calls and decisions compared",
                        recorded_status, status), session


class _DigestCheck:
    """The conversation sent to the model must be the one recorded (catches edited results)."""

    def __init__(self, cursor: _Cursor, model: ReplayModel):
        self.cursor, self.model = cursor, model

    def __call__(self, event: dict) -> None:
        if event.get("type") != "model_request" or self.model.divergence is not None:
            return
        rec = self.cursor._peek()
        if rec is not None and rec.get("type") == "model_request" and rec.get("turn") == event["turn"]:
            if rec.get("digest") != event.get("digest"):
                self.model.divergence = Divergence(
                    f"turn {event['turn']}, model request",
                    "the conversation sent to the model differs from the record (a recorded result or message "
                    f"before turn {event['turn']} was changed)", rec.get("digest"), event.get("digest"))


def _step_of_line(path: Path, problem: str) -> str:
    """Name the step a broken line belongs to, e.g. ' (line 12: tool_result of turn 3, call 2)'."""
    import re

    m = re.match(r"line (\d+)", problem)
    if not m:
        return ""
    n = int(m.group(1))
    with open(path, "rb") as f:
        for i, line in enumerate(f, 1):
            if i == n:
                try:
                    ev = json.loads(line)
                except json.JSONDecodeError:
                    return ""
                where = f"{ev.get('type')}"
                if "turn" in ev:
                    where += f" of turn {ev['turn']}"
                if "index" in ev:
                    where += f", call {ev['index'] + 1}"
                return f" (line {n}: {where})"
    return ""
