"""The chat on a terminal, drawn with rich: finished things printed once, what is in progress in a
small Live region at the bottom."""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.markdown import Markdown
from rich.padding import Padding
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from agent.record.redact import Redactor, StreamRedactor
from app.ui.common import (
    FOLD_HEAD,
    FOLD_TAIL,
    QUIET,
    VERBOSE,
    OutputTail,
    check_line,
    command_failed,
    default_verbosity,
    failure_cause,
    fold_note,
    inert_console,
    is_failure,
    note_line,
    progress_label,
    progress_numbers,
    redacted_card,
    session_summary,
    verdict_line,
)
from app.ui.format import _ANSI, STATUS_MARK, TONE_STYLE, _esc, _result_detail, _seconds, decision_panel
from app.ui.results import result_rows


@dataclass
class _Running:
    """A call between its tool_start and its tool_result."""

    tool: str
    host: str | None
    subject: str
    started: float = field(default_factory=time.monotonic)
    progress: dict | None = None
    spinner: Spinner = field(default_factory=lambda: Spinner("dots", style="cyan"))


@dataclass
class _Batch:
    turn: int
    expected: int
    started: float = field(default_factory=time.monotonic)
    statuses: Counter = field(default_factory=Counter)


class TerminalView:
    """The chat on a terminal, drawn with rich.

    Finished things (the model's text, a panel per tool call, results, summaries) are printed
    once and scroll away; what is in progress (the model thinking, running commands with
    their last lines of output, elapsed time and progress bars) lives in a small Live region
    at the bottom, redrawn by rich's refresh thread.

    Locks: `_state` guards the fields the Live region reads and is never held while calling
    rich (rich's refresh thread holds its own lock while it asks us for the region);
    `_printing` keeps one event's lines together and orders prints with the Live start/stop.

    What is not recorded (live output, the model's streamed text, progress) and the chat's own
    lines are redacted here with `redactor`; recorded events arrive redacted already.

    `verbosity` (app/ui/common.py): quiet prints each turn's summary, refusals, failures and the
    verdict; normal folds a long output to its first and last lines; verbose prints all of it.
    """

    prompt_mark = "❯"
    LIVE_LINES = 6  # lines of each running call's output in the live region
    TAIL_LINES = 12  # lines of a finished call's output left on screen
    HEAD_LINES = 4  # lines of a finished call's result shown when it had no live output
    STREAM_LINES = 6  # lines of the model's streaming text in the live region
    STREAM_KEEP = 8000  # characters of it kept while it streams
    REFRESH_PER_SECOND = 8

    def __init__(self, console: Console | None = None, use_readline_markers: bool = False,
                 redactor: Redactor | None = None, verbosity: str | None = None):
        self.console = inert_console(console or Console())
        self.verbosity = verbosity or default_verbosity()
        self.redactor = redactor or Redactor()
        self.use_readline_markers = use_readline_markers  # wrap prompt colours for GNU readline
        self.cancelling: Callable[[], bool] = lambda: False  # shown as "cancelling" while true
        self._state = threading.Lock()
        self._printing = threading.RLock()
        self._calls: dict[str, dict] = {}  # call_id -> what its decision said (tool, host, subject)
        self._running: dict[str, _Running] = {}
        self._outputs: dict[str, OutputTail] = {}
        self._streamed = ""  # the model's streamed text so far, its whole lines redacted
        self._stream = StreamRedactor(self.redactor)
        self._thinking_since: float | None = None
        self._thinking = Spinner("dots", style="cyan")  # one object, so its animation runs on
        self._batch: _Batch | None = None
        self._live: Live | None = None

    # ------------------------------------------------------------------ the listener

    def __call__(self, ev: dict) -> None:
        t = ev.get("type")
        if t in ("output", "progress", "text", "model_request", "tool_start"):
            self._track(ev)  # the hot path (output from many threads): state only, no drawing
            return
        with self._printing:
            for item in self._renderables(ev):
                self.console.print(item)

    def _track(self, ev: dict) -> None:
        t = ev["type"]
        with self._state:
            if t == "output":
                self._tail(ev.get("call_id", "")).add(str(ev.get("text", "")))
            elif t == "progress":
                running = self._running.get(ev.get("call_id", ""))
                if running is not None:
                    running.progress = self.redactor.value(ev)
            elif t == "text":
                # Only the tail is ever shown; the whole text arrives again with model_response.
                lines = self._stream.feed(str(ev.get("text", "")))
                if lines:
                    self._streamed = (self._streamed + "".join(f"{line}\n" for line in lines))[-self.STREAM_KEEP:]
            elif t == "model_request":
                self._thinking_since, self._streamed = time.monotonic(), ""
                self._stream = StreamRedactor(self.redactor)
            elif t == "tool_start":
                call = self._calls.get(ev["call_id"], {})
                self._running[ev["call_id"]] = _Running(ev.get("tool", "?"), ev.get("host"), call.get("subject", ""))
                self._tail(ev["call_id"])

    def _tail(self, call_id: str) -> OutputTail:
        tail = self._outputs.get(call_id)
        if tail is None:
            keep = None if self.verbosity == VERBOSE else max(self.TAIL_LINES, FOLD_HEAD + FOLD_TAIL)
            tail = self._outputs[call_id] = OutputTail(keep, self.redactor, head=FOLD_HEAD)
        return tail

    def _renderables(self, ev: dict) -> list[RenderableType]:
        shown = self._shown(ev)
        if self.verbosity != QUIET:
            return shown
        t = ev["type"]
        # --quiet: the state above is kept all the same; of what it draws, each turn's summary,
        # refusals, failures, failed checks, the verdict and the closing line.
        if t == "tool_result":
            return shown if is_failure(ev) else shown[-1:] if shown and self._is_turn_summary(shown[-1]) else []
        keep = {"decision": ev.get("verdict") == "deny", "check": not ev.get("ok"),
                "tool_call": bool(ev.get("error"))}.get(t, t in ("model_error", "goal_result", "session_end"))
        return shown if keep else []

    @staticmethod
    def _is_turn_summary(item: RenderableType) -> bool:
        return isinstance(item, Text) and item.plain.startswith("  turn ")

    def _shown(self, ev: dict) -> list[RenderableType]:
        t = ev["type"]
        if t == "session_start":
            plan = " · [cyan]dry run[/]" if ev.get("plan") else ""
            return [Text.from_markup(f"[bold]upgrade-agent[/] · model [bold]{_esc(ev.get('model'))}[/] · hosts "
                                     f"[bold]{_esc(', '.join(ev.get('hosts', [])) or 'none')}[/]{plan}")]
        if t == "model_response":
            return self._model_response(ev)
        if t == "model_error":
            with self._state:
                self._thinking_since = None
            return [Text(f"model error: {ev.get('error')}", style="red")]
        if t == "tool_call" and ev.get("error"):
            return [Panel(Text(str(ev["error"]), overflow="fold"), title=Text(f"{ev['tool']} · malformed call"),
                          title_align="left", border_style="red")]
        if t == "tool_call":
            with self._state:
                self._calls[ev["call_id"]] = {"tool": ev["tool"], "arguments": ev.get("arguments") or {}}
            return []
        if t == "decision":
            return [self._decision_panel(ev)]
        if t == "tool_result":
            return self._result(ev)
        if t == "backup":
            return [Text(f"  ✓ backup {ev['backup_id']} of {ev['host']} verified "
                         f"({ev.get('package_count')} packages)", style="green")]
        if t == "host_key_trusted":
            return [Text(f"  host key of {ev.get('host')} trusted: {ev.get('key_type')} {ev.get('fingerprint')}",
                         style="yellow", overflow="fold")]
        if t == "check":
            return [Text(check_line(ev), style="green" if ev.get("ok") else "red", overflow="fold")]
        if t == "goal_result":
            style = "bold green" if ev.get("met") else "bold yellow" if ev.get("verdict") in ("unverified", "dry run", "held") \
                else "bold red"
            return [Text(verdict_line(ev), style=style, overflow="fold")]
        if t == "note":
            line = note_line(ev)
            style = "yellow" if ev.get("kind") == "model_retry" else "dim"  # a wait the operator should see
            return [Text(self.redactor.text(line), style=style, overflow="fold")] if line else []
        if t == "session_end":
            return [Text(session_summary(ev), style="dim")]
        return []

    def _model_response(self, ev: dict) -> list[RenderableType]:
        calls = ev.get("tool_calls") or []
        with self._state:
            self._thinking_since, self._streamed = None, ""
            self._stream = StreamRedactor(self.redactor)
            self._batch = _Batch(ev.get("turn", 0), len(calls)) if calls else None
        text = (ev.get("text") or "").strip()
        if not text:
            return []
        if calls:  # thinking aloud before acting: quieter than the answer
            return [Text(text, style="italic", overflow="fold")]
        # hyperlinks=False: a link's target is written beside its text, never hidden in an OSC 8 sequence
        # (the model could show "developer.download.nvidia.com" and link elsewhere).
        return [Text(""), Markdown(text, hyperlinks=False), Text("")]

    def _decision_panel(self, ev: dict) -> Panel:
        with self._state:
            call = self._calls.setdefault(ev["call_id"], {"tool": ev["tool"], "arguments": {}})
            call.update(host=ev.get("host"), subject=ev.get("subject", ""))
            arguments = dict(call.get("arguments") or {})
        return decision_panel(ev, arguments)

    def _result(self, ev: dict) -> list[RenderableType]:
        call_id = ev.get("call_id", "")
        status = ev.get("status", "ok")
        with self._state:
            call = self._calls.pop(call_id, {})
            self._running.pop(call_id, None)
            tail = self._outputs.pop(call_id, None)
            if tail is not None:
                tail.finish()
            summary = self._count_in_batch(ev, status)
        out: list[RenderableType] = []
        not_started = (ev.get("data") or {}).get("not_started") if status == "skipped" else None
        if not_started:  # its panel showed a call allowed to run: why it did not start is said here
            out.append(Text(f"  ⊘ {ev.get('tool', '?')} · {' '.join(str(ev.get('content') or 'not started').split())}",
                            style="yellow", overflow="fold"))
        # Refused, skipped and malformed calls said everything in their panel already.
        if status not in ("refused", "skipped", "malformed"):
            data = ev.get("data") or {}
            failed_command = command_failed(ev)
            mark, style = ("✗", "red") if failed_command else STATUS_MARK.get(status, ("?", "white"))
            line = Text(f"  {mark} ", style=style)
            line.append(ev.get("tool", "?"), style="bold")
            if call.get("host"):
                line.append(f" · {call['host']}")
            detail = _result_detail(status, data, ev)
            if detail:
                line.append(f" · {detail}", style=style if status != "ok" or failed_command else "")
            line.append(f" · {_seconds(ev.get('duration_s', 0))}", style="dim")
            out.append(line)
            rows = result_rows(ev.get("tool", ""), data) if status == "ok" and not failed_command else None
            if status in ("error", "crashed") and ev.get("error"):
                # The cause is at the end of a long error (pip's resolver, nvcc): its last lines, or all of it.
                error = str(ev["error"]) if self.verbosity == VERBOSE else failure_cause(ev, self._cause_width())
                out.append(Padding(Text(error, style="red", overflow="fold"), (0, 0, 0, 4)))
            elif failed_command and not (tail is not None and tail.count) and failure_cause(ev, 1):
                out.append(Padding(Text(failure_cause(ev, self._cause_width()), style="red", overflow="fold"),
                                   (0, 0, 0, 4)))
            elif rows:
                # The facts that matter, a row each; the whole result is in the transcript.
                out.append(Padding(_rows_grid(rows), (0, 0, 0, 4)))
            elif tail is not None and tail.count:
                out.append(self._output_block(tail, data))
            elif status == "ok" and ev.get("content"):
                # A tool without live output: the start of what the model reads, a line each.
                lines = str(ev["content"]).splitlines()
                head = [Text(line, style="dim", no_wrap=True, overflow="ellipsis") for line in lines[:self.HEAD_LINES]]
                if len(lines) > self.HEAD_LINES:
                    head.append(Text(f"… {len(lines) - self.HEAD_LINES} more lines", style="dim italic"))
                out.append(Padding(Group(*head), (0, 0, 0, 4)))
        if summary is not None:
            out.append(summary)
        return out

    def _cause_width(self) -> int:
        return max(160, 3 * (self.console.width - 4))  # about three lines of the screen

    def _output_block(self, tail: OutputTail, data: dict) -> RenderableType:
        """A finished call's output: whole when verbose, else its first and last lines around a fold."""
        text = Text(overflow="fold", style="dim")
        if self.verbosity == VERBOSE:
            text.append("\n".join(tail.tail(tail.count)))
            return Padding(text, (0, 0, 0, 4))
        first, hidden, last = tail.folded(FOLD_TAIL)
        if first:
            text.append("\n".join(first))
        if hidden:
            text.append(("\n" if first else "") + fold_note(hidden, data), style="dim italic")
        if last:
            text.append("\n" + "\n".join(last))
        return Padding(text, (0, 0, 0, 4))

    def _count_in_batch(self, ev: dict, status: str) -> RenderableType | None:
        """The batch's summary line once its last result is in; the caller holds the state lock."""
        batch = self._batch
        if batch is None or ev.get("turn") != batch.turn:
            return None
        batch.statuses[status] += 1
        if sum(batch.statuses.values()) < batch.expected:
            return None
        self._batch = None
        n = batch.expected
        counts = ", ".join(f"{c} {s}" for s, c in batch.statuses.most_common())
        return Text(f"  turn {batch.turn}: {n} call{'s' if n != 1 else ''}: {counts} · "
                    f"{_seconds(time.monotonic() - batch.started)}", style="dim")

    # ------------------------------------------------------------------ the live region

    def live_region(self) -> RenderableType:
        """What is in progress: the model thinking (its text so far), running calls with their last lines."""
        now = time.monotonic()
        with self._state:
            thinking, streamed = self._thinking_since, self._streamed + self._stream.preview()
            running = [(r, self._outputs[c].tail(self.LIVE_LINES) if c in self._outputs else [])
                       for c, r in self._running.items()]
        parts: list[RenderableType] = []
        if thinking is not None:
            if streamed.strip():
                lines = streamed.strip().splitlines()[-self.STREAM_LINES:]
                parts.append(Text("\n".join(lines), style="italic", overflow="fold"))
            self._thinking.update(text=Text(f"thinking · {_seconds(now - thinking)}", style="dim"))
            parts.append(self._thinking)
        # Keep the region inside the screen when many calls run at once.
        per_call = max(0, min(self.LIVE_LINES, (self.console.height - 4) // max(1, len(running)) - 2))
        for r, lines in running:
            label = Text(r.tool, style="bold")
            if r.host:
                label.append(f" · {r.host}")
            if r.subject and r.tool == "ssh_exec":  # other tools' subjects repeat their name
                label.append(f" · {r.subject}", style="dim")
            label.append(f" · {_seconds(now - r.started)}", style="cyan")
            label.no_wrap, label.overflow = True, "ellipsis"
            r.spinner.update(text=label)
            parts.append(r.spinner)
            if r.progress:
                parts.append(self._progress_line(r.progress))
            for line in lines[-per_call:] if per_call else []:
                parts.append(Text("    " + line, style="dim", no_wrap=True, overflow="ellipsis"))
        if self.cancelling():
            parts.append(Text("cancelling: stopping the running commands (Ctrl-C again to stop at once)",
                              style="yellow", overflow="fold"))
        return Group(*parts)

    def _progress_line(self, data: dict) -> RenderableType:
        label = progress_label(data)
        numbers = progress_numbers(data)
        if numbers is None:
            return Text(f"    {label}", style="cyan", no_wrap=True, overflow="ellipsis")
        done, total = numbers
        grid = Table.grid(padding=(0, 1))
        grid.add_column(width=2)
        grid.add_column(ratio=1)
        grid.add_column(no_wrap=True, overflow="ellipsis", max_width=max(8, self.console.width // 2))
        grid.add_row("", ProgressBar(total=total, completed=done), Text(label, style="cyan"))
        return grid

    def _start_live(self) -> None:
        with self._printing:
            if self._live is None:
                # A fresh Live each time: a stopped one would move the cursor over lines printed since.
                self._live = Live(console=self.console, get_renderable=self.live_region, transient=True,
                                  refresh_per_second=self.REFRESH_PER_SECOND, redirect_stdout=False,
                                  redirect_stderr=False)
                self._live.start()

    def _stop_live(self) -> bool:
        with self._printing:
            live, self._live = self._live, None
            if live is not None:
                live.stop()
            return live is not None

    @contextlib.contextmanager
    def busy(self) -> Iterator[None]:
        """While the session works: the live region is on."""
        self._start_live()
        try:
            yield
        finally:
            self._stop_live()
            with self._state:
                self._thinking_since, self._streamed = None, ""
                self._stream = StreamRedactor(self.redactor)
                self._running.clear()
                self._outputs.clear()
                self._batch = None

    @contextlib.contextmanager
    def working(self, what: str, done: str) -> Iterator[None]:
        """Something slow before the session can start (a simulated host being built): `what` with a
        spinner and the time so far while it runs, then `done` with the time it took."""
        self.info(what)  # a line that stays: what is being done, and why it takes a while
        started = time.monotonic()
        spinner = Spinner("dots", style="cyan")

        def region() -> RenderableType:
            spinner.update(text=Text(f"{_seconds(time.monotonic() - started)} so far", style="dim"))
            return spinner

        live = Live(console=self.console, get_renderable=region, transient=True,
                    refresh_per_second=self.REFRESH_PER_SECOND, redirect_stdout=False, redirect_stderr=False)
        with self._printing:
            live.start()
        try:
            yield
        finally:
            with self._printing:
                live.stop()
        self.info(f"{done} ({_seconds(time.monotonic() - started)})")

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """While the operator is asked something: no live region redrawing over the prompt."""
        was_live = self._stop_live()
        try:
            yield
        finally:
            if was_live:
                self._start_live()

    # ------------------------------------------------------------------ chat output

    def info(self, text: str) -> None:
        with self._printing:
            self.console.print(Text(self.redactor.text(text), overflow="fold"))

    def warn(self, text: str) -> None:
        with self._printing:
            self.console.print(Text(self.redactor.text(text), style="yellow", overflow="fold"))

    def card(self, title: str, rows: list[tuple[str, str]], tone: str = "info") -> None:
        style = TONE_STYLE.get(tone, "white")
        title, rows = redacted_card(self.redactor, title, rows)
        grid = Table.grid(padding=(0, 1))
        grid.add_column(style="dim", no_wrap=True)
        grid.add_column(overflow="fold")
        for label, value in rows:
            grid.add_row(label, Text(value, style="bold" if label in ("command", "step") else ""))
        # The title inside the box: a narrow terminal folds it instead of cutting it off.
        body = Group(Text(title, style=f"bold {style}", overflow="fold"), grid)
        with self._printing:
            self.console.print(Panel(body, border_style=style))

    NARROW = 72  # below this many columns a table is shown as stacked entries

    def table(self, title: str, headers: list[str], rows: list[list[str]]) -> None:
        rows = [[self.redactor.text(str(c)) for c in row] for row in rows]
        if self.console.width < self.NARROW:
            # Columns squeezed to a few characters are unreadable: one entry per row, details below it.
            parts: list[RenderableType] = [Text(title, style="bold")]
            for row in rows:
                parts.append(Text(str(row[0]), style="bold", overflow="fold"))
                details = Text(overflow="fold")
                for i, (h, c) in enumerate(zip(headers[1:], row[1:])):
                    if i:
                        details.append("\n")
                    if len(headers) > 2:
                        details.append(f"{h}: ", style="dim")
                    details.append(str(c))
                parts.append(Padding(details, (0, 0, 0, 2)))
            renderable: RenderableType = Group(*parts)
        else:
            table = Table(title=title, title_justify="left", title_style="bold", show_edge=False,
                          header_style="dim")
            for i, h in enumerate(headers):
                table.add_column(h, overflow="fold", no_wrap=(i == 0))
            for row in rows:
                table.add_row(*(str(c) for c in row))
            renderable = table
        with self._printing:
            self.console.print(renderable)

    def read_line(self, prompt: str) -> str:
        """One line from the operator, with the prompt in colour; EOFError on Ctrl-D."""
        with self.console.capture() as captured:
            self.console.print(Text(self.redactor.text(prompt), style="bold cyan"), end="")
        styled = captured.get()
        if self.use_readline_markers:
            # GNU readline counts the prompt's width: colour codes must be marked as zero-width.
            styled = _ANSI.sub(lambda m: f"\001{m.group(1)}\002", styled)
        try:
            return input(styled)
        except (KeyboardInterrupt, EOFError):
            # Nothing ended the line: the cursor is still after the prompt (and what was typed, and a
            # "^C"). Whatever is drawn next must start on a line of its own, or a panel's top border
            # starts mid-line and wraps, which breaks every line of its box.
            self._end_line()
            raise

    def _end_line(self) -> None:
        with self._printing:
            self.console.file.write("\x1b[0m\n")  # attributes reset, and a fresh line
            self.console.file.flush()



def _rows_grid(rows: list[tuple[str, str]]) -> RenderableType:
    """A result's rows: labels dim in one column, values folded in the other."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(label, Text(value, overflow="fold"))
    return grid
