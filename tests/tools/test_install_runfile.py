"""install_runfile on the simulated GPU host: a host without a compiler, or without the room the install
needs, is refused before anything is written or downloaded, and a failed installer's error says what it
said and what it left behind."""

from __future__ import annotations

import hashlib
import shutil
import subprocess

import pytest

from tools.base import ArtifactStore, ToolContext, ToolError
from tools.hosts import CommandResult, HostPool
from tools.install_runfile import InstallRunfile, installer_failure
from tools.sim import build_sim

TARGET = "/usr/local/cuda-13.0"
LOG = "/var/log/cuda-installer.log"


class _Recorded:
    """A host provider that keeps every command its hosts ran, in order; `after(command)` runs after each one."""

    def __init__(self, pool, after=None):
        self.pool, self.commands, self.after = pool, [], after or (lambda command: None)

    def get(self, name):
        host, commands, after = self.pool.get(name), self.commands, self.after

        class Host:
            spec = host.spec

            def run(self, command, **kw):
                commands.append(command)
                try:
                    return host.run(command, **kw)
                finally:
                    after(command)

            def __getattr__(self, attr):
                return getattr(host, attr)

        return Host()


def _call(sim, tmp_path, commands: list[str], fills: tuple[str, int] | None = None, **args):
    """`fills` (a mount, MB): the mount fills up to that once the runfile's checksum was verified, as when
    another job writes there meanwhile: the installer then meets what the preflight could not foresee."""
    pool = HostPool([sim.host_spec()])

    def after(command: str) -> None:
        if fills and command.startswith(("md5sum ", "sha256sum ")):
            sim.set_free_space(*fills)

    hosts = _Recorded(pool, after)
    hosts.commands = commands
    ctx = ToolContext(hosts=hosts, artifacts=ArtifactStore(tmp_path / "t.artifacts"))
    info = sim.runfiles["13.0"]
    tool = InstallRunfile()
    try:
        return tool.run(ctx, tool.parse_args({"host": "sim", "runfile": info.url, "checksum": info.md5,
                                              "version": "13.0", **args}))
    finally:
        pool.close()


def install(sim, tmp_path, **args):
    """(result, the commands run) of an install that succeeds."""
    commands: list[str] = []
    return _call(sim, tmp_path, commands, **args), commands


def failure(sim, tmp_path, fills: tuple[str, int] | None = None, **args) -> tuple[str, list[str]]:
    """(the error, the commands run) of an install that fails."""
    commands: list[str] = []
    if fills:
        sim.set_free_space(fills[0], 64_000)  # room at the start: the preflight passes
    with pytest.raises(ToolError) as e:
        _call(sim, tmp_path, commands, fills, **args)
    return str(e.value), commands


# --------------------------------------------------------------------------- no compiler


def test_a_host_without_gcc_is_refused_before_anything_is_downloaded_or_written(tmp_path):
    sim = build_sim(tmp_path / "gpu", gcc=None)
    message, commands = failure(sim, tmp_path)
    assert "\n" not in message
    assert message == (
        "sim has no gcc on PATH (`command -v gcc` finds none), and the CUDA installer stops without one "
        "(\"Missing gcc. gcc is required to continue.\"): install a compiler on sim first (Debian and Ubuntu: "
        "apt-get install gcc), or install with `override: true`, which skips the installer's compiler check and "
        "needs a rule of the goal file that allows it; nothing was written or downloaded")
    assert "command -v gcc" in commands
    assert not [c for c in commands if c.startswith(("curl -fL", "mkdir", "sh "))], commands
    assert list(sim.sys_path("/tmp").iterdir()) == []
    assert not sim.sys_path(LOG).exists() and not sim.sys_path(TARGET).exists()


def test_override_installs_on_a_host_without_gcc_and_skips_the_check(tmp_path):
    sim = build_sim(tmp_path / "gpu", gcc=None)
    r, commands = install(sim, tmp_path, override=True)
    assert "command -v gcc" not in commands
    assert r.nvcc_version == "13.0" and "--override" in r.installer_command
    assert r.log_errors == ["[ERROR]: Missing gcc. gcc is required to continue."]


def test_a_host_with_gcc_passes_the_check(tmp_path):
    r, commands = install(build_sim(tmp_path / "gpu"), tmp_path)
    assert "command -v gcc" in commands and r.nvcc_version == "13.0"


def test_a_verified_install_removes_the_runfile_it_downloaded_into_a_temporary_directory(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    info = sim.runfiles["13.0"]
    r, _ = install(sim, tmp_path)
    assert r.downloaded and r.runfile_removed and r.runfile == f"/tmp/{info.filename}", r
    assert not sim.sys_path(r.runfile).exists()
    assert sim.sys_path(TARGET + "/bin/nvcc").exists()
    # one downloaded elsewhere stays, as on a failure
    sim2 = build_sim(tmp_path / "gpu2")
    r, _ = install(sim2, tmp_path, download_dir="/root/runfiles")
    assert r.downloaded and not r.runfile_removed and sim2.sys_path(r.runfile).is_file()


# --------------------------------------------------------------------------- a failed installer


def test_a_failed_install_says_what_the_installer_said_and_what_it_left(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    info = sim.runfiles["13.0"]
    downloaded = f"/tmp/{info.filename}"
    message, commands = failure(sim, tmp_path, fills=("/tmp", 100))  # room for the file, not for extracting it
    assert any(c.startswith("curl -fL") for c in commands)  # it was this call's own download
    assert message.startswith("the installer failed (exit 1): Disk space check has failed. Installation cannot "
                              f"continue. Its log {LOG} says: Not enough space on parition mounted at /tmp. ")
    assert ".." not in message.replace("/..", "")
    assert f"The runfile's checksum matched (md5 {info.md5}) before it ran." in message
    assert "The symlink /usr/local/cuda pointed at /usr/local/cuda-12.8 before and still does." in message
    assert f"{TARGET} was not created." in message
    assert message.endswith(f"The runfile this call downloaded to {downloaded} was removed (a retry downloads it "
                            "again).")
    assert not sim.sys_path(downloaded).exists()
    assert sim.sys_path("/usr/local/cuda").readlink().as_posix() == "/usr/local/cuda-12.8"


def test_a_runfile_the_call_did_not_download_into_a_temporary_directory_stays(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    info = sim.runfiles["13.0"]
    full = ("/tmp", 100)
    # Given as a path on the host.
    message, _ = failure(sim, tmp_path, full, runfile=str(info.path))
    assert message.endswith(f"The runfile {info.path} was given as a path on the host and stays there.")
    assert sim.sys_path(str(info.path)).is_file()
    # Already downloaded before this call, with the right checksum.
    there = sim.sys_path(f"/tmp/{info.filename}")
    there.write_bytes(sim.sys_path(str(info.path)).read_bytes())
    message, commands = failure(sim, tmp_path, full)
    assert not any(c.startswith("curl -fL") for c in commands)
    assert message.endswith(f"The runfile /tmp/{info.filename} was there before this call (its checksum matched) "
                            "and stays there.")
    assert hashlib.md5(there.read_bytes()).hexdigest() == info.md5
    # Downloaded by this call, into a directory that is not a temporary one.
    message, _ = failure(sim, tmp_path, full, download_dir="/root/runfiles")
    assert message.endswith(f"The runfile this call downloaded stays at /root/runfiles/{info.filename} "
                            "(download_dir is not a temporary directory).")
    assert sim.sys_path(f"/root/runfiles/{info.filename}").is_file()


def test_only_this_runs_log_lines_are_reported(tmp_path):
    """The installer appends to its log: an error of an earlier run is not this install's."""
    sim = build_sim(tmp_path / "gpu")
    log = sim.sys_path(LOG)
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("[INFO]: an earlier run\n[ERROR]: Missing gcc. gcc is required to continue.\n")
    r, _ = install(sim, tmp_path)
    assert r.nvcc_version == "13.0" and r.log_errors == []
    assert "an earlier run" not in r.log_tail and "Installed: CUDA Toolkit 13.0" in r.log_tail


def test_an_installer_that_timed_out_or_printed_nothing_is_said_so_in_sentences():
    timed_out = CommandResult(command="sh x.run", exit_code=None, stdout="", stderr="", duration_s=60.0,
                              timed_out=True)
    text = installer_failure(timed_out, 60, LOG, [], "md5 00", ["The runfile x.run stays."])
    assert text == (f"the installer failed (timed out after 60 s): it printed nothing. Its log {LOG} has no error "
                    "lines from this run. The runfile's checksum matched (md5 00) before it ran. The runfile x.run "
                    "stays.")
    said = CommandResult(command="sh x.run", exit_code=1, stdout="Failed to verify gcc version.\n", stderr="",
                         duration_s=1.0)
    text = installer_failure(said, 60, LOG, ["[ERROR]: Missing gcc. gcc is required to continue."], "md5 00", [])
    assert text.startswith("the installer failed (exit 1): Failed to verify gcc version. Its log "
                           f"{LOG} says: Missing gcc. gcc is required to continue. The runfile's")
    assert ".." not in text


def test_a_link_planted_on_the_way_is_refused_before_anything_is_written(tmp_path):
    """A rule allows tmpdir and download_dir under /tmp/*: a link planted at /tmp/x to the 12.8 toolkit's bin
    would have the runfile downloaded there. The resolved path is checked: refused, nothing written."""
    sim = build_sim(tmp_path / "gpu")
    info = sim.runfiles["13.0"]
    sim.sys_path("/tmp/x").symlink_to("/usr/local/cuda-12.8/bin")
    message, commands = failure(sim, tmp_path, tmpdir="/tmp/x", download_dir="/tmp/x")
    assert "tmpdir /tmp/x leads to /usr/local/cuda-12.8/bin" in message and "nothing was written" in message
    assert not any(c.startswith("curl -fL") for c in commands)
    assert not sim.sys_path(f"/usr/local/cuda-12.8/bin/{info.filename}").exists()
    assert not sim.sys_path(TARGET).exists()
    # and a toolkit_path through a link (or `..`)
    message, _ = failure(sim, tmp_path, toolkit_path="/usr/local/cuda-12.8/../cuda-13.0-x")
    assert "toolkit_path /usr/local/cuda-12.8/../cuda-13.0-x leads to /usr/local/cuda-13.0-x" in message


# --------------------------------------------------------------------------- the room it needs, known first


def test_a_target_without_room_for_the_toolkit_is_refused_before_anything_is_downloaded(tmp_path):
    """The seed's box: 1.5 GB free under /usr/local. The installer would say so only after the download."""
    sim = build_sim(tmp_path / "gpu", free_space_mb={"/usr/local": 1500})
    message, commands = failure(sim, tmp_path)
    assert message == ("not enough space to install CUDA 13.0 on sim: the filesystem mounted at /usr/local has 1.5 "
                       "GiB free and needs 6.7 GiB: 6.7 GiB in /usr/local (the toolkit goes there) (figures: NVIDIA's "
                       "installer figures for CUDA 13.0). Free space there, or choose another tmpdir or toolkit_path on "
                       "a filesystem that has it; nothing was downloaded or written")
    assert not [c for c in commands if c.startswith(("curl -fL", "mkdir", "sh ", "sudo"))], commands
    assert list(sim.sys_path("/tmp").iterdir()) == []
    assert not sim.sys_path(LOG).exists() and not sim.sys_path(TARGET).exists()


def test_places_on_one_filesystem_need_their_sum(tmp_path):
    """Unpacked in /var/tmp (8.0 GiB) and installed under /usr/local (6.7 GiB), both on /: each fits in its 11.7
    GiB, both at once do not, and the installer copies while the payload is unpacked."""
    sim = build_sim(tmp_path / "gpu", free_space_mb={"/": 12_000})
    message, commands = failure(sim, tmp_path, tmpdir="/var/tmp")
    assert ("the filesystem mounted at / has 11.7 GiB free and needs 14.7 GiB: 8.0 GiB in /var/tmp (the installer "
            "unpacks the runfile there); 6.7 GiB in /usr/local (the toolkit goes there)") in message
    assert not [c for c in commands if c.startswith(("curl -fL", "mkdir"))]
    sim.set_free_space("/", 16_000)
    r, _ = install(sim, tmp_path, tmpdir="/var/tmp")
    assert r.nvcc_version == "13.0"


def test_a_runfiles_own_header_says_what_it_unpacks_to(tmp_path):
    """A real makeself archive (what NVIDIA's runfiles are) of a release no table knows: its header's size is
    read with `head`, nothing of it runs, and the install is refused on it."""
    src = tmp_path / "payload"
    src.mkdir()
    (src / "toolkit.bin").write_bytes(b"\0" * 50_000_000)
    (src / "install.sh").write_text("#!/bin/sh\ntouch /tmp/the-runfile-ran\n")
    (src / "install.sh").chmod(0o755)
    sim = build_sim(tmp_path / "gpu", free_space_mb={"/tmp": 20})
    name = "cuda_12.9.1_575.57.08_linux.run"
    runfile = sim.sys_path(f"/root/{name}")
    runfile.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([shutil.which("makeself"), "--nox11", "--quiet", str(src), str(runfile), "CUDA", "./install.sh"],
                   check=True, capture_output=True)
    commands: list[str] = []
    with pytest.raises(ToolError) as e:
        _call(sim, tmp_path, commands, runfile=f"/root/{name}", version="12.9",
              checksum=hashlib.md5(runfile.read_bytes()).hexdigest())
    assert "the filesystem mounted at /tmp has 20 MiB free and needs 48 MiB: 48 MiB in /tmp (the installer unpacks " \
           "the runfile there)" in str(e.value) and "(figures: the runfile's header)" in str(e.value)
    assert any(c.startswith("head -c 65536 /root/" + name) for c in commands)
    assert not [c for c in commands if c.startswith(("sh ", "sudo", "md5sum"))]
    assert not sim.sys_path("/tmp/the-runfile-ran").exists()


def test_a_toolkit_under_opt_is_seen_by_inspect_host_and_its_rollback_names_it(tmp_path):
    """Where teams keep toolkits when /usr/local is small: the reading at the end sees it (the report's table says
    it was added), and the printed rollback removes it by hand, since no backup does."""
    from agent.report.data import Step, ToolkitRow, ToolkitView
    from agent.report.rollback import toolkit_rollback
    from tools.inspect_host import InspectHost

    sim = build_sim(tmp_path / "gpu")
    r, _ = install(sim, tmp_path, toolkit_path="/opt/nvidia/cuda-13.0")
    assert r.toolkit_path == "/opt/nvidia/cuda-13.0" and r.nvcc_version == "13.0"
    pool = HostPool([sim.host_spec()])
    try:
        tool = InspectHost()
        seen = tool.run(ToolContext(hosts=pool, artifacts=ArtifactStore(None)), tool.parse_args({"host": "sim"}))
    finally:
        pool.close()
    assert {(t.path, t.version) for t in seen.toolkits} >= {("/opt/nvidia/cuda-13.0", "13.0"),
                                                             ("/usr/local/cuda-12.8", "12.8")}
    # A reading after that could not see where an install went (anywhere else): the install's own record says.
    install_step = Step(turn=3, index=0, tool="install_runfile", arguments={}, host="sim", ok=True,
                        data={"toolkit_path": "/data/toolkits/cuda-13.0", "symlink_before": "/usr/local/cuda-12.8",
                              "symlink_after": "/usr/local/cuda-12.8"})
    view = ToolkitView(host="sim", before_step=install_step, after_source="final state",
                       rows=[ToolkitRow("/usr/local/cuda-12.8", "12.8", True, True)], link_before="/usr/local/cuda-12.8",
                       link_after="/usr/local/cuda-12.8", on_path_before="12.8", on_path_after="12.8",
                       installs=[install_step], after_known=True)
    assert toolkit_rollback(None, view) == ["rm -rf /data/toolkits/cuda-13.0"]
