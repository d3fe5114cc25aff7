"""A transcript as steps: one normalized object per tool call, for `agent show`."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from agent.record.transcript import iter_events


def steps(path: Path) -> Iterator[dict]:
    """One object per tool call: turn, tool, arguments, risk, decision, approved_by, exit_code, duration.

    Events of a call are merged as they arrive; a call is yielded once its result is read.
    """
    open_calls: dict[str, dict] = {}
    for ev in iter_events(path):
        t = ev.get("type")
        if t == "tool_call":
            open_calls[ev["call_id"]] = {
                "turn": ev["turn"], "index": ev["index"], "call_id": ev["call_id"], "tool": ev["tool"],
                "arguments": ev.get("arguments"), "host": None, "risk": None, "rule": None,
                "decision": "malformed" if ev.get("error") else None, "approved_by": None,
                "exit_code": None, "duration_s": None, "status": None, "error": ev.get("error"),
            }
            if ev.get("error"):
                yield open_calls.pop(ev["call_id"])
        elif t == "decision" and ev["call_id"] in open_calls:
            s = open_calls[ev["call_id"]]
            s.update(host=ev.get("host"), risk=ev.get("risk"), rule=ev.get("rule"), decision=ev.get("verdict"),
                     approved_by=ev.get("approved_by"), reason=ev.get("reason"))
        elif t == "tool_result" and ev["call_id"] in open_calls:
            s = open_calls.pop(ev["call_id"])
            data = ev.get("data") or {}
            s.update(status=ev.get("status"), duration_s=ev.get("duration_s"),
                     exit_code=data.get("exit_code") if isinstance(data, dict) else None,
                     error=ev.get("error"))
            yield s
    yield from open_calls.values()  # calls whose result never came (a crash mid-batch)
