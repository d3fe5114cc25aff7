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
from typing import Callable, Iterator, Protocol

from pydantic import BaseModel

from agent.model import ToolCall
from agent.safety import Decision
from tools.base import Action, RiskClass, Tool, ToolContext, ToolError, bound_for_record, has_long_text

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
        except ToolError as e:
            return CallResult(content=f"error: {e}", ok=False, error=str(e), status="error")
        except Exception as e:  # noqa: BLE001 - a crashing tool must not take the session down
            detail = "".join(traceback.format_exception(e))
            where = ctx.artifacts.save(f"{prepared.call.id}-traceback.txt", ctx.redact(detail))
            msg = f"tool {tool.name} crashed: {type(e).__name__}: {e}" + (f" (traceback in {where})" if where else "")
            return CallResult(content=f"error: {msg}", ok=False, error=msg, status="crashed")
        return CallResult(content=tool.render(result), ok=True, data=result.model_dump(mode="json"))


class BatchRunner:
    """Runs the allowed calls of each batch of one session.

    It lives as long as the session: once the time budget has run out (`time_up`), no call of any
    later batch starts either.
    """

    def __init__(self, runner: ToolRunner, context_for: Callable[[PreparedCall, CancelFlags], ToolContext],
                 emit: Emit, time_limit_s: float | None, started: float):
        self.runner = runner
        self.context_for = context_for
        self.emit = emit
        self.time_limit_s = time_limit_s
        self.started = started
        self.time_up = False  # the time budget ran out while a batch ran: nothing new starts
        self.changes_running: set[str] = set()  # call ids of running calls that change a host

    def run(self, turn_no: int, runnable: list[PreparedCall], results: list[CallResult | None],
            flags: CancelFlags, record: Callable[[], None]) -> None:
        """Fill `results` for the runnable calls. On Ctrl-C, `record` is called with what is known
        before the interrupt goes on, so the transcript keeps every call of the batch."""
        if self.time_limit_s is None:
            self._run_runnable(turn_no, runnable, results, flags, record)
        else:
            with self.time_budget_watch(self.time_limit_s, flags):
                self._run_runnable(turn_no, runnable, results, flags, record)

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
