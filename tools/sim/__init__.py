"""A simulated GPU host: a directory that behaves like the CUDA 12.8 machine of the upgrade story.

    sim = build_sim(tmp_path / "gpu")
    host = SimHost(sim.host_spec())
    host.run("nvidia-smi")                         # the real table, 8 RTX PRO 6000 Blackwell cards
    build_sim(tmp_path / "hopper", gpu_model="H100 80GB HBM3", gpus=4)   # or another GPU_MODELS model
    host.run("python -m pip freeze")               # torch==2.10.0+cu128, ... (/opt/venv/bin/python)

Every command runs in a bubblewrap sandbox (tools/hosts/sim.py) that binds the root's trees at
the paths a real host has them: /usr/local/cuda-12.8, /opt/venv, /srv, /tmp, /root. Layout of a
sim root on this machine:

    .sim/state.json            the machine: GPUs, driver (version, loaded), kernel, free space, gcc
    .sim/lib/simhost/          the code its commands run (standard library only)
    usr/bin/nvidia-smi
    usr/local/cuda-12.8/       a toolkit laid out like a real one; usr/local/cuda -> it
    opt/venv/                  a real venv with torch 2.10.0+cu128, sglang, sgl-kernel, flashinfer, vllm
    srv/pypi/simple{,-cu128,-cu130}/   PEP 503 indexes (file:// URLs) with cu128 and cu130 builds
    srv/nvidia/compute/cuda/<ver>/     runfiles with md5sum.txt and sha256sum.txt
    var/log/, tmp/ (1777), proc/driver/nvidia/version, proc/version, proc/sys/kernel/osrelease

    .sim/dpkg/                 its package database (status, info/*.list), which its dpkg and dpkg-query read
    usr/bin/                   the sim's nvidia-smi, df, lsmod, uname, dpkg, dpkg-query and compiler (gcc, g++,
                               cpp of the state's gcc; none when it is null), and links to this machine's
                               other programs

Nothing needs an environment variable: the sim's programs find their state by walking up from
their own location to /.sim/state.json.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from tools.hosts import HostSpec

from . import build as _build
from .files.simhost import compiler as _compiler
from .files.simhost import machine as _machine
from .files.simhost import runfile as _runfile
from .files.simhost import state as _state
from .files.simhost import toolkit as _toolkit
from .venv import SimBuildError

__all__ = ["Sim", "RunfileInfo", "SimBuildError", "build_sim", "RELEASES", "GPU_MODELS", "DEFAULT_GPU_MODEL",
           "gpu_model_key", "check_driver_supports", "check_gcc"]

RELEASES = _toolkit.RELEASES
# The GPU models a sim can have: what nvidia-smi and torch report for each, and its oldest driver.
GPU_MODELS = _machine.GPU_MODELS
DEFAULT_GPU_MODEL = _machine.DEFAULT_GPU_MODEL
DEFAULT_KERNEL = _machine.DEFAULT_KERNEL
gpu_model_key = _machine.gpu_model_key
check_driver_supports = _machine.check_driver_supports


def check_gcc(text: str | None) -> None:
    """ValueError, with the form expected, when a sim's `gcc` names no compiler version (None: no compiler)."""
    _compiler.parse(text)

# The host's own PyPI and PyTorch's wheel indexes, mirrored on the host (paths as the host sees them).
INDEX_URLS = {"pypi": "file:///srv/pypi/simple", "cu128": "file:///srv/pypi/simple-cu128",
              "cu130": "file:///srv/pypi/simple-cu130"}


@dataclass(frozen=True)
class RunfileInfo:
    version: str  # "13.0.1"
    path: Path
    url: str  # file:// URL, fetchable with curl
    md5: str
    sha256: str
    size: int
    driver_version: str  # the driver bundled in the runfile, "580.82.07"
    md5sum_url: str  # NVIDIA's published md5sum.txt for this release
    sha256sum_url: str

    @property
    def filename(self) -> str:
        return self.path.name


@dataclass
class Sim:
    root: Path
    python: str
    bin_dir: Path
    index_urls: dict[str, str]
    runfiles: dict[str, RunfileInfo]

    @classmethod
    def open(cls, root: Path) -> "Sim":
        """The sim already built at `root` (by build_sim or `python -m tools.sim build`)."""
        root = Path(root).absolute()
        if _state.find_root(root) != Path(os.path.realpath(root)):
            raise FileNotFoundError(f"{root} is not the root of a simulated GPU host (no .sim/state.json)")
        return cls(root=root, python="/opt/venv/bin/python", bin_dir=Path("/usr/bin"),
                   index_urls=dict(INDEX_URLS), runfiles={key: _runfile_info(root, key) for key in RELEASES})

    def host_spec(self, name: str = "sim") -> HostSpec:
        """The host as a session names it: the sim transport, every command in the sim's sandbox."""
        return HostSpec(
            name=name,
            transport="sim",
            sim_root=str(self.root),
            # The venv first, as on a box whose engineers activate it: `python -m pip ...` means it.
            path_prefix=[str(Path(self.python).parent), "/usr/local/cuda/bin"],
            python=self.python,
        )

    def sys_path(self, path: str) -> Path:
        """Where a system path ("/usr/local/cuda-13.0") of the sim lies on this machine (for checks from outside)."""
        return _state.host_path(self.root, path)

    def state(self) -> dict:
        return _state.load(self.root)

    def set_free_space(self, path: str, mb: int) -> None:
        """Free space of the filesystem mounted at a system path ("/tmp"), as the installer sees it."""
        if not path.startswith("/"):
            raise ValueError(f"a system path starting with '/' is expected, got {path!r}")
        _state.update(self.root, lambda st: st["free_space_mb"].__setitem__(path.rstrip("/") or "/", int(mb)))

    def set_driver_loaded(self, loaded: bool) -> None:
        """Whether the nvidia kernel module is loaded (a driver install needs it unloaded)."""
        st = _state.update(self.root, lambda st: st["driver"].__setitem__("loaded", bool(loaded)))
        _runfile.write_proc_version(self.root, st)

    def join_scheduler(self, node: str, slurm: dict | None = None, kubernetes: dict | None = None) -> None:
        """Make this host a node of a Slurm and/or Kubernetes cluster, named `node` there: scontrol, squeue
        and kubectl on its PATH, and its scheduler state (files/simcluster/). `slurm`: {"drained_by": reason
        of someone else's drain or None, "jobs": [seconds each running job still takes once drained]};
        `kubernetes`: {"cordoned_by": annotation value of someone else's cordon (or "" for a plain cordon) or
        None, "pods": [seconds each pod takes to leave]}."""
        import shutil
        import time

        st = _state.load(self.root)
        lib = self.root / _state.STATE_DIR / "lib" / "simcluster"
        shutil.copytree(_build.SIMCLUSTER, lib, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True)
        cluster: dict = {"node": node}
        if slurm is not None:
            by = slurm.get("drained_by")
            cluster["slurm"] = {"drained": by is not None, "reason": by, "by": "admin", "jobs": list(slurm.get("jobs", [])),
                                "drained_at": time.time() if by is not None else None, "state": "MIXED"}
            _build._write_command(self.root / "usr" / "bin" / "scontrol", st["python"], "simcluster.slurm",
                                  "scontrol_main")
            _build._write_command(self.root / "usr" / "bin" / "squeue", st["python"], "simcluster.slurm",
                                  "squeue_main")
        if kubernetes is not None:
            by = kubernetes.get("cordoned_by")
            cluster["kubernetes"] = {"cordoned": by is not None, "cordoned_at": time.time() if by is not None else None,
                                     "annotations": {}, "pods": list(kubernetes.get("pods", []))}
            _build._write_command(self.root / "usr" / "bin" / "kubectl", st["python"], "simcluster.kube",
                                  "kubectl_main")
        import json

        (self.root / _state.STATE_DIR / "cluster.json").write_text(json.dumps(cluster, indent=2) + "\n")

    def scheduler_state(self) -> dict:
        """The node's scheduler state as its scontrol and kubectl see it (for tests)."""
        import json

        return json.loads((self.root / _state.STATE_DIR / "cluster.json").read_text())

    def set_numerics(self, numerics: str) -> None:
        """"drift": what the served model answers changes once torch is built for CUDA 13 (its greedy outputs
        and a few of its arithmetic answers: sglang/_sim_outputs.py), so a correctness check has a difference
        to find; "stable": the same answers on every build."""
        if numerics not in ("stable", "drift"):
            raise ValueError(f"numerics is 'stable' or 'drift', not {numerics!r}")
        _state.update(self.root, lambda st: st["bench"].__setitem__("numerics", numerics))

    def set_bench_noise(self, sd: float) -> None:
        """Standard deviation of the benchmark's run-to-run noise in tok/s (0 makes it exact)."""
        _state.update(self.root, lambda st: st["bench"].__setitem__("noise_sd", float(sd)))


def build_sim(root: Path, *, gpus: int = 8, gpu_model: str = DEFAULT_GPU_MODEL,
              free_space_mb: dict[str, int] | None = None, driver_version: str = "590.48.01",
              smi_version: str | None = None, gcc: str | None = "gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04) ",
              kernel: str = DEFAULT_KERNEL, toolkits: tuple[str, ...] = ("12.8",), bench_noise: float = 0.25,
              pypi_reachable: bool = True, cache_dir: Path | None = None) -> Sim:
    """Build a sim root at `root` (a new or empty directory) and return it.

    gpu_model: a key of GPU_MODELS ("H100 80GB HBM3") or nvidia-smi's name for it; a driver older
    than the model's oldest supporting branch is refused (ValueError), as no such machine exists.
    toolkits: releases installed at build time ("12.8", "13.0", "13.1"); the first one is what
    /usr/local/cuda points at. smi_version: nvidia-smi's own version when it should differ from the
    driver's, as in a container whose userspace tools are older than the host's kernel module.
    gcc: the compiler on the host's PATH, as the last line of `gcc -v` gives it; None for none (the
    runfile's check then fails without --override, and gcc, cc, g++... are not in its /usr/bin).
    kernel: the kernel release uname and /proc/version report.
    pypi_reachable: False for a host without a route to PyPI, as the air-gapped machine of docs/gpu.md: its
    pip configuration names an index that is not there, so pip finds nothing unless given the mirror
    (file:///srv/pypi/simple...) by name.
    """
    model = _machine.gpu_model_key(gpu_model)  # these raise before anything is built
    _machine.check_driver_supports(model, driver_version)
    check_gcc(gcc)
    root = Path(root).absolute()
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty; a sim is built in a new or empty directory")
    root.mkdir(parents=True, exist_ok=True)
    python = _build.base_python()
    cache = _build.ensure_cache(python, cache_dir)
    _build.lay_out(root, cache, python, gpus=gpus, gpu_model=model, free_space_mb=free_space_mb,
                   driver_version=driver_version, smi_version=smi_version, gcc=gcc, kernel=kernel,
                   toolkits=tuple(toolkits), bench_noise=bench_noise, pypi_reachable=pypi_reachable)
    for key in RELEASES:
        _publish_runfile(root, key, python)
    return Sim.open(root)


def _release_dir(root: Path, key: str) -> Path:
    return root / "srv" / "nvidia" / "compute" / "cuda" / RELEASES[key].version


def _publish_runfile(root: Path, key: str, python: str) -> None:
    r = RELEASES[key]
    path = _build.write_runfile(_release_dir(root, key) / "local_installers", key, python, root)
    data = path.read_bytes()
    sidebar = _release_dir(root, key) / "docs" / "sidebar"
    sidebar.mkdir(parents=True, exist_ok=True)
    # NVIDIA publishes one md5sum.txt per release listing every installer of it.
    (sidebar / "md5sum.txt").write_text(f"{hashlib.md5(data).hexdigest()}  {r.runfile_name}\n")
    (sidebar / "sha256sum.txt").write_text(f"{hashlib.sha256(data).hexdigest()}  {r.runfile_name}\n")


def _runfile_info(root: Path, key: str) -> RunfileInfo:
    r = RELEASES[key]
    path = _release_dir(root, key) / "local_installers" / r.runfile_name
    sidebar = _release_dir(root, key) / "docs" / "sidebar"
    md5 = (sidebar / "md5sum.txt").read_text().split()[0]
    sha256 = (sidebar / "sha256sum.txt").read_text().split()[0]
    seen = Path("/" + str(path.relative_to(root)))  # the path the host sees
    sidebar_seen = Path("/" + str(sidebar.relative_to(root)))
    return RunfileInfo(version=r.version, path=seen, url=seen.as_uri(), md5=md5, sha256=sha256,
                       size=path.stat().st_size, driver_version=r.driver,
                       md5sum_url=(sidebar_seen / "md5sum.txt").as_uri(),
                       sha256sum_url=(sidebar_seen / "sha256sum.txt").as_uri())

