"""inspect_host says whether a host is a Slurm or Kubernetes node, its state and its running work, as the
host's own scheduler commands say: on simulated nodes (the sim's scontrol, squeue, kubectl), and from the
text real clients print."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools.base import ArtifactStore, ToolContext
from tools.drain_node import DrainNode
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.schedulers import KUBE_FIELDS, note, parse
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
    import subprocess
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
    own = subprocess.run(["hostname", "-s"], capture_output=True, text=True).stdout.strip()  # asked first
    assert [s.model_dump(exclude={"error"}) for s in report.schedulers] == [
        {"kind": "kubernetes", "node": own, "state": "schedulable", "drained": False, "reason": None,
         "running": 1}], report.schedulers
    assert asked and inside.exit_code != 0  # the same client as a read: no controller reachable


REDTEAM = Path(__file__).resolve().parents[1] / "data" / "tools" / "redteam-2026-12-06-scheduler-names"
# Stand-ins that log how they were called: a node is found only by its own name, gpu07.
_CLIENT = """#!{python}
import json, os, sys
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps([os.path.basename(sys.argv[0])] + sys.argv[1:]) + "\\n")
name = os.path.basename(sys.argv[0])
if name == "hostname":
    sys.stdout.buffer.write(open(os.environ["HOSTNAME_SAYS"], "rb").read())
elif name == "scontrol" and sys.argv[1:] == ["show", "node", "gpu07", "-o"]:
    print("NodeName=gpu07 Arch=x86_64 State=IDLE Reason=(null)")
elif name == "squeue":
    pass
elif name == "kubectl" and sys.argv[1:3] == ["get", "node"] and sys.argv[3] == "gpu07":
    print("|")
elif name == "kubectl" and sys.argv[1:3] == ["get", "pods"]:
    pass
else:
    sys.exit("not found")
"""
# What each client may be asked, the node's name aside: nothing else ever reaches it.
_ASKED = {("scontrol", "show"): ["show", "node", None, "-o"],
          ("squeue", "-h"): ["-h", "-w", None, "-t", "RUNNING,COMPLETING", "-o", "%i"],
          ("kubectl", "get", "node"): ["get", "node", None, "-o", "jsonpath=" + KUBE_FIELDS],
          ("kubectl", "get", "pods"): ["get", "pods", "--all-namespaces", "--field-selector", None, "-o", "name"]}


def test_the_blind_red_teams_names_and_hostnames_never_reach_a_client_as_anything_but_a_node_name(tmp_path):
    """tests/data/tools/redteam-2026-12-06-scheduler-names: 49 session names and 13 things a host's `hostname -s`
    could print, written to make the scheduler lines (run beside the read sandbox) take an option, a glob or many
    words for a node, or answer about another node. Names a goal file refuses (35: those that start with `-`, `.`
    or `@`, empty, a newline, a homoglyph) are refused; every other name and every hostname output reaches the
    clients only as one argument in the node's place, a word that can be a node's name."""
    import os
    import sys

    from agent.goal import HostEntry
    from tools.hosts import HostSpec
    from tools.schedulers import script

    names = [json.loads(x) for x in (REDTEAM / "names.jsonl").read_text().splitlines() if x.strip()]
    outputs = [json.loads(x) for x in (REDTEAM / "hostname_outputs.jsonl").read_text().splitlines() if x.strip()]
    accepted = []
    for case in names:
        try:
            HostEntry(name=case["name"])
            accepted.append(case["name"])
        except ValueError:
            pass
    assert len(names) == 49 and len(accepted) == 14 and not any(n.startswith(("-", ".", "@")) for n in accepted)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("scontrol", "squeue", "kubectl", "hostname"):
        (bin_dir / tool).write_text(_CLIENT.format(python=sys.executable))
        (bin_dir / tool).chmod(0o755)
    calls, says = tmp_path / "calls.jsonl", tmp_path / "hostname"
    spec = HostSpec(name="n", transport="local", env={"PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls),
                                                      "HOSTNAME_SAYS": str(says)})
    pool = HostPool([spec])
    try:
        cases = [(name, "gpu07\n") for name in accepted] + [("gpu07", o["output"]) for o in outputs] + \
            [("node-x", o["output"]) for o in outputs]
        for name, printed in cases:
            says.write_bytes(printed.encode("latin-1", "replace"))
            calls.write_text("")
            r = pool.get("n").run(script(name), timeout=60)
            found = parse(r.stdout)
            for call in [json.loads(x) for x in calls.read_text().splitlines()]:
                if call[0] == "hostname":
                    continue
                want = _ASKED.get(tuple(call[:3]) if call[0] == "kubectl" else tuple(call[:2]))
                assert want is not None and len(call) == len(want) + 1, call
                assert all(w is None or w == c for w, c in zip(want, call[1:])), call
                (asked,) = [c for w, c in zip(want, call[1:]) if w is None]
                assert re.fullmatch(r"(spec\.nodeName=)?[A-Za-z0-9][A-Za-z0-9._-]*", asked), (name, printed, call)
            for one in found:  # gpu07 found is gpu07's; any other answer is an error, never another node's state
                assert one.node in (None, "gpu07"), (name, printed, one)
    finally:
        pool.close()
