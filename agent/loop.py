"""The planner loop: one session, one message list, batches of tool calls.

    send(user text) -> step() until the model answers without tool calls
    step(): ask the model -> validate each call -> gate each call -> run the batch -> append results

Calls of one turn are one batch. Allowed calls run concurrently under one read/write
rule per host: read-only calls share the host, any other call runs alone, and both keep
call order (a call waits for the earlier calls it conflicts with). Calls on different
hosts never wait for each other. Results go back to the model in call order.

The loop never prints: everything it does is an event, written to the transcript and
passed to listeners (the UI).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import hashlib
import json
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from pydantic import BaseModel

from agent.model import Model, ModelError, ToolCall
from agent.safety import Decision, SafetyPolicy, Verdict
from agent.transcript import TranscriptWriter
from tools.base import (Action, ArgumentError, ArtifactStore, BackupRecord, Registry, RiskClass, Tool,
                        ToolContext, ToolError, bound_for_record, has_long_text)

MAX_MALFORMED_TURNS = 3


@dataclass
class Budget:
    max_turns: int = 40
    max_tokens: int | None = None
    max_wall_s: float | None = None


@dataclass
class Outcome:
    """How a `send` ended."""

    status: str  # done | budget | malformed | model_error | interrupted | crashed
    reason: str = ""
    final_text: str = ""


class CancelFlags:
    """One request's cancel flags. Calls that change a host watch `operator`, which only the
    operator's Ctrl-C sets; read-only calls watch `reads`, which the time budget sets too.

    A new request gets new flags rather than cleared ones: a call of an earlier request still
    waiting on a thread (behind a command that would not die) keeps seeing its cancel.
    """

    def __init__(self) -> None:
        self.operator = threading.Event()
        self.reads = threading.Event()
        self.reads_reason = "by the operator"

    def by_operator(self) -> None:
        self.operator.set()
        self.reads.set()


@dataclass
class PreparedCall:
    """One tool call of a batch after validation and the gate."""

    index: int
    call: ToolCall
    tool: Tool | None = None
    args: BaseModel | None = None
    action: Action | None = None
    decision: Decision | None = None
    error: str | None = None  # malformed call: message for the model

    @property
    def runnable(self) -> bool:
        return self.error is None and self.decision is not None and self.decision.allowed

    @property
    def changes_host(self) -> bool:
        return self.decision is None or self.decision.risk.cls is not RiskClass.READ_ONLY

    @property
    def exclusive(self) -> bool:
        """Runs alone on its host: anything that is not read-only, and what asks for the host alone."""
        return self.changes_host or (self.action is not None and self.action.exclusive)


@dataclass
class CallResult:
    """What the model reads (`content`) and what the transcript keeps (`data`)."""

    content: str
    ok: bool
    data: dict | None = None
    error: str | None = None
    duration_s: float = 0.0
    started: float | None = None
    ended: float | None = None
    status: str = "ok"  # ok | error | refused | skipped | malformed | cancelled | crashed


class ToolRunner(Protocol):
    """Runs one allowed call. Live sessions run the tool; replay answers from the record."""

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> CallResult: ...


class LiveToolRunner:
    def run(self, prepared: PreparedCall, ctx: ToolContext) -> CallResult:
        tool, args = prepared.tool, prepared.args
        try:
            result = tool.run(ctx, args)
        except ToolError as e:
            return CallResult(content=f"error: {e}", ok=False, error=str(e), status="error")
        except Exception as e:  # noqa: BLE001 - a crashing tool must not take the session down
            detail = "".join(traceback.format_exception(e))
            where = ctx.artifacts.save(f"{prepared.call.id}-traceback.txt", ctx.redact(detail))
            msg = f"tool {tool.name} crashed: {type(e).__name__}: {e}" + (f" (traceback in {where})" if where else "")
            return CallResult(content=f"error: {msg}", ok=False, error=msg, status="crashed")
        return CallResult(content=tool.render(result), ok=True, data=result.model_dump(mode="json"))


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
        self.flags = CancelFlags()  # this request's; request_cancel sets them, rearm_cancel replaces them
        self._changes_running: set[str] = set()  # call ids of running calls that change a host
        self._time_up = False  # the time budget ran out while a batch ran: nothing new starts
        self.turns = 0
        self.tokens = 0
        self.tool_calls = 0
        self.refused: list[Decision] = []
        self.failed_calls = 0
        self.started = time.monotonic()
        self._malformed_streak = 0
        self._turns_at_send = 0
        self._schemas = registry.schemas()
        self._ended = False
        # Everything replay needs to rebuild this session is in its first event.
        self.emit("session_start", **(start_info or {}), model=getattr(model, "name", "?"),
                  hosts=sorted(gate.scope), system_prompt=system_prompt, budget=self.budget.__dict__,
                  policy={"scope": sorted(gate.scope), "mode": gate.mode, "plan": gate.plan,
                          "authorizations": [a.model_dump(exclude_defaults=True) for a in gate.authorizations]},
                  tools=self._schemas)

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
            over = self._over_budget()
            if over:
                return Outcome("budget", over)
            outcome = self.step()
            if outcome is not None:
                return outcome

    def _over_budget(self) -> str | None:
        b = self.budget
        if b.max_turns is not None and self.turns - self._turns_at_send >= b.max_turns:
            return f"turn budget of {b.max_turns} reached"
        if b.max_tokens is not None and self.tokens >= b.max_tokens:
            return f"token budget of {b.max_tokens} reached ({self.tokens} used)"
        if b.max_wall_s is not None and time.monotonic() - self.started >= b.max_wall_s:
            return f"time budget of {b.max_wall_s:g} s reached"
        return None

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

    def _context(self, p: PreparedCall, flags: CancelFlags) -> ToolContext:
        def emit_live(kind: str, data: dict) -> None:
            self.emit(kind, record=False, call_id=p.call.id, tool=p.call.name, **data)

        if p.changes_host:
            cancel, reason = flags.operator, (lambda: "by the operator")
        else:
            cancel, reason = flags.reads, (lambda: flags.reads_reason)
        return ToolContext(hosts=self.hosts, artifacts=self.artifacts, call_id=p.call.id, cancel=cancel,
                           emit=emit_live, store=self.store, redact=self.transcript.redactor.text,
                           known_backup=self.gate.ledger.find, cancel_reason=reason)

    @property
    def cancel(self) -> threading.Event:
        """Set while the operator's cancel of the current request is on (the UI shows 'cancelling')."""
        return self.flags.operator

    def request_cancel(self) -> None:
        """The operator's cancel (Ctrl-C): every running call of this request stops, none starts.

        It takes the flags' locks: a signal handler must not call it (chat relays it to a thread).
        """
        self.flags.by_operator()

    def _execute(self, turn_no: int, p: PreparedCall, waits: list[cf.Future], flags: CancelFlags) -> CallResult:
        for f in waits:  # earlier calls this one conflicts with, on the same host
            try:
                f.result()
            except BaseException:  # noqa: BLE001 - their failure is theirs; we only wait for them
                pass
        if p.changes_host:
            self._changes_running.add(p.call.id)
        try:
            if flags.operator.is_set():  # a Ctrl-C may have come while this call waited
                return CallResult(content="cancelled by the operator before it started", ok=False,
                                  error="cancelled", status="cancelled")
            if self._time_up:
                return CallResult(content=f"not started: {self._time_up_reason()}", ok=False,
                                  error="cancelled", status="cancelled")
            started = time.time()
            self.emit("tool_start", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                      host=p.action.host if p.action else None)
            t0 = time.monotonic()
            ctx = self._context(p, flags)
            result = self.runner.run(p, ctx)
            if result.data is not None and has_long_text(result.data):  # kept as head and tail in the record
                result.data = bound_for_record(result.data, ctx)
            result.duration_s = time.monotonic() - t0
            result.started, result.ended = started, time.time()
            return result
        finally:
            self._changes_running.discard(p.call.id)

    # ------------------------------------------------------------------ the batch

    def _run_batch(self, turn_no: int, batch: list[PreparedCall]) -> list[CallResult]:
        results: list[CallResult | None] = [None] * len(batch)
        for p in batch:
            if p.error is not None:
                results[p.index] = CallResult(content=f"error: {p.error}", ok=False, error=p.error, status="malformed")
            elif not p.runnable:
                status = "skipped" if p.decision.verdict is Verdict.SKIP else "refused"
                results[p.index] = CallResult(content=p.decision.message_for_model(), ok=False, status=status)
        runnable = [p for p in batch if p.runnable]
        self.tool_calls += len(runnable)
        flags = self.flags  # this batch's, whatever a later request does
        if self.budget.max_wall_s is None:
            self._run_runnable(turn_no, batch, runnable, results, flags)
        else:
            with self._time_budget_watch(self.budget.max_wall_s, flags):
                self._run_runnable(turn_no, batch, runnable, results, flags)
        self._finish_batch(turn_no, batch, results)
        return results  # type: ignore[return-value]

    def rearm_cancel(self) -> None:
        """After a request (chat goes back to the prompt): the next one starts with flags of its own."""
        self.flags = CancelFlags()

    def _time_up_reason(self) -> str:
        return f"the session's time budget of {self.budget.max_wall_s:g} s ran out"

    @contextlib.contextmanager
    def _time_budget_watch(self, limit: float, flags: CancelFlags) -> Iterator[None]:
        """While a batch runs: what happens when the session's time budget runs out.

        Between turns the budget is checked by `send`; this covers the long step in the middle.
        Read-only calls (a benchmark, a long query) are cancelled and nothing new starts. A call
        that changes a host (an installer, a pip install) is left to finish, bounded by its own
        timeout: killed halfway, it would leave the host half-changed, which is worse than late.
        """

        def time_up() -> None:
            self._time_up = True
            if flags.operator.is_set():  # the operator cancelled everything already: that is the reason
                return
            flags.reads_reason = f"because {self._time_up_reason()}"
            flags.reads.set()
            left = len(self._changes_running)
            try:
                self.emit("note", kind="budget", text=f"time budget of {limit:g} s reached: "
                          f"read-only calls cancelled, nothing new starts" +
                          (f"; {left} running change(s) left to finish within their own timeouts" if left else ""))
            except Exception:  # noqa: BLE001 - a closed transcript or a full disk: the cancel above stands
                pass

        timer = threading.Timer(max(0.0, limit - (time.monotonic() - self.started)), time_up)
        timer.daemon = True
        try:
            timer.start()
            yield
        finally:
            timer.cancel()
            if timer.is_alive():
                timer.join()  # a time_up already running finishes before the batch is recorded

    def _run_runnable(self, turn_no: int, batch: list[PreparedCall], runnable: list[PreparedCall],
                      results: list[CallResult | None], flags: CancelFlags) -> None:
        if len(runnable) == 1:
            # One call: no threads needed, and Ctrl-C reaches the tool's own wait loop.
            p = runnable[0]
            try:
                results[p.index] = self._execute(turn_no, p, [], flags)
            except KeyboardInterrupt:
                flags.by_operator()
                results[p.index] = CallResult(content="cancelled by the operator", ok=False, error="cancelled",
                                              status="cancelled")
                self._finish_batch(turn_no, batch, results)
                raise
        elif runnable:
            self._run_concurrently(turn_no, runnable, results, batch, flags)

    def _run_concurrently(self, turn_no, runnable, results, batch, flags: CancelFlags) -> None:
        futures: dict[int, cf.Future] = {}
        by_host: dict[str | None, list[PreparedCall]] = {}
        pool = cf.ThreadPoolExecutor(max_workers=min(32, len(runnable)), thread_name_prefix="tool")
        try:
            for p in runnable:
                host = p.action.host
                earlier = by_host.setdefault(host, []) if host is not None else []
                # Read/write rule per host, in call order: an exclusive call waits for every
                # earlier call on its host; a shared call waits only for earlier exclusive ones.
                waits = [futures[q.index] for q in earlier if p.exclusive or q.exclusive]
                futures[p.index] = pool.submit(self._execute, turn_no, p, waits, flags)
                if host is not None:
                    earlier.append(p)
            pending = set(futures.values())
            try:
                while pending:
                    _, pending = cf.wait(pending, timeout=0.2)
            except KeyboardInterrupt:
                flags.by_operator()  # running commands see it and kill their remote processes
                cf.wait(list(futures.values()), timeout=30)
                for p in runnable:
                    f = futures[p.index]
                    results[p.index] = (f.result() if f.done() and f.exception() is None else
                                        CallResult(content="cancelled by the operator", ok=False,
                                                   error="cancelled", status="cancelled"))
                self._finish_batch(turn_no, batch, results)
                raise
            for p in runnable:
                f = futures[p.index]
                exc = f.exception()
                results[p.index] = f.result() if exc is None else CallResult(
                    content=f"error: tool {p.call.name} crashed: {type(exc).__name__}: {exc}", ok=False,
                    error=str(exc), status="crashed")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

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

    def close(self, status: str, reason: str = "") -> None:
        """Write the end event once, whatever happened; close the hosts."""
        if self._ended:
            return
        # Built first: a Ctrl-C from here on can no longer cost the transcript its end.
        end = dict(status=status, reason=reason, turns=self.turns, tokens=self.tokens, tool_calls=self.tool_calls,
                   refused=len(self.refused), failed=self.failed_calls,
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
        outcome = session.send(text)
    except KeyboardInterrupt:
        session.close("interrupted", "interrupted by the operator")
        return Outcome("interrupted", "interrupted by the operator")
    except BaseException as e:
        session.close("crashed", f"{type(e).__name__}: {e}")
        raise
    session.close(outcome.status, outcome.reason)
    return outcome
