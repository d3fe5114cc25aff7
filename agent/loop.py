"""The planner loop: one session, one message list, batches of tool calls.

    send(user text) -> step() until the model answers without tool calls
    step(): ask the model -> prepare each call (validate, gate) -> run the batch -> append results
    close(): the end event, once, whatever happened

The batch itself (per-host order, cancel flags, the time budget) runs in agent/batch.py. The
loop never prints: everything it does is an event, written to the transcript and passed to
listeners (the UI).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from agent.batch import BatchRunner, CallResult, LiveToolRunner, PreparedCall, ToolRunner
from agent.budget import Budget
from agent.errors import interruption_reason
from agent.model import Model, ModelError, ToolCall
from agent.record.transcript import TranscriptWriter
from agent.safety.policy import Decision, SafetyPolicy, Verdict
from tools.base import ArgumentError, ArtifactStore, BackupRecord, Registry, ToolError

MAX_MALFORMED_TURNS = 3


@dataclass
class Outcome:
    """How a `send` ended."""

    status: str  # done | budget | malformed | model_error | interrupted | crashed
    reason: str = ""
    final_text: str = ""


Listener = Callable[[dict], None]


class Session:
    """One conversation with the model over a set of hosts, recorded step by step."""

    def __init__(
        self,
        model: Model,
        registry: Registry,
        gate: SafetyPolicy,
        transcript: TranscriptWriter,
        hosts: Any = None,
        system_prompt: str = "",
        budget: Budget | None = None,
        runner: ToolRunner | None = None,
        listeners: list[Listener] | None = None,
        start_info: dict | None = None,
    ):
        self.model = model
        self.registry = registry
        self.gate = gate
        self.transcript = transcript
        self.hosts = hosts
        self.budget = budget or Budget()
        self.runner = runner or LiveToolRunner()
        self.listeners = list(listeners or [])
        self.messages: list[dict] = []
        # A running hash of the message list: the request digest without re-serialising it every turn.
        self._messages_hash = hashlib.sha256()
        if system_prompt:
            self._add_message({"role": "system", "content": system_prompt})
        self.artifacts = ArtifactStore(transcript.artifacts_dir)
        self.store: dict[str, Any] = {}  # tool state shared across calls (run_bench's labels)
        self.turns = 0
        self.tokens = 0
        self.tool_calls = 0  # run
        self.calls_made = 0  # every call the model made, run or not
        self.skipped = self.malformed = 0
        self.refused: list[Decision] = []
        self.failed_calls = 0
        self.started = time.monotonic()
        self._malformed_streak = 0
        self._turns_at_send = 0
        self._schemas = registry.schemas()
        self._ended = False
        self.ending = Outcome("done", "")  # how close() ends the session by default: the last request's outcome
        tool_base = dict(hosts=hosts, artifacts=self.artifacts, store=self.store, redact=transcript.redactor.text,
                         known_backup=gate.ledger.find)
        self.batches = BatchRunner(self.runner, tool_base, self.emit, self.budget.max_wall_s, self.started)
        # Known as open before its first event is written: a signal that comes before the caller has
        # entered closing() is still answered by a closed transcript (close_open_sessions).
        _OPEN.add(self)
        # Everything replay needs to rebuild this session is in its first event.
        self.emit("session_start", **(start_info or {}), model=getattr(model, "name", "?"),
                  hosts=sorted(gate.scope), system_prompt=system_prompt, budget=self.budget.as_record(),
                  policy=gate.as_record(), tools=self._schemas)

    # ------------------------------------------------------------------ events

    def emit(self, type_: str, record: bool = True, **fields: Any) -> dict:
        if record:
            event = self.transcript.write(type_, **fields)
        else:
            event = {"type": type_, "t": time.time(), **fields}
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a broken display must not break the session
                pass
        return event

    def _add_message(self, message: dict) -> None:
        self.messages.append(message)
        # Hashed as the transcript stores it (redacted), so a replay computes the same digest.
        redacted = self.transcript.redactor.value(message)
        self._messages_hash.update(json.dumps(redacted, sort_keys=True, default=str).encode())

    # ------------------------------------------------------------------ driving

    def send(self, text: str) -> Outcome:
        """Add a user message and run turns until a final answer, a budget, or an error.

        KeyboardInterrupt propagates after the running batch is cancelled and recorded; the
        caller decides whether that ends the session (run) or returns to the prompt (chat).
        """
        self._add_message({"role": "user", "content": text})
        self.emit("note", kind="user", text=text)
        self._turns_at_send = self.turns  # the turn budget is per request; tokens and time are per session
        while True:
            over = self.budget.spent(self.turns - self._turns_at_send, self.tokens, time.monotonic() - self.started)
            outcome = Outcome("budget", over) if over else self.step()
            if outcome is not None:
                self.ending = outcome
                return outcome

    def step(self) -> Outcome | None:
        """One model turn and its batch. Returns an Outcome when the conversation stops."""
        self.turns += 1
        turn_no = self.turns
        self.emit("model_request", turn=turn_no, messages=len(self.messages),
                  digest=self._messages_hash.hexdigest()[:16])
        try:
            reply = self.model.complete(self.messages, self._schemas,
                                        on_text=lambda t: self.emit("text", record=False, turn=turn_no, text=t))
        except ModelError as e:
            self.emit("model_error", turn=turn_no, error=str(e))
            return Outcome("model_error", str(e))
        self.tokens += reply.usage.total_tokens
        self.emit("model_response", turn=turn_no, text=reply.text,
                  tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                  usage=reply.usage.as_dict(), latency_s=round(reply.latency_s, 4),
                  finish_reason=reply.finish_reason, attempts=reply.attempts)
        self._add_message(reply.to_message())
        if not reply.tool_calls:
            return Outcome("done", "final answer", reply.text)

        batch = [self._prepare(turn_no, i, c) for i, c in enumerate(reply.tool_calls)]
        self.calls_made += len(batch)
        self.malformed += sum(p.error is not None for p in batch)
        self.skipped += sum(p.decision is not None and p.decision.verdict is Verdict.SKIP for p in batch)
        results = self._run_batch(turn_no, batch)
        for p, r in zip(batch, results):
            self._add_message({"role": "tool", "tool_call_id": p.call.id, "content": r.content})

        if any(p.error for p in batch):
            self._malformed_streak += 1
            if self._malformed_streak >= MAX_MALFORMED_TURNS:
                return Outcome("malformed", f"{MAX_MALFORMED_TURNS} turns in a row had malformed tool calls")
        else:
            self._malformed_streak = 0
        return None

    # ------------------------------------------------------------------ one call

    def _prepare(self, turn_no: int, index: int, call: ToolCall) -> PreparedCall:
        p = PreparedCall(index=index, call=call)
        tool = self.registry.get(call.name)
        base = {"turn": turn_no, "index": index, "call_id": call.id, "tool": call.name}
        if tool is None:
            p.error = (f"unknown tool {call.name!r}; available tools: {', '.join(self.registry.names())}")
        else:
            p.tool = tool
            try:
                p.args = tool.parse_args(call.arguments)
                p.action = tool.action(p.args)
            except (ArgumentError, ToolError) as e:
                p.error = str(e)
        if p.error is not None:
            self.emit("tool_call", **base, arguments=call.arguments, error=p.error)
            return p
        self.emit("tool_call", **base, arguments=p.args.model_dump(mode="json"))
        p.decision = self.gate.decide(call.name, p.action)
        self.emit("decision", **base, **p.decision.as_event())
        if not p.decision.allowed and p.decision.verdict is Verdict.DENY:
            self.refused.append(p.decision)
        return p

    # ------------------------------------------------------------------ the batch

    def _run_batch(self, turn_no: int, batch: list[PreparedCall]) -> list[CallResult]:
        self.tool_calls += sum(p.runnable for p in batch)
        results = self.batches.run(turn_no, batch, record=lambda done: self._finish_batch(turn_no, batch, done))
        self._finish_batch(turn_no, batch, results)
        return results

    def _finish_batch(self, turn_no: int, batch: list[PreparedCall], results: list[CallResult | None]) -> None:
        """Record every result in call order and register any verified backup."""
        for p in batch:
            r = results[p.index]
            if r is None:
                r = results[p.index] = CallResult(content="not run", ok=False, status="cancelled")
            if r.status in ("error", "crashed"):
                self.failed_calls += 1
            self.emit("tool_result", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                      status=r.status, ok=r.ok, content=r.content, data=r.data, error=r.error,
                      duration_s=round(r.duration_s, 4), started=r.started, ended=r.ended)
            backup = (r.data or {}).get("backup") if r.ok else None
            if backup:
                record = BackupRecord.model_validate(backup)
                if record.verified:
                    self.gate.ledger.register(record)
                    self.emit("backup", call_id=p.call.id, **record.model_dump(mode="json"))

    # ------------------------------------------------------------------ closing

    @contextlib.contextmanager
    def closing(self) -> Iterator["Session"]:
        """The one send-and-close path of run, chat, demo and replay.

        Whatever happens inside, the transcript gets exactly one session_end: `self.ending` (the
        last request's outcome, or what the caller sets) on the way out; "interrupted" on Ctrl-C
        and "crashed" on any other exception, both of which go on to the caller.
        """
        try:
            yield self
        except KeyboardInterrupt as e:
            self.close("interrupted", interruption_reason(e))
            raise
        except BaseException as e:
            self.close("crashed", f"{type(e).__name__}: {e}")
            raise
        self.close(self.ending.status, self.ending.reason)

    def close(self, status: str, reason: str = "") -> None:
        """Write the end event once, whatever happened; close the hosts."""
        if self._ended:
            return
        _OPEN.discard(self)
        # Built first: a Ctrl-C from here on can no longer cost the transcript its end.
        end = dict(status=status, reason=reason, turns=self.turns, tokens=self.tokens, tool_calls=self.tool_calls,
                   calls=self.calls_made, refused=len(self.refused), skipped=self.skipped, malformed=self.malformed,
                   failed=self.failed_calls,
                   duration_s=round(time.monotonic() - self.started, 3))
        self._ended = True
        try:
            if self.hosts is not None:
                self.hosts.close()
        finally:
            try:
                self.emit("session_end", **end)
            except KeyboardInterrupt:
                # Another Ctrl-C while closing: the transcript still gets its end, then the interrupt goes on.
                if not self.transcript.closed:
                    self.emit("session_end", **end)
                raise


def run_session(session: Session, text: str) -> Outcome:
    """Send one message and close the session whatever happens (the scripted-run shape)."""
    try:
        with session.closing():
            return session.send(text)
    except KeyboardInterrupt as e:
        return Outcome("interrupted", interruption_reason(e))


# Sessions whose transcript has its first event but not its end yet.
_OPEN: weakref.WeakSet[Session] = weakref.WeakSet()


def close_open_sessions(reason: str) -> None:
    """End every session still open (an interrupt that came before or after a caller's closing())."""
    for session in list(_OPEN):
        session.close("interrupted", reason)
