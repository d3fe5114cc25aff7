"""inspect_host says whether a host is a Slurm or Kubernetes node, its state and its running work, as the
host's own scheduler commands say: on simulated nodes (the sim's scontrol, squeue, kubectl), and from the
text real clients print."""

from __future__ import annotations

import pytest

from tools.base import ArtifactStore, ToolContext
from tools.drain_node import DrainNode
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.schedulers import parse
from tools.sim import build_sim


def inspected(sim, name: str = "gpu07", ctx_store: dict | None = None):
    pool = HostPool([sim.host_spec(name=name)])
    try:
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), store=ctx_store if ctx_store is not None else {})
        return InspectHost().run(ctx, InspectHost.parse_args({"host": name}))
    finally:
        pool.close()


@pytest.mark.parametrize("joined, want", [
    ({"slurm": {"jobs": [30, 60]}},
     {"kind": "slurm", "node": "gpu07", "state": "MIXED", "drained": False, "reason": None, "running": 2}),
    ({"slurm": {"drained_by": "hw: fan 3 failed"}},
     {"kind": "slurm", "node": "gpu07", "state": "IDLE+DRAIN", "drained": True, "reason": "hw: fan 3 failed",
      "running": 0}),
    ({"kubernetes": {"pods": [5, 5, 5]}},
     {"kind": "kubernetes", "node": "gpu07", "state": "schedulable", "drained": False, "reason": None, "running": 3}),
    ({"kubernetes": {"cordoned_by": "", "pods": []}},
     {"kind": "kubernetes", "node": "gpu07", "state": "cordoned", "drained": True, "reason": None, "running": 0}),
])
def test_inspect_host_reports_the_node_its_state_and_its_running_work(tmp_path, joined, want):
    sim = build_sim(tmp_path / "gpu07")
    sim.join_scheduler("gpu07", **joined)
    report = inspected(sim)
    assert [s.model_dump(exclude={"error"}) for s in report.schedulers] == [want]
    said = " ".join(report.notes)
    assert ("never undrain it" in said) is want["drained"] and ("drain it with drain_node" in said) is not want["drained"]


def test_a_host_in_no_cluster_reports_none_and_a_client_that_cannot_answer_is_no_proof(tmp_path):
    """No scheduler command: nothing reported. A kubectl that is installed but reaches no API server is said as
    such (it may well be a node), never read as "not a node"."""
    sim = build_sim(tmp_path / "gpu07")
    assert inspected(sim).schedulers == []
    text = "kube_error|The connection to the server localhost:8080 was refused - did you specify the right host?"
    [found] = parse(text)
    assert found.kind == "kubernetes" and found.node is None and "refused" in found.error


def test_after_our_drain_the_report_shows_it_drained_with_no_jobs_left(tmp_path):
    sim = build_sim(tmp_path / "gpu07")
    sim.join_scheduler("gpu07", slurm={"jobs": [0.2]})
    pool = HostPool([sim.host_spec(name="gpu07")])
    try:
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
        DrainNode().run(ctx, DrainNode.parse_args({"host": "gpu07", "scheduler": "slurm", "reason": "cuda 13"}))
        [slurm] = InspectHost().run(ctx, InspectHost.parse_args({"host": "gpu07"})).schedulers
    finally:
        pool.close()
    assert slurm.drained and slurm.running == 0 and slurm.reason.startswith("upgrade-agent: cuda 13 #")


def test_real_clients_output_is_read():
    """Lines as a real Slurm 23.11 scontrol prints them (one line with -o), and kubectl's jsonpath."""
    shown = ("slurm|gpu-a12|NodeName=gpu-a12 Arch=x86_64 CoresPerSocket=56 CPUAlloc=112 CPUEfctv=224 CPUTot=224 "
             "CPULoad=97.31 AvailableFeatures=h200 ActiveFeatures=h200 Gres=gpu:h200:8 NodeAddr=gpu-a12 "
             "NodeHostName=gpu-a12 Version=23.11.4 OS=Linux 6.8.0-60-generic RealMemory=2000000 AllocMem=1500000 "
             "State=MIXED+DRAIN ThreadsPerCore=2 Partitions=gpu Reason=kernel upgrade [ops@2026-12-01T09:00:00]\n"
             "slurm_jobs|3\n"
             "kube|gpu-a12|true|upgrade-agent: cuda 13 #1a2b3c4d\nkube_pods|7\n")
    slurm, kube = parse(shown)
    assert (slurm.state, slurm.drained, slurm.reason, slurm.running) == ("MIXED+DRAIN", True, "kernel upgrade", 3)
    assert (kube.state, kube.drained, kube.reason, kube.running) == ("cordoned", True,
                                                                     "upgrade-agent: cuda 13 #1a2b3c4d", 7)
