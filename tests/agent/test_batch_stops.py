"""A batch stops at its first failed or refused change on a host: the later changes to that host in the
batch do not start and say why; reads there still run, other hosts go on, and a replay gives the same.
Real sessions: the loop, the gate, the tools and simulated GPU hosts, with a scripted model."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.goal import load_goal
from agent.loop import run_session
from agent.model import ScriptedModel, turn
from agent.record.replay import replay
from agent.record.transcript import iter_events, verify
from agent.session_builder import build_session, goal_budget
from tools import default_tools
from tools.base import Registry
from tools.sim import build_sim

from helpers import events

FAILS = "touch /no-such-dir/marker"  # a change that exits 1
MARK = "touch /opt/venv/marker"


@pytest.fixture(scope="module")
def sims(tmp_path_factory):
    root = tmp_path_factory.mktemp("sims")
    return {"sim": build_sim(root / "sim"), "other": build_sim(root / "other")}


def record(tmp_path: Path, sims: dict, batch: list, commands: list[str]) -> Path:
    rules = "".join(f"  - {{host: {h}, command: '{c}'}}\n" for h in sims for c in commands)
    goal_path = tmp_path / "goal.yaml"
    goal_path.write_text("goal: Upgrade.\nhosts:\n" + "".join(f"  - {{name: {h}, transport: sim}}\n" for h in sims)
                         + "authorizations:\n" + rules)
    goal = load_goal(goal_path)
    path = tmp_path / "run.jsonl"
    script = [turn(calls=[("pip_freeze_backup", {"host": h}) for h in sims]), turn(calls=batch), turn("Done.")]
    built = build_session(hosts=goal.hosts, model=ScriptedModel(script), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=path,
                          sims=sims, start_info={"goal": goal.goal, "command": "run"})
    assert run_session(built.session, "go").status == "done"
    return path


def results(path: Path, turn_no: int = 2) -> list[dict]:
    return sorted((e for e in events(path, "tool_result") if e["turn"] == turn_no), key=lambda e: e["index"])


def replays(path: Path) -> None:
    assert verify(path).ok
    report = replay(path, Registry(default_tools()))
    assert report.ok, report.message


@pytest.fixture(autouse=True)
def no_markers(sims):
    for sim in sims.values():
        sim.sys_path("/opt/venv/marker").unlink(missing_ok=True)


def test_a_failed_change_stops_the_later_changes_to_its_host_and_reads_still_run(tmp_path, sims):
    one = {"sim": sims["sim"]}
    path = record(tmp_path, one, [("ssh_exec", {"host": "sim", "command": FAILS}),
                                  ("ssh_exec", {"host": "sim", "command": "ls /opt"}),
                                  ("ssh_exec", {"host": "sim", "command": MARK})], [FAILS, MARK])
    failed, read, later = results(path)
    assert failed["data"]["exit_code"] == 1
    assert read["status"] == "ok" and read["data"]["exit_code"] == 0 and "venv" in read["data"]["stdout"]
    assert later["status"] == "skipped" and not later["ok"], later
    assert later["content"].startswith("not started: the earlier change ssh_exec (call 1) on sim in this batch "
                                       "failed: its command exited 1"), later["content"]
    assert not sims["sim"].sys_path("/opt/venv/marker").exists()  # it really did not run
    assert [e["index"] for e in events(path, "intent") if e["turn"] == 2] == [0]  # no intent: it never started
    assert not [e for e in iter_events(path) if e["type"] == "tool_start" and e.get("index") == 2
                and e.get("turn") == 2]
    end = events(path, "session_end")[-1]
    assert end["skipped"] == 1 and end["failed"] == 0
    replays(path)


def test_a_refused_change_stops_the_later_changes_to_its_host(tmp_path, sims):
    one = {"sim": sims["sim"]}
    path = record(tmp_path, one, [("ssh_exec", {"host": "sim", "command": "touch /opt/venv/unapproved"}),
                                  ("ssh_exec", {"host": "sim", "command": MARK})], [MARK])
    refused, later = results(path)
    assert refused["status"] == "refused"
    assert later["status"] == "skipped"
    assert "the earlier change ssh_exec (call 1) on sim in this batch was refused by the safety layer" \
        in later["content"], later["content"]
    assert not sims["sim"].sys_path("/opt/venv/marker").exists()
    replays(path)


def test_other_hosts_and_earlier_changes_are_not_stopped(tmp_path, sims):
    path = record(tmp_path, sims, [("ssh_exec", {"host": "sim", "command": MARK}),
                                   ("ssh_exec", {"host": "sim", "command": FAILS}),
                                   ("ssh_exec", {"host": "other", "command": MARK})], [FAILS, MARK])
    first, failed, other = results(path)
    assert first["status"] == "ok" and first["data"]["exit_code"] == 0
    assert failed["data"]["exit_code"] == 1
    assert other["status"] == "ok" and other["data"]["exit_code"] == 0
    assert sims["sim"].sys_path("/opt/venv/marker").exists() and sims["other"].sys_path("/opt/venv/marker").exists()
    replays(path)


def test_the_terminal_says_why_a_change_did_not_start(tmp_path, sims):
    # The rich view showed a not-started change's panel as allowed, then nothing: the reason is on screen now.
    import io

    from rich.console import Console

    from app.ui import TerminalView

    path = record(tmp_path, {"sim": sims["sim"]}, [("ssh_exec", {"host": "sim", "command": FAILS}),
                                                   ("ssh_exec", {"host": "sim", "command": MARK})], [FAILS, MARK])
    console = Console(width=100, record=True, force_terminal=True, file=io.StringIO())
    view = TerminalView(console)
    for ev in iter_events(path):
        view(ev)
    shown = " ".join(console.export_text().split())
    assert "ssh_exec · not started: the earlier change ssh_exec (call 1) on sim in this batch failed" in shown, shown
