"""The step journal: a change writes down what it is about to do before it starts.

Every call that changes a host (its risk is mutating or destructive, and the gate allowed it)
writes an `intent` event just before its tool runs: the call id, the tool, the host and a digest
of its validated arguments. Its `tool_result` is the outcome. So the record of a process that was
killed while a change ran (SIGKILL, a power cut, an out-of-memory kill) ends with an intent that
has no outcome, and one stopped by a signal shows the change as cancelled while it ran: either
way nobody knows what the host looks like now. `agent resume` finds these here and tells the model
to check first; it never runs such a change again blindly.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable

from agent.batch import CallResult, PreparedCall, ToolRunner
from agent.safety.policy import Decision, Verdict
from tools.base import RiskClass, ToolContext

# What the model reads, in place of the result, for a change whose outcome is unknown.
OUTCOME_UNKNOWN = ("outcome unknown: check first. The session was stopped while this change ran (or before its "
                   "result was written), so it may have been applied in full, in part or not at all. Look at the "
                   "host's state with a read-only call before you decide whether to send it again.")

# Results of a change that started and whose end nobody saw: the interrupt stopped it in the middle.
_UNFINISHED = {"cancelled"}


def args_digest(tool: str, arguments: Any) -> str:
    """A short digest of a call's validated arguments: the same change gives the same digest."""
    text = json.dumps({"tool": tool, "arguments": arguments}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def is_change(decision: Any) -> bool:
    """A call the gate allowed whose risk is mutating or destructive."""
    return (decision is not None and decision.allowed
            and decision.risk.cls in (RiskClass.MUTATING, RiskClass.DESTRUCTIVE))


@dataclass
class Intent:
    """A change that was about to run, and how it ended (`status` None: no result was written)."""

    turn: int
    index: int
    call_id: str
    tool: str
    host: str | None
    args_digest: str
    subject: str = ""
    status: str | None = None

    @property
    def outcome_known(self) -> bool:
        return self.status is not None and self.status not in _UNFINISHED

    def key(self) -> tuple[str, str | None, str]:
        """What identifies the same change sent again: tool, host and arguments."""
        return (self.tool, self.host, self.args_digest)

    def as_record(self) -> dict:
        return asdict(self)


def intents(events: Iterable[dict]) -> list[Intent]:
    """Every change of one transcript with its outcome, in the order the intents were written."""
    found: dict[tuple[int, str], Intent] = {}
    for ev in events:
        t = ev.get("type")
        if t == "intent":
            key = (ev.get("turn", 0), ev.get("call_id", ""))
            found[key] = Intent(turn=ev.get("turn", 0), index=ev.get("index", 0), call_id=ev.get("call_id", ""),
                                tool=ev.get("tool", ""), host=ev.get("host"), args_digest=ev.get("args_digest", ""),
                                subject=ev.get("subject", ""))
        elif t == "tool_result":
            intent = found.get((ev.get("turn", 0), ev.get("call_id", "")))
            if intent is not None:
                intent.status = ev.get("status")
    return list(found.values())


def unknown_outcomes(events: Iterable[dict]) -> list[Intent]:
    """The changes whose outcome is unknown: an intent without a result, or a result that says the
    change was stopped while it ran."""
    return [i for i in intents(events) if not i.outcome_known]


def changed_hosts(events: Iterable[dict]) -> list[str]:
    """The hosts a change was started on in this record, and in the parts it resumes (their `resumed`
    event carries them on): the hosts whose state the end of a resumed session must read."""
    hosts: set[str] = set()
    for ev in events:
        if ev.get("type") == "intent" and ev.get("host"):
            hosts.add(ev["host"])
        elif ev.get("type") == "resumed":
            hosts.update(ev.get("changed_hosts") or [])
    return sorted(hosts)


class JournaledRunner:
    """A session's runner, with every change's intent written just before its tool runs."""

    def __init__(self, inner: ToolRunner, write_intent: Callable[[PreparedCall, str], None]):
        self.inner = inner
        self.write_intent = write_intent  # (the call, its args digest): the session records it and its host

    def run(self, prepared: PreparedCall, ctx: ToolContext) -> CallResult:
        if is_change(prepared.decision) and prepared.args is not None:
            self.write_intent(prepared, args_digest(prepared.call.name, prepared.args.model_dump(mode="json")))
        return self.inner.run(prepared, ctx)


class CheckFirst:
    """The changes of an interrupted part whose outcome is unknown, carried into the part that resumes it.

    Such a change sent again before the model has looked at its host since the resume is sent back (it
    may have been applied already); once a read ran there, or the change ran again, it is known."""

    def __init__(self) -> None:
        self.unknown: dict[tuple[str, str | None, str], str] = {}  # (tool, host, args digest) -> call id
        self.looked_at: set[str] = set()  # hosts a read-only call of the model ran on since the resume

    def carry(self, changes: Iterable[dict]) -> None:
        for change in changes:
            self.unknown[(change["tool"], change["host"], change["args_digest"])] = change["call_id"]

    def judge(self, tool: str, arguments: dict, decision: Decision) -> Decision:
        if not self.unknown or not is_change(decision) or decision.host in self.looked_at:
            return decision
        call_id = self.unknown.get((tool, decision.host, args_digest(tool, arguments)))
        if call_id is None:
            return decision
        return Decision(Verdict.DENY, decision.risk, "outcome-unknown",
                        f"this same change ({call_id}) was running when the session was stopped and its outcome is "
                        f"unknown: check the state of {decision.host} with a read-only call first, then send it "
                        f"again if it is still needed", host=decision.host, subject=decision.subject)

    def ran(self, prepared: PreparedCall) -> None:
        """A call the gate allowed ran and succeeded: a read looked at its host, a change's outcome is known."""
        decision = prepared.decision
        if decision is None or not decision.host:
            return
        if decision.risk.cls is RiskClass.READ_ONLY:
            self.looked_at.add(decision.host)
        elif self.unknown:
            self.unknown.pop((prepared.call.name, decision.host,
                              args_digest(prepared.call.name, prepared.args.model_dump(mode="json"))), None)
