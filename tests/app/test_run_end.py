"""The end of `agent run`: the final state of every host and the success checks, run side by side,
recorded in their one order; a Ctrl-C among them stops what runs and still closes the record.

Real `agent` processes on the local host, the real openai SDK against a loopback server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]


def env_for(home: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
                "OPENAI_API_KEY": "x"})
    return env


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def leftovers(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


def test_final_states_and_checks_are_recorded_hosts_by_name_then_checks_in_order(tmp_path):
    goal = tmp_path / "goal.yaml"
    goal.write_text(
        "goal: look\n"
        "hosts:\n"
        "  - {name: zeta, transport: local, python: /nonexistent/bin/python}\n"
        f"  - {{name: alpha, transport: local, python: {sys.executable}}}\n"
        "budget: {turns: 3}\n"
        "success:\n"
        "  - command: {host: alpha, run: 'uname -s', expect_output: Linux}\n"
        "  - command: {run: 'false'}\n"
        "  - command: {host: alpha, run: 'rm -rf /tmp/nothing-here'}\n"
        "  - throughput: {label: after, compare_to: before, min_ratio: 1.0}\n")
    transcript = tmp_path / "t.jsonl"
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "alpha", "command": "true"})]), Reply(text="Done.")]) as srv:
        r = subprocess.run([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                            "--transcript", str(transcript)], cwd=ROOT, env=env_for(tmp_path), capture_output=True,
                           text=True, timeout=180)
    assert r.returncode == 1, r.stderr
    evs = events(transcript)
    answer = max(i for i, e in enumerate(evs) if e["type"] == "model_response")
    end = [(e["type"], e.get("host", e.get("index"))) for e in evs[answer + 1:]]
    assert end == [("final_state", "alpha"), ("final_state", "zeta"), ("check", 0), ("check", 1), ("check", 2),
                   ("check", 3), ("goal_result", None), ("session_end", None)]

    alpha, zeta = evs[answer + 1], evs[answer + 2]
    assert alpha["error"] is None and alpha["python"] == sys.executable
    assert "pydantic==" in alpha["freeze"] and alpha["inspect"]["host"] == "alpha"
    # A freeze that fails as a command is a fact of the final state; the inspection still runs.
    assert zeta["freeze"] is None and zeta["error"].startswith("pip freeze failed:")
    assert zeta["inspect"]["host"] == "zeta"

    checks = [e for e in evs if e["type"] == "check"]
    assert [c["ok"] for c in checks] == [True, False, False, False]
    assert checks[1]["detail"] == "zeta: exit 1; alpha: exit 1"  # a check without a host runs on every host
    assert checks[2]["detail"].startswith("not run: a success check must be read-only")
    assert "no benchmark under label" in checks[3]["detail"]
    result = next(e for e in evs if e["type"] == "goal_result")
    assert result["verdict"] == "not met" and result["checks_ok"] is False
    assert verify(transcript).ok


def test_a_ctrl_c_during_the_final_checks_stops_them_and_closes_the_transcript(tmp_path):
    marker = f"final-check-{uuid.uuid4().hex[:8]}"
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: look\nhosts: [{name: box, transport: local}]\nbudget: {turns: 3}\n"
                    f"success:\n  - command: {{run: 'sleep 60; : {marker}'}}\n")
    transcript = tmp_path / "t.jsonl"
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "box", "command": "true"})]), Reply(text="Done.")]) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                 "--transcript", str(transcript)], cwd=ROOT, env=env_for(tmp_path), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not leftovers(marker):
            time.sleep(0.05)
        assert leftovers(marker), "the check's command never started"
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError("agent run was still running 40 s after Ctrl-C") from None
    time.sleep(0.3)  # a killed process group needs a moment to be reaped
    assert not leftovers(marker), leftovers(marker)
    assert proc.returncode == 130, err
    evs = events(transcript)
    assert verify(transcript).ok
    assert [e for e in evs if e["type"] == "check"] == []  # the check that was stopped has no result
    for state in (e for e in evs if e["type"] == "final_state"):  # what is recorded finished before the Ctrl-C
        assert state["error"] is None and state["freeze"] is not None and state["inspect"] is not None
    result = next(e for e in evs if e["type"] == "goal_result")
    assert result["verdict"] == "not met" and result["reason"] == "interrupted by the operator during the final checks"
    assert evs[-1]["type"] == "session_end" and evs[-1]["status"] == "interrupted"
