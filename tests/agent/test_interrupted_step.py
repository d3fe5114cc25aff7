"""An interrupted change's record says what is known: that it had started on the host, how long it ran,
what the host printed up to then, and that its outcome is unknown; `agent resume` reads it as such.
Real sessions on a simulated GPU host: the loop, the gate, the tools and the sim's own pip."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from agent.goal import Goal
from agent.journal import unknown_outcomes
from agent.loop import run_session
from agent.model import ScriptedModel, turn
from agent.record.transcript import iter_events, verify
from agent.session_builder import build_session, goal_budget
from tools.sim import build_sim

from helpers import events

PACKAGE = "nvidia-nccl-cu13==2.28.9"  # not in the sim's venv yet


@pytest.fixture
def sim(tmp_path):
    return build_sim(tmp_path / "gpu")


def session(tmp_path: Path, sim, rules: list[dict], change: tuple[str, dict]):
    goal = Goal.model_validate({"goal": "Upgrade sim.", "hosts": [{"name": "sim", "transport": "sim"}],
                                "authorizations": rules, "budget": {"turns": 6}})
    path = tmp_path / "run.jsonl"
    script = [turn(calls=[("pip_freeze_backup", {"host": "sim"})]), turn(calls=[change]), turn("Done.")]
    built = build_session(hosts=goal.hosts, model=ScriptedModel(script), mode="scripted",
                          authorizations=goal.authorizations, budget=goal_budget(goal), transcript=path,
                          sims={"sim": sim}, start_info={"goal": goal.goal, "command": "run"})
    return built.session, path


def when_printed(session, text: str, then) -> threading.Event:
    """Call `then` (on another thread) once the running call's live output has shown `text`."""
    seen, shown = threading.Event(), []

    def listen(ev: dict) -> None:
        if ev.get("type") == "output":
            shown.append(ev.get("text", ""))
            if text in "".join(shown) and not seen.is_set():
                seen.set()

    def wait_then() -> None:
        if seen.wait(120):
            threading.Event().wait(0.3)  # the command is now in its sleep
            then()

    session.listeners.append(listen)
    threading.Thread(target=wait_then, daemon=True).start()
    return seen


def the_result(path: Path, tool: str) -> dict:
    return [e for e in events(path, "tool_result") if e["tool"] == tool][-1]


def assert_says_what_is_known(result: dict, printed: str) -> None:
    assert result["status"] == "cancelled", result
    assert result["started"] is not None and result["duration_s"] > 0.3, result
    data = result["data"]
    assert data["started"] is True and data["outcome"] == "unknown" and data["ran_s"] > 0.3, data
    assert printed in data["output"] and printed in result["content"], result["content"]
    assert "outcome unknown" in result["content"] and "had started on sim" in result["content"]


def test_an_ssh_exec_change_cancelled_after_it_printed_records_what_is_known(tmp_path, sim):
    command = "touch /opt/venv/installing && echo Successfully installed torch-2.10.0 && sleep 30"
    s, path = session(tmp_path, sim, [{"host": "sim", "command": command}],
                      ("ssh_exec", {"host": "sim", "command": command}))
    seen = when_printed(s, "Successfully installed", s.batches.request_cancel)
    run_session(s, "go")
    assert seen.is_set()
    result = the_result(path, "ssh_exec")
    assert_says_what_is_known(result, "Successfully installed torch-2.10.0")
    assert result["duration_s"] < 20  # the cancel killed the sleep
    assert [(u.tool, u.status) for u in unknown_outcomes(iter_events(path))] == [("ssh_exec", "cancelled")]
    assert verify(path).ok


def slow_exit_after_install(sim) -> None:
    """pip install prints 'Successfully installed', then its interpreter lingers 30 s at exit: a .pth file
    of the sim's venv registers the sleep for `pip install` only."""
    site = next(sim.sys_path("/opt/venv/lib").glob("python3*/site-packages"))
    (site / "zz_slow_exit.pth").write_text(
        "import sys, atexit, time; ('install' in sys.orig_argv) and atexit.register(time.sleep, 30)\n")


def test_ctrl_c_during_pip_install_after_it_printed_records_what_is_known(tmp_path, sim, sigint_raises):
    index = sim.index_urls["cu130"]
    slow_exit_after_install(sim)
    s, path = session(tmp_path, sim, [{"host": "sim", "tool": "pip_install", "args": {"packages": [PACKAGE],
                                                                                      "index_url": index}}],
                      ("pip_install", {"host": "sim", "packages": [PACKAGE], "index_url": index}))
    seen = when_printed(s, "Successfully installed", lambda: os.kill(os.getpid(), signal.SIGINT))
    out = run_session(s, "go")
    assert seen.is_set() and out.status == "interrupted", out
    result = the_result(path, "pip_install")
    assert_says_what_is_known(result, "Successfully installed")
    assert "installing 1 packages" in result["data"]["step"]
    assert [(u.tool, u.status) for u in unknown_outcomes(iter_events(path))] == [("pip_install", "cancelled")]
    assert verify(path).ok
