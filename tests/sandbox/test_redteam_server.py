"""The 2026-12-05 red team's lines, written against the read sandbox's server, run through it on a sim.

One server for the whole corpus (as for a session), eight reads at a time (as a turn's batch), under both
mechanisms. test_redteam_attacks.py runs each line under a launcher of its own with a listener and the
sim's state around it; here what the lines share is the point: the server, its namespace, the reader's
uid. After every batch a canary read must see what a read on a fresh server sees (its scratch empty, no
IPC object, no process of the reader's uid but its own, its limits), and the server must still answer.
At the end the sim's trees are as they were, and once the host is closed nothing of the sim runs here.

The lines that would take this machine's memory are left out, as there (EXHAUSTING).
"""

from __future__ import annotations

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sandbox.test_redteam_attacks import BOUND_S, MARGIN_S, lines_run, sim_processes_here, snapshot, tree_changes
from tools.hosts import SimHost
from tools.sandbox import SandboxedHost, loopback_ports, probe_host
from tools.sim import build_sim

WORKERS = 8
# What a read on a fresh server sees: files in its scratch, IPC segments, the reader uid's processes (the
# canary's own: bash, pgrep), its core and process limits, its OOM score.
CANARY = ('ls -A "$TMPDIR" | wc -l; ipcs -m | tail -n +4 | grep -c . ; pgrep -u 1999999999 | wc -l; '
          "ulimit -c; ulimit -u; cat /proc/self/oom_score_adj")


@dataclasses.dataclass
class ServerRun:
    mechanism: str
    results: list
    canaries: list[tuple[int, str]]  # (lines run so far, what the canary saw)
    fresh: str  # what the canary saw before any line
    starts: int  # how many servers the run needed
    changes: list[str]
    left_here: list[str]


def run_through_server(base, mechanism: str) -> ServerRun:
    sim = build_sim(base / "sim")
    host = SimHost(sim.host_spec("sim"))
    r = host.run("ln -s /dev/watchdog /tmp/wd && ln -s /etc/shadow /tmp/shadow && mkfifo /tmp/fifo", timeout=30)
    assert r.exit_code == 0, r.stderr
    info = dataclasses.replace(probe_host(host), mechanism=mechanism)
    before = snapshot(sim.root)
    canary = SandboxedHost(host, info)
    fresh = canary.run(CANARY, timeout=30).stdout.split()
    lines = lines_run("2026-12-05")
    results, canaries = [], []

    def one(line):
        start = time.monotonic()
        result = SandboxedHost(host, info, ports=loopback_ports(line[0])).run(line[0], timeout=BOUND_S)
        return line[0], result, time.monotonic() - start

    with ThreadPoolExecutor(WORKERS) as pool:
        for at in range(0, len(lines), WORKERS * 4):
            results += list(pool.map(one, lines[at:at + WORKERS * 4]))
            time.sleep(0.2)  # what a line left is killed by its supervisor as it ends
            canaries.append((len(results), " ".join(canary.run(CANARY, timeout=30).stdout.split())))
    starts = sum(n for _, n in host.__dict__.get("_sandbox_servers", {}).values())  # a lost one is started again
    host.close()
    time.sleep(1)
    return ServerRun(mechanism, results, canaries, " ".join(fresh), starts, tree_changes(before, snapshot(sim.root)),
                     sim_processes_here(sim.root))


@pytest.fixture(scope="module", params=("namespaces", "landlock"))
def server_run(request, tmp_path_factory) -> ServerRun:
    return run_through_server(tmp_path_factory.mktemp(f"redteam-server-{request.param}"), request.param)


@pytest.mark.slow
def test_no_line_changes_the_sims_trees(server_run):
    assert not server_run.changes, f"{server_run.mechanism}:\n" + "\n".join(server_run.changes[:50])


@pytest.mark.slow
def test_every_batch_leaves_the_next_read_what_a_fresh_server_gives(server_run):
    differ = [(n, seen) for n, seen in server_run.canaries if seen != server_run.fresh]
    assert server_run.fresh.split()[:3] == ["0", "0", server_run.fresh.split()[2]]
    assert not differ, f"{server_run.mechanism}: fresh {server_run.fresh!r}, then:\n" + "\n".join(map(str, differ))


@pytest.mark.slow
def test_every_line_ends_within_its_bound_and_the_server_keeps_answering(server_run):
    late = [f"{command}: {wall:.1f} s" for command, _, wall in server_run.results if wall > BOUND_S + MARGIN_S]
    assert not late, f"{server_run.mechanism}:\n" + "\n".join(late)
    assert sum(result.exit_code == 0 for _, result, _ in server_run.results) > 50
    assert server_run.starts == 1, f"{server_run.mechanism}: {server_run.starts} servers were started"


@pytest.mark.slow
def test_nothing_of_the_sim_runs_here_once_the_host_is_closed(server_run):
    assert not server_run.left_here, server_run.left_here
