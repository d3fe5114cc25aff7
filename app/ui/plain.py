"""Plain lines: one readable line per step for pipes, logs and dumb terminals (`PlainPrinter`), the
chat in plain lines (`PlainView`), every recorded event as a JSON line for programs (`JsonLines`),
and one command's live output as it comes (`LiveOutput`, for `agent exec`).

Recorded events arrive redacted by the transcript writer; what is not recorded (live output,
progress) and the chat's own lines are redacted here, with the same redactor."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections import deque
from typing import IO, Iterator

from agent.record.redact import Redactor, StreamRedactor
from agent.text import clip
from app.ui.common import (
    FOLD_HEAD,
    FOLD_TAIL,
    QUIET,
    VERBOSE,
    check_line,
    command_failed,
    default_verbosity,
    failure_cause,
    fold_note,
    inert,
    is_failure,
    note_line,
    plan_answer,
    progress_label,
    redacted_card,
    session_summary,
    verdict_line,
)
from app.ui.results import result_rows

_ICONS = {"allow": "+", "deny": "x", "skip": "~"}


def _short(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


class _Fold:
    """One call's live output as printed by default: its first lines as they come, the rest held back
    until the call ends, when the last few are printed under a line that counts what was folded."""

    def __init__(self) -> None:
        self.shown = 0
        self.held: deque[str] = deque(maxlen=FOLD_TAIL)
        self.hidden = 0  # lines pushed out of `held`: never printed

    def take(self, lines: list[str]) -> list[str]:
        out = []
        for line in lines:
            if self.shown < FOLD_HEAD:
                self.shown += 1
                out.append(line)
            else:
                if len(self.held) == FOLD_TAIL:
                    self.hidden += 1
                self.held.append(line)
        return out


class PlainPrinter:
    """One readable line per step; live output (and progress) only when `live` is on.

    `full_text` prints the model's text whole instead of a one-line excerpt (chat answers).
    `verbosity` (app/ui/common.py): quiet prints each turn's line, refusals, failures and the
    verdict; normal folds a long live output to its first and last lines; verbose prints it all.
    No colours and no cursor movement: fit for pipes, logs and dumb terminals.
    """

    ERROR_WIDTH = 160  # characters of a failure's cause on its result line

    def __init__(self, out: IO[str] | None = None, live: bool = False, full_text: bool = False,
                 redactor: Redactor | None = None, verbosity: str | None = None):
        self.out = out or sys.stdout
        self.verbosity = verbosity or default_verbosity()
        self.live = live and self.verbosity != QUIET
        self.full_text = full_text or self.verbosity == VERBOSE
        self.redactor = redactor or Redactor()
        self._folds: dict[str, _Fold] = {}  # call_id -> its live output's fold (normal verbosity)
        # Re-entrant: a line printed from a signal handler in the thread that holds it must not hang.
        self._lock = threading.RLock()
        self._last_progress: dict[str, str] = {}
        self._streams: dict[str, StreamRedactor] = {}  # call_id -> its live output, a whole line at a time

    def __call__(self, ev: dict) -> None:
        with self._lock:  # one event at a time: per-call buffers, and lines never interleaved
            line = self.format(ev)
            if line is not None:
                print(inert(line), file=self.out, flush=True)

    def _print(self, line: str) -> None:
        with self._lock:
            print(inert(line), file=self.out, flush=True)

    def format(self, ev: dict) -> str | None:
        if self.verbosity == QUIET and not self._shown_when_quiet(ev):
            return None
        t = ev.get("type")
        if t == "session_start":
            return f"session: model {ev.get('model')}, hosts {', '.join(ev.get('hosts', [])) or '-'}" + (
                " (dry run)" if ev.get("plan") else "")
        if t == "model_response":
            parts = []
            if ev.get("text") and self.verbosity != QUIET:
                text = ev["text"].strip() if self.full_text else _short(ev["text"], 400)
                parts.append(f"model: {text}")
            n = len(ev.get("tool_calls") or [])
            if n:
                parts.append(f"turn {ev['turn']}: {n} tool call{'s' if n != 1 else ''}")
            return "\n".join(parts) or None
        if t == "model_error":
            return f"model error: {ev.get('error')}"
        if t == "note":
            line = note_line(ev)
            return self.redactor.text(line) if line else None
        if t == "tool_call" and ev.get("error"):
            return f"  ! {ev['tool']}: malformed call: {_short(ev['error'])}"
        if t == "decision":
            mark = _ICONS.get(ev["verdict"], "?")
            who = f", by {ev['approved_by']}" if ev.get("approved_by") else ""
            # A dry run's answer is what a real run would do: said first, where a cut cannot lose it.
            how = (f"dry run: {plan_answer(str(ev.get('reason') or ''))}" if ev["verdict"] == "skip"
                   and ev.get("rule") == "plan" else f"{ev['verdict']}: {ev['rule']}{who}")
            return (f"  {mark} {ev['tool']} on {ev.get('host') or '-'}: {_short(ev.get('subject', ''), 100)} "
                    f"[{ev['risk']}; {how}]")
        if t == "tool_result":
            self._last_progress.pop(ev.get("call_id", ""), None)
            stream = self._streams.pop(ev.get("call_id", ""), None)
            rest = stream.finish() if stream is not None else []
            status = ev.get("status")
            data = ev.get("data") if isinstance(ev.get("data"), dict) else {}
            failed = command_failed(ev)
            # A failure's cause is at the end of what it said (pip's resolver, nvcc): its last lines.
            extra = ""
            if status == "skipped" and "(dry run: nothing ran;" in str(ev.get("content") or ""):
                # Its reason starts with what a real run would do ("would be refused: ..."): kept from the start.
                width = 10 * self.ERROR_WIDTH if self.verbosity == VERBOSE else self.ERROR_WIDTH
                extra = ": " + clip(" ".join(str(ev["content"]).split("): ", 1)[-1].split()), width)
            elif status != "ok" or failed:
                width = 10 * self.ERROR_WIDTH if self.verbosity == VERBOSE else self.ERROR_WIDTH
                said = [f"exit {data['exit_code']}"] if failed else []
                said += [cause] if (cause := failure_cause(ev, width)) else []
                extra = ": " + ": ".join(said) if said else ""
            line = f"  = {ev['tool']} {status} in {ev.get('duration_s', 0):.2f}s{extra}"
            rows = result_rows(ev.get("tool", ""), data) if status == "ok" and not failed else None
            if rows and self.verbosity != QUIET:  # the facts that matter, a line each; the whole result is kept
                line += "".join(f"\n    {label}: {value}" for label, value in rows)
            fold = self._folds.pop(ev.get("call_id", ""), None)
            if not self.live:
                return line
            if fold is not None:
                rest = [*(fold.take(rest)), *fold.held]
                if fold.hidden:
                    rest.insert(len(rest) - len(fold.held), fold_note(fold.hidden, data))
            return "\n".join([*(f"    | {r}" for r in rest), line]) if rest else line
        if t == "backup":
            return f"  backup {ev['backup_id']} of {ev['host']} verified ({ev.get('package_count')} packages)"
        if t == "host_key_trusted":
            return f"  host key of {ev.get('host')} trusted: {ev.get('key_type')} {ev.get('fingerprint')}"
        if t == "output" and self.live:
            # Whole lines only, each marked and redacted: chunks end anywhere, several calls print at once.
            call_id = ev.get("call_id", "")
            stream = self._streams.get(call_id)
            if stream is None:
                stream = self._streams[call_id] = StreamRedactor(self.redactor)
            lines = stream.feed(str(ev.get("text", "")))
            if self.verbosity != VERBOSE:  # the first lines now, the last when it ends: see _Fold
                lines = self._folds.setdefault(call_id, _Fold()).take(lines)
            return "\n".join(f"    | {line}" for line in lines) or None
        if t == "progress" and self.live:
            label = self.redactor.text(progress_label(ev))
            # Only a change is worth a line: a download reporting every chunk would flood a log.
            if not label or self._last_progress.get(ev.get("call_id", "")) == label:
                return None
            self._last_progress[ev.get("call_id", "")] = label
            return f"    ~ {ev.get('tool')}: {label}"
        if t == "check":
            return check_line(ev)
        if t == "goal_result":
            return verdict_line(ev)
        if t == "session_end":
            return session_summary(ev)
        return None

    @staticmethod
    def _shown_when_quiet(ev: dict) -> bool:
        """--quiet: each turn's line, refusals, failures, failed checks, the verdict and the closing line."""
        t = ev.get("type")
        if t == "model_response":
            return bool(ev.get("tool_calls"))
        if t == "decision":
            return ev.get("verdict") == "deny"
        if t == "tool_result":
            return is_failure(ev)
        if t == "tool_call":
            return bool(ev.get("error"))
        if t == "check":
            return not ev.get("ok")
        return t in ("model_error", "goal_result", "session_end")


class JsonLines:
    """`--json`: every recorded event as one JSON line, for other programs."""

    def __init__(self, out: IO[str] | None = None):
        self.out = out or sys.stdout
        self._lock = threading.Lock()

    def __call__(self, ev: dict) -> None:
        if "seq" not in ev:  # live-only events (text deltas, output chunks) are not part of the record
            return
        line = json.dumps(ev, ensure_ascii=False, default=str)
        with self._lock:
            print(line, file=self.out, flush=True)


class PlainView(PlainPrinter):
    """The chat in plain lines: what `agent chat` shows when its output is not a terminal."""

    prompt_mark = ">"

    def __init__(self, out: IO[str] | None = None, inp: IO[str] | None = None, redactor: Redactor | None = None,
                 verbosity: str | None = None):
        super().__init__(out=out, live=True, full_text=True, redactor=redactor, verbosity=verbosity)
        self.inp = inp or sys.stdin

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        yield

    @contextlib.contextmanager
    def working(self, what: str, done: str) -> Iterator[None]:
        """Something slow before the session can start: a line before it, and one with its time after."""
        self.info(what)
        started = time.monotonic()
        yield
        self.info(f"{done} ({time.monotonic() - started:.1f}s)")

    def info(self, text: str) -> None:
        self._print(self.redactor.text(text))

    def warn(self, text: str) -> None:
        self._print(f"! {self.redactor.text(text)}")

    def card(self, title: str, rows: list[tuple[str, str]], tone: str = "info") -> None:
        title, rows = redacted_card(self.redactor, title, rows)
        width = max((len(label) for label, _ in rows), default=0)
        self._print("\n".join([title, *(f"  {label + ':':{width + 1}} {value}" for label, value in rows)]))

    def table(self, title: str, headers: list[str], rows: list[list[str]]) -> None:
        rows = [[self.redactor.text(str(c)) for c in row] for row in rows]
        widths = [max([len(h), *(len(str(r[i])) for r in rows)]) for i, h in enumerate(headers)]
        lines = [title, "  " + "  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
        lines += ["  " + "  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        self._print("\n".join(lines))

    def read_line(self, prompt: str) -> str:
        """One line from the operator; EOFError at the end of input."""
        with self._lock:
            self.out.write(inert(self.redactor.text(prompt)))
            self.out.flush()
        try:
            line = self.inp.readline()
        except KeyboardInterrupt:
            self._print("")  # the prompt's line is ended before anything else is printed
            raise
        if not line:
            self._print("")
            raise EOFError
        line = line.rstrip("\n")
        if not _isatty(self.inp):  # nobody typed it, so nothing echoed it: keep the log readable
            self._print(line)
        return line


class LiveOutput:
    """One command's live output on this process's own stdout and stderr (`agent exec`), redacted a
    line at a time; `close()` writes the last lines, also one without a newline.

    A `ToolContext.emit`: it takes ("output", {"stream": ..., "text": ...}) and ignores the rest.
    """

    def __init__(self, stdout: IO[str] | None = None, stderr: IO[str] | None = None,
                 redactor: Redactor | None = None):
        self.outs = {"stdout": stdout or sys.stdout, "stderr": stderr or sys.stderr}
        redactor = redactor or Redactor()
        self.streams = {name: StreamRedactor(redactor) for name in self.outs}
        self._lock = threading.Lock()

    def __call__(self, kind: str, data: dict) -> None:
        if kind != "output":
            return
        name = "stdout" if data.get("stream") == "stdout" else "stderr"
        with self._lock:
            self._write(name, self.streams[name].feed(str(data.get("text", ""))))

    def close(self) -> None:
        with self._lock:
            for name, stream in self.streams.items():
                self._write(name, stream.finish())

    def _write(self, name: str, lines: list[str]) -> None:
        if lines:
            out = self.outs[name]
            out.write("".join(f"{line}\n" for line in lines))
            out.flush()


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
