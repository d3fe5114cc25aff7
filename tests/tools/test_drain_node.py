"""drain_node and undrain_node against the simulated host's Slurm and Kubernetes clients.

The sim's scontrol, squeue and kubectl keep the node's scheduler state; its jobs (pods) end a few
tenths of a second after the drain, so the drain waits for them as it would for real jobs.
"""

from __future__ import annotations

import time

import pytest

from tools.base import ArtifactStore, ToolContext, ToolError
from tools.drain_node import DrainNode, UndrainNode
from tools.hosts import HostPool
from tools.sim import build_sim


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


@pytest.fixture
def node(tmp_path):
    sim = build_sim(tmp_path / "gpu07")
    pool = HostPool([sim.host_spec(name="gpu07")])
    try:
        yield sim, ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
    finally:
        pool.close()


def test_slurm_drain_waits_for_the_jobs_and_undrain_puts_back_only_our_drain(node):
    sim, ctx = node
    sim.join_scheduler("gpu07", slurm={"drained_by": None, "jobs": [0.6, 0.3]})
    began = time.monotonic()
    d = call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade")
    assert d.drained_by_us and d.jobs_at_start == 2 and time.monotonic() - began >= 0.6
    state = sim.scheduler_state()["slurm"]
    assert state["drained"] and state["reason"] == f"upgrade-agent: cuda 13.0 upgrade #{d.drain_id}"
    # An operator drains it again for their own work: our undrain must leave it drained.
    sim.join_scheduler("gpu07", slurm={"drained_by": "hw: fan 3 failed", "jobs": []})
    with pytest.raises(ToolError, match="drained by someone else .*'hw: fan 3 failed'.*stays drained"):
        call(UndrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade", drain_id=d.drain_id)
    assert sim.scheduler_state()["slurm"]["drained"]
    # Someone else's drain is not taken over either: drain_node changes nothing and says so.
    again = call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade")
    assert not again.drained_by_us and again.reason_before == "hw: fan 3 failed"
    assert sim.scheduler_state()["slurm"]["reason"] == "hw: fan 3 failed"


def test_a_drain_in_our_words_but_not_made_by_this_call_is_not_undone(node):
    """Red team: ownership by the reason's words alone let a person (or another session) who wrote
    `upgrade-agent: fw upgrade` have their drain undone. Only the drain_id of the call that drained it does."""
    sim, ctx = node
    sim.join_scheduler("gpu07", slurm={"drained_by": "upgrade-agent: fw upgrade", "jobs": []})
    for guess in ("00000000", "ffffffff"):
        with pytest.raises(ToolError, match="drained by someone else"):
            call(UndrainNode(), ctx, host="gpu07", scheduler="slurm", reason="fw upgrade", drain_id=guess)
    assert sim.scheduler_state()["slurm"]["drained"]
    assert not call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="fw upgrade").drained_by_us


def test_slurm_undrain_after_our_drain_resumes_the_node_and_a_timeout_leaves_it_drained(node):
    sim, ctx = node
    sim.join_scheduler("gpu07", slurm={"drained_by": None, "jobs": [30.0]})
    with pytest.raises(ToolError, match="jobs still run on it after 0.5 s; it stays drained") as e:
        call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade", timeout=0.5)
    assert sim.scheduler_state()["slurm"]["drained"]
    drain_id = str(e.value).rsplit("drain_id '", 1)[1].rstrip("'")
    u = call(UndrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade", drain_id=drain_id)
    assert u.undrained and not sim.scheduler_state()["slurm"]["drained"]
    assert not call(UndrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade",
                    drain_id=drain_id).undrained


def test_kubernetes_cordon_drain_and_uncordon_only_with_our_annotation(node):
    sim, ctx = node
    sim.join_scheduler("gpu07", kubernetes={"cordoned_by": None, "pods": [0.3]})
    d = call(DrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13")
    assert d.jobs_at_start == 1  # its pod, counted as inspect_host counts them (it said 0 while draining two)
    k = sim.scheduler_state()["kubernetes"]
    assert d.drained_by_us and k["cordoned"] and k["annotations"] == {"upgrade-agent/drained": f"cuda13 #{d.drain_id}"}
    u = call(UndrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13", drain_id=d.drain_id)
    k = sim.scheduler_state()["kubernetes"]
    assert u.undrained and not k["cordoned"] and k["annotations"] == {}
    sim.join_scheduler("gpu07", kubernetes={"cordoned_by": "", "pods": []})  # cordoned by hand
    assert not call(DrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13").drained_by_us
    with pytest.raises(ToolError, match="cordoned by someone else"):
        call(UndrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13", drain_id=d.drain_id)
    assert sim.scheduler_state()["kubernetes"]["cordoned"]


def test_a_host_in_no_cluster_says_so_and_never_reaches_this_machines_own_clients(node):
    _, ctx = node
    with pytest.raises(ToolError, match="scontrol is not on the host's PATH"):
        call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="x")
    with pytest.raises(ToolError, match="kubectl is not on the host's PATH"):
        call(DrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="x")


def test_arguments_that_are_not_a_node_name_or_a_plain_reason_are_refused():
    with pytest.raises(Exception, match="reason"):
        DrainNode().parse_args({"host": "h", "scheduler": "slurm", "reason": "x; rm -rf /"})
    with pytest.raises(Exception, match="reason"):  # `=` would make scontrol's KEY=VALUE output ambiguous
        DrainNode().parse_args({"host": "h", "scheduler": "slurm", "reason": "x nodename=gpu08"})
    with pytest.raises(Exception, match="reason"):
        DrainNode().parse_args({"host": "h", "scheduler": "slurm", "reason": "x\n"})
    with pytest.raises(Exception):
        DrainNode().parse_args({"host": "h", "scheduler": "pbs", "reason": "x"})


def test_a_node_put_back_runs_none_of_the_work_that_ended_while_it_was_drained(node):
    """A played model's undrain showed the Slurm node MIXED again, its finished job back on it."""
    sim, ctx = node
    sim.join_scheduler("gpu07", slurm={"drained_by": None, "jobs": [0.2]})
    d = call(DrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade")
    call(UndrainNode(), ctx, host="gpu07", scheduler="slurm", reason="cuda 13.0 upgrade", drain_id=d.drain_id)
    shown = ctx.hosts.get("gpu07").run("scontrol show node gpu07 -o; squeue -h -w gpu07", timeout=30).stdout
    assert "State=IDLE " in shown and shown.count("\n") == 1, shown
    sim.join_scheduler("gpu07", kubernetes={"cordoned_by": None, "pods": [0.2]})
    d = call(DrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13")
    call(UndrainNode(), ctx, host="gpu07", scheduler="kubernetes", reason="cuda13", drain_id=d.drain_id)
    pods = ctx.hosts.get("gpu07").run("kubectl get pods --all-namespaces --field-selector spec.nodeName=gpu07 -o name",
                                      timeout=30)
    assert pods.stdout.strip() == "", pods
