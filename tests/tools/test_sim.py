"""The simulated GPU host, driven the way the product drives a host: through SimHost(sim.host_spec()).

Every command runs inside the sim's sandbox, where its trees lie at the real paths: commands name
/usr/local/cuda-12.8, /opt/venv/bin/python, /var/log, /tmp as on a GPU box. sim.sys_path(p) is
where such a path physically lies on this machine, for checks made from outside with pathlib.

Output formats are checked against samples of the real tools in tests/data/sim/ (layout, labels,
column positions), behaviour against what the real installer, pip, torch and the benchmarks do.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tools.hosts import HostError, HostSpec, LocalHost, SimHost
from tools.hosts.sim import sandbox_argv, sshd_force_command
from tools.sim import Sim, build_sim

DATA = Path(__file__).resolve().parents[1] / "data" / "sim"
REPO = Path(__file__).resolve().parents[2]

BENCH = ("{py} -m sglang.bench_serving --backend sglang --dataset-name random --num-prompts 20 "
         "--random-input-len 1024 --random-output-len 256 --max-concurrency 1")


def fixture(name: str) -> str:
    return (DATA / name).read_text()


@pytest.fixture
def sim(tmp_path):
    return build_sim(tmp_path / "gpu-box")


@pytest.fixture
def host(sim):
    return SimHost(sim.host_spec())


def run(host, command: str, ok: bool = True, **kwargs):
    r = host.run(command, timeout=120, **kwargs)
    if ok:
        assert r.exit_code == 0, f"{command}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    return r


def q(path) -> str:
    return shlex.quote(str(path))


def install_toolkit_13(host, sim, *extra: str):
    rf = sim.runfiles["13.0"]
    return run(host, f"sh {q(rf.path)} --silent --toolkit --toolkitpath=/usr/local/cuda-13.0 "
                     "--no-man-page --tmpdir=/tmp " + " ".join(extra), ok=False)


def upgrade_torch_to_cu130(host, sim):
    return run(host, f"{q(sim.python)} -m pip install --index-url {sim.index_urls['cu130']} "
                     "torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130")


def output_throughput(stdout: str) -> float:
    return float(re.search(r"^Output token throughput \(tok/s\):\s+([\d.]+)", stdout, re.M).group(1))


# --------------------------------------------------------------------------- nvidia-smi


def bars(line: str) -> list[int]:
    return [i for i, c in enumerate(line) if c in "|+"]


def test_nvidia_smi_table_has_the_real_layout(host):
    sim_lines = run(host, "nvidia-smi").stdout.splitlines()
    real_lines = fixture("nvidia-smi.txt").splitlines()
    assert len(sim_lines) == len(real_lines)
    assert re.fullmatch(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4} {7}", sim_lines[0])
    for s, r in zip(sim_lines[1:], real_lines[1:]):
        assert len(s) == len(r), f"\nsim:  {s!r}\nreal: {r!r}"
        assert bars(s) == bars(r), f"\nsim:  {s!r}\nreal: {r!r}"
        if not re.search(r"\d", r):  # borders, headings, the processes box
            assert s == r
    assert sim_lines[2] == real_lines[2]  # driver 590.48.01, CUDA 13.1
    gpu_rows = [line for line in sim_lines if re.match(r"\|\s+\d+  NVIDIA", line)]
    assert len(gpu_rows) == 8
    for row, real in zip(gpu_rows, [line for line in real_lines if re.match(r"\|\s+\d+  NVIDIA", line)]):
        assert row[:41] == real[:41] and row[-25:] == real[-25:]  # index, truncated name, persistence, ECC
    usage = [line for line in sim_lines if "MiB /" in line]
    assert all(re.fullmatch(r"\| 30%   \d\dC    P8 +\d+W /  600W \| +0MiB /  97887MiB \|      0%      Default \|", u)
               for u in usage)


def test_nvidia_smi_list_gpus(host):
    lines = run(host, "nvidia-smi -L").stdout.splitlines()
    real = fixture("nvidia-smi-L.txt").splitlines()
    pattern = r"GPU (\d): NVIDIA RTX PRO 6000 Blackwell Workstation Edition \(UUID: GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\)"
    assert len(lines) == len(real) == 8
    for i, (s, r) in enumerate(zip(lines, real)):
        assert re.fullmatch(pattern, s) and re.fullmatch(pattern, r)
        assert s.startswith(f"GPU {i}: ")
    assert len({line.split("UUID: ")[1] for line in lines}) == 8


@pytest.mark.parametrize("fmt,sample", [("csv", "nvidia-smi-query-gpu.csv"),
                                        ("csv,noheader,nounits", "nvidia-smi-query-gpu-noheader-nounits.csv")])
def test_nvidia_smi_query_gpu(host, fmt, sample):
    out = run(host, "nvidia-smi --query-gpu=index,name,driver_version,memory.total,memory.used,compute_cap,"
                    f"power.draw --format={fmt}").stdout.splitlines()
    real = fixture(sample).splitlines()
    assert len(out) == len(real)
    if "noheader" not in fmt:
        assert out[0] == real[0]
    for s, r in zip(out[-8:], real[-8:]):
        s_cells, r_cells = s.split(", "), r.split(", ")
        assert s_cells[:6] == r_cells[:6]  # everything but the power draw is the story's machine
        assert re.sub(r"[\d.]+", "N", s_cells[6]) == re.sub(r"[\d.]+", "N", r_cells[6])


def test_nvidia_smi_rejects_unknown_fields_and_options(host):
    r = run(host, "nvidia-smi --query-gpu=name,bogus --format=csv", ok=False)
    assert r.exit_code == 2 and r.stdout.startswith('Field "bogus" is not a valid field to query.')
    r = run(host, "nvidia-smi --frobnicate", ok=False)
    assert r.exit_code == 2 and "not recognized" in r.stdout


def test_nvidia_smi_q_has_the_real_keys_in_order(host):
    def keys(text: str) -> list[tuple[int, str]]:
        out = []
        for line in text.splitlines():
            if line.strip():
                indent = len(line) - len(line.lstrip())
                out.append((indent, line.split(":")[0].rstrip() if " : " in line or line.endswith(": ") else line.strip()))
        return out

    sim_text = run(host, "nvidia-smi -q -i 0").stdout
    real_text = fixture("nvidia-smi-q.txt")
    assert keys(sim_text) == keys(real_text)
    colons = {line.index(" : ") for line in sim_text.splitlines() if " : " in line}
    assert colons == {line.index(" : ") for line in real_text.splitlines() if " : " in line} == {41}
    assert "    Product Name                          : NVIDIA RTX PRO 6000 Blackwell Workstation Edition" in sim_text
    assert run(host, "nvidia-smi -q").stdout.count("\nGPU 00000000:") == 8


def test_nvidia_smi_version(host):
    assert run(host, "nvidia-smi --version").stdout == fixture("nvidia-smi-version.txt")


def test_nvcc_of_the_installed_toolkit(host, sim):
    assert run(host, "nvcc --version").stdout == fixture("nvcc-12.8.txt")
    assert run(host, "/usr/local/cuda-12.8/bin/nvcc -V").stdout == fixture("nvcc-12.8.txt")
    assert run(host, "command -v nvcc").stdout == "/usr/local/cuda/bin/nvcc\n"
    r = run(host, "nvcc", ok=False)
    assert r.exit_code == 1 and "No input files specified" in r.stderr
    assert run(host, "readlink /usr/local/cuda").stdout == "/usr/local/cuda-12.8\n"
    assert os.readlink(sim.sys_path("/usr/local/cuda")) == "/usr/local/cuda-12.8"  # dangles seen from outside
    assert sim.sys_path("/usr/local/cuda-12.8/bin/nvcc").is_file()
    version = json.loads(run(host, "cat /usr/local/cuda/version.json").stdout)
    assert version["cuda"] == {"name": "CUDA SDK", "version": "12.8.1"}


def test_driver_not_loaded(host, sim):
    sim.set_driver_loaded(False)
    r = run(host, "nvidia-smi", ok=False)
    assert r.exit_code == 9 and r.stdout == fixture("nvidia-smi-driver-not-loaded.txt")
    assert run(host, "lsmod").stdout.strip() == "Module                  Size  Used by"
    r = run(host, f"{q(sim.python)} -c 'import torch; print(torch.cuda.is_available(), torch.cuda.device_count())'")
    assert r.stdout.strip() == "False 0" and "Found no NVIDIA driver on your system" in r.stderr
    sim.set_driver_loaded(True)
    assert "nvidia_uvm" in run(host, "lsmod").stdout
    assert run(host, "cat /proc/driver/nvidia/version").stdout.startswith(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  590.48.01")


# --------------------------------------------------------------------------- the runfile


def test_runfile_is_published_with_checksums(host, sim):
    rf = sim.runfiles["13.0"]
    assert rf.filename == "cuda_13.0.1_580.82.07_linux.run" and rf.driver_version == "580.82.07"
    assert rf.path == Path("/srv/nvidia/compute/cuda/13.0.1/local_installers") / rf.filename
    assert rf.url == rf.path.as_uri() and rf.size == sim.sys_path(str(rf.path)).stat().st_size
    assert rf.md5sum_url == "file:///srv/nvidia/compute/cuda/13.0.1/docs/sidebar/md5sum.txt"
    assert run(host, f"md5sum {q(rf.path)}").stdout.split()[0] == rf.md5
    assert run(host, f"sha256sum {q(rf.path)}").stdout.split()[0] == rf.sha256
    published = run(host, f"curl -fsS {rf.md5sum_url}").stdout
    assert re.fullmatch(r"[0-9a-f]{32}  cuda_\d+\.\d+\.\d+_[\d.]+_linux\.run\n", fixture("md5sum.txt"))
    assert published == f"{rf.md5}  {rf.filename}\n"
    assert run(host, f"curl -fsS {rf.sha256sum_url}").stdout == f"{rf.sha256}  {rf.filename}\n"
    dest = Path("/root/Downloads") / rf.filename
    r = run(host, f"mkdir -p {q(dest.parent)} && curl -fsSL -o {q(dest)} {rf.url} && cd {q(dest.parent)} && "
                  f"curl -fsS {rf.md5sum_url} | md5sum -c -")
    assert r.stdout == f"{rf.filename}: OK\n"
    assert sim.sys_path(str(dest)).stat().st_size == rf.size
    assert set(sim.runfiles) == {"12.8", "13.0", "13.1"}


def test_runfile_installs_toolkit_side_by_side(host, sim):
    link_before = run(host, "readlink /usr/local/cuda").stdout
    assert link_before == "/usr/local/cuda-12.8\n"
    r = install_toolkit_13(host, sim)
    assert r.exit_code == 0, r.stdout + r.stderr
    new = "/usr/local/cuda-13.0"
    assert sim.sys_path(new).is_dir()
    assert run(host, f"{new}/bin/nvcc --version").stdout == fixture("nvcc-13.0.txt")
    # Side by side: 12.8 untouched, and /usr/local/cuda still points at it.
    assert run(host, "readlink /usr/local/cuda").stdout == link_before
    assert run(host, "nvcc --version").stdout == fixture("nvcc-12.8.txt")
    listing = run(host, f"ls {new} {new}/bin {new}/lib64/").stdout.split()
    for name in ("bin", "lib64", "include", "version.json", "nvcc", "ptxas", "cuda-uninstaller", "libcudart.so.13",
                 "libcudart.so.13.0.88", "libcublas.so.13"):
        assert name in listing, name
    assert run(host, f"readlink {new}/lib64").stdout.strip() == "targets/x86_64-linux/lib"
    assert json.loads(run(host, f"cat {new}/version.json").stdout)["cuda"]["version"] == "13.0.1"
    # The log: the real installer's line format and order, paths as given.
    log = run(host, "cat /var/log/cuda-installer.log").stdout
    assert log == sim.sys_path("/var/log/cuda-installer.log").read_text()
    assert all(line == "" or re.match(r"\[(INFO|ERROR)\]: ", line) for line in log.splitlines())
    expected = fixture("cuda-installer.log").splitlines()
    lines = iter(log.splitlines())
    assert all(any(line == want for line in lines) for want in expected), log
    # The extraction directory is gone; no man pages were asked for.
    assert run(host, "ls -A /tmp").stdout == ""
    assert list(sim.sys_path("/tmp").iterdir()) == []
    assert run(host, "ls -A /usr/share/man/man1").stdout.split() == ["nvcc-12.8.1"]


def test_runfile_runs_as_an_executable_too(host, sim):
    rf = sim.runfiles["13.0"]
    work = "/root"
    run(host, f"cp {q(rf.path)} {work}/")
    r = run(host, f"./{rf.filename} --silent --toolkit --toolkitpath=/opt/cuda-13.0", cwd=work)
    assert r.stdout == "" and r.stderr == ""  # a silent install prints nothing
    assert "release 13.0, V13.0.88" in run(host, "/opt/cuda-13.0/bin/nvcc --version").stdout
    assert sim.sys_path("/opt/cuda-13.0/bin/nvcc").is_file()
    assert run(host, f"./{rf.filename} --help", cwd=work).stdout.startswith(f"Usage: sh {rf.filename} [options]")


def test_runfile_default_path_takes_over_the_cuda_symlink(host, sim):
    r = run(host, f"sh {q(sim.runfiles['13.0'].path)} --silent --toolkit")
    assert r.stdout == ""
    assert run(host, "readlink /usr/local/cuda").stdout == "/usr/local/cuda-13.0\n"
    assert run(host, "nvcc --version").stdout == fixture("nvcc-13.0.txt")
    assert sim.sys_path("/usr/local/cuda-12.8/bin/nvcc").exists()


@pytest.mark.parametrize("flags,message", [
    ("--silent --toolkit --frobnicate", "Unknown option: --frobnicate"),
    ("--silent --toolkit --toolkitpath", "Option --toolkitpath needs a value"),
    ("--silent --toolkit --samples-path=/x", "Unknown option: --samples-path=/x"),
])
def test_runfile_rejects_bad_flags(host, sim, flags, message):
    r = run(host, f"sh {q(sim.runfiles['13.0'].path)} {flags}", ok=False)
    assert r.exit_code == 1 and r.stdout.startswith(message)
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()


def test_runfile_needs_silent_without_a_terminal(host, sim):
    r = run(host, f"sh {q(sim.runfiles['13.0'].path)} --toolkit", ok=False)
    assert r.exit_code == 1 and r.stdout == "Error opening terminal: unknown.\n"
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()


@pytest.mark.parametrize("flags", ["--silent --driver", "--silent", "--silent --driver --toolkit --no-drm"])
def test_runfile_driver_while_the_module_is_loaded(host, sim, flags):
    r = run(host, f"sh {q(sim.runfiles['13.0'].path)} {flags}", ok=False)
    assert r.exit_code == 1
    assert fixture("nvidia-installer-module-loaded.txt").strip() in r.stdout
    assert "Installation failed. See log at /var/log/cuda-installer.log for details." in r.stdout
    log = sim.sys_path("/var/log/cuda-installer.log").read_text()
    for line in fixture("cuda-installer-driver-loaded.log").splitlines()[-5:]:
        if "--no-drm" in flags and line.startswith("[INFO]: Executing"):
            line = line.replace("--install-libglvnd", "--install-libglvnd --no-drm")
        assert line in log
    assert fixture("nvidia-installer-module-loaded.txt").strip() in sim.sys_path("/var/log/nvidia-installer.log").read_text()
    assert "Driver Version: 590.48.01" in run(host, "nvidia-smi").stdout
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()


def test_runfile_driver_with_the_module_unloaded(host, sim):
    sim.set_driver_loaded(False)
    run(host, f"sh {q(sim.runfiles['13.0'].path)} --silent --driver")
    assert "Driver Version: 580.82.07      CUDA Version: 13.0" in run(host, "nvidia-smi").stdout
    assert "-> Installing NVIDIA driver version 580.82.07." in sim.sys_path("/var/log/nvidia-installer.log").read_text()


def test_runfile_stops_when_the_temp_dir_is_too_small(host, sim):
    sim.set_free_space("/tmp", 2000)
    r = install_toolkit_13(host, sim)
    assert r.exit_code == 1
    assert r.stdout == fixture("cuda-installer-disk-space.txt")
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()
    assert "[ERROR]: Disk space check has failed. Installation cannot continue." in \
        sim.sys_path("/var/log/cuda-installer.log").read_text()
    # df agrees with the installer, and another temp dir with room works.
    df = run(host, "df -P -k /tmp").stdout.splitlines()[1].split()
    assert int(df[3]) == 2000 * 1024 and df[5] == "/tmp"
    sim.set_free_space("/var/tmp", 50_000)
    run(host, "mkdir -p /var/tmp")
    r = install_toolkit_13(host, sim, "--tmpdir=/var/tmp")
    assert r.exit_code == 0, r.stdout


def test_runfile_stops_when_the_target_disk_is_too_small(host, sim):
    sim.set_free_space("/usr/local", 3000)
    r = install_toolkit_13(host, sim)
    assert r.exit_code == 1
    assert r.stdout.startswith("Not enough space on parition mounted at /usr/local.\nNeed 7152115712 bytes.")
    assert not sim.sys_path("/usr/local/cuda-13.0").exists()


def test_runfile_over_an_existing_toolkit_upgrades_it_in_place(host, sim):
    # The real installer does not refuse an existing toolkit directory in silent mode: it
    # installs over it. (--override is about compiler and package-manager checks.)
    assert install_toolkit_13(host, sim).exit_code == 0
    stale = "/usr/local/cuda-13.0/bin/nvcc"
    sim.sys_path(stale).write_text("#!/bin/sh\necho broken\n")
    assert run(host, f"{stale} --version").stdout == "broken\n"
    r = install_toolkit_13(host, sim)
    assert r.exit_code == 0, r.stdout
    assert run(host, f"{stale} --version").stdout == fixture("nvcc-13.0.txt")


def test_runfile_refuses_to_write_outside_the_sim_root(host, sim, tmp_path):
    """The installer aimed at this machine's own paths cannot reach them: this machine's OS is
    read-only inside the sandbox, and its other directories are not there at all."""
    rf = q(sim.runfiles["13.0"].path)
    tag = unique_name()
    # This machine's OS trees: the install fails, and nothing appears here.
    for flag, target in (("--toolkitpath", f"/usr/lib/{tag}/cuda-13.0"), ("--toolkitpath", f"/etc/{tag}"),
                         ("--tmpdir", f"/usr/lib/{tag}")):
        r = run(host, f"sh {rf} --silent --toolkit {flag}={target}", ok=False)
        assert r.exit_code != 0, f"{flag}={target}: {r.stdout}{r.stderr}"
        assert "Read-only file system" in r.stdout + r.stderr, r.stdout + r.stderr
        assert not Path(target).exists() and not Path(f"/usr/lib/{tag}").exists()
        assert not sim.sys_path("/usr/local/cuda-13.0").exists()
    assert "Installed: CUDA Toolkit" not in sim.sys_path("/var/log/cuda-installer.log").read_text()
    # A directory of this test under this machine's /tmp: inside, /tmp is the sim's, so that is where
    # the toolkit lands; this machine's directory stays as it was.
    outside = tmp_path / "elsewhere" / "cuda-13.0"
    r = run(host, f"sh {rf} --silent --toolkit --toolkitpath={q(outside)}", ok=False)
    assert not (tmp_path / "elsewhere").exists()
    assert r.exit_code != 0 or sim.sys_path(str(outside / "bin" / "nvcc")).is_file()
    # The worktree this test runs from (a directory of this machine outside its OS trees) is not
    # in the sandbox: whatever the installer does there, this machine's copy is untouched.
    here = REPO.parent / tag
    run(host, f"test ! -e {q(REPO)}")
    run(host, f"sh {rf} --silent --toolkit --toolkitpath={q(here / 'cuda-13.0')}", ok=False)
    assert not here.exists()
    run(host, f"sh {rf} --silent --toolkit --tmpdir={q(tmp_path / 'scratch')}", ok=False)
    assert not (tmp_path / "scratch").exists()


def test_runfile_compiler_check_and_override(tmp_path):
    sim = build_sim(tmp_path / "nogcc", gcc=None)
    host = SimHost(sim.host_spec())
    r = install_toolkit_13(host, sim)
    assert r.exit_code == 1
    assert r.stdout == "Failed to verify gcc version. See log at /var/log/cuda-installer.log for details.\n"
    assert "[ERROR]: Missing gcc. gcc is required to continue." in sim.sys_path("/var/log/cuda-installer.log").read_text()
    assert install_toolkit_13(host, sim, "--override").exit_code == 0


# --------------------------------------------------------------------------- python stack


def test_venv_is_real_and_belongs_to_the_sim(host, sim):
    assert run(host, f"{q(sim.python)} -m pip freeze").stdout == fixture("pip-freeze-cu128.txt")
    assert sim.python == "/opt/venv/bin/python"
    venv = "/opt/venv"
    assert f"from {venv}/lib/python" in run(host, f"{venv}/bin/pip --version").stdout
    assert run(host, f"{venv}/bin/vllm --version").stdout == "0.16.0\n"
    assert re.fullmatch(rf"#!{re.escape(venv)}/bin/python[\d.]*\n", run(host, f"head -1 {venv}/bin/pip").stdout)
    assert run(host, "python -c 'import sys; print(sys.prefix)'").stdout == f"{venv}\n"  # first on PATH
    assert sim.sys_path(f"{venv}/pyvenv.cfg").is_file()
    assert run(host, f"{q(sim.python)} -m pip check").stdout.startswith("No broken requirements found")
    probe = ("import torch; print(torch.__version__, torch.version.cuda, torch.cuda.is_available(), "
             "torch.cuda.device_count(), torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0), "
             "torch.backends.cudnn.version(), torch.zeros(1).cuda())")
    assert run(host, f"{q(sim.python)} -c {q(probe)}").stdout.strip() == (
        "2.10.0+cu128 12.8 True 8 NVIDIA RTX PRO 6000 Blackwell Workstation Edition (12, 0) 91002 "
        "tensor([0.], device='cuda:0')")
    assert run(host, f"CUDA_VISIBLE_DEVICES=2,3 {q(sim.python)} -c 'import torch; print(torch.cuda.device_count())'"
               ).stdout == "2\n"


def test_deep_sim_path_gets_shebangs_that_still_work(tmp_path):
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "gpu-box"
    sim = build_sim(deep)
    host = SimHost(sim.host_spec())
    # Where the venv lies on this machine is too long for a #! line (the kernel's limit is 127 bytes);
    # inside the sandbox it is /opt/venv, and the scripts' shebangs name that.
    assert len(f"#!{sim.sys_path(sim.python)}") > 127
    assert re.fullmatch(r"#!/opt/venv/bin/python[\d.]*\n", run(host, "head -1 /opt/venv/bin/vllm").stdout)
    assert run(host, "/opt/venv/bin/vllm --version").stdout == "0.16.0\n"
    assert "pip" in run(host, "/opt/venv/bin/pip --version").stdout


def test_torch_upgrade_to_cu130_through_pip(host, sim):
    r = upgrade_torch_to_cu130(host, sim)
    assert "Successfully installed" in r.stdout and "torch-2.10.0+cu130" in r.stdout
    freeze = run(host, f"{q(sim.python)} -m pip freeze").stdout.splitlines()
    assert "torch==2.10.0+cu130" in freeze and "sgl-kernel==0.3.21+cu130" in freeze
    assert "nvidia-nccl-cu13==2.28.9" in freeze
    out = run(host, f"{q(sim.python)} -c 'import torch; print(torch.version.cuda, torch.cuda.is_available())'").stdout
    assert out == "13.0 True\n"
    # A restore from a backup reinstalls exact pins from the cu128 index without resolving.
    run(host, f"{q(sim.python)} -m pip install --no-deps --index-url {sim.index_urls['cu128']} "
              "torch==2.10.0+cu128 sgl-kernel==0.3.21+cu128")
    freeze = run(host, f"{q(sim.python)} -m pip freeze").stdout.splitlines()
    assert "torch==2.10.0+cu128" in freeze and "sgl-kernel==0.3.21+cu128" in freeze


def test_default_index_is_the_sims_own_pypi(host, sim):
    config = run(host, f"{q(sim.python)} -m pip config list").stdout
    assert f"global.index-url='{sim.index_urls['pypi']}'" in config
    r = run(host, f"{q(sim.python)} -m pip download --no-deps -d /root/wheels torch==2.10.0+cu128")
    assert "torch-2.10.0+cu128-py3-none-any.whl" in r.stdout
    assert sim.sys_path("/root/wheels/torch-2.10.0+cu128-py3-none-any.whl").is_file()
    r = run(host, f"{q(sim.python)} -m pip install torch==2.10.0+cu130", ok=False)
    assert r.exit_code != 0 and "No matching distribution found for torch==2.10.0+cu130" in r.stderr


# --------------------------------------------------------------------------- benchmarks


def bench_layout(text: str) -> list[tuple[str, int]]:
    """Labels in order, with the column their value starts at; rules kept whole."""
    out = []
    for line in text.splitlines():
        if re.fullmatch(r"[=\-]+.*[=\-]+|=+", line):
            out.append((line, 0))
        elif re.match(r"[A-Z][^:]*:\s", line) and len(line) > 41:
            out.append((line[:41].rstrip(), len(line) - len(line[41:])))
    return out


def test_bench_serving_format_and_baseline(host, sim):
    r = run(host, BENCH.format(py=q(sim.python)))
    block = r.stdout[r.stdout.index("\n============ Serving Benchmark Result"):]
    assert bench_layout(block) == bench_layout(fixture("sglang-bench-serving.txt"))
    assert all(len(line) >= 51 for line in block.splitlines() if re.match(r"[A-Z][^:]*:\s", line))
    assert abs(output_throughput(r.stdout) - 89.5) <= 0.5 + 1e-9


def test_bench_noise_and_mean(host, sim):
    values = [output_throughput(run(host, BENCH.format(py=q(sim.python))).stdout) for _ in range(6)]
    assert len(set(values)) > 1, values  # run-to-run noise, as on a real machine
    assert all(abs(v - 89.5) <= 0.5 + 1e-9 for v in values), values
    assert abs(statistics.fmean(values) - 89.5) < 0.35, values
    sim.set_bench_noise(0)
    assert output_throughput(run(host, BENCH.format(py=q(sim.python))).stdout) == 89.5


def test_bench_after_the_upgrade(host, sim):
    assert install_toolkit_13(host, sim).exit_code == 0
    upgrade_torch_to_cu130(host, sim)
    cuda_home = "CUDA_HOME=/usr/local/cuda-13.0 "
    values = [output_throughput(run(host, cuda_home + BENCH.format(py=q(sim.python))).stdout) for _ in range(3)]
    assert all(abs(v - 96.1) <= 0.5 + 1e-9 for v in values), values
    # Without CUDA_HOME the JIT uses /usr/local/cuda, still 12.8: the real torch error.
    r = run(host, BENCH.format(py=q(sim.python)), ok=False)
    assert r.exit_code == 1
    assert ("RuntimeError: \nThe detected CUDA version (12.8) mismatches the version that was used to compile\n"
            "PyTorch (13.0). Please make sure to use the same CUDA versions.") in r.stderr
    assert "Serving Benchmark Result" not in r.stdout
    # Moving the symlink fixes it the other way round.
    run(host, "ln -sfn /usr/local/cuda-13.0 /usr/local/cuda")
    assert os.readlink(sim.sys_path("/usr/local/cuda")) == "/usr/local/cuda-13.0"
    assert abs(output_throughput(run(host, BENCH.format(py=q(sim.python))).stdout) - 96.1) <= 0.5 + 1e-9


def test_bench_fails_like_the_real_stack_when_pieces_do_not_match(host, sim):
    py = q(sim.python)
    # torch cu130 with sgl-kernel still built for CUDA 12: the loader cannot find libcudart.so.12.
    run(host, f"{py} -m pip install --no-deps --index-url {sim.index_urls['cu130']} torch==2.10.0+cu130")
    cuda_home = "CUDA_HOME=/usr/local/cuda-13.0 "
    assert install_toolkit_13(host, sim).exit_code == 0
    r = run(host, cuda_home + BENCH.format(py=py), ok=False)
    assert r.exit_code == 1
    assert "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory" in r.stderr
    # torch cu128 with a 13.0 toolkit: the CUDA check fails the other way.
    run(host, f"{py} -m pip install --no-deps --index-url {sim.index_urls['cu128']} torch==2.10.0+cu128")
    r = run(host, cuda_home + BENCH.format(py=py), ok=False)
    assert "The detected CUDA version (13.0) mismatches the version that was used to compile\nPyTorch (12.8)" in r.stderr


def test_bench_with_a_driver_too_old_for_torch(tmp_path):
    sim = build_sim(tmp_path / "old-driver", driver_version="570.124.06")
    host = SimHost(sim.host_spec())
    assert "CUDA Version: 12.8" in run(host, "nvidia-smi").stdout
    upgrade_torch_to_cu130(host, sim)
    r = run(host, BENCH.format(py=q(sim.python)), ok=False)
    assert r.exit_code == 1 and "The NVIDIA driver on your system is too old (found version 12080)" in r.stderr


def test_vllm_bench_serve_and_bench_one_batch_formats(host, sim):
    py = q(sim.python)
    args = "bench serve --model m --num-prompts 10 --max-concurrency 1 --random-input-len 512 --random-output-len 128"
    for command in (f"{py} -m vllm.entrypoints.cli.main {args}", f"/opt/venv/bin/vllm {args}"):
        r = run(host, command)
        block = r.stdout[r.stdout.index("============ Serving Benchmark Result"):]
        assert bench_layout(block) == bench_layout(fixture("vllm-bench-serve.txt"))
        assert abs(output_throughput(block) - 89.5) <= 0.5 + 1e-9
    r = run(host, f"{py} -m sglang.bench_one_batch --model-path m --batch-size 1 --input-len 512 --output-len 32 "
                  "--tp-size 8")
    shape = lambda text: [re.sub(r"\d+\.\d+", "N", line) for line in text.splitlines()]  # noqa: E731
    *real_lines, note = r.stdout.splitlines()  # the real tool's lines, then what the sim says it simulated
    assert shape("\n".join(real_lines)) == shape(fixture("sglang-bench-one-batch.txt"))
    assert note.startswith("simulated host: ") and "simulated time" in note
    median = float(re.findall(r"median throughput:\s+([\d.]+)", r.stdout)[-1])
    assert abs(median - 89.5) < 1.5


# --------------------------------------------------------------------------- isolation


def test_two_sims_never_interfere(tmp_path):
    a, b = build_sim(tmp_path / "a"), build_sim(tmp_path / "b")
    ha, hb = SimHost(a.host_spec("a")), SimHost(b.host_spec("b"))
    before = {cmd: run(hb, cmd.format(py=q(b.python))).stdout for cmd in (
        "nvidia-smi -L", "nvcc --version", "{py} -m pip freeze", "readlink $(dirname $(dirname $(command -v nvcc)))")}
    a.set_driver_loaded(False)
    a.set_free_space("/tmp", 10)
    run(ha, f"sh {q(a.runfiles['13.0'].path)} --silent --toolkit --tmpdir=/root")
    assert run(ha, "readlink /usr/local/cuda").stdout == "/usr/local/cuda-13.0\n"
    upgrade_torch_to_cu130(ha, a)
    after = {cmd: run(hb, cmd.format(py=q(b.python))).stdout for cmd in before}
    assert after == before
    assert "nvcc --version" in before and "release 12.8" in after["nvcc --version"]
    assert abs(output_throughput(run(hb, BENCH.format(py=q(b.python))).stdout) - 89.5) <= 0.5 + 1e-9
    assert not b.sys_path("/usr/local/cuda-13.0").exists() and a.sys_path("/usr/local/cuda-13.0").is_dir()
    assert os.readlink(b.sys_path("/usr/local/cuda")) == "/usr/local/cuda-12.8"


def snapshot(directory: Path, skip: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        if Path(dirpath) == skip or skip in Path(dirpath).parents:
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p == skip:
                continue
            st = p.lstat()
            out[str(p)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return out


def test_nothing_is_written_outside_the_sim_root(tmp_path):
    sim = build_sim(tmp_path / "gpu-box")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    host = SimHost(sim.host_spec())
    before = snapshot(tmp_path, sim.root)
    real_trees = {tree: sorted(os.listdir(tree)) for tree in ("/usr/local", "/opt", "/srv")}
    py = q(sim.python)
    # The session's own way (HOME /root, the sim's cwd) and this machine's paths named outright: a HOME
    # and a working directory under this test's tmp_path lie, inside the sandbox, in the sim's /tmp.
    env = {"HOME": str(tmp_path / "home")}
    work = str(tmp_path / "work")
    run(host, f"mkdir -p {q(work)} {q(env['HOME'])} && touch {q(work)}/written")
    for command in ("nvidia-smi", "nvidia-smi -q", "nvcc --version", "df -h /tmp", "lsmod",
                    f"{py} -m pip freeze", f"{py} -m torch.utils.collect_env", f"{py} -m sglang.check_env"):
        run(host, command, cwd=work, env=env)
        run(host, command, cwd="/root")
    assert install_toolkit_13(host, sim).exit_code == 0
    run(host, f"sh {q(sim.runfiles['13.0'].path)} --silent --driver", ok=False, cwd=work, env=env)
    run(host, f"{py} -m pip install --index-url {sim.index_urls['cu130']} torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130",
        cwd=work, env=env)
    env["CUDA_HOME"] = "/usr/local/cuda-13.0"
    run(host, BENCH.format(py=py), cwd=work, env=env)
    run(host, f"{py} -m sglang.bench_one_batch --model-path m", cwd=work, env=env)
    run(host, "/opt/venv/bin/vllm bench serve --num-prompts 5", cwd=work, env=env, ok=False)
    assert snapshot(tmp_path, sim.root) == before
    assert {tree: sorted(os.listdir(tree)) for tree in real_trees} == real_trees
    assert sim.sys_path(f"{work}/written").is_file()  # where the write went: the sim's /tmp


def unique_name() -> str:
    return f"upgrade-agent-test-{uuid.uuid4().hex[:12]}"


def test_a_destructive_step_on_the_sim_changes_only_the_sim(host, sim):
    """`rm -rf` on a system path deletes the sim's copy, never this machine's."""
    # A directory of this machine's /usr/local, a tree the sim shadows with its own. (As a user who may
    # not write there, the test still checks that this machine's /usr/local is left as it was.)
    marker = Path("/usr/local") / unique_name()
    if os.access("/usr/local", os.W_OK):
        marker.mkdir()
        (marker / "keep").write_text("this machine's\n")
    try:
        # The sandbox first: this machine's directory must not be visible in the sim's /usr/local.
        assert run(host, f"test -e {q(marker)}", ok=False).exit_code == 1, "the sim sees this machine's /usr/local"
        real_local = sorted(os.listdir("/usr/local"))
        r = run(host, f"rm -rf /usr/local/cuda-12.8 {q(marker)} && ls /usr/local")
        assert "cuda-12.8" not in r.stdout.split() and marker.name not in r.stdout
        assert not sim.sys_path("/usr/local/cuda-12.8").exists()
        assert sim.sys_path("/usr/local/cuda").is_symlink()  # the sim's link now dangles, as it would on a box
        assert run(host, "nvcc --version", ok=False).exit_code == 127
        # This machine: the marker and the rest of /usr/local as they were.
        assert not marker.exists() or (marker / "keep").read_text() == "this machine's\n"
        assert sorted(os.listdir("/usr/local")) == real_local
        # Its OS is read-only inside: a write there fails and changes nothing here.
        victim = Path("/usr/lib") / unique_name()
        r = run(host, f"touch {q(victim)}", ok=False)
        assert r.exit_code == 1 and "Read-only file system" in r.stderr
        assert not victim.exists()
        r = run(host, f"rm -rf {q(marker)} /usr/share/man/man1 && ls /usr/share/man", ok=False)
        assert r.exit_code == 0 and "man1" not in r.stdout.split()
        assert not sim.sys_path("/usr/share/man/man1").exists()
        assert sorted(os.listdir("/usr/local")) == real_local
    finally:
        shutil.rmtree(marker, ignore_errors=True)


def test_the_sim_is_a_machine_of_its_own(sim):
    """Its processes, its name and its root directory: none of this machine's show through."""
    host = SimHost(sim.host_spec("gpu-box-7"))
    alone = run(host, "ps aux").stdout.splitlines()
    assert len(alone) == 2 and alone[1].split()[1] == "1" and alone[1].endswith(" ps aux"), alone
    # Wait until the background child has exec'd sleep: until then ps shows it as a second copy of the shell.
    r = run(host, 'sleep 30 & until [ "$(cat /proc/$!/comm)" = sleep ]; do :; done; ps aux; kill %1')
    lines = r.stdout.splitlines()
    assert lines[0].split()[:2] == ["USER", "PID"]
    commands = [line.split(None, 10)[10] for line in lines[1:]]
    pids = [int(line.split()[1]) for line in lines[1:]]
    assert any(c.startswith("ps aux") for c in commands) and "sleep 30" in commands, commands
    assert len(commands) <= 4, commands  # the shell, sleep, ps: nothing of this machine
    assert max(pids) < 20, pids  # numbered from 1 in a PID namespace of its own
    assert not any("pytest" in c or "bwrap" in c for c in commands), r.stdout
    assert str(sim.root) not in r.stdout
    assert run(host, "hostname").stdout == "gpu-box-7\n"
    assert run(host, "cat /proc/sys/kernel/hostname").stdout == "gpu-box-7\n"
    assert socket.gethostname() != "gpu-box-7"
    top = run(host, "ls /").stdout.split()
    for present in ("usr", "opt", "srv", "tmp", "root", "var", "etc"):
        assert present in top, top
    # This machine's top-level folders that the sim lacks (a checkout under /tmp is no evidence either way:
    # the sim has a /tmp of its own).
    for absent in {"work", "home", REPO.parts[1]} - {"usr", "opt", "srv", "tmp", "root", "var", "etc"}:
        if Path("/" + absent).is_dir():  # this machine has it, the sim does not
            assert absent not in top, top
    assert run(host, f"ls {q(REPO)}", ok=False).exit_code == 2
    # Where its commands ran from is its own too: its home, and not this machine's cwd.
    assert run(host, "pwd; echo $HOME").stdout == "/root\n/root\n"
    assert str(sim.root) not in run(host, "env; df -h /tmp /usr/local /opt /; cat /proc/self/cmdline /proc/1/cmdline").stdout


# --------------------------------------------------------------------------- entry points and transports


def test_build_command_prints_the_host_spec(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tools.sim", "build", str(tmp_path / "cli-box")], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    spec = HostSpec(**json.loads(r.stdout))
    assert spec.name == "sim" and spec.transport == "sim" and spec.sim_root == str(tmp_path / "cli-box")
    assert spec.python == "/opt/venv/bin/python"
    assert "Driver Version: 590.48.01" in SimHost(spec).run("nvidia-smi").stdout
    with pytest.raises(HostError):
        LocalHost(spec)  # its paths are real only inside its sandbox
    assert build_sim.__doc__ and dataclasses.is_dataclass(spec)


def test_open_an_existing_sim(sim, tmp_path):
    again = Sim.open(sim.root)
    assert again == sim
    with pytest.raises(FileNotFoundError):
        Sim.open(tmp_path)


def test_build_refuses_a_directory_in_use(tmp_path):
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "file").write_text("x")
    with pytest.raises(FileExistsError):
        build_sim(tmp_path / "busy")


def test_same_results_over_ssh(sim, host, ssh_world, sshd_factory):
    """A sim reached over SSH: an sshd whose sessions enter the sim's sandbox, as a GPU box's sshd
    runs them on the box."""
    force = sshd_force_command(sim.root)
    sandbox = shlex.join([*sandbox_argv(sim.root, "sim"), "bash", "--noprofile", "--norc", "-c"])
    assert force == f'{sandbox} "$SSH_ORIGINAL_COMMAND"'
    server = sshd_factory("sim-sshd", extra_config=f"ForceCommand {force}\n")
    ssh_world.add_host_alias("box", server)
    spec = dataclasses.replace(sim.host_spec("sim-ssh"), transport="ssh", target="box", sim_root=None)
    remote = ssh_world.pool(spec).get("sim-ssh")
    real_local = sorted(os.listdir("/usr/local"))
    assert run(remote, "hostname; readlink /usr/local/cuda; test ! -e /work && echo sandboxed").stdout == \
        "sim\n/usr/local/cuda-12.8\nsandboxed\n"
    for command in ("nvidia-smi -L", "nvcc --version", f"{q(sim.python)} -m pip freeze",
                    "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader", "command -v nvcc python",
                    "ls /usr/local /srv/pypi"):
        assert run(remote, command).stdout == run(host, command).stdout, command
    r = run(remote, BENCH.format(py=q(sim.python)))
    assert abs(output_throughput(r.stdout) - 89.5) <= 0.5 + 1e-9
    rf = sim.runfiles["13.0"]
    run(remote, f"sh {q(rf.path)} --silent --toolkit --toolkitpath=/usr/local/cuda-13.0")
    assert run(host, "/usr/local/cuda-13.0/bin/nvcc --version").stdout == fixture("nvcc-13.0.txt")
    assert sim.sys_path("/usr/local/cuda-13.0/bin/nvcc").is_file()
    assert "[INFO]: Setting toolkitpath=/usr/local/cuda-13.0" in sim.sys_path("/var/log/cuda-installer.log").read_text()
    assert sorted(os.listdir("/usr/local")) == real_local  # this machine's /usr/local: as it was


def test_cold_cache_build_ignores_the_callers_pythonpath(tmp_path, monkeypatch):
    """A cold cache built under a PYTHONPATH that holds a distribution with unmet requirements (as a
    source checkout's egg-info is) still passes its own `pip check`: the venv sees only itself."""
    site = tmp_path / "checkout"
    info = site / "broken_checkout-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-checkout\nVersion: 0.1\n"
                                   "Requires-Dist: no-such-package-anywhere>=1\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    sim = build_sim(tmp_path / "gpu", cache_dir=tmp_path / "cold-cache")
    assert (tmp_path / "cold-cache").is_dir()
    monkeypatch.delenv("PYTHONPATH")
    freeze = run(SimHost(sim.host_spec()), f"{q(sim.python)} -m pip freeze").stdout
    assert "broken-checkout" not in freeze
    assert "torch==2.10.0+cu128" in freeze


def test_a_failed_sim_build_says_what_failed_in_one_line(tmp_path):
    """pip's own words reach the user, not a bare CalledProcessError."""
    from tools.sim.venv import SimBuildError, build_template

    empty_index = tmp_path / "index"
    empty_index.mkdir()
    with pytest.raises(SimBuildError) as caught:
        build_template(tmp_path / "venv", sys.executable, empty_index)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("building the simulated host's Python environment failed: pip install exited 1")
    assert "torch==2.10.0+cu128" in message or "No matching distribution" in message
