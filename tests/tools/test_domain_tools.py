"""inspect_host, pip_freeze_backup, restore_backup and install_runfile, end to end on the simulated
GPU host, through the local transport and through a real sshd."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter, iter_events
from agent.safety.ledger import BackupLedger
from agent.safety.policy import Authorization, SafetyPolicy
from tools.base import ArtifactStore, Registry, ToolContext, ToolError, sha256_hex
from tools.hosts import HostPool, HostSpec
from tools.hosts.sim import sshd_force_command
from tools.inspect_host import InspectHost
from tools.install_runfile import InstallRunfile
from tools.pip_freeze_backup import PipFreezeBackup
from tools.restore_backup import RestoreBackup, restore_plan
from tools.sim import build_sim
from tools.ssh_exec import SSHExec


@pytest.fixture(params=["local", "ssh"])
def sim_world(request, tmp_path):
    """(pool, sim) for a fresh simulated host named `sim`, over the transport of the parameter."""
    sim = build_sim(tmp_path / "gpu")
    if request.param == "local":
        pool = HostPool([sim.host_spec()])
    else:
        # A real sshd whose sessions enter the sim's sandbox: the same plain paths over SSH.
        world = request.getfixturevalue("ssh_world")
        server = request.getfixturevalue("sshd_factory")("simsshd", extra_config=f"ForceCommand {sshd_force_command(sim.root)}\n")
        world.add_host_alias("simbox", server)
        spec = sim.host_spec()
        pool = world.pool(HostSpec(name="sim", transport="ssh", target="simbox", path_prefix=spec.path_prefix,
                                   python=spec.python))
    yield pool, sim
    pool.close()


def ctx_for(pool, tmp_path, store=None) -> ToolContext:
    return ToolContext(hosts=pool, artifacts=ArtifactStore(tmp_path / "t.artifacts"), store=store or {})


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


# --------------------------------------------------------------------------- inspect_host


def test_inspect_host_reads_the_seed_machine(sim_world, tmp_path):
    pool, sim = sim_world
    r = call(InspectHost(), ctx_for(pool, tmp_path), host="sim")
    assert r.driver.version == "590.48.01" and r.driver.cuda_version == "13.1"
    assert r.gpu_count == 8 and {g.compute_capability for g in r.gpus} == {"12.0"}
    assert all(g.name.startswith("NVIDIA RTX PRO 6000 Blackwell") for g in r.gpus)
    assert r.gpus[0].memory_total_mib and r.gpus[0].memory_total_mib > 90_000
    assert r.toolkit_on_path.version == "12.8" and r.nvcc_build == "cuda_12.8.r12.8/compiler.35583870_0"
    assert [(Path(t.path).name, t.version) for t in r.toolkits] == [("cuda-12.8", "12.8")]
    assert r.cuda_symlink == "/usr/local/cuda-12.8"
    assert r.python.torch == "2.10.0+cu128" and r.python.torch_cuda == "12.8" and r.python.cuda_available
    assert r.python.device_count == 8
    assert r.python.packages["sglang"] and r.python.packages["sgl-kernel"].endswith("+cu128")
    assert any("driver supports CUDA 13.1; the toolkit on PATH is 12.8" in n for n in r.notes)
    assert {d.path for d in r.disk} >= {"/tmp"}


def test_inspect_host_reports_missing_pieces_as_facts(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    sim.set_driver_loaded(False)
    pool = HostPool([sim.host_spec(), ])
    r = call(InspectHost(), ctx_for(pool, tmp_path), host="sim", python=str(tmp_path / "no" / "python"))
    assert r.driver is None and r.gpu_count == 0
    assert any("no NVIDIA driver answered" in n for n in r.notes)
    assert r.python is None and any("did not run" in n for n in r.notes)


# --------------------------------------------------------------------------- backup and restore


def test_backup_is_verified_registered_and_restore_brings_back_the_exact_set(sim_world, tmp_path):
    pool, sim = sim_world
    ctx = ctx_for(pool, tmp_path)
    host = pool.get("sim")
    before = host.run(f"{sim.python} -m pip freeze --all").stdout
    b = call(PipFreezeBackup(), ctx, host="sim")
    assert b.verified and b.backup.verified and b.package_count >= 8
    assert b.remote_dir.startswith("/var/tmp/upgrade-agent/backups/")
    assert sim.sys_path(b.remote_dir).is_dir(), "the backup lies in the sim, not on this machine"
    assert (sim.sys_path(b.remote_dir) / "freeze.txt").read_text() == before
    assert not Path(b.local_dir).is_absolute()  # relative to the transcript's folder
    assert (tmp_path / b.local_dir / "freeze.txt").read_text() == before
    assert b.local_version_indexes["torch==2.10.0+cu128"] == sim.index_urls["cu128"]
    sums = dict(line.split()[::-1] for line in (sim.sys_path(b.remote_dir) / "SHA256SUMS").read_text().splitlines())
    assert set(sums) >= {"freeze.txt", "list.json", "indexes.json", "manifest.json", "python.txt"}
    # Its rollback was rehearsed: every pin but pip's own can be fetched again (pip resolved them, installed none).
    pins = len([ln for ln in before.splitlines() if ln.split("==")[0] not in ("pip", "setuptools", "wheel")])
    assert b.backup.rehearsed is True and b.rehearsal.startswith(f"every one of the {pins} pins can be fetched")
    assert host.run(f"{sim.python} -m pip freeze --all").stdout == before

    # Change the environment: torch to cu130 and one extra package.
    up = host.run(f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} "
                  f"torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130")
    assert up.ok, up.stderr
    host.run(f"{sim.python} -m pip uninstall -y vllm")
    changed = host.run(f"{sim.python} -m pip freeze --all").stdout
    assert "torch==2.10.0+cu130" in changed and "vllm" not in changed

    ctx.known_backup = {b.backup_id: b.backup}.get  # as the session's ledger answers
    r = call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id)
    assert r.restored and r.remaining_diff == []
    assert r.checked_against == "the hashes recorded when this session took it"
    assert "torch==2.10.0+cu128" in r.installed and "vllm==0.16.0" in r.installed
    assert host.run(f"{sim.python} -m pip freeze --all").stdout == before


def test_the_restore_plan_uninstalls_extras_then_reinstalls_by_index_pypi_first():
    """restore_backup runs this plan and the report prints it; without the current freeze, the fallback."""
    cu = "https://download.pytorch.org/whl/cu128"
    want = {"torch": "torch==2.10.0+cu128", "numpy": "numpy==2.3.0", "pip": "pip==25.0", "six": "six==1.17.0"}
    have = {"torch": "torch==2.10.0+cu130", "numpy": "numpy==2.4.0", "pip": "pip==25.0", "six": "six==1.17.0",
            "wheel": "wheel==0.45.0", "vllm": "vllm==0.16.0", "flash-attn": "flash-attn==2.8.0"}
    indexes = {"torch==2.10.0+cu128": cu}
    plan = restore_plan("/opt/my venv/bin/python", want, indexes, "/var/tmp/b", have)
    assert plan.uninstall == ["flash-attn", "vllm"] and plan.install == ["numpy==2.3.0", "torch==2.10.0+cu128"]
    assert plan.lines == ["'/opt/my venv/bin/python' -m pip uninstall -y flash-attn vllm",
                          "'/opt/my venv/bin/python' -m pip install --no-deps numpy==2.3.0",
                          f"'/opt/my venv/bin/python' -m pip install --no-deps --index-url {cu} torch==2.10.0+cu128"]
    assert restore_plan("python3", want, indexes, "/var/tmp/b", dict(want)).commands == []
    assert restore_plan("python3", want, indexes, "/var/tmp/b").lines == [
        f"python3 -m pip install --no-deps --index-url {cu} torch==2.10.0+cu128",
        "python3 -m pip install --no-deps -r /var/tmp/b/freeze.txt"]


def test_backup_warns_about_what_cannot_be_restored_exactly(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    host = pool.get("sim")
    wheel = next(sim.root.glob("srv/pypi/simple/triton/*.whl"))
    sim.sys_path(f"/tmp/{wheel.name}").write_bytes(wheel.read_bytes())  # a wheel file on the host
    local = f"/tmp/{wheel.name}"
    r = host.run(f"{sim.python} -m pip install --no-deps --force-reinstall {local}")
    assert r.ok, r.stderr
    b = call(PipFreezeBackup(), ctx_for(pool, tmp_path), host="sim")
    assert any("triton @ file://" in w and "local file" in w for w in b.warnings), b.warnings


def test_a_damaged_backup_is_refused_by_restore(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ctx_for(pool, tmp_path)
    b = call(PipFreezeBackup(), ctx, host="sim")
    (sim.sys_path(b.remote_dir) / "freeze.txt").write_text("torch==1.0\n")
    with pytest.raises(ToolError, match="missing or damaged"):
        call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id)


def test_a_backup_rewritten_whole_on_the_host_is_refused_when_this_session_took_it(tmp_path):
    """Whoever can edit the backup can rewrite its SHA256SUMS too: the session's own hashes decide."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ledger = BackupLedger()
    ctx = ctx_for(pool, tmp_path)
    ctx.known_backup = ledger.find
    b = call(PipFreezeBackup(), ctx, host="sim")
    ledger.register(b.backup)
    remote = sim.sys_path(b.remote_dir)
    freeze = (remote / "freeze.txt").read_text()
    assert "vllm==" in freeze
    (remote / "freeze.txt").write_text("".join(ln for ln in freeze.splitlines(True) if not ln.startswith("vllm==")))
    names = [line.split()[1] for line in (remote / "SHA256SUMS").read_text().splitlines()]
    (remote / "SHA256SUMS").write_text("".join(f"{sha256_hex((remote / n).read_bytes())}  {n}\n" for n in names))
    with pytest.raises(ToolError, match=r"changed after it was taken: freeze.txt no longer match"):
        call(RestoreBackup(), ctx, host="sim", backup_id=b.backup_id)
    with pytest.raises(ToolError, match="is of host sim, not other"):
        call(RestoreBackup(), ctx, host="other", backup_id=b.backup_id)
    # Without the session's record only the host's own sums are there, and the result says so.
    r = call(RestoreBackup(), ctx_for(pool, tmp_path), host="sim", backup_id=b.backup_id)
    assert r.checked_against.startswith("the host's own SHA256SUMS only")
    assert r.uninstalled == ["vllm"]  # what the rewritten backup asked for


def test_through_the_loop_restore_checks_the_backup_against_the_sessions_own_record(tmp_path):
    """The session hands its ledger to restore_backup: a backup rewritten on the host between
    the backup and the restore is refused, sums and all."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    taken: list[str] = []

    def expert(messages):
        n = sum(1 for m in messages if m["role"] == "assistant")
        if n == 0:
            return turn(calls=[("pip_freeze_backup", {"host": "sim"})])
        if n == 1:
            backup_id = json.loads(messages[-1]["content"])["backup_id"]
            taken.append(backup_id)
            remote = Path(sim.sys_path(f"/var/tmp/upgrade-agent/backups/{backup_id}"))
            freeze = (remote / "freeze.txt").read_text()
            (remote / "freeze.txt").write_text(freeze.replace("vllm==", "vllm>="))
            names = [line.split()[1] for line in (remote / "SHA256SUMS").read_text().splitlines()]
            (remote / "SHA256SUMS").write_text(
                "".join(f"{sha256_hex((remote / n).read_bytes())}  {n}\n" for n in names))
            return turn(calls=[("restore_backup", {"host": "sim", "backup_id": backup_id, "python": None})])
        return turn("stopped")

    path = tmp_path / "t.jsonl"
    gate = SafetyPolicy(scope={"sim"}, authorizations=[Authorization(host="sim", tool="restore_backup", args={"backup_id": "*"},
                                                                      destructive=True)])
    session = Session(model=ScriptedModel(expert), registry=Registry([PipFreezeBackup(), RestoreBackup()]),
                      gate=gate, transcript=TranscriptWriter(path), hosts=pool, budget=Budget(turns=5))
    assert run_session(session, "back up, then restore").status == "done"
    restore = [e for e in iter_events(path) if e["type"] == "tool_result" and e["tool"] == "restore_backup"][0]
    assert restore["status"] == "error", restore["content"]
    assert f"backup {taken[0]} on sim was changed after it was taken: freeze.txt" in restore["content"]


def test_a_mutating_step_is_allowed_only_after_a_verified_backup(tmp_path):
    """The gate, the ledger and the real backup tool together, through the loop."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    install = f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} torch==2.10.0+cu130"
    model = ScriptedModel([
        turn(calls=[("ssh_exec", {"host": "sim", "command": install})]),
        turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
        turn(calls=[("ssh_exec", {"host": "sim", "command": install})]),
        turn("torch moved to cu130"),
    ])
    path = tmp_path / "t.jsonl"
    gate = SafetyPolicy(scope={"sim"}, authorizations=[Authorization(host="sim", command=install)])
    session = Session(model=model, registry=Registry([SSHExec(), PipFreezeBackup()]), gate=gate,
                      transcript=TranscriptWriter(path), hosts=pool, budget=Budget(turns=6))
    assert run_session(session, "move torch to cu130").status == "done"
    decisions = [(e["rule"], e["verdict"]) for e in iter_events(path) if e["type"] == "decision"]
    assert decisions == [("no-backup", "deny"), ("backup", "allow"), ("authorized", "allow")]
    backup = [e for e in iter_events(path) if e["type"] == "backup"][0]
    last = [e for e in iter_events(path) if e["type"] == "decision"][-1]
    assert last["backup_id"] == backup["backup_id"]
    assert "torch==2.10.0+cu130" in pool.get("sim").run(f"{sim.python} -m pip freeze").stdout


# --------------------------------------------------------------------------- install_runfile


def _runfile_args(sim, version="13.0", **kw):
    info = sim.runfiles[version]
    return {"host": "sim", "runfile": info.url, "checksum": info.md5, "version": version, **kw}


def test_install_runfile_side_by_side(sim_world, tmp_path):
    pool, sim = sim_world
    events = []
    ctx = ctx_for(pool, tmp_path)
    ctx.emit = lambda kind, data: events.append((kind, data))
    r = call(InstallRunfile(), ctx, **_runfile_args(sim))
    assert r.nvcc_version == "13.0" and r.toolkit_path == "/usr/local/cuda-13.0"
    assert r.downloaded and r.checksum_ok
    assert "--toolkit" in r.installer_command and "--driver" not in r.installer_command
    assert r.symlink_before == r.symlink_after == "/usr/local/cuda-12.8"
    assert sim.sys_path("/usr/local/cuda-12.8/bin/nvcc").exists(), "the old toolkit must stay"
    assert not r.log_errors and r.log_tail
    assert any(k == "progress" and d.get("step") == "running the installer" for k, d in events)
    # The same again: the target exists now, and nothing is run.
    with pytest.raises(ToolError, match="already exists"):
        call(InstallRunfile(), ctx, **_runfile_args(sim))


def test_install_runfile_refuses_a_bad_checksum_before_running(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    with pytest.raises(ToolError, match="checksum mismatch .* it was not run"):
        call(InstallRunfile(), ctx_for(pool, tmp_path), **_runfile_args(sim, checksum="0" * 32))
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()


def test_install_runfile_reports_too_little_space(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    sim.set_free_space("/tmp", 100)  # MB: the real 13.0 runfile needs several GB to extract
    pool = HostPool([sim.host_spec()])
    with pytest.raises(ToolError) as e:
        call(InstallRunfile(), ctx_for(pool, tmp_path), **_runfile_args(sim))
    assert "Disk space check has failed" in str(e.value) or "not enough space" in str(e.value)
    assert not sim.sys_path("/usr/local/cuda-13.0/bin/nvcc").exists()


def test_install_runfile_never_installs_a_driver_that_is_loaded(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    tool = InstallRunfile()
    args = tool.parse_args(_runfile_args(sim, toolkit_only=False))
    assert tool.action(args).risk.cls.value == "destructive"
    with pytest.raises(ToolError, match="driver 590.48.01 is loaded"):
        tool.run(ctx_for(pool, tmp_path), args)


def test_install_runfile_checks_the_driver_supports_the_cuda(tmp_path):
    sim = build_sim(tmp_path / "gpu", driver_version="570.124.06")
    pool = HostPool([sim.host_spec()])
    with pytest.raises(ToolError, match="driver 570.124.06 is too old for CUDA 13.0: CUDA 13.x needs driver >= 580"):
        call(InstallRunfile(), ctx_for(pool, tmp_path), **_runfile_args(sim))


def test_install_runfile_can_move_the_symlink_when_asked(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    tool = InstallRunfile()
    args = tool.parse_args(_runfile_args(sim, move_symlink=True))
    assert tool.action(args).risk.cls.value == "destructive"
    r = tool.run(ctx_for(pool, tmp_path), args)
    assert r.symlink_after == "/usr/local/cuda-13.0"
    assert json.loads(r.model_dump_json())["symlink_before"].endswith("cuda-12.8")


def test_a_benchmark_may_set_the_toolkit_but_not_load_code_through_its_environment():
    from agent.safety.policy import classify_action
    from tools.run_bench import RunBench

    tool = RunBench()

    def risk(env, cwd=None):
        args = tool.parse_args({"host": "sim", "command": "python -m sglang.bench_serving --backend sglang",
                                "parser": "sglang_bench_serving", "label": "after", "env": env, "cwd": cwd})
        return classify_action(tool.action(args))

    assert risk({"CUDA_HOME": "/usr/local/cuda-13.0", "CUDA_VISIBLE_DEVICES": "0,1"}).cls.value == "read-only"
    assert risk({}, cwd="/srv/bench").cls.value == "read-only"
    assert risk({"CUDA_HOME": "/tmp/sim/usr/local/cuda-13.0"}).cls.value == "read-only"  # a sysroot's toolkit
    for name in ("LD_PRELOAD", "PYTHONPATH", "PATH", "NCCL_NET_PLUGIN", "NCCL_DEBUG_FILE", "CUDA_HOME"):
        r = risk({name: "/tmp/x"})
        assert r.cls.value == "mutating" and r.rule == "workload:env" and name in r.reason
    assert risk({"CUDA_HOME": "/usr/local/cuda-13.0/../../../tmp/x/usr/local/cuda"}).rule == "workload:env"


def test_cancelled_tools_say_so_and_what_state_they_leave(tmp_path):
    """A cancel is an error naming its cause (as the session gives it), never a result that looks
    like a finished inspection or a failed command."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ctx_for(pool, tmp_path)
    b = call(PipFreezeBackup(), ctx, host="sim")
    ctx.cancel.set()
    budget = "because the session's time budget of 60 s ran out"
    cases = [
        (InspectHost(), {"host": "sim"}, budget,
         f"inspecting sim was cancelled {budget}: no facts were gathered"),
        (PipFreezeBackup(), {"host": "sim"}, "by the operator",
         "the backup of sim was cancelled by the operator; nothing was written"),
        (RestoreBackup(), {"host": "sim", "backup_id": b.backup_id}, "by the operator",
         "cancelled by the operator while reading the environment; nothing was changed yet"),
        (InstallRunfile(), _runfile_args(sim), "by the operator",
         "cancelled by the operator during preflight; the command was killed and nothing was written"),
    ]
    for tool, args, reason, message in cases:
        ctx.cancel_reason = lambda reason=reason: reason
        with pytest.raises(ToolError) as e:
            call(tool, ctx, **args)
        assert message in str(e.value), (tool.name, str(e.value))


class _CancelAfter:
    """A host provider whose host sets the cancel flag right after a command matching `marker` ends."""

    def __init__(self, pool, cancel, marker: str):
        self.pool, self.cancel, self.marker = pool, cancel, marker

    def get(self, name):
        host, cancel, marker = self.pool.get(name), self.cancel, self.marker

        class Wrapped:
            spec = host.spec

            def run(self, command, **kw):
                result = host.run(command, **kw)
                if marker in command:
                    cancel.set()
                return result

            def __getattr__(self, attr):
                return getattr(host, attr)

        return Wrapped()


def test_a_cancel_after_the_installer_ran_does_not_hide_the_install(tmp_path):
    """The checks after the installer (log, nvcc, the symlink) always finish and report."""
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ctx_for(pool, tmp_path)
    ctx.hosts = _CancelAfter(pool, ctx.cancel, "--toolkitpath=")
    r = call(InstallRunfile(), ctx, **_runfile_args(sim))
    assert ctx.cancel.is_set() and r.nvcc_version == "13.0"
    assert r.symlink_after == "/usr/local/cuda-12.8"


def test_a_cancel_during_the_installer_says_the_toolkit_may_be_partly_installed(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool = HostPool([sim.host_spec()])
    ctx = ctx_for(pool, tmp_path)

    def cancel_when_the_installer_starts(kind, data):
        if kind == "progress" and data.get("step") == "running the installer":
            ctx.cancel.set()  # as Ctrl-C would, the moment the installer is launched

    ctx.emit = cancel_when_the_installer_starts
    with pytest.raises(ToolError) as e:
        call(InstallRunfile(), ctx, **_runfile_args(sim))
    target = "/usr/local/cuda-13.0"
    assert f"cancelled by the operator during running the installer; the command was killed and {target} may be " \
           f"partly installed: check it and remove it before trying again" in str(e.value)
