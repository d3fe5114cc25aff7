"""Rendering session events for people: plain lines, and JSON lines for programs.

The loop never prints; these are listeners on its events.
"""

from __future__ import annotations

import json
import sys
from typing import IO

_ICONS = {"allow": "+", "deny": "x", "skip": "~"}


def _short(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


class PlainPrinter:
    """One readable line per step; live output only when `live` is on."""

    def __init__(self, out: IO[str] | None = None, live: bool = False):
        self.out = out or sys.stdout
        self.live = live

    def __call__(self, ev: dict) -> None:
        line = self.format(ev)
        if line is not None:
            print(line, file=self.out, flush=True)

    def format(self, ev: dict) -> str | None:
        t = ev.get("type")
        if t == "session_start":
            return f"session: model {ev.get('model')}, hosts {', '.join(ev.get('hosts', [])) or '-'}" + (
                " (dry run)" if ev.get("plan") else "")
        if t == "model_response":
            parts = []
            if ev.get("text"):
                parts.append(f"model: {_short(ev['text'], 400)}")
            n = len(ev.get("tool_calls") or [])
            if n:
                parts.append(f"turn {ev['turn']}: {n} tool call{'s' if n != 1 else ''}")
            return "\n".join(parts) or None
        if t == "model_error":
            return f"model error: {ev.get('error')}"
        if t == "tool_call" and ev.get("error"):
            return f"  ! {ev['tool']}: malformed call: {_short(ev['error'])}"
        if t == "decision":
            mark = _ICONS.get(ev["verdict"], "?")
            who = f", by {ev['approved_by']}" if ev.get("approved_by") else ""
            return (f"  {mark} {ev['tool']} on {ev.get('host') or '-'}: {_short(ev.get('subject', ''), 100)} "
                    f"[{ev['risk']}; {ev['verdict']}: {ev['rule']}{who}]")
        if t == "tool_result":
            status = ev.get("status")
            extra = f": {_short(ev.get('error') or ev.get('content', ''), 120)}" if status not in ("ok",) else ""
            return f"  = {ev['tool']} {status} in {ev.get('duration_s', 0):.2f}s{extra}"
        if t == "backup":
            return f"  backup {ev['backup_id']} of {ev['host']} verified ({ev.get('package_count')} packages)"
        if t == "output" and self.live:
            return f"    | {ev.get('text', '').rstrip()}"
        if t == "session_end":
            return (f"session {ev['status']}: {ev.get('turns')} turns, {ev.get('tool_calls')} tool calls, "
                    f"{ev.get('refused')} refused, {ev.get('duration_s')}s" + (
                        f" ({ev['reason']})" if ev.get("reason") else ""))
        return None


class JsonLines:
    """`--json`: every recorded event as one JSON line, for other programs."""

    def __init__(self, out: IO[str] | None = None):
        self.out = out or sys.stdout

    def __call__(self, ev: dict) -> None:
        if "seq" not in ev:  # live-only events (text deltas, output chunks) are not part of the record
            return
        print(json.dumps(ev, ensure_ascii=False, default=str), file=self.out, flush=True)
