"""What a resumed part of a session carries over from the earlier one.

`agent resume` and the fleet's recovery of a killed host build this state from the earlier record;
the new part records it as one `resumed` event and applies it here, and a replay of the new part's
transcript applies the same event without reading the earlier file.

    messages          the conversation after the system prompt
    backups           verified backups, checked again on their hosts
    unknown           changes whose outcome is unknown: sent again, they are sent back until checked
    store, measured   the benchmark labels the tools kept, and what the gate measured
    changed_hosts     hosts a change was started on: the end reads their state
    session_approvals a chat's approvals for the session, as the operator carried them over
"""

from __future__ import annotations

from typing import Any

from tools.base import BackupRecord


def carry_over(session: Any, state: dict) -> None:
    """Record the state as the `resumed` event and apply it to a session that has not run a turn yet."""
    session.emit("resumed", **state)
    for message in state.get("messages", []):
        session.conversation.add(message, session.turns)
    for backup in state.get("backups", []):
        session.gate.ledger.register(BackupRecord.model_validate(backup))
    session.check_first.carry(state.get("unknown", []))
    for key, value in (state.get("store") or {}).items():
        session.store[key] = value
    session.gate.resume_measured(state.get("measured"), state.get("store"))
    session.changed_hosts.update(state.get("changed_hosts", []))
    for tool, host, subject in state.get("session_approvals", []):
        session.gate.carry_session_approval(tool, host, subject)
