"""What both chat views show: the rows of an approval card, progress in a few words, and the last
lines of a call's live output.

Everything a view prints passes through the one redactor (agent/record/redact.py): recorded
events come redacted by the transcript writer; live output, the model's streamed text, progress
and the chat's own lines (cards, tables, notes) are redacted here, by the view."""

from __future__ import annotations

import time
from collections import deque

from agent.record.redact import Redactor, StreamRedactor
from agent.report.document import error_cause, inert
from agent.safety.policy import ApprovalRequest
from app.exit_codes import MEANINGS

# How much a view shows. quiet: each turn's one-line summary, refusals, failures and the verdict;
# normal: every step, a long raw output folded to its first and last lines; verbose: all of it.
# The transcript and its artifacts keep every output whole whatever is shown.
QUIET, NORMAL, VERBOSE = "quiet", "normal", "verbose"
VERBOSITIES = (QUIET, NORMAL, VERBOSE)
FOLD_HEAD = 3  # lines of a long raw output shown before the fold
FOLD_TAIL = 5  # and after it (a benchmark's result table, a build's last words)

_default_verbosity = NORMAL


def inert_console(console):
    """`console`, its text made inert as it is written: the terminal view's own styles and cursor moves are
    control segments and stay as they are; every piece of text, wherever it came from, goes through `inert`."""
    if getattr(console, "_inert", False):
        return console
    from rich.segment import Segment  # lazy: only the terminal view uses rich

    render = console._render_buffer

    def _render_buffer(buffer):
        return render([s if s.control else Segment(inert(s.text), s.style, s.control) for s in buffer])

    console._render_buffer = _render_buffer
    console._inert = True
    return console


def set_default_verbosity(verbosity: str) -> None:
    """What a view made without a `verbosity` shows: set once by the command line (--quiet, --verbose)."""
    global _default_verbosity
    if verbosity not in VERBOSITIES:
        raise ValueError(f"verbosity {verbosity!r}: give one of {', '.join(VERBOSITIES)}")
    _default_verbosity = verbosity


def default_verbosity() -> str:
    return _default_verbosity


def where_whole(data) -> str:
    """Where a call's whole output is kept: its artifact (or their folder), else the transcript."""
    data = data if isinstance(data, dict) else {}
    named = [data.get(k) for k in ("stdout_artifact", "stderr_artifact", "log_artifact") if data.get(k)]
    listed = data.get("artifacts") if isinstance(data.get("artifacts"), list) else []
    paths = [str(p) for p in [*named, *listed] if p]
    if len(paths) == 1:
        return paths[0]
    if paths:
        folder = paths[0].rsplit("/", 1)[0] if "/" in paths[0] else "."
        return f"{folder}/ ({len(paths)} files)"
    return "the transcript"


def fold_note(hidden: int, data) -> str:
    return f"… {hidden} line{'s' * (hidden != 1)} folded; whole output in {where_whole(data)}"


def failure_text(ev: dict) -> str:
    """What a failed call said about why: its error, or a failed command's stderr (else stdout)."""
    data = ev.get("data") if isinstance(ev.get("data"), dict) else {}
    if ev.get("error"):
        return str(ev["error"])
    for key in ("stderr", "stdout"):
        if isinstance(data.get(key), str) and data[key].strip():
            return data[key]
    return str(ev.get("content") or "")


def failure_cause(ev: dict, width: int) -> str:
    """A failed call's cause in `width` characters: the last lines that say something, not the first."""
    return error_cause(failure_text(ev), width)


def command_failed(ev: dict) -> bool:
    """A call that ran but whose command did not succeed (an exit code other than 0)."""
    data = ev.get("data") if isinstance(ev.get("data"), dict) else {}
    return isinstance(data.get("exit_code"), int) and data["exit_code"] != 0


def is_failure(ev: dict) -> bool:
    """A tool result an operator must see even when quiet."""
    return ev.get("status") not in ("ok", "refused", "skipped", "malformed") or command_failed(ev)


def approval_rows(request: ApprovalRequest) -> list[tuple[str, str]]:
    """What the operator needs to judge a step, as (label, value) rows."""
    r = request
    rows = [("host", r.host or "-"), ("tool", r.tool),
            ("command" if r.tool == "ssh_exec" else "step", r.subject)]
    if r.risk.decoded:
        rows.append(("decoded", r.risk.decoded))
    rows.append(("class", f"{r.risk.cls.value}: {r.risk.reason} [{r.risk.rule}]"))
    undo = r.undo
    if undo is not None and undo.backup is not None:
        rows.append(("backup", _backup_line(undo.backup)))
    elif undo is not None:
        # The gate needed some backup to ask at all; it is named, with the warning that it does not undo this.
        rows.append(("backup", "none undoes this step" + (f" ({_backup_line(r.backup)} does not)" if r.backup
                                                          else "")))
    else:
        rows.append(("backup", _backup_line(r.backup) if r.backup is not None else "none"))
    if undo is not None:
        rows.append(("undo", undo.says))
    return rows


def _backup_line(b) -> str:
    taken = time.strftime("%H:%M:%S", time.localtime(b.created_at))
    count = f", {b.package_count} packages" if b.package_count is not None else ""
    return f"{b.backup_id} ({b.kind}{count} of {b.target}, taken {taken})"


def redacted_card(redactor: Redactor, title: str, rows: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
    """A card's title and rows as they may be shown: an approval's command can hold a credential."""
    return redactor.text(title), [(label, redactor.text(str(value))) for label, value in rows]


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
    """The last lines of one call's live output, redacted; the whole output is in the transcript's artifacts.

    Chunks arrive split anywhere; a carriage return (progress bars of pip, curl, wget) starts
    the line over, as a terminal would show it. Lines are redacted as they complete (a key block
    over several lines included); the line still arriving shows only what is safe so far.
    """

    MAX_PARTIAL = 4096  # characters of a line without a newline (a spinner) that are shown

    def __init__(self, keep: int | None, redactor: Redactor | None = None, head: int = 0):
        self.lines: deque[str] = deque(maxlen=keep)  # keep None: every line (--verbose)
        self.first: list[str] = []  # the first `head` lines, shown above a fold
        self.head = head
        self.stream = StreamRedactor(redactor or Redactor())
        self.total = 0  # complete lines seen

    def add(self, text: str) -> None:
        self._keep(self.stream.feed(text))

    def finish(self) -> None:
        """The output is over: its last line, even without a newline, is whole now."""
        self._keep(self.stream.finish())

    def _keep(self, lines: list[str]) -> None:
        for line in lines:
            if len(self.first) < self.head:
                self.first.append(line)
            self.lines.append(line)
            self.total += 1

    def folded(self, tail: int) -> tuple[list[str], int, list[str]]:
        """(first lines, lines folded between, last lines) of a finished output; nothing is shown twice."""
        if self.total <= len(self.first) + tail:
            return list(self.lines)[-self.total:] if self.total else [], 0, []
        last = list(self.lines)[-tail:] if tail > 0 else []
        return list(self.first), self.total - len(self.first) - len(last), last

    @property
    def partial(self) -> str:
        return self.stream.preview()[-self.MAX_PARTIAL:]

    def tail(self, n: int) -> list[str]:
        lines = list(self.lines)
        partial = self.partial
        if partial:
            lines.append(partial)
        return lines[-n:] if n > 0 else []

    @property
    def count(self) -> int:
        return self.total + (1 if self.stream.partial else 0)


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
    verdict = ev.get("verdict") or ("met" if ev.get("met") else "not met")
    head = {"met": "GOAL MET", "unverified": "GOAL UNVERIFIED", "dry run": "DRY RUN",
            "not started": "NOT STARTED", "held": "HOST HELD"}.get(verdict, "GOAL NOT MET")
    meaning = ("done, but nothing proved the goal" if verdict == "unverified" else
               "nothing was changed: the host stays held" if verdict == "held" else
               "a real run would be allowed every change" if verdict == "dry run" and code == 0 else
               MEANINGS.get(code, "see agent --help"))
    reason = str(ev.get("reason") or "")
    if verdict == "dry run":  # "DRY RUN: dry run: ..." said it twice
        reason = reason.removeprefix("dry run: ")
    return f"{head}: {reason} (exit code {code}: {meaning})"


# Notes worth a line on the terminal: how the model server was met, replies cut off, a request tried again.
SHOWN_NOTES = ("model_server", "cut_off", "model_retry")


def note_line(ev: dict) -> str | None:
    return f"  note: {ev.get('text')}" if ev.get("kind") in SHOWN_NOTES and ev.get("text") else None


def plan_answer(reason: str) -> str:
    """A dry run's answer for a change, in its three words (the gate's reason starts with them)."""
    for answer in ("would be refused", "would ask", "would run"):
        if reason.startswith(answer):
            return answer
    return "not run"
