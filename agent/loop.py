"""The planner loop: one session, one message list, batches of tool calls.

    send(user text) -> step() until the model answers without tool calls
    step(): ask the model -> prepare each call (scope, validate, gate) -> run the batch -> append results
    close(): the end event, once, whatever happened

A reply the server cut off at its token limit is never a final answer (agent/outcome.py). The
batch itself (per-host order, cancel flags, the time budget) runs in agent/batch.py; the message
list and its compaction are agent/conversation.py's; a change's intent and a resumed part's unknown
outcomes, agent/journal.py's. The loop never prints: everything it does is an event, written to the
transcript and passed to listeners (the UI).
"""

from __future__ import annotations

import contextlib
import time
import weakref
from typing import Any, Callable, Iterator

from agent.batch import BatchRunner, CallResult, LiveToolRunner, PreparedCall, ToolRunner
from agent.budget import Budget
from agent.conversation import Compactor, Conversation
from agent.errors import interruption_reason
from agent.journal import CheckFirst, JournaledRunner
from agent.model import Model, ModelError, ToolCall
from agent.outcome import CUT_OFF_CALL, GO_ON, CutOffReplies, Outcome
from agent.record.transcript import TranscriptWriter
from agent.resumed import carry_over
from agent.safety.call_scope import arguments_for_record, hosts_named
from agent.safety.policy import Decision, SafetyPolicy, Verdict
from tools.base import ArgumentError, ArtifactStore, BackupRecord, Registry, ToolError

MAX_MALFORMED_TURNS = 3

Listener = Callable[[dict], None]


class Session:
    """One conversation with the model over a set of hosts, recorded step by step."""

    def __init__(self, model: Model, registry: Registry, gate: SafetyPolicy, transcript: TranscriptWriter,
                 hosts: Any = None, system_prompt: str = "", budget: Budget | None = None,
                 runner: ToolRunner | None = None, listeners: list[Listener] | None = None,
                 start_info: dict | None = None, context_tokens: int | None = None, compaction: bool = True):
        self.model, self.registry, self.gate, self.transcript, self.hosts = model, registry, gate, transcript, hosts
        self.budget = budget or Budget()
        self.runner = JournaledRunner(runner or LiveToolRunner(), self._write_intent)
        self.listeners = list(listeners or [])
        self.schemas = registry.schemas()
        self.turns = self.tokens = 0
        self.tokens_estimated = False  # some turn's usage was estimated: the server reported none
        self.conversation = Conversation(transcript.redactor.value)
        self.compactor = Compactor(self, context_tokens, live=compaction)
        if system_prompt:
            self.conversation.add({"role": "system", "content": system_prompt}, 0)
        self.artifacts = ArtifactStore(transcript.artifacts_dir)
        self.store: dict[str, Any] = {}  # tool state shared across calls (run_bench's labels)
        self.tool_calls = self.calls_made = 0  # calls run; every call the model made, run or not
        self.skipped = self.malformed = self.failed_calls = 0
        self.refused: list[Decision] = []
        # Hosts a change was started on, in this part or an earlier one: the end reads their state (agent/finish.py).
        self.changed_hosts: set[str] = set()
        self.check_first = CheckFirst()  # the changes of an interrupted part whose outcome is unknown (resume)
        self.started = time.monotonic()
        self._malformed_streak = self._turns_at_send = 0
        self._cut_off = CutOffReplies()
        self._ended = False
        self.ending = Outcome("done", "")  # how close() ends the session by default: the last request's outcome
        tool_base = dict(hosts=hosts, artifacts=self.artifacts, store=self.store, redact=transcript.redactor.text,
                         known_backup=gate.ledger.find)
        self.batches = BatchRunner(self.runner, tool_base, self.emit, self.budget.max_wall_s, self.started)
        # Known as open before its first event is written: a signal that comes before the caller has
        # entered closing() is still answered by a closed transcript (close_open_sessions).
        _OPEN.add(self)
        # Everything replay needs to rebuild this session is in its first event.
        info = dict(start_info or {})
        if hasattr(hosts, "sim_roots") and hosts.sim_roots() and "sim_roots" not in info:
            info["sim_roots"] = hosts.sim_roots()  # where each simulated host lives: a resume goes on there
        self.emit("session_start", **info, model=getattr(model, "name", "?"),
                  hosts=sorted(gate.scope), system_prompt=system_prompt, budget=self.budget.as_record(),
                  policy=gate.as_record(), tools=self.schemas)

    @property
    def messages(self) -> list[dict]:
        return self.conversation.messages

    def emit(self, type_: str, record: bool = True, **fields: Any) -> dict:
        event = self.transcript.write(type_, **fields) if record else {"type": type_, "t": time.time(), **fields}
        for listener in self.listeners:
            try:
                listener(event)
            except Exception:  # noqa: BLE001 - a broken display must not break the session
                pass
        return event

    def _add(self, message: dict) -> None:
        self.conversation.add(message, self.turns)

    # ------------------------------------------------------------------ driving

    def send(self, text: str) -> Outcome:
        """Add a user message and run turns until a final answer, a budget, or an error.

        KeyboardInterrupt propagates after the running batch is cancelled and recorded; the
        caller decides whether that ends the session (run) or returns to the prompt (chat).
        """
        self.compactor.before_request()
        self._add({"role": "user", "content": text})
        self.emit("note", kind="user", text=text)
        self._turns_at_send = self.turns  # the turn budget is per request; tokens and time are per session
        self._cut_off.new_request()
        while True:
            over = self.budget.spent(self.turns - self._turns_at_send, self.tokens, time.monotonic() - self.started,
                                     tokens_estimated=self.tokens_estimated)
            outcome = Outcome("budget", over) if over else self.step()
            if outcome is not None:
                self.ending = outcome
                return outcome

    def step(self) -> Outcome | None:
        """One model turn and its batch. Returns an Outcome when the conversation stops; before the
        next turn, the older turns are folded into a summary if the conversation nears the context."""
        outcome = self._step()
        if outcome is None:
            self.compactor.before_request()
        return outcome

    def _step(self) -> Outcome | None:
        self.turns += 1
        turn_no = self.turns
        self.emit("model_request", turn=turn_no, messages=len(self.conversation), digest=self.conversation.digest())
        try:
            reply = self.model.complete(self.messages, self.schemas,
                                        on_text=lambda t: self.emit("text", record=False, turn=turn_no, text=t))
        except ModelError as e:
            # One line for the terminal; the server's whole answer for the record.
            detail = {key: value for key, value in (("kind", e.kind), ("body", e.body)) if value}
            self.emit("model_error", turn=turn_no, error=str(e), **detail)
            return Outcome("model_error", str(e), kind=e.kind)
        self.tokens += reply.usage.total_tokens
        self.tokens_estimated = self.tokens_estimated or reply.usage.estimated
        for note in reply.notes:
            self.emit("note", kind="model_server", text=note)
        self.emit("model_response", turn=turn_no, text=reply.text,
                  tool_calls=[{"id": c.id, "name": c.name, "arguments": c.arguments} for c in reply.tool_calls],
                  usage=reply.usage.as_dict(), latency_s=round(reply.latency_s, 4),
                  finish_reason=reply.finish_reason, attempts=reply.attempts)
        self._add(reply.to_message())
        self._cut_off.replied(reply)
        if not reply.tool_calls:
            return self._answer(turn_no, reply)

        batch = [self._prepare(turn_no, i, c, cut_off=reply.cut_off) for i, c in enumerate(reply.tool_calls)]
        self.calls_made += len(batch)
        self.malformed += sum(p.error is not None for p in batch)
        self.skipped += sum(p.decision is not None and p.decision.verdict is Verdict.SKIP for p in batch)
        self.tool_calls += sum(p.runnable for p in batch)
        results = self.batches.run(turn_no, batch, record=lambda done: self._record_results(turn_no, batch, done))
        self._record_results(turn_no, batch, results)
        for p, r in zip(batch, results):
            self._add({"role": "tool", "tool_call_id": p.call.id, "content": r.content})

        if reply.cut_off:
            return self._cut_off.ends(reply)
        self._malformed_streak = self._malformed_streak + 1 if any(p.error for p in batch) else 0
        if self._malformed_streak >= MAX_MALFORMED_TURNS:
            return Outcome("malformed", f"{MAX_MALFORMED_TURNS} turns in a row had malformed tool calls")
        return None

    def _answer(self, turn_no: int, reply) -> Outcome | None:
        """A reply without tool calls: the final answer, or, cut off, a request to go on."""
        ended = self._cut_off.answer(reply)
        if ended is None:
            self.emit("note", kind="cut_off", turn=turn_no, text=f"the reply was cut off (finish_reason "
                      f"{reply.finish_reason!r}); the model is asked to go on")
            self._add({"role": "user", "content": GO_ON})
        return ended

    # ------------------------------------------------------------------ one call

    def _prepare(self, turn_no: int, index: int, call: ToolCall, cut_off: bool = False) -> PreparedCall:
        """Scope, validate, gate: a call the batch can run, or the reason it cannot (recorded either way)."""
        p = PreparedCall(index=index, call=call)
        p.tool = self.registry.get(call.name)
        base = {"turn": turn_no, "index": index, "call_id": call.id, "tool": call.name}
        if p.tool is None:
            p.error = f"unknown tool {call.name!r}; available tools: {', '.join(self.registry.names())}"
        elif cut_off:
            # The server stopped the reply at its token limit: a call of it may have lost its end, and
            # what a server "repaired" of a cut command is not what the model meant to run.
            p.error = CUT_OFF_CALL
        else:
            try:
                p.args = p.tool.parse_args(call.arguments)
                p.action = p.tool.action(p.args)
            except (ArgumentError, ToolError) as e:
                p.error = str(e)
        if p.error is not None:
            # Out of scope is said as such, whatever else is wrong (agent/safety/call_scope.py).
            refusal = next(filter(None, map(self.gate.refuse_out_of_scope, hosts_named(call.arguments))), None)
            if refusal is None:
                self.emit("tool_call", **base, arguments=call.arguments, error=p.error)
                return p
            p.args = p.action = p.error = None
            p.decision = refusal
            self.emit("tool_call", **base, arguments=arguments_for_record(call.arguments))
        else:
            arguments = p.args.model_dump(mode="json")
            self.emit("tool_call", **base, arguments=arguments)
            p.decision = self.check_first.judge(call.name, arguments, self.gate.decide(call.name, p.action))
        self.emit("decision", **base, **p.decision.as_event())
        if not p.decision.allowed and p.decision.verdict is Verdict.DENY and p.decision.rule != "outcome-unknown":
            self.refused.append(p.decision)  # "check first" is no refusal of the goal's step: it may be sent again
        return p

    def _write_intent(self, p: PreparedCall, digest: str) -> None:
        if p.decision.host:
            self.changed_hosts.add(p.decision.host)
        self.emit("intent", turn=self.turns, index=p.index, call_id=p.call.id, tool=p.call.name,
                  host=p.decision.host, risk=p.decision.risk.cls.value, subject=p.decision.subject,
                  args_digest=digest)

    def _record_results(self, turn_no: int, batch: list[PreparedCall], results: list[CallResult | None]) -> None:
        """Record every result in call order (once: an interrupt records what ended), and what it taught."""
        for p in batch:
            r = results[p.index]
            if r is None:
                r = results[p.index] = CallResult(content="not run", ok=False, status="cancelled")
            if r.failed:
                self.failed_calls += 1
            elif r.status in ("skipped", "unavailable") and p.runnable:  # not started: an earlier change on its
                self.tool_calls -= 1  # host failed, or the tool cannot run here (web_search without its key)
                self.skipped += 1
            self.emit("tool_result", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                      status=r.status, ok=r.ok, content=r.content, data=r.data, error=r.error,
                      duration_s=round(r.duration_s, 4), started=r.started, ended=r.ended)
            if r.ok and p.decision is not None and p.decision.allowed:
                self.check_first.ran(p)
            # What the gate learns from the result: a benchmark's label on its host, a change that ran there.
            self.gate.observe(p.call.name, p.decision, r.ok, r.status, r.data if isinstance(r.data, dict) else None)
            backup = BackupRecord.model_validate(r.data["backup"]) if r.ok and (r.data or {}).get("backup") else None
            if backup is not None and backup.verified:
                self.gate.ledger.register(backup)
                self.emit("backup", call_id=p.call.id, **backup.model_dump(mode="json"))

    # ------------------------------------------------------------------ resuming, replaying, closing

    def resume_from(self, state: dict) -> None:
        """Go on from an earlier part of this conversation (agent/resumed.py says what it carries)."""
        carry_over(self, state)

    def compaction_recorded(self, event: dict) -> None:
        """A compaction of the record (replay): applied where the live session applied it."""
        self.compactor.recorded.append(event)

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
                   failed=self.failed_calls, duration_s=round(time.monotonic() - self.started, 3),
                   **({"tokens_estimated": True} if self.tokens_estimated else {}))
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


def close_open_sessions(reason: str) -> int:
    """End every session still open (an interrupt that came before or after a caller's closing()); how many."""
    sessions = list(_OPEN)
    for session in sessions:
        session.close("interrupted", reason)
    return len(sessions)
