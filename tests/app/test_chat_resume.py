"""`agent resume` of a chat: the real command in a pseudo-terminal, the real `openai` SDK against a scripted
server on 127.0.0.1, a real simulated host. The conversation, the ledger and the host go on; an approval the
operator gave for the session carries over only when, shown it again, they say yes."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from test_chat import ROOT, WAIT_S, Terminal, chat_argv, chat_env

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply
from helpers import events

pytestmark = pytest.mark.timeout(240)

MARK = "mkdir -p /var/tmp/resume-mark"


def resume_argv(srv: FakeOpenAI, old, new) -> list[str]:
    return [sys.executable, "-m", "app.cli", "resume", str(old), "--transcript", str(new), "--base-url",
            srv.base_url, "--model", "test-model"]


def first_chat(tmp_path):
    """A chat on a sim: a backup, then a change approved for the session; left with Ctrl-D."""
    script = [Reply(calls=[("pip_freeze_backup", {"host": "sim"})]), Reply(text="Backed up."),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": MARK})]), Reply(text="Marked.")]
    with FakeOpenAI(script) as srv:
        term = Terminal(chat_argv(srv, tmp_path / "chat.jsonl", "sim"), chat_env(tmp_path), cols=100)
        try:
            term.expect("❯ ", timeout=WAIT_S * 4)  # the sim may be built first
            term.line("back up sim")
            term.expect("Backed up.")
            term.expect("❯ ")
            term.line("make the mark")
            term.expect("approve? [y/n/s]")
            term.line("s")
            term.expect("Marked.")
            term.expect("❯ ")
            term.type("\x04")
            assert term.wait() == 0
        finally:
            term.close()
    return tmp_path / "chat.jsonl"


def test_a_chat_goes_on_with_its_conversation_and_backups_and_carries_approvals_only_on_a_yes(tmp_path):
    old = first_chat(tmp_path)
    (backup_id,) = [r["data"]["backup_id"] for r in events(old, "tool_result") if r["tool"] == "pip_freeze_backup"]

    # Resumed with "no" to the approvals: the same step is asked again.
    again = [Reply(calls=[("ssh_exec", {"host": "sim", "command": MARK})]), Reply(text="Asked again.")]
    refused = tmp_path / "no.jsonl"
    with FakeOpenAI(again) as srv:
        term = Terminal(resume_argv(srv, old, refused), chat_env(tmp_path), cols=100)
        try:
            shown = term.expect("carry them over? [y/N]")
            assert "approval(s) for the session were given before it stopped" in shown and MARK in shown
            term.line("n")
            term.expect("not carried over: each will be asked again")
            term.expect("❯ ")
            term.line("mark it again")
            term.expect("approve? [y/n/s]")
            term.line("n")
            term.expect("Asked again.")
            term.expect("❯ ")
            term.type("\x04")
            assert term.wait() == 0
        finally:
            term.close()
        first = srv.requests[0]["messages"]
    # The model read the whole conversation so far, then where things stand, with the operator's request.
    said = [m.get("content") for m in first]
    assert "Backed up." in said and "Marked." in said
    note = first[-1]["content"]
    assert note.startswith("[This chat ended (done: the operator left) and goes on now.")
    assert f"Backups read back on their hosts and still intact: {backup_id} (sim)" in note
    assert note.endswith("mark it again")
    assert [e["answer"] for e in events(refused, "approval")] == ["no"]

    # Resumed with "yes": the same step runs without asking, as approved earlier for the session.
    carried = tmp_path / "yes.jsonl"
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "sim", "command": MARK})]), Reply(text="Done again.")]) as srv:
        term = Terminal(resume_argv(srv, old, carried), chat_env(tmp_path), cols=100)
        try:
            term.expect("carry them over? [y/N]")
            term.line("y")
            term.expect("carried over: each runs again without asking")
            term.expect("❯ ")
            term.line("mark it again")
            shown = term.expect("Done again.")
            assert "approve?" not in shown
            term.expect("❯ ")
            term.type("\x04")
            assert term.wait() == 0
        finally:
            term.close()
    (decision,) = [d for d in events(carried, "decision") if d["tool"] == "ssh_exec"]
    assert decision["verdict"] == "allow" and decision["approved_by"] == "operator (session)"
    (note_ev,) = [n for n in events(carried, "note") if n.get("kind") == "session_approvals"]
    assert note_ev["carried"] is True and note_ev["approvals"] == [["ssh_exec", "sim", MARK]]
    start = events(carried, "session_start")[0]
    assert start["command"] == "chat" and start["resumes"]["path"] == str(old)

    for path in (old, refused, carried):
        assert verify(path).ok, path
    # The resumed record replays on its own: its `resumed` event holds what it took from the old one,
    # the carried approvals too.
    replayed = subprocess.run([sys.executable, "-m", "app.cli", "replay", str(carried)], cwd=ROOT,
                              capture_output=True, text=True, env=chat_env(tmp_path), timeout=WAIT_S * 2)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    # `agent sessions` offers the resume of a chat however it ended (this one: the operator left).
    data = tmp_path / "data" / "upgrade-agent" / "transcripts"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copy(old, data / "chat-1.jsonl")
    listed = subprocess.run([sys.executable, "-m", "app.cli", "sessions", "--json"], cwd=ROOT, capture_output=True,
                            text=True, env=chat_env(tmp_path), timeout=WAIT_S)
    assert listed.returncode == 0, listed.stderr
    (entry,) = [s for s in json.loads(listed.stdout) if s["path"].endswith("chat-1.jsonl")]
    assert entry["command"] == "chat" and entry["resume"] == f"agent resume {data / 'chat-1.jsonl'}"
