"""The red team's drain_node / undrain_node cases (tests/data/tools/redteam-2026-12-02-drain/).

Written by a tester who read only the two tools' descriptions and schemas. Each case's calls run in
order against the simulated node gpu07, its scheduler state set as the case says. The promises held
for every case: a node someone else drained (or cordoned) is never put back; no argument reaches a
shell (no probe file appears); a drain that says it is ours left the node drained; nothing hangs;
and the legitimate cases work. An undrain_node call is given the drain_id of the case's last
drain_node, as a caller that read the result would.
"""

from __future__ import annotations

import json
import shutil
import signal
from pathlib import Path

import pytest

from tools.base import ArtifactStore, ArgumentError, ToolContext, ToolError
from tools.drain_node import DrainNode, UndrainNode
from tools.hosts import HostPool
from tools.sim import build_sim

CORPUS = Path(__file__).resolve().parents[1] / "data" / "tools" / "redteam-2026-12-02-drain" / "attacks.jsonl"
CASES = [json.loads(line) for line in CORPUS.read_text().splitlines()]
PROBES = Path("/tmp/rt4-probe")
TOOLS = {"drain_node": DrainNode(), "undrain_node": UndrainNode()}


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    sim = build_sim(tmp_path_factory.mktemp("drain") / "gpu07")
    pool = HostPool([sim.host_spec(name="gpu07")])
    yield sim, ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
    pool.close()


def _timeout(signum, frame):
    raise TimeoutError("a drain call hung")


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_the_promises_hold_for_every_case(node, case):
    sim, ctx = node
    shutil.rmtree(PROBES, ignore_errors=True)
    state = case.get("scheduler_state") or {}
    sim.join_scheduler("gpu07", slurm=state.get("slurm"), kubernetes=state.get("kubernetes"))
    foreign = (state.get("slurm") or {}).get("drained_by") is not None or \
        (state.get("kubernetes") or {}).get("cordoned_by") is not None
    outcomes, last_id = [], None
    for c in case["calls"]:
        tool = TOOLS[c["tool"]]
        args = {k: (float("nan") if v == "NaN" else v) for k, v in (c.get("args") or {}).items()}
        if tool.name == "undrain_node" and "drain_id" not in args and last_id:
            args["drain_id"] = last_id
        signal.signal(signal.SIGALRM, _timeout)
        signal.alarm(60)
        try:
            result = tool.run(ctx, tool.parse_args(args))
            outcomes.append("ok")
            if tool.name == "drain_node":
                last_id = result.drain_id or last_id
                if result.drained_by_us:
                    now = sim.scheduler_state()
                    assert (now.get("slurm") or {}).get("drained") or (now.get("kubernetes") or {}).get("cordoned")
        except (ArgumentError, ToolError):
            outcomes.append("refused")
        finally:
            signal.alarm(0)
    after = sim.scheduler_state()
    if foreign:
        assert (after.get("slurm") or {}).get("drained", True) and (after.get("kubernetes") or {}).get("cordoned", True), \
            f"someone else's drain was undone: {after}"
    assert not PROBES.exists() or not any(PROBES.iterdir()), "an argument reached a shell"
    if case["id"].startswith("legit-"):
        assert outcomes == ["ok"] * len(case["calls"]), outcomes
