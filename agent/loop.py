"""The planner loop: one session, one message list, batches of tool calls.

    send(user text) -> step() until the model answers without tool calls
    step(): ask the model -> prepare each call (scope, validate, gate) -> run the batch -> append results
    close(): the end event, once, whatever happened

A reply the server cut off at its token limit is never a final answer: the model is asked to go
on, a bounded number of times, and the request ends as "cut_off" when it never finishes.

The batch itself (per-host order, cancel flags, the time budget) runs in agent/batch.py. The
loop never prints: everything it does is an event, written to the transcript and passed to
listeners (the UI).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from agent.batch import BatchRunner, CallResult, LiveToolRunner, PreparedCall, ToolRunner
from agent.budget import Budget
from agent.errors import interruption_reason
from agent.journal import args_digest, is_change
from agent.model import AssistantTurn, Model, ModelError, ToolCall
from agent.record.transcript import TranscriptWriter
from agent.safety.policy import Decision, SafetyPolicy, Verdict
from tools.base import ArgumentError, ArtifactStore, BackupRecord, Registry, RiskClass, ToolContext, ToolError

MAX_MALFORMED_TURNS = 3
# Replies in a row the server may cut off at its token limit before the request ends as cut off.
MAX_CUT_OFF_TURNS = 3

# What the model reads for a call of a reply the server cut off.
CUT_OFF_CALL = ("not run: your reply was cut off by the model server's limit on generated tokens before it ended, "
                "so this call of it may be incomplete; send the calls again, fewer or shorter at once")
# What the model reads after a reply the server cut off: the next turn goes on from there.
GO_ON = "[your reply was cut off by the model server's limit on generated tokens; go on from exactly where it stopped]"


@dataclass
class Outcome:
    """How a `send` ended."""

    status: str  # done | budget | malformed | cut_off | model_error | interrupted | crashed
    reason: str = ""
    final_text: str = ""
    kind: str = ""  # for model_error, what failed: ModelError.kind (config, rejected, context, server, unreachable,
    # stopped)


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
        context_tokens: int | None = None,
        compaction: bool = True,
    ):
        self.model = model
        self.registry = registry
        self.gate = gate
        self.transcript = transcript
        self.hosts = hosts
        self.budget = budget or Budget()
        self.runner = _Journaled(runner or LiveToolRunner(), self)
        self.listeners = list(listeners or [])
        self.messages: list[dict] = []
        # A running hash of the message list: the request digest without re-serialising it every turn.
        self._messages_hash = hashlib.sha256()
        # Each message's size as recorded and the turn it came in, for the context estimate (agent/compaction.py).
        self._sizes: list[int] = []
        self._message_turns: list[int] = []
        self.context_tokens = context_tokens  # None: the model's own or a default (compaction.context_limit)
        self._compaction = compaction  # False (replay): only the compactions of the record are applied
        self._recorded_compactions: list[dict] = []
        self.compactions = 0
        if system_prompt:
            self._add_message({"role": "system", "content": system_prompt})
        self.artifacts = ArtifactStore(transcript.artifacts_dir)
        self.store: dict[str, Any] = {}  # tool state shared across calls (run_bench's labels)
        self.turns = 0
        self.tokens = 0
        self.tokens_estimated = False  # some turn's usage was estimated: the server reported none
        self.tool_calls = 0  # run
        self.calls_made = 0  # every call the model made, run or not
        self.skipped = self.malformed = 0
        self.refused: list[Decision] = []
        self.failed_calls = 0
        # Hosts a change was started on, in this part or an earlier one: the end reads their state (agent/finish.py).
        self.changed_hosts: set[str] = set()
        self.started = time.monotonic()
        self._malformed_streak = 0
        self._cut_off_streak = 0
        self._cut_off_text: list[str] = []  # what the model said in replies cut off, before it finished
        self._turns_at_send = 0
        self._schemas = registry.schemas()
        self._ended = False
        # Changes of an interrupted part whose outcome is unknown (resume): (tool, host, args digest) -> call id.
        # Sent again before the model has looked at that host, such a change is sent back: check first.
        self.unknown_outcomes: dict[tuple[str, str | None, str], str] = {}
        self._looked_at: set[str] = set()  # hosts a read-only call of the model ran on since the resume
        self.ending = Outcome("done", "")  # how close() ends the session by default: the last request's outcome
        tool_base = dict(hosts=hosts, artifacts=self.artifacts, store=self.store, redact=transcript.redactor.text,
                         known_backup=gate.ledger.find)
        self.batches = BatchRunner(self.runner, tool_base, self.emit, self.budget.max_wall_s, self.started)
        # Known as open before its first event is written: a signal that comes before the caller has
        # entered closing() is still answered by a closed transcript (close_open_sessions).
        _OPEN.add(self)
        # Everything replay needs to rebuild this session is in its first event.
        info = dict(start_info or {})
        roots = _sim_roots(hosts)
        if roots and "sim_roots" not in info:
            info["sim_roots"] = roots  # where each simulated host lives: a resume goes on on the same machine
        self.emit("session_start", **info, model=getattr(model, "name", "?"),
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
        encoded = json.dumps(redacted, sort_keys=True, default=str).encode()
        self._messages_hash.update(encoded)
        self._sizes.append(len(encoded))
        self._message_turns.append(getattr(self, "turns", 0))

    def _set_messages(self, messages: list[dict]) -> None:
        """Replace the whole message list (a compaction), its digest and sizes computed again."""
        turns = dict(zip(map(id, self.messages), self._message_turns))
        self.messages, self._sizes, self._message_turns = [], [], []
        self._messages_hash = hashlib.sha256()
        kept_turns = [turns.get(id(m), self.turns) for m in messages]
        for message in messages:
            self._add_message(message)
        self._message_turns = kept_turns

    # ------------------------------------------------------------------ driving

    def send(self, text: str) -> Outcome:
        """Add a user message and run turns until a final answer, a budget, or an error.

        KeyboardInterrupt propagates after the running batch is cancelled and recorded; the
        caller decides whether that ends the session (run) or returns to the prompt (chat).
        """
        self._maybe_compact()
        self._add_message({"role": "user", "content": text})
        self.emit("note", kind="user", text=text)
        self._turns_at_send = self.turns  # the turn budget is per request; tokens and time are per session
        self._cut_off_streak, self._cut_off_text = 0, []  # an earlier request's unfinished reply is not this one's
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
            self._maybe_compact()
        return outcome

    def _step(self) -> Outcome | None:
        self.turns += 1
        turn_no = self.turns
        self.emit("model_request", turn=turn_no, messages=len(self.messages),
                  digest=self._messages_hash.hexdigest()[:16])
        try:
            reply = self.model.complete(self.messages, self._schemas,
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
        self._add_message(reply.to_message())
        self._cut_off_streak = self._cut_off_streak + 1 if reply.cut_off else 0
        if not reply.tool_calls:
            return self._answer(turn_no, reply)
        self._cut_off_text = []  # the model acted instead of finishing what it was saying

        batch = [self._prepare(turn_no, i, c, cut_off=reply.cut_off) for i, c in enumerate(reply.tool_calls)]
        self.calls_made += len(batch)
        self.malformed += sum(p.error is not None for p in batch)
        self.skipped += sum(p.decision is not None and p.decision.verdict is Verdict.SKIP for p in batch)
        results = self._run_batch(turn_no, batch)
        for p, r in zip(batch, results):
            self._add_message({"role": "tool", "tool_call_id": p.call.id, "content": r.content})

        if reply.cut_off:
            return self._cut_off_ends(reply)
        if any(p.error for p in batch):
            self._malformed_streak += 1
            if self._malformed_streak >= MAX_MALFORMED_TURNS:
                return Outcome("malformed", f"{MAX_MALFORMED_TURNS} turns in a row had malformed tool calls")
        else:
            self._malformed_streak = 0
        return None

    def _answer(self, turn_no: int, reply: AssistantTurn) -> Outcome | None:
        """A reply without tool calls: the final answer, or, cut off, a request to go on."""
        if not reply.cut_off:
            text, self._cut_off_text = "".join(self._cut_off_text) + reply.text, []
            return Outcome("done", "final answer", text)
        self._cut_off_text.append(reply.text)
        ended = self._cut_off_ends(reply)
        if ended is not None:
            return ended
        self.emit("note", kind="cut_off", turn=turn_no,
                  text=f"the reply was cut off (finish_reason {reply.finish_reason!r}); the model is asked to go on")
        self._add_message({"role": "user", "content": GO_ON})
        return None

    def _cut_off_ends(self, reply: AssistantTurn) -> Outcome | None:
        """Cut off too many times in a row: the request ends as cut off, never as done."""
        if self._cut_off_streak < MAX_CUT_OFF_TURNS:
            return None
        return Outcome("cut_off", f"the model's reply was cut off by the model server's limit on generated tokens "
                                  f"{MAX_CUT_OFF_TURNS} times in a row (finish_reason {reply.finish_reason!r}): raise "
                                  f"that limit (llama.cpp: --n-predict; vLLM and others: max_tokens)",
                       "".join(self._cut_off_text))

    # ------------------------------------------------------------------ one call

    def _prepare(self, turn_no: int, index: int, call: ToolCall, cut_off: bool = False) -> PreparedCall:
        p = PreparedCall(index=index, call=call)
        tool = self.registry.get(call.name)
        base = {"turn": turn_no, "index": index, "call_id": call.id, "tool": call.name}
        if tool is None:
            p.error = (f"unknown tool {call.name!r}; available tools: {', '.join(self.registry.names())}")
            return self._malformed(p, base)
        p.tool = tool
        if cut_off:
            # The server stopped the reply at its token limit: a call of it may have lost its end, and
            # what a server "repaired" of a cut command is not what the model meant to run.
            p.error = CUT_OFF_CALL
        else:
            try:
                p.args = tool.parse_args(call.arguments)
                p.action = tool.action(p.args)
            except (ArgumentError, ToolError) as e:
                p.error = str(e)
        if p.error is not None:
            # The scope comes before the arguments' details: a call naming a host outside the session is
            # refused as such, whatever else is wrong with it (valid ones meet the gate's rule 1).
            for host in _hosts_named(call.arguments):
                refusal = self.gate.refuse_out_of_scope(host)
                if refusal is not None:
                    return self._refused_before_validation(p, base, refusal)
            return self._malformed(p, base)
        arguments = p.args.model_dump(mode="json")
        self.emit("tool_call", **base, arguments=arguments)
        p.decision = self._check_first(call.name, arguments, self.gate.decide(call.name, p.action))
        self.emit("decision", **base, **p.decision.as_event())
        if not p.decision.allowed and p.decision.verdict is Verdict.DENY and p.decision.rule != "outcome-unknown":
            self.refused.append(p.decision)  # "check first" is no refusal of the goal's step: it may be sent again
        return p

    def _check_first(self, tool: str, arguments: dict, decision: Decision) -> Decision:
        """A change of the interrupted part whose outcome is unknown, sent again before the model has looked
        at its host since the resume, is sent back: it may have been applied already."""
        if not self.unknown_outcomes or not is_change(decision) or decision.host in self._looked_at:
            return decision
        call_id = self.unknown_outcomes.get((tool, decision.host, args_digest(tool, arguments)))
        if call_id is None:
            return decision
        return Decision(Verdict.DENY, decision.risk, "outcome-unknown",
                        f"this same change ({call_id}) was running when the session was stopped and its outcome is "
                        f"unknown: check the state of {decision.host} with a read-only call first, then send it "
                        f"again if it is still needed", host=decision.host, subject=decision.subject)

    def _malformed(self, p: PreparedCall, base: dict) -> PreparedCall:
        self.emit("tool_call", **base, arguments=p.call.arguments, error=p.error)
        return p

    def _refused_before_validation(self, p: PreparedCall, base: dict, refusal: Decision) -> PreparedCall:
        p.args = p.action = p.error = None
        p.decision = refusal
        self.emit("tool_call", **base, arguments=_arguments_for_record(p.call.arguments))
        self.emit("decision", **base, **refusal.as_event())
        self.refused.append(refusal)
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
            if r.status in ("error", "crashed") or _never_finished(r):
                self.failed_calls += 1
            elif r.status == "skipped" and p.runnable:  # not started: an earlier change on its host failed
                self.tool_calls -= 1
                self.skipped += 1
            self.emit("tool_result", turn=turn_no, index=p.index, call_id=p.call.id, tool=p.call.name,
                      status=r.status, ok=r.ok, content=r.content, data=r.data, error=r.error,
                      duration_s=round(r.duration_s, 4), started=r.started, ended=r.ended)
            if r.ok and p.decision is not None and p.decision.allowed and p.decision.host:
                if p.decision.risk.cls is RiskClass.READ_ONLY:
                    self._looked_at.add(p.decision.host)
                elif self.unknown_outcomes:  # the change sent again has run: its outcome is known now
                    key = (p.call.name, p.decision.host, args_digest(p.call.name, p.args.model_dump(mode="json")))
                    self.unknown_outcomes.pop(key, None)
            # What the gate learns from the result: a benchmark's label on its host, a change that ran there.
            self.gate.observe(p.call.name, p.decision, r.ok, r.status, r.data if isinstance(r.data, dict) else None)
            backup = (r.data or {}).get("backup") if r.ok else None
            if backup:
                record = BackupRecord.model_validate(backup)
                if record.verified:
                    self.gate.ledger.register(record)
                    self.emit("backup", call_id=p.call.id, **record.model_dump(mode="json"))

    # ------------------------------------------------------------------ compaction

    def prompt_tokens_estimate(self) -> int:
        """The next request's prompt, estimated from the recorded size of every message and the tools."""
        from agent.compaction import message_tokens  # lazy: only a long session needs it

        if not hasattr(self, "_tools_tokens"):
            self._tools_tokens = message_tokens(len(json.dumps(self._schemas, sort_keys=True)))
        return self._tools_tokens + sum(message_tokens(size) for size in self._sizes)

    def compaction_recorded(self, event: dict) -> None:
        """A compaction of the record (replay): applied where the live session applied it."""
        self._recorded_compactions.append(event)

    def _maybe_compact(self) -> None:
        if self._recorded_compactions:
            ev = self._recorded_compactions.pop(0)
            self.tokens += ev.get("tokens", 0)
            self._fold(ev["folded"][1], ev["summary"], ev.get("method", "built"), ev.get("limit", 0),
                       ev.get("note", ""), tokens=ev.get("tokens", 0))
            return
        if not self._compaction:
            return
        from agent import compaction  # lazy: most sessions never get near their context

        limit, source = compaction.context_limit(self.model, self.context_tokens)
        if self.prompt_tokens_estimate() <= limit * compaction.TRIGGER:
            return
        cut = compaction.cut_point(self.messages, self._sizes, limit)
        head = self._first_user_index()
        if cut is None or head is None or cut <= head + 1:
            return
        _, previous = compaction.split_summary(_content(self.messages[head]))
        facts = {"backups": [b.model_dump(mode="json") for b in self.gate.ledger.all()],
                 "refused": [{"subject": d.subject, "rule": d.rule, "reason": d.reason} for d in self.refused]}
        summary = compaction.summarize(self.model, previous, self.messages[head + 1:cut], facts, limit)
        tokens = summary.usage.total_tokens if summary.usage is not None else 0
        self.tokens += tokens
        self._fold(cut, summary.text, summary.method, limit, summary.note, source, tokens)

    def _fold(self, cut: int, summary: str, method: str, limit: int, note: str = "", source: str = "",
              tokens: int = 0) -> None:
        from agent import compaction  # lazy: as above

        head = self._first_user_index()
        if head is None or not head + 1 < cut <= len(self.messages):
            return  # nothing to fold there (a replay whose record differs: its next digest says so)
        original, _ = compaction.split_summary(_content(self.messages[head]))
        turns = (self._message_turns[head + 1], self._message_turns[cut - 1])
        first = {"role": "user", "content": compaction.with_summary(original, summary, turns, method)}
        before = self.prompt_tokens_estimate()
        kept = self.messages[:head] + [first] + self.messages[cut:]
        self.emit("compaction", turn=self.turns, folded=[head + 1, cut], turns=list(turns),
                  messages_before=len(self.messages), messages_after=len(kept), tokens_before=before, limit=limit,
                  **({"limit_source": source} if source else {}), method=method, **({"note": note} if note else {}),
                  tokens=tokens, summary=summary)
        self._set_messages(kept)
        self.compactions += 1

    def _first_user_index(self) -> int | None:
        return next((i for i, m in enumerate(self.messages) if m.get("role") == "user"), None)

    # ------------------------------------------------------------------ resuming

    def resume_from(self, state: dict) -> None:
        """Go on from an earlier part of this conversation (agent resume): its messages after the system
        prompt, its backups that were checked again on their hosts, its changes whose outcome is unknown,
        the benchmark labels its tools kept, and (a chat) the approvals for the session the operator carried over. Recorded as one `resumed` event, from which a replay of
        this transcript restores the same state without reading the earlier file."""
        self.emit("resumed", **state)
        for message in state.get("messages", []):
            self._add_message(message)
        for backup in state.get("backups", []):
            self.gate.ledger.register(BackupRecord.model_validate(backup))
        for change in state.get("unknown", []):
            self.unknown_outcomes[(change["tool"], change["host"], change["args_digest"])] = change["call_id"]
        for key, value in (state.get("store") or {}).items():
            self.store[key] = value
        self.gate.resume_measured(state.get("measured"), state.get("store"))
        self.changed_hosts.update(state.get("changed_hosts", []))
        for tool, host, subject in state.get("session_approvals", []):  # a chat's, as the operator confirmed them
            self.gate.carry_session_approval(tool, host, subject)

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
        if self.tokens_estimated:
            end["tokens_estimated"] = True
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


class _Journaled:
    """The session's runner, with every change's intent written just before its tool runs (agent/journal.py)."""

    def __init__(self, inner: ToolRunner, session: "Session"):
        self.inner = inner
        self.session = session

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> CallResult:
        if is_change(prepared.decision) and prepared.args is not None:
            if prepared.decision.host:
                self.session.changed_hosts.add(prepared.decision.host)
            arguments = prepared.args.model_dump(mode="json")
            self.session.emit("intent", turn=self.session.turns, index=prepared.index, call_id=prepared.call.id,
                              tool=prepared.call.name, host=prepared.decision.host,
                              risk=prepared.decision.risk.cls.value, subject=prepared.decision.subject,
                              args_digest=args_digest(prepared.call.name, arguments))
        return self.inner.run(prepared, ctx)


def _content(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def _sim_roots(hosts: Any) -> dict[str, str]:
    """The root of each simulated host of a pool, by name."""
    out: dict[str, str] = {}
    if not hasattr(hosts, "spec"):
        return out
    for name in hosts.names:
        spec = hosts.spec(name)
        if spec is not None and getattr(spec, "sim_root", None):
            out[name] = str(spec.sim_root)
    return out


# A host named in arguments that do not parse: enough to judge the scope of a call cut short.
_HOST_IN_TEXT = re.compile(r'"host"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _hosts_named(arguments: Any) -> list[str]:
    """The hosts a call names, read before its arguments are validated: every `host` value of the
    object (a key given twice names two), or what the text shows when it does not parse."""
    if isinstance(arguments, dict):
        return [arguments["host"]] if isinstance(arguments.get("host"), str) else []
    if not isinstance(arguments, str):
        return []
    named: list[str] = []

    def collect(pairs: list[tuple[str, Any]]) -> dict:
        named.extend(v for k, v in pairs if k == "host" and isinstance(v, str))
        return dict(pairs)

    try:
        json.loads(arguments, object_pairs_hook=collect)
        return named
    except (ValueError, RecursionError):
        hosts = []
        for found in _HOST_IN_TEXT.finditer(arguments):
            try:
                hosts.append(json.loads(f'"{found.group(1)}"'))
            except ValueError:
                continue
        return hosts


def _arguments_for_record(arguments: Any) -> Any:
    """A refused call's arguments as the model sent them: the object when they parse, the text otherwise."""
    if isinstance(arguments, str):
        try:
            return json.loads(arguments)
        except (ValueError, RecursionError):
            return arguments
    return arguments


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


def _never_finished(r: CallResult) -> bool:
    """A command whose connection dropped or that ran out of time did not do its step, though the
    tool answered: it counts as a failed step (the verdict of a run without checks depends on it)."""
    data = r.data if isinstance(r.data, dict) else {}
    return bool(data.get("connection_lost") or data.get("timed_out"))
