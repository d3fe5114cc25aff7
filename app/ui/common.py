"""What both chat views show: the rows of an approval card, progress in a few words, and the last
lines of a call's live output."""

from __future__ import annotations

import time
from collections import deque

from agent.safety.policy import ApprovalRequest
from app.exit_codes import MEANINGS


def approval_rows(request: ApprovalRequest) -> list[tuple[str, str]]:
    """What the operator needs to judge a step, as (label, value) rows."""
    r = request
    rows = [("host", r.host or "-"), ("tool", r.tool),
            ("command" if r.tool == "ssh_exec" else "step", r.subject)]
    if r.risk.decoded:
        rows.append(("decoded", r.risk.decoded))
    rows.append(("class", f"{r.risk.cls.value}: {r.risk.reason} [{r.risk.rule}]"))
    if r.backup is not None:
        b = r.backup
        taken = time.strftime("%H:%M:%S", time.localtime(b.created_at))
        count = f", {b.package_count} packages" if b.package_count is not None else ""
        rows.append(("backup", f"{b.backup_id} ({b.kind}{count}, taken {taken})"))
    else:
        rows.append(("backup", "none"))
    return rows


def progress_numbers(data: dict) -> tuple[float, float] | None:
    """(done, total) of a progress event that counts toward a total (benchmark runs, bytes), else None."""
    total = data.get("of", data.get("total"))
    if not isinstance(total, (int, float)) or total <= 0:
        return None
    for key in ("run", "warmup", "done", "bytes", "completed"):
        if isinstance(data.get(key), (int, float)):
            return float(data[key]), float(total)
    return None


def progress_label(data: dict) -> str:
    """A progress event in a few words: 'preflight', 'run 2/5 (89.3)', 'warmup 1/2'."""
    parts = []
    if data.get("step") is not None:
        parts.append(str(data["step"]))
    for key in ("warmup", "run"):
        if data.get(key) is not None:
            parts.append(f"{key} {data[key]}/{data.get('of', '?')}")
    if data.get("value") is not None:
        parts.append(f"({data['value']})")
    if not parts and progress_numbers(data):
        done, total = progress_numbers(data)
        parts.append(f"{done / total:.0%}")
    return " ".join(parts)


class OutputTail:
    """The last lines of one call's live output; the whole output is in the transcript's artifacts.

    Chunks arrive split anywhere; a carriage return (progress bars of pip, curl, wget) starts
    the line over, as a terminal would show it.
    """

    MAX_PARTIAL = 4096  # a line without a newline (a spinner) cannot grow without bound

    def __init__(self, keep: int):
        self.lines: deque[str] = deque(maxlen=keep)
        self.partial = ""
        self.total = 0  # complete lines seen

    def add(self, text: str) -> None:
        pieces = (self.partial + text).split("\n")
        for line in pieces[:-1]:
            self.lines.append(line.rsplit("\r", 1)[-1])
            self.total += 1
        self.partial = pieces[-1].rsplit("\r", 1)[-1][-self.MAX_PARTIAL:]

    def tail(self, n: int) -> list[str]:
        lines = list(self.lines)
        if self.partial:
            lines.append(self.partial)
        return lines[-n:] if n > 0 else []

    @property
    def count(self) -> int:
        return self.total + (1 if self.partial else 0)


def session_summary(ev: dict) -> str:
    """The closing line: every call the model made, and what became of each."""
    made = ev.get("calls", ev.get("tool_calls"))
    parts = [f"{ev.get('tool_calls')} run", f"{ev.get('refused')} refused"]
    for key in ("skipped", "malformed", "failed"):
        if ev.get(key):
            parts.append(f"{ev[key]} {key}")
    reason = f" ({ev['reason']})" if ev.get("reason") else ""
    return (f"session {ev['status']}: {ev.get('turns')} turns, {made} calls ({', '.join(parts)}), "
            f"{ev.get('duration_s')}s{reason}")


def check_line(ev: dict) -> str:
    """One success check at the end of a run, with what it found."""
    return f"  {'✓' if ev.get('ok') else '✗'} check {ev.get('index')}: {ev.get('kind')}: {ev.get('detail')}"


def verdict_line(ev: dict) -> str:
    """The run's verdict: met or not, why, and what the exit code means."""
    code = ev.get("exit_code")
    head = "GOAL MET" if ev.get("met") else "GOAL NOT MET"
    return f"{head}: {ev.get('reason')} (exit code {code}: {MEANINGS.get(code, 'see agent --help')})"
