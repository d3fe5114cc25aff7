"""inspect_host says whether a host is a Slurm or Kubernetes node, its state and its running work, as the
host's own scheduler commands say: on simulated nodes (the sim's scontrol, squeue, kubectl), and from the
text real clients print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.base import ArtifactStore, ToolContext
from tools.drain_node import DrainNode
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.schedulers import note, parse
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
    assert ("never undrain it" in said or "never uncordon it" in said) is want["drained"]
    assert ("drain it with drain_node" in said) is not want["drained"]


def test_a_host_in_no_cluster_reports_none_and_a_client_that_cannot_answer_is_no_proof(tmp_path):
    """No scheduler command: nothing reported. A kubectl that is installed but reaches no API server is said as
    such (it may well be a node), never read as "not a node"."""
    sim = build_sim(tmp_path / "gpu07")
    assert inspected(sim).schedulers == []
    text = ("kube_node|gpu07\nkube_rc|1\nkube_out|The connection to the server localhost:8080 was refused - did you "
            "specify the right host?")
    [found] = parse(text)
    assert found.kind == "kubernetes" and found.node is None and "refused" in found.error
    assert "could not answer" in note(found) and "find out before changing it" in note(found)


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


def _printed(case: dict) -> str:
    """What tools/schedulers.script prints for a case's raw client outputs (the name it asked first answering)."""
    out, node = [], case.get("node_name") or "node"

    def each(prefix: str, text: str | None, n: int) -> list[str]:
        return [f"{prefix}|{ln[:2000]}" for ln in (text or "").rstrip("\n").split("\n")[:n]]

    if case.get("scontrol") is not None:
        rc = 0 if case.get("scontrol_ok") else 1
        out += [f"slurm_node|{node}", f"slurm_rc|{rc}", *each("slurm_out", case["scontrol"], 20)]
        if rc == 0 and case.get("squeue") is not None:
            out += [f"squeue_rc|{0 if case.get('squeue_ok') else 1}", *each("squeue_out", case["squeue"], 500)]
    if case.get("kubectl_node") is not None:
        rc = 0 if case.get("kubectl_node_ok") else 1
        out += [f"kube_node|{node}", f"kube_rc|{rc}", *each("kube_out", case["kubectl_node"], 20)]
        if rc == 0 and case.get("kubectl_pods") is not None:
            out += [f"pods_rc|{0 if case.get('kubectl_pods_ok') else 1}", *each("pods_out", case["kubectl_pods"], 500)]
    return "\n".join(out)


REDTEAM = Path(__file__).resolve().parents[1] / "data" / "tools" / "redteam-2026-12-06-schedulers" / "cases.json"
CASES = json.loads(REDTEAM.read_text())
# Where our reading is the cautious one and the red team's reads further (README.md beside the cases).
CAUTIOUS = {"slurm-hostname-vs-nodename-squeue-maps", "k8s-node-notfound-wrong-name"}


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_what_real_clients_print_is_read_as_an_operator_reads_it(case):
    got = {s.kind: s for s in parse(_printed(case))}
    for kind in ("slurm", "kubernetes"):
        want, have = case["expect"].get(kind), got.get(kind)
        assert (want is None) == (have is None), kind
        if want is None:
            continue
        if case["id"] in CAUTIOUS:  # said as a client that could not answer: never as a node free to change
            assert have.error and have.drained is None and "find out" in note(have), have
            continue
        for field in ("state", "drained", "reason", "running"):
            if field in want:
                assert getattr(have, field) == want[field], (kind, field)
        if want.get("error"):
            assert want["error"] in (have.error or ""), (kind, have.error)


def test_the_schedulers_clients_reach_their_controller_while_the_rest_of_the_inspection_stays_in_the_sandbox(
        tmp_path):
    """A real kubectl asks an API server over the network, which the read sandbox withholds from a read: its lines
    (ours, fixed) run outside the sandbox, the inspection's others inside it. Here kubectl is a stand-in that asks
    an API server on this test's loopback before it answers, as a worker's asks the control plane."""
    import os
    import socket
    import sys
    import threading

    from tools.hosts import HostSpec
    from tools.sandbox import SandboxedHosts

    api = socket.socket()
    api.bind(("127.0.0.1", 0))
    api.listen(8)
    asked = []

    def serve():
        while True:
            conn, _ = api.accept()
            asked.append(1)
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(f"#!{sys.executable}\nimport socket, sys\nsocket.create_connection(('127.0.0.1', "
                       f"{api.getsockname()[1]}), timeout=5).close()\n"
                       "print('|' if sys.argv[1:3] == ['get', 'node'] else 'pod/serving-0')\n")
    kubectl.chmod(0o755)
    spec = HostSpec(name="worker", transport="local", env={"PATH": f"{bin_dir}:{os.environ['PATH']}"})
    pool = HostPool([spec])
    try:
        ctx = ToolContext(hosts=SandboxedHosts(pool), artifacts=ArtifactStore(None))
        report = InspectHost().run(ctx, InspectHost.parse_args({"host": "worker"}))
        inside = SandboxedHosts(pool).get("worker").run(f"{kubectl} get node worker", timeout=30)
    finally:
        pool.close()
        api.close()
    assert [s.model_dump(exclude={"error"}) for s in report.schedulers] == [
        {"kind": "kubernetes", "node": "worker", "state": "schedulable", "drained": False, "reason": None,
         "running": 1}], report.schedulers
    assert asked and inside.exit_code != 0  # the same client as a read: no controller reachable
