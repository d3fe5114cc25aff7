"""How finished things look on the terminal: styles, short texts of times and values, and the panel
of a decision. Pure functions of an event; the state and the drawing are in app/ui/terminal.py."""

from __future__ import annotations

import json
import re

from rich.panel import Panel
from rich.text import Text

from app.ui.common import plan_answer

RISK_STYLE = {"read-only": "green", "mutating": "yellow", "destructive": "bold red", "forbidden": "bold red"}
STATUS_MARK = {"ok": ("✓", "green"), "error": ("✗", "red"), "crashed": ("✗", "bold red"),
               "cancelled": ("⊘", "yellow"), "refused": ("✗", "red"), "skipped": ("~", "cyan"),
               "malformed": ("!", "red")}
TONE_STYLE = {"info": "cyan", "warn": "yellow", "danger": "red"}
_ANSI = re.compile(r"(\x1b\[[0-9;?]*[A-Za-z])")


def decision_panel(ev: dict, arguments: dict) -> Panel:
    """The panel of one decision: the command (or the call's arguments), its risk and the outcome."""
    body = Text(overflow="fold")
    if ev["tool"] == "ssh_exec":
        body.append("$ ", style="dim")
        body.append(ev.get("subject", ""), style="bold")
        if arguments.get("timeout") not in (None, 600, 600.0):
            body.append(f"\ntimeout {arguments['timeout']}s", style="dim")
    else:
        shown = {k: v for k, v in arguments.items() if k != "host" and v is not None}
        body.append("\n".join(f"{k}: {_value(v)}" for k, v in shown.items()) or ev.get("subject", ""))
    if ev.get("decoded"):
        body.append(f"\ndecoded: {ev['decoded']}", style="magenta")
    risk, verdict = ev.get("risk", "?"), ev.get("verdict")
    if verdict == "allow":
        outcome = {"read-only": "runs", "backup": "runs (a backup)"}.get(ev.get("rule"), "allowed")
        if ev.get("approved_by"):
            outcome = f"approved by {ev['approved_by']}"
        edge = RISK_STYLE.get(risk, "white")
    elif verdict == "skip":
        # What a real run would do, as the gate said it ("would be refused: ..."): a refusal in red.
        would = plan_answer(str(ev.get("reason") or "")) if ev.get("rule") == "plan" else "not run"
        refused = would.startswith("would be refused")
        outcome, edge = f"{would} (dry run)", ("red" if refused else "cyan")
        body.append(f"\n{ev.get('reason', '')}", style="red" if refused else "cyan")
    else:
        outcome, edge = f"refused: {ev.get('rule')}", "red"
        body.append(f"\n{ev.get('reason', '')}", style="red")
    title = Text(ev["tool"], style="bold")
    if ev.get("host"):
        title.append(f" · {ev['host']}", style="")
    subtitle = Text.assemble((risk, RISK_STYLE.get(risk, "")), " · ", outcome)
    return Panel(body, title=title, title_align="left", subtitle=subtitle, subtitle_align="right",
                 border_style=edge)


def _esc(value) -> str:
    from rich.markup import escape

    return escape(str(value))


def _value(v) -> str:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else str(v)


def _seconds(s: float) -> str:
    s = float(s or 0)
    if s < 10:
        return f"{s:.1f}s"
    if s < 120:
        return f"{s:.0f}s"
    return f"{int(s // 60)}m{int(s % 60):02d}s"


def _result_detail(status: str, data: dict, ev: dict) -> str:
    if data.get("timed_out"):
        return "timed out, process killed"
    if data.get("cancelled") or status == "cancelled":
        return "cancelled, process killed" if "exit_code" in data else "cancelled"
    if data.get("connection_lost"):
        return "connection lost"
    if isinstance(data.get("exit_code"), int):
        return f"exit {data['exit_code']}"
    if status in ("error", "crashed"):
        return status
    return ""
