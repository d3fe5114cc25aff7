"""`agent chat` ends by reading what the changed hosts show: the real command through a pipe, a scripted
OpenAI-compatible server on 127.0.0.1 and a simulated host."""

from __future__ import annotations

import subprocess

import pytest

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply
from helpers import events
from test_chat import ROOT, WAIT_S, chat_argv, chat_env

pytestmark = pytest.mark.timeout(180)


def test_leaving_a_chat_records_the_final_state_of_the_host_an_approved_change_touched(tmp_path):
    change = "ln -sfn /opt /usr/local/cuda"
    script = [Reply(calls=[("pip_freeze_backup", {"host": "sim"})]),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": change})]),
              Reply(text="The cuda link now points at /opt.")]
    path = tmp_path / "chat.jsonl"
    with FakeOpenAI(script) as srv:
        proc = subprocess.run(chat_argv(srv, path, "sim"), env=chat_env(tmp_path), cwd=ROOT,
                              input="point the cuda link at /opt\ny\n", capture_output=True, text=True,
                              timeout=WAIT_S * 4)
    assert proc.returncode == 0, proc.stderr
    assert [d["rule"] for d in events(path, "decision") if d["subject"] == change] == ["approved"]
    states = events(path, "final_state")
    assert [s["host"] for s in states] == ["sim"], proc.stdout
    assert states[0]["inspect"]["cuda_symlink"] == "/opt"
    assert "reading the final state of the changed hosts" in proc.stdout + proc.stderr
    report = verify(path)
    assert report.ok and report.status == "done"
