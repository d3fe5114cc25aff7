"""What the GPU tests and the GPU recording share: the torch interpreter, host specs, direct readings."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tools.hosts import DEFAULT_PATH, HostSpec, SSHSettings

REPO = Path(__file__).resolve().parents[2]

NO_GPU = ("this test needs an NVIDIA GPU and nvidia-smi on PATH, and none is here; run the GPU tests on a GPU "
          "machine as docs/gpu.md says, or deselect them with -m 'not gpu' (the default)")


# --------------------------------------------------------------------------- the interpreter that holds torch


def gpu_python() -> str:
    """The interpreter whose torch the tests inspect: UPGRADE_AGENT_GPU_PYTHON, else the one running pytest."""
    return os.environ.get("UPGRADE_AGENT_GPU_PYTHON") or sys.executable


def clean_env() -> dict[str, str]:
    """The environment for direct readings: without PYTHONPATH, which may point at the test's own packages."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def host_path_prefix() -> list[str]:
    """Directories a host spec puts in front of PATH, as an operator's host entry would: commands run with a
    clean PATH (tools/hosts/), so `python3` must be made the torch interpreter, and nvidia-smi and nvcc must
    be found where this shell finds them when that is outside the standard directories."""
    dirs = [str(Path(gpu_python()).parent)]
    standard = DEFAULT_PATH.split(":")
    for program in ("nvidia-smi", "nvcc"):
        found = shutil.which(program)
        if found and str(Path(found).parent) not in dirs + standard:
            dirs.append(str(Path(found).parent))
    return dirs


TORCH_PROBE = r"""
import ctypes, json, sys
from importlib import metadata
import torch
out = {"executable": sys.executable, "torch": torch.__version__, "torch_dist": metadata.version("torch"),
       "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
       "device_count": torch.cuda.device_count()}
if out["cuda_available"]:
    out["names"] = [torch.cuda.get_device_name(i) for i in range(out["device_count"])]
    out["capabilities"] = ["%d.%d" % torch.cuda.get_device_capability(i) for i in range(out["device_count"])]
try:  # the driver API's own answer: the newest CUDA the driver supports, e.g. 13000
    v = ctypes.c_int()
    ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(v))
    out["driver_cuda"] = "%d.%d" % (v.value // 1000, v.value % 1000 // 10)
except OSError as e:
    out["driver_cuda_error"] = repr(e)
print(json.dumps(out))
"""


def run(argv: list[str], **kw) -> str:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=clean_env(), **kw)
    assert r.returncode == 0, f"{argv} failed ({r.returncode}): {r.stderr[-1000:]}"
    return r.stdout


@dataclass
class Readings:
    """What the machine says about itself, read directly, not through the tools."""

    query: list[dict]  # nvidia-smi --query-gpu, one dict per GPU
    smi_q: dict[str, str]  # the first value of each key in nvidia-smi -q
    nvcc: str | None  # `nvcc --version` of the nvcc on the PATH the tools use, if any
    nvcc_path: str | None
    torch: dict




def read_machine() -> Readings:
    """nvidia-smi's query and -q report, nvcc --version, and torch's own view, read directly."""
    fields = ["index", "name", "compute_cap", "driver_version", "memory.total", "pci.bus_id"]
    text = run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"])
    query = [dict(zip(fields, (p.strip() for p in line.split(",")))) for line in text.splitlines() if line.strip()]
    smi_q: dict[str, str] = {}
    for line in run(["nvidia-smi", "-q"]).splitlines():
        key, sep, value = line.partition(" : ")
        if sep:
            smi_q.setdefault(key.strip(), value.strip())
    nvcc_path = shutil.which("nvcc", path=local_spec().path())
    nvcc = run([nvcc_path, "--version"]) if nvcc_path else None
    torch_facts = json.loads(run([gpu_python(), "-c", TORCH_PROBE]).strip().splitlines()[-1])
    return Readings(query=query, smi_q=smi_q, nvcc=nvcc, nvcc_path=nvcc_path, torch=torch_facts)


# --------------------------------------------------------------------------- hosts: local, and SSH to a real sshd


def local_spec(name: str = "gpu") -> HostSpec:
    return HostSpec(name=name, transport="local", python=gpu_python(), path_prefix=host_path_prefix())


def sshd_binary(default: str) -> str | None:
    """UPGRADE_AGENT_SSHD (an sshd unpacked from OpenSSH's package, or a wrapper), else the system's."""
    candidates = [os.environ.get("UPGRADE_AGENT_SSHD"), default, shutil.which("sshd")]
    return next((c for c in candidates if c and Path(c).exists()), None)


def ssh_settings(root: Path, alias: str, server, key: Path) -> SSHSettings:
    """An ssh config with `alias` pointing at the server, and its host key in a known_hosts of its own."""
    root.mkdir(parents=True, exist_ok=True)
    config, known = root / "ssh_config", root / "known_hosts"
    config.write_text(f"Host {alias}\n  HostName 127.0.0.1\n  Port {server.port}\n  User {server.user}\n"
                      f"  IdentityFile {key}\n  IdentitiesOnly yes\n")
    known.write_text(server.known_hosts_line())
    return SSHSettings(config_path=config, known_hosts_paths=[known], project_known_hosts=root / "project_known_hosts",
                       connect_timeout=10.0, use_agent=False)
