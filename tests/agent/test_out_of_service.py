"""A goal met while a scheduler node is left out of service says so in its verdict, from the end's reading of the
node (a played model's run was GOAL MET over a node it rightly left drained, someone else's: the operator, who had
asked for it back in service, read only the first line)."""

from __future__ import annotations

from types import SimpleNamespace

from agent.checks import END_READ
from agent.finish import out_of_service


def _session(*nodes: dict) -> SimpleNamespace:
    return SimpleNamespace(store={END_READ: {"gpu-a17": {"schedulers": list(nodes)}, "gone": None}})


def test_a_node_left_drained_is_named_with_whose_drain_it_is():
    theirs = {"kind": "slurm", "state": "IDLE+DRAIN", "drained": True, "reason": "hw: GPU 5 Xid 79"}
    said = out_of_service(_session(theirs))
    assert said == "; but gpu-a17 is still out of slurm (IDLE+DRAIN: 'hw: GPU 5 Xid 79': drained by someone else, " \
                   "left so)"
    ours = {"kind": "slurm", "state": "IDLE+DRAIN", "drained": True, "reason": "upgrade-agent: cuda13 #0a1b2c3d"}
    assert "drained by this tool, 'upgrade-agent: cuda13 #0a1b2c3d': undrain_node puts it back" in \
        out_of_service(_session(ours))
    cordoned = {"kind": "kubernetes", "state": "cordoned", "drained": True, "reason": "cuda13 #0a1b2c3d"}
    assert "out of kubernetes (cordoned: drained by this tool" in out_of_service(_session(cordoned))
    assert "drained by someone else" in out_of_service(_session({**cordoned, "reason": None}))
    assert out_of_service(_session({"kind": "slurm", "state": "IDLE", "drained": False})) == ""
    assert out_of_service(SimpleNamespace(store={})) == ""


def test_agent_run_met_on_a_node_someone_else_drained_says_it_is_still_out(tmp_path):
    """`agent run`, the model through the real openai SDK on loopback, on a sim that is a Slurm node someone else
    drained: the goal's check passes, and the verdict says the node is still out of service, read at the end."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_openai import FakeOpenAI, Reply

    root = Path(__file__).resolve().parents[2]
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: List the GPUs of node a17 and put it back in service.\n"
                    "hosts:\n  - name: a17\n    transport: sim\n"
                    "    sim: {gpus: 2, slurm: {drained_by: 'hw: GPU 1 Xid 79'}}\n"
                    "success:\n  - command: {host: a17, run: nvidia-smi -L}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "UPGRADE_AGENT"))}
    with FakeOpenAI([Reply(calls=[("inspect_host", {"host": "a17"})]), Reply(text="Two GPUs.")]) as srv:
        env.update(PYTHONPATH=str(root), HOME=str(tmp_path), OPENAI_API_KEY="x", OPENAI_BASE_URL=srv.base_url)
        r = subprocess.run([sys.executable, "-m", "app.cli", "run", str(goal), "--transcript",
                            str(tmp_path / "t.jsonl")], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    end = next(json.loads(x) for x in (tmp_path / "t.jsonl").read_text().splitlines() if '"goal_result"' in x)
    assert r.returncode == 0 and end["met"], r.stderr[-2000:]
    assert "but a17 is still out of slurm (IDLE+DRAIN: 'hw: GPU 1 Xid 79': drained by someone else" in end["reason"]
    assert "still out of slurm" in r.stdout + r.stderr
