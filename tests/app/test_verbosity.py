"""--quiet and --verbose: the demo in quiet lines, folded output by default, or every line; the verdict in all."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from app.cli import build_parser
from app.ui.plain import PlainPrinter

ROOT = Path(__file__).resolve().parents[2]


def demo_lines(tmp_path: Path, *flags: str) -> list[str]:
    work = tmp_path / ("demo" + "".join(flags).replace("-", "_"))
    done = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--dir", str(work), *flags], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TERM": "dumb"})
    assert done.returncode == 0, done.stdout + done.stderr
    return (done.stdout + done.stderr).splitlines()


def test_the_demo_is_shortest_quiet_and_longest_verbose(tmp_path):
    quiet, default, verbose = (demo_lines(tmp_path, *f) for f in (["--quiet"], [], ["--verbose"]))
    assert len(quiet) < len(default) < len(verbose)
    for lines in (quiet, default, verbose):
        assert any(line.startswith("GOAL MET:") for line in lines)
    assert any("lines folded; whole output in" in line for line in default)
    assert not any("lines folded" in line for line in verbose)
    assert not any(line.startswith("    |") for line in quiet)  # no raw output at all


def output(call_id: str, text: str) -> dict:
    return {"type": "output", "call_id": call_id, "stream": "stdout", "text": text}


def bench_result(call_id: str) -> dict:
    return {"type": "tool_result", "seq": 5, "turn": 2, "call_id": call_id, "tool": "ssh_exec", "status": "ok",
            "duration_s": 1.0, "data": {"exit_code": 0, "stdout_artifact": "run.artifacts/00001-call_0-stdout.txt"}}


@pytest.mark.parametrize("verbosity, shown", [("normal", 3 + 1 + 5), ("verbose", 40), ("quiet", 0)])
def test_a_long_output_is_folded_by_default(verbosity, shown):
    out = io.StringIO()
    view = PlainPrinter(out=out, live=True, verbosity=verbosity)
    view(output("call_0", "".join(f"line {i}\n" for i in range(40))))
    view(bench_result("call_0"))
    raw = [line for line in out.getvalue().splitlines() if line.startswith("    |")]
    assert len(raw) == shown
    if verbosity == "normal":
        assert raw[0] == "    | line 0" and raw[-1] == "    | line 39"
        assert "… 32 lines folded; whole output in run.artifacts/00001-call_0-stdout.txt" in raw[3]


def test_the_flags_are_on_run_demo_and_chat_and_exclusive():
    parser = build_parser()
    assert parser.parse_args(["run", "g.yaml", "--quiet"]).verbosity == "quiet"
    assert parser.parse_args(["demo", "--verbose"]).verbosity == "verbose"
    assert parser.parse_args(["chat", "-q"]).verbosity == "quiet"
    with pytest.raises(SystemExit):
        parser.parse_args(["demo", "--quiet", "--verbose"])
