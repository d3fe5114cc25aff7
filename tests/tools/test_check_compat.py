"""check_compat on the sandboxed sim: what blocks a target CUDA, and what it would endanger."""

from __future__ import annotations

import pytest

from tools.base import ArtifactStore, ToolContext
from tools.check_compat import CheckCompat
from tools.hosts import HostPool
from tools.sim import build_sim


@pytest.fixture
def check(tmp_path):
    pools = []

    def run(cuda: str, args: dict | None = None, **sim_options):
        sim = build_sim(tmp_path / f"gpu{len(pools)}", **sim_options)
        pool = HostPool([sim.host_spec()])
        pools.append(pool)
        tool = CheckCompat()
        return tool.run(ToolContext(hosts=pool, artifacts=ArtifactStore(None)), tool.parse_args({"host": "sim",
                                                                                                 "cuda": cuda, **(args or {})}))
    yield run
    for pool in pools:
        pool.close()


def test_the_seed_machine_can_take_cuda_13_and_is_told_the_wheels_must_follow(check):
    r = check("13.0")
    assert r.ok and r.blockers == [] and r.driver == "590.48.01" and r.toolkit_on_path == "12.8"
    assert any("move the wheels to +cu130 builds too" in f.what and "CUDA_HOME" in f.what for f in r.risks)


def test_a_driver_of_550_blocks_cuda_13_and_says_why_with_its_source(check):
    r = check("13.0", driver_version="550.144.03", gpu_model="H100 80GB HBM3")  # a GPU 550 supports
    assert not r.ok
    first = r.blockers[0]
    assert "CUDA 13.0 needs a driver of 580 or newer; this host has 550.144.03" in first.what
    assert "minimum required driver version" in first.source
    # (A Blackwell card on 550 no longer exists to test: the sim refuses a driver older than its GPU's.)
    assert len(r.blockers) == 1  # one finding, not one per GPU
    assert any("cannot see the GPUs now" in f.what for f in r.risks)


def test_blackwell_needs_cuda_12_8_or_newer(check):
    r = check("12.6")
    assert any("needs CUDA 12.8 or newer" in f.what for f in r.blockers)


def test_too_little_room_under_usr_local_blocks_and_names_both_figures(check):
    r = check("13.0", free_space_mb={"/usr/local": 1500})
    assert not r.ok
    [blocker] = [b for b in r.blockers if "too little room" in b.what]
    assert ("the filesystem mounted at /usr/local has 1.5 GiB free and needs 6.7 GiB: 6.7 GiB in /usr/local (the "
            "toolkit goes there)") in blocker.what and "NVIDIA's installer figures for CUDA 13.0" in blocker.source
    by_path = {s.path: s for s in r.space}
    assert by_path["/usr/local"].free_gib == 1.5 and by_path["/usr/local"].need_gib == 6.7
    assert by_path["/tmp"].need_gib == 8.0 and by_path["/tmp"].free_gib > 8
    # The blocker is about the places checked: where the goal allows /opt, the same host has the room there.
    there = check("13.0", {"toolkit_path": "/opt/cuda-13.0"}, free_space_mb={"/usr/local": 1500})
    assert there.ok and [(s.path, s.mount) for s in there.space] == [("/tmp", "/tmp"), ("/opt", "/")]


def test_the_seed_machine_has_room_and_says_how_much(check):
    r = check("13.0")
    assert r.ok and [(s.path, s.need_gib) for s in r.space] == [("/tmp", 8.0), ("/usr/local", 6.7)]
    assert check("12.9").space == []  # no figures for a release nobody measured: install_runfile reads its header


def test_a_toolkit_path_no_backup_lists_is_named_as_a_risk_before_the_install(check):
    r = check("13.0", {"toolkit_path": "/opt/nvidia/cuda-13.0"})
    assert r.ok and any("is undone by no backup" in f.what and "irreversible: true" in f.what for f in r.risks)
    assert not any("undone by no backup" in f.what for f in check("13.0", {"toolkit_path": "/usr/local/cuda-13.0"}).risks)
