"""A failed step is told by its cause: the last lines of a long error that say something, not its first
characters (the cause of a pip or nvcc failure is at the end of forty lines of progress)."""

from __future__ import annotations

import io

from rich.console import Console

from agent.report.document import error_cause
from app.ui.plain import PlainPrinter
from app.ui.terminal import TerminalView

CAUSE = "RuntimeError: The detected CUDA version (12.8) mismatches the version that was used to compile PyTorch (13.0)."

PIP_ERROR = "\n".join(
    ["error: pip install failed: exit 1 after 31.2s", "Looking in indexes: file:///srv/pypi/simple-cu130"]
    + [f"  Collecting package-{i}==1.{i}.0 (from -r requirements.txt (line {i}))" for i in range(30)]
    + ["  Building wheel for flash-attn (setup.py): started",
       "  error: subprocess-exited-with-error",
       "  × python setup.py bdist_wheel did not run successfully.",
       "  │ exit code: 1",
       "  ╰─> [3 lines of output]",
       "      building 'flash_attn_cuda' extension",
       f"      {CAUSE}",
       "      [end of output]",
       "",
       "  note: This error originates from a subprocess, and is likely not a problem with pip.",
       "ERROR: Failed building wheel for flash-attn",
       "exit status 1",
       ""])


def failed_result(error: str) -> dict:
    return {"type": "tool_result", "seq": 9, "turn": 4, "call_id": "call_0", "tool": "pip_install",
            "status": "error", "error": error, "duration_s": 31.2, "data": None}


def test_the_cause_at_the_end_of_a_long_error_is_shown():
    assert len(PIP_ERROR.splitlines()) >= 40
    cause = error_cause(PIP_ERROR, 400)
    assert CAUSE in cause
    assert "exit status 1" not in cause and "originates from a subprocess" not in cause
    assert len(cause) <= 400


def test_a_narrow_budget_keeps_the_last_line_and_its_end():
    cause = error_cause(PIP_ERROR, 60)
    assert len(cause) <= 60
    assert cause.endswith("compile PyTorch (13.0).")


def test_an_error_of_boilerplate_only_still_says_something():
    assert error_cause("\n\nexit status 1\n", 100) == "exit status 1"


def test_the_plain_result_line_names_the_cause():
    out = io.StringIO()
    PlainPrinter(out=out, verbosity="normal")(failed_result(PIP_ERROR))
    line = out.getvalue()
    assert "pip_install error" in line
    assert "compile PyTorch (13.0)" in line


def test_a_failed_command_shows_the_end_of_its_stderr():
    stderr = "\n".join([f"nvcc: compiling kernel_{i}.cu" for i in range(40)]
                       + ["nvcc fatal   : Unsupported gpu architecture 'compute_120'", ""])
    ev = {"type": "tool_result", "seq": 3, "turn": 2, "call_id": "call_1", "tool": "ssh_exec", "status": "ok",
          "duration_s": 2.0, "data": {"exit_code": 1, "stdout": "", "stderr": stderr}, "content": "exit 1"}
    out = io.StringIO()
    PlainPrinter(out=out, verbosity="normal")(ev)
    assert "exit 1" in out.getvalue() and "Unsupported gpu architecture 'compute_120'" in out.getvalue()


def test_the_terminal_shows_the_cause_not_the_whole_error():
    out = io.StringIO()
    view = TerminalView(Console(file=out, width=100, force_terminal=False, color_system=None), verbosity="normal")
    view(failed_result(PIP_ERROR))
    shown = " ".join(out.getvalue().split())  # the terminal folds a long line
    assert "compile PyTorch (13.0)" in shown
    assert "package-3==" not in shown  # the progress of the first lines is not what is shown
