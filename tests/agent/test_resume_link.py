"""A resumed transcript links to the part it resumes by the hash of that part's last line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from agent.record.transcript import TranscriptWriter, linked_part, read_part

ROOT = Path(__file__).resolve().parents[2]


def write(path: Path, **start) -> None:
    w = TranscriptWriter(path)
    w.write("session_start", **start)
    w.write("note", kind="user", text="go")
    w.write("session_end", status="interrupted", reason="stopped by SIGTERM")


def test_the_link_holds_until_the_earlier_part_is_changed_and_show_verify_says_so(tmp_path):
    first, second = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    write(first, command="run")
    write(second, command="run", resumes=read_part(first).link())
    start = json.loads(second.read_text().splitlines()[0])
    assert linked_part(second, start) == (first.absolute(), None)
    show = subprocess.run([sys.executable, "-m", "app.cli", "show", "--verify", str(second)], cwd=ROOT,
                          capture_output=True, text=True)
    assert show.returncode == 0 and "links to" in show.stdout and "intact" in show.stdout

    first.write_text(first.read_text().replace('"go"', '"gone"'))
    _, problem = linked_part(second, start)
    assert problem is not None and "changed after this part began" in problem
    show = subprocess.run([sys.executable, "-m", "app.cli", "show", "--verify", str(second)], cwd=ROOT,
                          capture_output=True, text=True)
    assert show.returncode == 1 and "PROBLEM" in show.stdout


def test_a_last_line_cut_short_by_a_kill_is_left_out_when_read_back(tmp_path):
    path = tmp_path / "t.jsonl"
    write(path, command="run")
    whole = path.read_text()
    path.write_text(whole + '{"v":1,"seq":3,"type":"tool_res')
    part = read_part(path)
    assert part.cut_line and len(part.events) == 3 and part.last_seq == 2
