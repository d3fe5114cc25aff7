"""A backup records the system state an upgrade touches, and restore_backup rolls back what the session changed
there: on the simulated host, a CUDA 13.0 toolkit installed side by side with the `cuda` link moved to it, and
torch moved to its cu130 build; after `restore_backup(system=true)` the link points at 12.8 again, 13.0 is
gone, the freeze is the backup's, and the tool proves the whole state equal to the backup."""

from __future__ import annotations

import pytest

from tools.base import ArtifactStore, ToolContext, ToolError
from tools.hosts import HostPool
from tools.install_runfile import InstallRunfile
from tools.pip_freeze_backup import PipFreezeBackup
from tools.restore_backup import RestoreBackup
from tools.sim import build_sim
from tools.system_state import SystemState, parse_system_state, system_diff, system_rollback


def runfile_args(sim, version="13.0", **kw):
    info = sim.runfiles[version]
    return {"host": "sim", "runfile": info.url, "checksum": info.md5, "version": version, **kw}


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


def test_restore_backup_with_system_removes_the_new_toolkit_and_puts_the_link_back(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    try:
        host = pool.get("sim")
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        b = call(PipFreezeBackup(), ctx, host="sim")
        ctx.known_backup = {b.backup_id: b.backup}.get
        recorded = parse_system_state((tmp_path / b.local_dir / "system.txt").read_text())
        assert recorded.cuda_link == "/usr/local/cuda-12.8" and list(recorded.toolkits) == ["/usr/local/cuda-12.8"]
        assert recorded.driver == "590.48.01"
        freeze = host.run(f"{sim.python} -m pip freeze --all").stdout

        r = call(InstallRunfile(), ctx, **runfile_args(sim, move_symlink=True))
        assert r.symlink_after == "/usr/local/cuda-13.0"
        assert host.run(f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} "
                        "torch==2.10.0+cu130").ok

        # Without `system`, the Python environment comes back and the system's differences are reported.
        python_only = call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id)
        assert python_only.remaining_diff == [] and python_only.system_recorded
        assert python_only.system_diff == ["+ toolkit /usr/local/cuda-13.0 (not in the backup)",
                                           "~ /usr/local/cuda -> /usr/local/cuda-12.8 (now -> /usr/local/cuda-13.0)"]
        assert python_only.restored, "restored means what was asked: the Python environment"

        whole = call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id, system=True)
        assert whole.system_commands == ["ln -sfn /usr/local/cuda-12.8 /usr/local/cuda", "rm -rf /usr/local/cuda-13.0"]
        assert whole.system_diff == [] and whole.remaining_diff == [] and whole.restored
        assert host.run("readlink /usr/local/cuda").stdout.strip() == "/usr/local/cuda-12.8"
        assert not sim.sys_path("/usr/local/cuda-13.0").exists()
        assert sim.sys_path("/usr/local/cuda-12.8/bin/nvcc").exists(), "the backed-up toolkit stays"
        assert host.run(f"{sim.python} -m pip freeze --all").stdout == freeze
    finally:
        pool.close()


def test_a_system_file_changed_after_the_backup_is_refused(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    try:
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        b = call(PipFreezeBackup(), ctx, host="sim")
        ctx.known_backup = {b.backup_id: b.backup}.get
        # Someone edits the recorded state to make a toolkit look as if it had been there before.
        system = sim.sys_path(b.remote_dir) / "system.txt"
        system.write_text(system.read_text() + "toolkit\t/usr/local/cuda-13.0\t\n")
        with pytest.raises(ToolError, match="missing or damaged|changed after"):
            call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id, system=True)
    finally:
        pool.close()


def test_the_system_rollback_moves_the_link_before_removing_toolkits_and_leaves_packages_to_the_operator():
    before = SystemState(toolkits={"/usr/local/cuda-12.8": "", "/usr/local/cuda-12": "/usr/local/cuda-12.8"},
                         cuda_link="/usr/local/cuda-12.8", packages={"cuda-toolkit-12-8": "12.8.1-1"},
                         driver="590.48.01")
    now = SystemState(toolkits={**before.toolkits, "/usr/local/cuda-13.0": "", "/usr/local/cuda-13": "/usr/local/cuda-13.0"},
                      cuda_link="/usr/local/cuda-13.0",
                      packages={"cuda-toolkit-12-8": "12.8.1-1", "cuda-toolkit-13-0": "13.0.1-1"}, driver="595.10")
    plan = system_rollback(before, now)
    assert plan.commands == ["ln -sfn /usr/local/cuda-12.8 /usr/local/cuda", "rm -f /usr/local/cuda-13",
                             "rm -rf /usr/local/cuda-13.0"]
    assert plan.by_hand == ["+ package cuda-toolkit-13-0 13.0.1-1 (not in the backup)",
                            "~ driver 590.48.01 (now 595.10)"]
    assert parse_system_state(before.text()) == before
    assert not before.complete and parse_system_state(before.text() + "end\n").complete
    assert system_diff(before, before) == []


def test_a_system_reading_that_stopped_half_way_is_never_rolled_back_from(tmp_path):
    """An empty toolkit list from a reading cut short would mean 'remove every toolkit': refused instead."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    try:
        ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store={})
        b = call(PipFreezeBackup(), ctx, host="sim")
        assert parse_system_state((tmp_path / b.local_dir / "system.txt").read_text()).complete
        ctx.known_backup = lambda backup_id: None  # checked against the host's own sums only
        remote = sim.sys_path(b.remote_dir)
        (remote / "system.txt").write_text("cuda_link\t/usr/local/cuda-12.8\n")  # cut short: no toolkits, no end
        import hashlib
        import json

        manifest = json.loads((remote / "manifest.json").read_text())
        manifest["files"]["system.txt"] = hashlib.sha256((remote / "system.txt").read_bytes()).hexdigest()
        (remote / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
        sums = "".join(f"{hashlib.sha256((remote / n).read_bytes()).hexdigest()}  {n}\n"
                       for n in sorted(p.name for p in remote.iterdir() if p.name != "SHA256SUMS"))
        (remote / "SHA256SUMS").write_text(sums)
        with pytest.raises(ToolError, match="reading of the system state is incomplete"):
            call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id, system=True)
        assert sim.sys_path("/usr/local/cuda-12.8/bin/nvcc").exists(), "nothing was removed"
    finally:
        pool.close()
