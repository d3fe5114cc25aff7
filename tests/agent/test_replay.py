"""Replay: the same calls and the same decisions, or a diff that names the step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.record.replay import replay
from agent.record.transcript import TranscriptWriter, iter_events, line_hash
from agent.safety.policy import ApprovalAnswer, Authorization, SafetyPolicy
from tools.base import Registry

from fake_tools import all_fake_tools

REGISTRY = Registry(all_fake_tools())


def record(path: Path, turns, **policy) -> None:
    gate = SafetyPolicy(scope={"h1", "h2"}, **policy)
    session = Session(model=ScriptedModel(turns), registry=REGISTRY, gate=gate, transcript=TranscriptWriter(path),
                      system_prompt="sys", budget=Budget(turns=20))
    run_session(session, "upgrade h1")


SCRIPT = [
    turn(calls=[("echo", {"text": "nvidia-smi says 590.48.01", "host": "h1"}), ("sleep", {"host": "h2", "seconds": 0})]),
    turn(calls=[("change", {"host": "h1", "what": "pip install torch"})]),  # refused: no backup yet
    turn(calls=[("fake_backup", {"host": "h1"})]),
    turn(calls=[("change", {"host": "h1", "what": "pip install torch"}), ("nope", "{}")]),
    turn("upgraded"),
]


def test_replay_of_a_recorded_session_is_identical(tmp_path):
    path = tmp_path / "t.jsonl"
    record(path, SCRIPT, authorizations=[Authorization(tool="change", args={"what": "pip install torch"})])
    decisions = [e["rule"] for e in iter_events(path) if e["type"] == "decision"]
    assert decisions == ["read-only", "read-only", "no-backup", "backup", "authorized"]
    report = replay(path, REGISTRY)
    assert report.ok, report.message
    assert report.turns == 5 and report.compared == 6 + 5  # tool calls + decisions


def test_replay_reuses_recorded_operator_answers(tmp_path):
    class Yes:
        def ask(self, request):
            return ApprovalAnswer.YES_ONCE

    path = tmp_path / "t.jsonl"
    gate_approver = Yes()
    gate = SafetyPolicy(scope={"h1", "h2"}, mode="interactive", approver=gate_approver)
    session = Session(model=ScriptedModel(SCRIPT), registry=REGISTRY, gate=gate, transcript=TranscriptWriter(path))
    inner = gate.approver

    class Recording:
        def ask(self, request):
            answer = inner.ask(request)
            session.emit("approval", host=request.host, subject=request.subject, answer=answer.value, by="operator")
            return answer

    gate.approver = Recording()
    run_session(session, "go")
    assert [e["answer"] for e in iter_events(path) if e["type"] == "approval"] == ["yes"]
    report = replay(path, REGISTRY)
    assert report.ok, report.message


def _rewrite(path: Path, out: Path, edit) -> None:
    """Write a copy with `edit(event)` applied, re-chaining the hashes and dropping the seal it cannot
    forge (a careful forger: the record then reads as unsealed, and replay must still catch the edit)."""
    prev = ""
    with open(out, "w") as f:
        for ev in iter_events(path):
            ev = edit(ev) or ev
            ev.pop("mac", None)
            ev.pop("seal", None)
            ev["prev"] = prev
            line = json.dumps(ev, separators=(",", ":"))
            prev = line_hash(line.encode())
            f.write(line + "\n")


def test_an_edited_result_fails_with_a_diff_that_names_the_step(tmp_path):
    path = tmp_path / "t.jsonl"
    record(path, SCRIPT, authorizations=[Authorization(tool="change", args={"what": "*"})])

    # 1. Edited in place: the hash chain breaks at that line, and the step is named.
    lines = path.read_text().splitlines()
    i = next(n for n, ln in enumerate(lines) if '"tool_result"' in ln and '"turn":1' in ln)
    lines[i] = lines[i].replace("590.48.01", "999.99.99")
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    report = replay(edited, REGISTRY)
    assert not report.ok
    assert f"line {i + 1} was changed" in report.message and "tool_result of turn 1, call 1" in report.message

    # 2. Edited and re-chained: the conversation sent to the model no longer matches the record.
    def edit(ev):
        if ev["type"] == "tool_result" and ev["turn"] == 1 and ev["index"] == 0:
            ev["content"] = ev["content"].replace("590.48.01", "999.99.99")

    forged = tmp_path / "forged.jsonl"
    _rewrite(path, forged, edit)
    report = replay(forged, REGISTRY)
    assert not report.ok
    assert "turn 2, model request" in report.message and "before turn 2 was changed" in report.message


def test_a_changed_decision_is_reported_with_recorded_and_now(tmp_path):
    path = tmp_path / "t.jsonl"
    record(path, SCRIPT, authorizations=[Authorization(tool="change", args={"what": "*"})])

    def edit(ev):
        if ev["type"] == "session_start":
            ev["policy"]["authorizations"] = []  # the same calls under a stricter policy
    stricter = tmp_path / "stricter.jsonl"
    _rewrite(path, stricter, edit)
    report = replay(stricter, REGISTRY)
    assert not report.ok
    # The first difference: the refusal before the backup now has a second reason (no rule covers it).
    assert report.message.startswith("replay differs at turn 2, call 1 (change): decision rule")
    assert "recorded: no-backup" in report.message and "now:      not-authorized" in report.message


def test_a_record_that_goes_on_after_the_replay_stops_is_a_difference(tmp_path):
    path = tmp_path / "t.jsonl"
    record(path, SCRIPT, authorizations=[Authorization(tool="change", args={"what": "*"})])

    def edit(ev):
        if ev["type"] == "session_start":
            ev["budget"]["max_turns"] = 2
    short = tmp_path / "short.jsonl"
    _rewrite(path, short, edit)
    report = replay(short, REGISTRY)
    assert not report.ok and "the record goes on, the replay stopped" in report.message


def test_replay_of_an_interrupted_session_stops_where_the_record_ends(tmp_path, sigint_raises):
    import os
    import signal
    import threading

    path = tmp_path / "t.jsonl"
    gate = SafetyPolicy(scope={"h1", "h2"})
    model = ScriptedModel([turn(calls=[("echo", {"text": "x"})]),
                           turn(calls=[("sleep", {"host": "h1", "seconds": 20})]), turn("never")])
    session = Session(model=model, registry=REGISTRY, gate=gate, transcript=TranscriptWriter(path))
    threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT)).start()
    assert run_session(session, "go").status == "interrupted"
    report = replay(path, REGISTRY)
    assert report.ok, report.message
    assert report.recorded_status == "interrupted"


@pytest.mark.parametrize("n_turns", [300])
def test_replay_memory_is_bounded_by_the_message_list(tmp_path, n_turns):
    path = tmp_path / "long.jsonl"
    script = [turn(calls=[("echo", {"text": f"step {i}"})]) for i in range(n_turns)] + [turn("end")]
    gate = SafetyPolicy(scope={"h1"})
    session = Session(model=ScriptedModel(script), registry=REGISTRY, gate=gate, transcript=TranscriptWriter(path),
                      budget=Budget(turns=n_turns + 5))
    run_session(session, "go")
    report = replay(path, REGISTRY)
    assert report.ok and report.turns == n_turns + 1


def test_operator_changes_mid_session_are_replayed(tmp_path):
    """/plan and /host add in chat change later decisions; replay applies them where they happened."""
    path = tmp_path / "chat.jsonl"
    gate = SafetyPolicy(scope={"h1"}, authorizations=[Authorization(tool="change", args={"what": "*"})])
    model = ScriptedModel([turn(calls=[("fake_backup", {"host": "h1"})]), turn("backed up"),
                           turn(calls=[("change", {"host": "h1", "what": "pip install x"}),
                                       ("echo", {"text": "hi", "host": "h2"})]), turn("planned")])
    session = Session(model=model, registry=REGISTRY, gate=gate, transcript=TranscriptWriter(path))
    session.send("back up h1")
    gate.plan = True
    session.emit("note", kind="plan", plan=True, by="operator")
    gate.scope.add("h2")
    session.emit("note", kind="host_added", host="h2", transport="ssh", target=None, by="operator")
    session.send("plan the install and look at h2")
    session.close("done")
    rules = [e["rule"] for e in iter_events(path) if e["type"] == "decision"]
    assert rules == ["backup", "plan", "read-only"]
    report = replay(path, REGISTRY)
    assert report.ok, report.message


def test_replay_goes_on_after_an_interrupted_request(tmp_path):
    """A chat whose first request was interrupted: what came after it is replayed and compared too."""
    path = tmp_path / "t.jsonl"

    class InterruptFirst:
        name = "m"

        def __init__(self):
            self.n = 0

        def complete(self, messages, tools, on_text=None):
            self.n += 1
            if self.n == 1:
                raise KeyboardInterrupt
            return [turn(calls=[("echo", {"text": "x"})]), turn("done")][self.n - 2]

    session = Session(model=InterruptFirst(), registry=REGISTRY, gate=SafetyPolicy(scope={"h1"}),
                      transcript=TranscriptWriter(path))
    with pytest.raises(KeyboardInterrupt):
        session.send("first")
    session.send("second")
    session.close("done")
    assert replay(path, REGISTRY).ok
    # The replay really compared the second request: without `echo` it differs.
    from fake_tools import Sleep

    report = replay(path, Registry([Sleep()]))
    assert not report.ok and "turn 2, call 1 (echo)" in report.message
