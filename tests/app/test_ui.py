"""The views fed with real event sequences: recorded from a session of the real loop, gate and
transcript, with a scripted model and small test tools."""

from __future__ import annotations

import io
import re
import threading
import time

import pyte
import pytest
from rich.cells import cell_len
from rich.console import Console

from agent.budget import Budget
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter
from agent.safety.policy import ApprovalAnswer, ApprovalRequest, SafetyPolicy
from app.ui import OutputTail, PlainPrinter, PlainView, TerminalView, approval_rows, make_view
from tools.base import BackupRecord, Registry, Risk, RiskClass

from fake_tools import all_fake_tools
from helpers import flat

pytestmark = pytest.mark.timeout(60)

FINAL = "## Checked\n\nThe host is **fine**:\n\n- echo worked\n- one change was approved"


class YesApprover:
    def __init__(self):
        self.asked: list[ApprovalRequest] = []

    def ask(self, request: ApprovalRequest) -> ApprovalAnswer:
        self.asked.append(request)
        return ApprovalAnswer.YES_ONCE


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[dict]:
    """Every event of a two-request session, live ones included, in the order listeners saw them."""
    seen: list[dict] = []
    model = ScriptedModel([
        # A read-only call with output, a backup, a change refused for lack of one, a malformed call.
        turn("First a look and a backup.", calls=[("echo", {"text": "hello from h1\nsecond line", "host": "h1"}),
                                                  ("fake_backup", {"host": "h1"}),
                                                  ("change", {"host": "h1", "what": "apt-get install foo"}),
                                                  ("echo", {"nonsense": 1})]),
        turn(calls=[("change", {"host": "h1", "what": "apt-get install foo"})]),  # approved by the operator
        turn(FINAL),
        turn(calls=[("change", {"host": "h1", "what": "apt-get remove bar"})]),  # in a dry run
        turn("Nothing changed."),
    ])
    approver = YesApprover()
    gate = SafetyPolicy(scope={"h1"}, mode="interactive", approver=approver)
    path = tmp_path_factory.mktemp("ui") / "t.jsonl"
    session = Session(model=model, registry=Registry(all_fake_tools()), gate=gate, transcript=TranscriptWriter(path),
                      system_prompt="test", budget=Budget(turns=10), listeners=[seen.append])
    session.send("check h1")
    gate.plan = True
    session.send("now remove bar")
    session.close("done", "test over")
    assert len(approver.asked) == 1
    return seen


def narrow_console(width: int = 40) -> Console:
    return Console(width=width, record=True, force_terminal=True, file=io.StringIO(), color_system="truecolor")


def feed(view, events: list[dict]) -> None:
    for ev in events:
        view(ev)


def test_terminal_view_in_40_columns_shows_every_call_with_its_class_and_verdict(recorded):
    # The printed log alone: the live region is checked through a terminal below, because a
    # recording console keeps its transient drawings as if they were printed lines.
    console = narrow_console()
    feed(TerminalView(console), recorded)
    raw = console.file.getvalue()
    text = console.export_text()
    assert "\x1b[" in raw  # styled for a terminal
    too_wide = [line for line in text.splitlines() if cell_len(line) > 40]
    assert not too_wide, too_wide
    screen = flat(text)
    for shown in ("echo · h1", "read-only · runs", "hello from h1", "second line",  # read-only call + output
                  "fake_backup · h1", "runs (a backup)", "backup bk-h1 of h1 verified",
                  "refused: no-backup", "no verified backup of h1",  # a change before the backup
                  "echo · malformed call", "nonsense",
                  "turn 1: 4 calls",
                  "mutating · approved by operator",  # the approved change
                  "would ask (dry run)", "apt-get remove bar",  # the dry run: an interactive session asks
                  "session done"):
        assert flat(shown) in screen, f"{shown!r} missing:\n{text}"


def terminal_screen(raw: str, width: int, height: int) -> list[str]:
    """What a VT100 terminal shows after `raw`: cursor moves and erasures applied."""
    screen = pyte.Screen(width, height)
    screen.set_mode(pyte.modes.LNM)  # a tty turns \n into \r\n
    pyte.Stream(screen).feed(raw)
    return [line.rstrip() for line in screen.display]


def without_times(lines: list[str]) -> list[str]:
    return [re.sub(r"\d+\.\ds", "T", line).rstrip() for line in lines if line.strip()]


def test_the_live_region_drawn_between_prints_leaves_only_the_log_on_screen(recorded):
    log_console = narrow_console()
    feed(TerminalView(log_console), recorded)
    log = log_console.export_text().splitlines()
    height = len(log) + 20  # tall enough that nothing scrolls away
    console = Console(width=40, height=height, force_terminal=True, file=io.StringIO(), color_system="truecolor")
    view = TerminalView(console)
    with view.busy():
        for ev in recorded:  # the refresh thread's draw, forced after every event
            view(ev)
            view._live.refresh()
    drawn = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", console.file.getvalue())
    assert "thinking · " in drawn and re.search(r"change · h1 · \d+\.\ds", drawn)  # the live region was drawn
    shown = terminal_screen(console.file.getvalue(), 40, height)
    assert without_times(shown) == without_times(log)


def test_the_final_answer_is_rendered_as_markdown():
    console = narrow_console()
    TerminalView(console)({"type": "model_response", "turn": 3, "text": FINAL, "tool_calls": []})
    text = console.export_text()
    assert "Checked" in text and "• echo worked" in text
    assert "##" not in text and "**" not in text and "- echo" not in text


def test_plain_view_and_printer_write_no_escape_codes(recorded):
    for view in (PlainView(out=io.StringIO()), PlainPrinter(out=io.StringIO(), live=True)):
        feed(view, recorded)
        out = view.out.getvalue()
        assert "\x1b" not in out
        assert "+ echo on h1: echo hello from h1 second line [read-only; allow: read-only]" in out
        assert "    | hello from h1\n    | second line\n" in out
        assert "x change on h1: apt-get install foo [mutating; deny: no-backup]" in out
        assert "+ change on h1: apt-get install foo [mutating; allow: approved, by operator]" in out
        assert "~ change on h1: apt-get remove bar [mutating; dry run: would ask]" in out, out


def test_plain_view_prints_the_final_answer_whole():
    view = PlainView(out=io.StringIO())
    view({"type": "model_response", "turn": 1, "text": FINAL, "tool_calls": []})
    assert view.out.getvalue() == f"model: {FINAL}\n"


def test_live_region_shows_elapsed_time_progress_and_the_last_lines_only():
    console = narrow_console(60)
    view = TerminalView(console)
    view({"type": "decision", "call_id": "c1", "tool": "ssh_exec", "host": "gpu1", "subject": "long-job --flag",
          "verdict": "allow", "rule": "read-only", "risk": "read-only"})
    view({"type": "tool_start", "call_id": "c1", "tool": "ssh_exec", "host": "gpu1"})
    for i in range(40):
        view({"type": "output", "call_id": "c1", "tool": "ssh_exec", "stream": "stdout", "text": f"step {i}\n"})
    view({"type": "progress", "call_id": "c1", "tool": "ssh_exec", "run": 2, "of": 5, "value": 89.5})
    console.print(view.live_region())
    region = console.export_text()
    assert "ssh_exec · gpu1 · long-job --flag" in region
    assert re.search(r"· \d+\.\ds", region)  # elapsed time
    assert "run 2/5 (89.5)" in region and "━" in region  # a progress bar
    shown = re.findall(r"step (\d+)", region)
    assert shown == [str(i) for i in range(40 - TerminalView.LIVE_LINES, 40)]


def test_approval_card_folds_into_a_narrow_terminal():
    console = narrow_console()
    view = TerminalView(console)
    command = "echo aGVsbG8K | base64 -d | bash && pip install --index-url https://download.pytorch.org/whl/cu130 torch"
    backup = BackupRecord(backup_id="gpu1-20250101-000000-abcd", host="gpu1", kind="pip-freeze", target="python3",
                          created_at=time.time(), remote_dir="/var/tmp/upgrade-agent/backups/x", verified=True,
                          package_count=212)
    risk = Risk(cls=RiskClass.DESTRUCTIVE, rule="decoded", reason="runs decoded text", decoded="echo hello")
    view.card("approval needed", approval_rows(ApprovalRequest("gpu1", "ssh_exec", command, risk, backup)), "danger")
    text = console.export_text()
    assert all(cell_len(line) <= 40 for line in text.splitlines())
    for shown in ("approval needed", "gpu1", command, "decoded", "echo hello", "destructive: runs decoded text",
                  "gpu1-20250101-000000-abcd", "212 packages"):
        assert flat(shown) in flat(text), shown


def test_tables_stack_in_a_narrow_terminal_and_stay_tables_in_a_wide_one():
    rows = [["gpu1", "ssh", "root@10.0.0.5:2222", "gpu1-20250101-000000-abcd"]]
    headers = ["host", "transport", "target", "latest backup"]
    narrow, wide = narrow_console(), narrow_console(120)
    TerminalView(narrow).table("hosts", headers, rows)
    TerminalView(wide).table("hosts", headers, rows)
    assert "target: root@10.0.0.5:2222" in narrow.export_text()
    assert re.search(r"gpu1\s+│?\s*ssh\s+│?\s*root@10\.0\.0\.5:2222", wide.export_text())


def test_output_tail_keeps_whole_lines_and_what_a_carriage_return_leaves():
    tail = OutputTail(keep=3)
    for chunk in ("first li", "ne\nsecond\n", "downloading 10%\rdownloading 50%\rdownloading 100%\n", "par"):
        tail.add(chunk)
    assert tail.tail(10) == ["first line", "second", "downloading 100%", "par"]
    tail.add("tial\nlast\n")
    assert tail.tail(10) == ["downloading 100%", "partial", "last"] and tail.count == 5


def test_terminal_view_takes_output_from_many_threads_at_once():
    console = narrow_console(80)
    view = TerminalView(console)
    view.REFRESH_PER_SECOND = 50  # redraw often, so drawing and emitting really overlap
    threads_n, lines_n = 16, 400
    errors: list[BaseException] = []
    start = threading.Barrier(threads_n)

    def emit_lines(i: int) -> None:
        try:
            start.wait()
            for j in range(lines_n):
                view({"type": "output", "call_id": f"c{i}", "tool": "ssh_exec", "stream": "stdout",
                      "text": f"t{i} line {j}\n"})
                if j % 50 == 0:
                    view({"type": "progress", "call_id": f"c{i}", "tool": "ssh_exec", "run": j, "of": lines_n})
        except BaseException as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    with view.busy():
        for i in range(threads_n):
            view({"type": "tool_start", "call_id": f"c{i}", "tool": "ssh_exec", "host": f"h{i}"})
        workers = [threading.Thread(target=emit_lines, args=(i,)) for i in range(threads_n)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=30)
        assert all(len(tail.lines) <= TerminalView.TAIL_LINES for tail in view._outputs.values())
        with view.paused():  # the live region's redraws are recorded too: keep them out of what is checked
            console.export_text(clear=True)
            for i in range(threads_n):
                view({"type": "tool_result", "call_id": f"c{i}", "tool": "ssh_exec", "status": "ok", "turn": 1,
                      "duration_s": 0.1, "data": {"exit_code": 0}})
            text = console.export_text()
        assert not view._outputs and not view._running
    assert not errors, errors
    from app.ui.common import FOLD_HEAD, FOLD_TAIL

    folded = lines_n - FOLD_HEAD - FOLD_TAIL
    expected = list(range(FOLD_HEAD)) + list(range(lines_n - FOLD_TAIL, lines_n))
    for i in range(threads_n):
        # Each finished call leaves its first and last lines on screen, in order, and says how many were folded.
        kept = [int(n) for n in re.findall(rf"\bt{i} line (\d+)\b", text)]
        assert kept == expected, (i, kept)
    assert text.count(f"… {folded} lines folded; whole output in the transcript") == threads_n


def test_plain_printer_never_interleaves_lines_from_many_threads():
    out = io.StringIO()
    printer = PlainPrinter(out=out, live=True, verbosity="verbose")
    threads_n, lines_n = 16, 200

    def emit_lines(i: int) -> None:
        for j in range(lines_n):
            line = f"t{i}-{j}"
            # Each line in two chunks, as output arrives from a host.
            printer({"type": "output", "call_id": f"c{i}", "text": line[:2]})
            printer({"type": "output", "call_id": f"c{i}", "text": line[2:] + "\n"})

    workers = [threading.Thread(target=emit_lines, args=(i,)) for i in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=30)
    lines = out.getvalue().splitlines()
    assert len(lines) == threads_n * lines_n
    assert all(re.fullmatch(r"    \| t\d+-\d+", line) for line in lines), [
        line for line in lines if not re.fullmatch(r"    \| t\d+-\d+", line)][:5]
    for i in range(threads_n):
        mine = [line for line in lines if line.startswith(f"    | t{i}-")]
        assert mine == [f"    | t{i}-{j}" for j in range(lines_n)]  # each call's lines in order


class _FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("term, plain, expected", [
    ("xterm-256color", False, TerminalView),
    ("dumb", False, PlainView),
    ("xterm-256color", True, PlainView),
])
def test_make_view_falls_back_to_plain_lines(monkeypatch, term, plain, expected):
    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR", "JUPYTER_COLUMNS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TERM", term)
    assert type(make_view(plain=plain, out=_FakeTTY())) is expected
    assert type(make_view(out=io.StringIO())) is PlainView  # not a terminal


def test_the_end_of_a_run_shows_each_check_the_verdict_with_its_exit_code_and_every_call_counted():
    from app.ui import PlainPrinter

    printer = PlainPrinter(live=False)
    check = printer.format({"type": "check", "index": 0, "kind": "toolkit", "ok": False,
                            "detail": "sim: /usr/local/cuda-13.0/bin/nvcc reports nothing"})
    verdict = printer.format({"type": "goal_result", "met": False, "exit_code": 3,
                              "reason": "a needed step was refused"})
    end = printer.format({"type": "session_end", "status": "done", "turns": 7, "calls": 15, "tool_calls": 11,
                          "refused": 3, "malformed": 1, "skipped": 0, "failed": 0, "duration_s": 12.5,
                          "reason": "final answer"})
    assert check == "  ✗ check 0: toolkit: sim: /usr/local/cuda-13.0/bin/nvcc reports nothing"
    assert verdict == ("GOAL NOT MET: a needed step was refused (exit code 3: a needed step was refused by the "
                       "safety layer)")
    assert end == "session done: 7 turns, 15 calls (11 run, 3 refused, 1 malformed), 12.5s (final answer)"


HOSTILE = ("pip said: \x1b[2K\x1b[1A\x1b[32mGOAL MET - exit code 0\x1b[0m\x1b]0;pwned\x07 and \x9b2J and a bell\x07; "
           "\x1b[2J\x1b[H")


def test_a_link_in_the_models_answer_shows_where_it_leads():
    """Markdown links became OSC 8 hyperlinks: the text said one address and the click went to another."""
    console = narrow_console(100)
    feed(TerminalView(console), [{"type": "model_response", "turn": 1, "tool_calls": [],
                                  "text": "Get it from [developer.download.nvidia.com](http://evil.example/cuda.run)."}])
    raw = console.file.getvalue()
    assert "\x1b]8;" not in raw
    assert "developer.download.nvidia.com (http://evil.example/cuda.run)" in "\n".join(terminal_screen(raw, 100, 40))


def test_text_that_reads_otherwise_than_it_is_shows_its_hidden_characters(recorded):
    """A right-to-left override makes `rm -rf /; echo ok` read as something else; a zero-width space makes two
    different words look the same. Written out, on the terminal and in plain lines."""
    trojan = "echo safe \u202e/ fr- mr\u202c; pip install tor\u200bch"
    hostile = [{"type": "model_response", "turn": 9, "text": trojan, "tool_calls": []}]
    console = narrow_console(100)
    feed(TerminalView(console), recorded + hostile)
    raw = console.file.getvalue()
    assert "\u202e" not in raw and "\u200b" not in raw
    assert "echo safe <U+202E>/ fr- mr<U+202C>; pip install tor<U+200B>ch" in "\n".join(terminal_screen(raw, 100, 400))
    printer = PlainPrinter(out=io.StringIO(), full_text=True)
    feed(printer, hostile)
    assert "<U+202E>/ fr- mr<U+202C>" in printer.out.getvalue()


def test_no_control_sequence_from_a_model_or_a_host_reaches_a_screen(recorded):
    """A model's text and a command's output can hold escape sequences: erase a line, move up, print a green
    verdict, set the window's title. On the terminal and in plain lines they are shown written out (`^[`),
    and the view's own styles stay styles."""
    hostile = [{"type": "model_response", "turn": 9, "text": HOSTILE, "tool_calls": []},
               {"type": "note", "kind": "model_server", "text": HOSTILE}]
    console = narrow_console(100)
    feed(TerminalView(console), recorded + hostile)
    raw = console.file.getvalue()
    for sequence in ("\x1b[2K", "\x1b[1A", "\x1b]0;", "\x07", "\x9b", "\x1b[2J", "\x1b[H"):
        assert sequence not in raw, repr(sequence)
    assert "\x1b[" in raw  # the view's own colours are still there
    screen = "\n".join(terminal_screen(raw, 100, 400))
    assert "^[[32mGOAL MET - exit code 0" in screen and "^[]0;pwned" in screen and "M-^[2J" in screen
    for printer in (PlainPrinter(out=io.StringIO(), full_text=True), PlainView(out=io.StringIO())):
        feed(printer, hostile)
        out = printer.out.getvalue()
        assert "\x1b" not in out and "\x07" not in out and "\x9b" not in out, repr(out)
        assert "^[[2K^[[1A^[[32mGOAL MET" in out
