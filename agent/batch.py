"""One turn's batch of tool calls: the per-host read/write order, cancel flags and the time budget.

Calls of one turn are one batch. Allowed calls run concurrently under one read/write rule per
host: read-only calls share the host, any other call runs alone, and both keep call order (a
call waits for the earlier calls it conflicts with). Calls on different hosts never wait for
each other. Results go back in call order.

The session (agent/loop.py) prepares the calls and records the results; this module only runs them.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from pydantic import BaseModel

from agent.model import ToolCall
from agent.safety.policy import Decision, Verdict
from tools.base import Action, RiskClass, Tool, ToolContext, ToolError, ToolUnavailable, bound_for_record, has_long_text

Emit = Callable[..., dict]


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
        except ToolUnavailable as e:
            return CallResult(content=f"unavailable: {e}", ok=False, error=str(e), status="unavailable")
        except ToolError as e:
            return CallResult(content=f"error: {e}", ok=False, error=str(e), status="error")
        except Exception as e:  # noqa: BLE001 - a crashing tool must not take the session down
            detail = "".join(traceback.format_exception(e))
            where = ctx.artifacts.save(f"{prepared.call.id}-traceback.txt", ctx.redact(detail))
            msg = f"tool {tool.name} crashed: {type(e).__name__}: {e}" + (f" (traceback in {where})" if where else "")
            return CallResult(content=f"error: {msg}", ok=False, error=msg, status="crashed")
        return CallResult(content=_allowed_by(prepared) + tool.render(result), ok=True,
                          data=result.model_dump(mode="json"))


def _allowed_by(p: PreparedCall) -> str:
    """For a change, the line that tells the model which approval let it run."""
    d = p.decision
    if d is None or d.approved_by is None:
        return ""
    by = d.approved_by.replace("goal:", "the goal file's ")
    return f"[allowed by {by}]\n"


def _unrun(p: PreparedCall) -> CallResult:
    """What the model reads for a call that does not run: its error, or the gate's answer."""
    if p.error is not None:
        return CallResult(content=f"error: {p.error}", ok=False, error=p.error, status="malformed")
    status = "skipped" if p.decision.verdict is Verdict.SKIP else "refused"
    return CallResult(content=p.decision.message_for_model(), ok=False, status=status)


class BatchRunner:
    """Runs the allowed calls of each batch of one session.

    It lives as long as the session: once the time budget has run out (`time_up`), no call of any
    later batch starts either.
    """

    def __init__(self, runner: ToolRunner, tool_base: dict[str, Any], emit: Emit, time_limit_s: float | None,
                 started: float):
        self.runner = runner
        self.tool_base = tool_base  # what every call's ToolContext shares: hosts, artifacts, store, redact...
        self.emit = emit
        self.time_limit_s = time_limit_s
        self.started = started
        self.flags = CancelFlags()  # this request's; request_cancel sets them, rearm_cancel replaces them
        self.time_up = False  # the time budget ran out while a batch ran: nothing new starts
        self.changes_running: set[str] = set()  # call ids of running calls that change a host

    @property
    def cancel(self) -> threading.Event:
        """Set while the operator's cancel of the current request is on (the UI shows 'cancelling')."""
        return self.flags.operator

    def request_cancel(self) -> None:
        """The operator's cancel (Ctrl-C): every running call of this request stops, none starts.

        It takes the flags' locks: a signal handler must not call it (chat relays it to a thread).
        """
        self.flags.by_operator()

    def rearm_cancel(self) -> None:
        """After a request (chat goes back to the prompt): the next one starts with flags of its own."""
        self.flags = CancelFlags()

    def run(self, turn_no: int, batch: list[PreparedCall],
            record: Callable[[list[CallResult | None]], None]) -> list[CallResult]:
        """The result of every call of the batch, in call order: malformed, refused and skipped calls
        answered at once, the runnable ones run. On Ctrl-C, `record` gets what is known before the
        interrupt goes on, so the transcript keeps every call of the batch."""
        flags = self.flags  # this batch's, whatever a later request does
        results: list[CallResult | None] = [None if p.runnable else _unrun(p) for p in batch]
        runnable = [p for p in batch if p.runnable]
        done = lambda: record(results)  # noqa: E731 - the interrupt paths' one-line callback
        if self.time_limit_s is None:
            self._run_runnable(turn_no, runnable, results, flags, done)
        else:
            with self.time_budget_watch(self.time_limit_s, flags):
                self._run_runnable(turn_no, runnable, results, flags, done)
        return results  # type: ignore[return-value]

    def context_for(self, p: PreparedCall, flags: CancelFlags) -> ToolContext:
        """A call's context: a change watches only the operator's cancel, a read the time budget's too."""

        def emit_live(kind: str, data: dict) -> None:
            self.emit(kind, record=False, call_id=p.call.id, tool=p.call.name, **data)

        if p.changes_host:
            cancel, reason = flags.operator, (lambda: "by the operator")
        else:
            cancel, reason = flags.reads, (lambda: flags.reads_reason)
        return ToolContext(**self.tool_base, call_id=p.call.id, cancel=cancel, emit=emit_live, cancel_reason=reason)

    def execute(self, turn_no: int, p: PreparedCall, waits: list[cf.Future], flags: CancelFlags) -> CallResult:
        """One call, after the earlier calls it conflicts with; its result timed."""
        for f in waits:  # earlier calls this one conflicts with, on the same host
            try:
                f.result()
            except BaseException:  # noqa: BLE001 - their failure is theirs; we only wait for them
                pass
        if p.changes_host:
            self.changes_running.add(p.call.id)
        try:
            if flags.operator.is_set():  # a Ctrl-C may have come while this call waited
                return CallResult(content="cancelled by the operator before it started", ok=False,
                                  error="cancelled", status="cancelled")
            if self.time_up:
                return CallResult(content=f"not started: {self.time_up_reason()}", ok=False,
                                  error="cancelled", status="cancelled")
            started = time.time()
            self.emit("tool_start", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                      host=p.action.host if p.action else None)
            t0 = time.monotonic()
            ctx = self.context_for(p, flags)
            result = self.runner.run(p, ctx)
            if result.data is not None and has_long_text(result.data):  # kept as head and tail in the record
                result.data = bound_for_record(result.data, ctx)
            result.duration_s = time.monotonic() - t0
            result.started, result.ended = started, time.time()
            return result
        finally:
            self.changes_running.discard(p.call.id)

    def time_up_reason(self) -> str:
        return f"the session's time budget of {self.time_limit_s:g} s ran out"

    @contextlib.contextmanager
    def time_budget_watch(self, limit: float, flags: CancelFlags) -> Iterator[None]:
        """While a batch runs: what happens when the session's time budget runs out.

        Between turns the budget is checked by `send`; this covers the long step in the middle.
        Read-only calls (a benchmark, a long query) are cancelled and nothing new starts. A call
        that changes a host (an installer, a pip install) is left to finish, bounded by its own
        timeout: killed halfway, it would leave the host half-changed, which is worse than late.
        """

        def time_up() -> None:
            self.time_up = True
            if flags.operator.is_set():  # the operator cancelled everything already: that is the reason
                return
            flags.reads_reason = f"because {self.time_up_reason()}"
            flags.reads.set()
            left = len(self.changes_running)
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

    def _run_runnable(self, turn_no: int, runnable: list[PreparedCall], results: list[CallResult | None],
                      flags: CancelFlags, record: Callable[[], None]) -> None:
        if len(runnable) == 1:
            # One call: no threads needed, and Ctrl-C reaches the tool's own wait loop.
            p = runnable[0]
            try:
                results[p.index] = self.execute(turn_no, p, [], flags)
            except KeyboardInterrupt:
                flags.by_operator()
                results[p.index] = CallResult(content="cancelled by the operator", ok=False, error="cancelled",
                                              status="cancelled")
                record()
                raise
        elif runnable:
            self._run_concurrently(turn_no, runnable, results, flags, record)

    def _run_concurrently(self, turn_no: int, runnable: list[PreparedCall], results: list[CallResult | None],
                          flags: CancelFlags, record: Callable[[], None]) -> None:
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
                futures[p.index] = pool.submit(self.execute, turn_no, p, waits, flags)
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
                record()
                raise
            for p in runnable:
                f = futures[p.index]
                exc = f.exception()
                results[p.index] = f.result() if exc is None else CallResult(
                    content=f"error: tool {p.call.name} crashed: {type(exc).__name__}: {exc}", ok=False,
                    error=str(exc), status="crashed")
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
