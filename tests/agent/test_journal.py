"""The step journal: every change writes its intent before it runs, and its outcome when it ends."""

from __future__ import annotations

import os
import signal
import threading

from agent.budget import Budget
from agent.journal import args_digest, intents, unknown_outcomes
from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter, iter_events
from agent.safety.policy import Authorization, SafetyPolicy
from tools.base import Registry

from fake_tools import all_fake_tools
from helpers import events


def session_for(path, model) -> Session:
    gate = SafetyPolicy(scope={"h1"}, mode="scripted",
                        authorizations=[Authorization(tool="change", host="h1", args={"what": "apply *"}),
                                        Authorization(tool="sleep", host="h1")])
    return Session(model=model, registry=Registry(all_fake_tools()), gate=gate, transcript=TranscriptWriter(path),
                   system_prompt="test", budget=Budget(turns=10))


def test_a_change_writes_its_intent_before_it_runs_and_reads_and_refusals_write_none(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([
        turn(calls=[("change", {"host": "h1", "what": "apply before any backup"})]),  # refused: no backup
        turn(calls=[("fake_backup", {"host": "h1"}), ("echo", {"host": "h1", "text": "look"})]),
        turn(calls=[("change", {"host": "h1", "what": "apply the upgrade"})]),
        turn("done"),
    ])
    assert run_session(session_for(path, model), "go").status == "done"
    evs = list(iter_events(path))
    found = [e for e in evs if e["type"] == "intent"]
    assert [(e["tool"], e["host"]) for e in found] == [("fake_backup", "h1"), ("change", "h1")]
    change = found[1]
    assert change["args_digest"] == args_digest("change", {"host": "h1", "what": "apply the upgrade"})
    assert change["risk"] == "mutating" and change["subject"] == "apply the upgrade"
    order = [e["type"] for e in evs if e.get("call_id") == change["call_id"] and e.get("turn") == change["turn"]]
    assert order.index("intent") < order.index("tool_result")
    assert [i.status for i in intents(evs)] == ["ok", "ok"] and unknown_outcomes(evs) == []


def test_a_process_killed_while_a_change_ran_leaves_an_intent_without_outcome(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("fake_backup", {"host": "h1"})]),
                           turn(calls=[("change", {"host": "h1", "what": "apply it"})]), turn("done")])
    run_session(session_for(path, model), "go")
    # What a SIGKILL leaves: the lines written up to the moment the process died, here right after the intent.
    lines = path.read_text().splitlines(keepends=True)
    cut = next(n for n, line in enumerate(lines) if '"type":"intent"' in line and '"tool":"change"' in line)
    killed = tmp_path / "killed.jsonl"
    killed.write_text("".join(lines[:cut + 1]))
    unknown = unknown_outcomes(iter_events(killed))
    assert [(u.tool, u.host, u.status) for u in unknown] == [("change", "h1", None)]
    assert not unknown[0].outcome_known


def test_a_change_stopped_by_ctrl_c_while_it_ran_has_an_unknown_outcome(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("fake_backup", {"host": "h1"})]),
                           turn(calls=[("sleep", {"host": "h1", "seconds": 20, "change": True})]), turn("done")])
    session = session_for(path, model)

    def interrupt_once_it_runs():
        while not any(e["type"] == "intent" and e["tool"] == "sleep" for e in iter_events(path)):
            threading.Event().wait(0.02)
        os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=interrupt_once_it_runs, daemon=True).start()
    out = run_session(session, "go")
    assert out.status == "interrupted"
    result = [e for e in events(path, "tool_result") if e["tool"] == "sleep"][0]
    assert result["status"] == "cancelled"
    assert [(u.tool, u.status) for u in unknown_outcomes(iter_events(path))] == [("sleep", "cancelled")]
