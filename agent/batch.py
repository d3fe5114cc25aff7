"""One turn's batch of tool calls: the per-host read/write order, cancel flags and the time budget.

Calls of one turn are one batch. Allowed calls run concurrently under one read/write rule per
host: read-only calls share the host, any other call runs alone, and both keep call order (a
call waits for the earlier calls it conflicts with). Calls on different hosts never wait for
each other. Results go back in call order.

A batch stops at its first failed or refused change on a host: the model plans a batch as steps that
build on each other (the toolkit, then the wheels for it), so the later changes to that host do not
start, and each says which earlier change stopped it. Reads still run, and other hosts go on.

A change the operator's cancel stops while it runs is recorded with what is known (`interrupted`):
that it had started, how long it ran, its last step and what the host printed up to then, and that
its outcome is unknown (agent/journal.py reads the status `cancelled` as such).

The session (agent/loop.py) prepares the calls and records the results; this module only runs them.
"""

from __future__ import annotations

import collections
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
from tools.base import (Action, RiskClass, Tool, ToolContext, ToolError, ToolUnavailable, bound_for_record,
                        has_long_text, truncate_for_model)
from tools.sandbox import SandboxedHosts, loopback_ports

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


def read_ports(tool: Tool | None, args: BaseModel | None, arguments: str) -> list[int]:
    """The loopback ports a read's sandbox relays: those the tool knows from its arguments (check_outputs: its
    endpoint's, never a port some other argument names), else those its arguments' text names."""
    known = tool.read_ports(args) if tool is not None and args is not None else None
    return known if known is not None else loopback_ports(arguments)


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

    @property
    def failed(self) -> bool:
        """A step that did not do its work: it failed, crashed, or its command lost its connection or ran out
        of time though the tool answered (the verdict of a run without checks depends on it)."""
        data = self.data if isinstance(self.data, dict) else {}
        return self.status in ("error", "crashed") or bool(data.get("connection_lost") or data.get("timed_out"))


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


# How much of a stopped call's live output its record keeps: its first and its last characters.
WATCH_HEAD_CHARS = 4_000
WATCH_TAIL_CHARS = 12_000
INTERRUPTED_OUTPUT_BYTES = 8_000  # what the model and the record read of it (head and tail, redacted)


class CallWatch:
    """What a running call has shown so far: its last progress step and its live output, bounded.

    The tool's own result is lost when an interrupt stops it in the middle (a KeyboardInterrupt goes
    through it), so this is what its record can still say about what happened on the host.
    """

    def __init__(self, started: float):
        self.started = started  # time.time() when the tool started
        self.t0 = time.monotonic()
        self.step: str | None = None
        self.head = ""
        self.tail: collections.deque[str] = collections.deque()
        self.tail_chars = 0
        self.left_out = 0  # characters between head and tail that were not kept
        self._lock = threading.Lock()

    def seen(self, kind: str, data: dict) -> None:
        if kind == "progress" and isinstance(data.get("step"), str):
            self.step = data["step"]
        elif kind == "output" and isinstance(data.get("text"), str):
            with self._lock:
                self._keep(data["text"])

    def _keep(self, text: str) -> None:
        if len(self.head) < WATCH_HEAD_CHARS:
            room = WATCH_HEAD_CHARS - len(self.head)
            self.head, text = self.head + text[:room], text[room:]
        self.tail.append(text)
        self.tail_chars += len(text)
        while self.tail and self.tail_chars - len(self.tail[0]) >= WATCH_TAIL_CHARS:
            dropped = self.tail.popleft()
            self.tail_chars -= len(dropped)
            self.left_out += len(dropped)

    def output(self) -> str:
        with self._lock:
            middle = f"\n[... {self.left_out} characters left out ...]\n" if self.left_out else ""
            return self.head + middle + "".join(self.tail)

    @property
    def ran_s(self) -> float:
        return time.monotonic() - self.t0


def interrupted_result(p: PreparedCall, watch: CallWatch, redact: Callable[[str], str], why: str = "by the operator",
                       tool_said: str | None = None, still_running: bool = False) -> CallResult:
    """The record of a call a cancel stopped while it ran: what is known, and for a change that its
    outcome is unknown (it may have been applied in full, in part or not at all)."""
    ran = round(watch.ran_s, 3)
    printed = redact(watch.output())
    shown = truncate_for_model(printed, INTERRUPTED_OUTPUT_BYTES)
    host = p.action.host if p.action is not None else None
    outcome = "unknown" if p.changes_host else "nothing changed (read-only)"
    still = " (it was still running when this was written)" if still_running else ""
    head = (f"cancelled {why} while it ran, after {ran:g} s{still}: "
            + (f"outcome {outcome}." if p.changes_host else f"{outcome}."))
    lines = [head, f"It had started on {host or 'its host'}" + (f"; its last step: {watch.step}" if watch.step else "")
             + "."]
    if tool_said:
        lines.append(f"The tool said: {truncate_for_model(redact(tool_said), 1000)}")
    if p.changes_host:
        lines.append("Check the host's state with a read-only call before you send this change again.")
    lines.append(f"--- what the host printed up to then ---\n{shown}" if printed.strip()
                 else "--- the host printed nothing up to then ---")
    data = {"interrupted": True, "started": True, "ran_s": ran, "step": watch.step, "outcome": outcome,
            "output": shown, "output_chars": len(printed) + watch.left_out, "tool_said": tool_said,
            "still_running": still_running}
    return CallResult(content="\n".join(lines), ok=False, data=data, status="cancelled",
                      error=f"cancelled {why} while it ran: outcome {outcome}", duration_s=ran,
                      started=watch.started, ended=time.time())


def stopped_by_cancel(p: PreparedCall, result: CallResult) -> bool:
    """A change whose tool came back after the operator's cancel without finishing: a ToolError
    ("cancelled ... while installing"), a crash, or a command the cancel killed (ssh_exec's cancelled)."""
    data = result.data if isinstance(result.data, dict) else {}
    return p.changes_host and (not result.ok or bool(data.get("cancelled")))


def change_failed(result: CallResult) -> str | None:
    """Why a change that ran did not do its step, in one line; None when it did."""
    data = result.data if isinstance(result.data, dict) else {}
    if result.status in ("error", "crashed", "unavailable", "cancelled"):
        said = result.error or result.content
        return f"{result.status}: {_first_line(said)}" if said else result.status
    if data.get("timed_out"):
        return "it timed out and was killed"
    if data.get("connection_lost"):
        return "the connection dropped while it ran"
    if isinstance(data.get("exit_code"), int) and data["exit_code"] != 0:
        return f"its command exited {data['exit_code']}"
    return None


def _first_line(text: str, limit: int = 300) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def _host_of(p: PreparedCall) -> str | None:
    if p.action is not None:
        return p.action.host
    return p.decision.host if p.decision is not None else None


class HostStops:
    """One batch's first failed or refused change on each host: the later changes there do not start."""

    def __init__(self, batch: list[PreparedCall]):
        self.first: dict[str, tuple[int, str]] = {}  # host -> (call index, why it stopped the host)
        self._lock = threading.Lock()
        for p in batch:  # refusals are known before anything runs
            if p.error is None and p.decision is not None and not p.runnable and p.changes_host \
                    and p.decision.verdict is not Verdict.SKIP:
                self.stop(p, f"was refused by the safety layer [{p.decision.rule}]: {_first_line(p.decision.reason)}")

    def stop(self, p: PreparedCall, why: str) -> None:
        host = _host_of(p)
        if host is None:
            return
        with self._lock:
            if host not in self.first or self.first[host][0] > p.index:
                self.first[host] = (p.index, f"the earlier change {p.call.name} (call {p.index + 1}) on {host} "
                                             f"in this batch {why}")

    def ran(self, p: PreparedCall, result: CallResult) -> None:
        if p.changes_host and (why := change_failed(result)):
            self.stop(p, f"failed: {why}")

    def blocked(self, p: PreparedCall) -> CallResult | None:
        """The result of a change that must not start because an earlier one on its host failed."""
        host = _host_of(p)
        with self._lock:
            index, why = self.first.get(host, (None, ""))
        if not p.changes_host or index is None or index >= p.index:
            return None
        text = (f"not started: {why}. Later changes to {host} in a batch wait for the earlier ones to succeed; "
                "check the host, then send this change again if it still applies.")
        return CallResult(content=text, ok=False, error=f"not started: {why}", status="skipped",
                          data={"not_started": True, "stopped_by": index})


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
        self.watches: dict[str, CallWatch] = {}  # call id -> what its run has shown (the current batch's)
        self.interrupted: dict[str, CallResult] = {}  # call id -> its record, made as an interrupt went through it

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
        stops = HostStops(batch)
        done = lambda: record(results)  # noqa: E731 - the interrupt paths' one-line callback
        if self.time_limit_s is None:
            self._run_runnable(turn_no, runnable, results, flags, stops, done)
        else:
            with self.time_budget_watch(self.time_limit_s, flags):
                self._run_runnable(turn_no, runnable, results, flags, stops, done)
        return results  # type: ignore[return-value]

    def context_for(self, p: PreparedCall, flags: CancelFlags, watch: CallWatch | None = None) -> ToolContext:
        """A call's context: a change watches only the operator's cancel, a read the time budget's too."""

        def emit_live(kind: str, data: dict) -> None:
            if watch is not None:
                watch.seen(kind, data)
            self.emit(kind, record=False, call_id=p.call.id, tool=p.call.name, **data)

        if p.changes_host:
            cancel, reason = flags.operator, (lambda: "by the operator")
        else:
            cancel, reason = flags.reads, (lambda: flags.reads_reason)
        base = self.tool_base
        if not p.changes_host and "hosts" in base:
            # What the gate runs without approval runs in the read sandbox on its host: the kernel, not the
            # classifier's reading of the text, is what keeps it from changing anything.
            base = {**base, "hosts": SandboxedHosts(base["hosts"], read_ports(p.tool, p.args, p.call.arguments))}
        return ToolContext(**base, call_id=p.call.id, cancel=cancel, emit=emit_live, cancel_reason=reason)

    def execute(self, turn_no: int, p: PreparedCall, waits: list[cf.Future], flags: CancelFlags,
                stops: HostStops | None = None) -> CallResult:
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
            if stops is not None and (blocked := stops.blocked(p)) is not None:
                return blocked
            result = self._run_watched(turn_no, p, flags)
            if stops is not None:
                stops.ran(p, result)
            return result
        finally:
            self.changes_running.discard(p.call.id)

    def _run_watched(self, turn_no: int, p: PreparedCall, flags: CancelFlags) -> CallResult:
        """Run the call with a watch on what it shows, so a cancel in the middle still leaves a record
        of what is known (`interrupted_result`)."""
        watch = self.watches[p.call.id] = CallWatch(time.time())
        self.emit("tool_start", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                  host=p.action.host if p.action else None)
        ctx = self.context_for(p, flags, watch)
        redact = self.tool_base.get("redact") or (lambda text: text)
        try:
            result = self.runner.run(p, ctx)
        except KeyboardInterrupt:  # raised through the tool (one call runs in the main thread)
            flags.by_operator()
            self.interrupted[p.call.id] = interrupted_result(p, watch, redact)
            raise
        if flags.operator.is_set() and stopped_by_cancel(p, result):
            return interrupted_result(p, watch, redact, tool_said=result.error or result.content)
        if result.data is not None and has_long_text(result.data):  # kept as head and tail in the record
            result.data = bound_for_record(result.data, ctx)
        result.duration_s = watch.ran_s
        result.started, result.ended = watch.started, time.time()
        return result

    def _stopped(self, p: PreparedCall) -> CallResult:
        """The result of a call the operator's cancel caught, as far as the batch knows it: the record
        its run left on the interrupt, what its watch saw while it still ran, or that it never started."""
        if p.call.id in self.interrupted:
            return self.interrupted.pop(p.call.id)
        watch = self.watches.get(p.call.id)
        if watch is not None:
            return interrupted_result(p, watch, self.tool_base.get("redact") or (lambda text: text),
                                      still_running=True)
        return CallResult(content="cancelled by the operator before it started", ok=False, error="cancelled",
                          status="cancelled")

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
                      flags: CancelFlags, stops: HostStops, record: Callable[[], None]) -> None:
        self.watches, self.interrupted = {}, {}
        if len(runnable) == 1:
            # One call: no threads needed, and Ctrl-C reaches the tool's own wait loop.
            p = runnable[0]
            try:
                results[p.index] = self.execute(turn_no, p, [], flags, stops)
            except KeyboardInterrupt:
                flags.by_operator()
                results[p.index] = self._stopped(p)
                record()
                raise
        elif runnable:
            self._run_concurrently(turn_no, runnable, results, flags, stops, record)

    def _run_concurrently(self, turn_no: int, runnable: list[PreparedCall], results: list[CallResult | None],
                          flags: CancelFlags, stops: HostStops, record: Callable[[], None]) -> None:
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
                futures[p.index] = pool.submit(self.execute, turn_no, p, waits, flags, stops)
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
                    results[p.index] = f.result() if f.done() and f.exception() is None else self._stopped(p)
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
