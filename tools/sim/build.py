"""Building a sim root: the shared cache, the runfiles, and the layout of one machine.

What is the same for every sim (wheels, indexes, a venv with the stack installed) is built once
per version of this package's sources and kept in $XDG_CACHE_HOME/upgrade-agent/ (default
~/.cache/upgrade-agent/). A new sim copies from there, so building one takes well under a second.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import sys
import tempfile
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tools.hosts.sim import HOST_USR_BIN, HOST_USR_SBIN

from . import venv as sim_venv
from . import wheels
from .files.simcommands import serving as sim_serving
from .files.simhost import compiler as sim_compiler
from .files.simhost import dpkg as sim_dpkg
from .files.simhost import kernel as sim_kernel
from .files.simhost import machine, toolkit
from .files.simhost import runfile as sim_runfile
from .files.simhost import state as host_state

HERE = Path(__file__).parent
SIMHOST = HERE / "files" / "simhost"
SIMCLUSTER = HERE / "files" / "simcluster"  # not in the runfile, which carries simhost/*.py alone
SIMCOMMANDS = HERE / "files" / "simcommands"  # nor these: what the host shows beside its installer
# A sim is a node of no cluster unless its machine says so (Sim.join_scheduler): this machine's own
# scheduler clients, if it has any, are never shown inside, where they could reach a real cluster.
SCHEDULER_COMMANDS = frozenset({"kubectl", "scontrol", "squeue", "sinfo", "sbatch", "srun", "scancel"})
VENV_DIR = "/opt/venv"


def base_python() -> str:
    """The interpreter outside any venv: it stays put while venvs come and go."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "upgrade-agent"


def source_digest(python: str) -> str:
    """Changes whenever the sim's code, its package sources or the interpreter change."""
    h = hashlib.sha256()
    for path in sorted(HERE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            h.update(path.relative_to(HERE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    h.update(python.encode() + b"\0" + sys.version.encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Cache:
    dir: Path
    pypi: Path  # the three simple indexes
    venv: Path  # template venv with the cu128 stack
    venv_origin: str  # the path the template was built at (its scripts name it)


def ensure_cache(python: str, cache_dir: Path | None = None) -> Cache:
    home = cache_dir or cache_home()
    target = home / f"sim-{source_digest(python)}"
    if not (target / "ready").exists():
        home.mkdir(parents=True, exist_ok=True)
        with _locked(home / f"{target.name}.lock"):
            if not (target / "ready").exists():  # another process may have built it meanwhile
                _build_cache(target, python)
                _prune(home, keep=target)
    os.utime(target / "ready")  # marks the cache as in use, so pruning spares it
    return Cache(target, target / "pypi", target / "venv", (target / "venv-origin").read_text())


def _prune(home: Path, keep: Path, unused_days: float = 7.0) -> None:
    """Caches of older sources pile up as the code changes; drop those unused for a week."""
    import time

    for entry in home.glob("sim-*"):
        if entry == keep or entry.suffix == ".lock":
            continue
        marker = entry / "ready"
        last = marker.stat().st_mtime if marker.exists() else entry.stat().st_mtime
        if time.time() - last > unused_days * 86400:
            shutil.rmtree(entry, ignore_errors=True)
            (home / f"{entry.name}.lock").unlink(missing_ok=True)


def _build_cache(target: Path, python: str) -> None:
    work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        indexes = wheels.build_indexes(work / "pypi")
        sim_venv.build_template(work / "venv", python, indexes["simple-cu128"])
        (work / "venv-origin").write_text(str(work / "venv"))
        (work / "ready").write_text("")
        if target.exists():
            shutil.rmtree(target)
        os.rename(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


@contextmanager
def _locked(path: Path):
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- runfiles

_RUNFILE_HEADER = """#!/bin/sh
# NVIDIA CUDA Toolkit {version} (driver {driver}) runfile of a simulated GPU host.
# Like a makeself archive, a shell header followed by the installer: here a zip of its Python
# sources. Works with `sh FILE ARGS` and `./FILE ARGS`; the sim root is found from the file's own
# location. No path of the machine that built it is inside, so the file (and its published
# checksum) is the same in every sim built from the same sources, as a real runfile is.
SIM_PYTHON=$(command -v sim-python || command -v python3)
exec "$SIM_PYTHON" -I -S -c 'import sys; sys.path.insert(0, sys.argv[1]); from simhost.runfile import main; sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))' "$0" "" '{release}' "$@"
echo "cannot find a Python interpreter to run this installer" >&2
exit 1
"""


def _installer_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(SIMHOST.glob("*.py")):
            zi = zipfile.ZipInfo(f"simhost/{path.name}", (1980, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, path.read_bytes())
    return buf.getvalue()


def write_runfile(directory: Path, release_key: str, python: str, root: Path) -> Path:
    r = toolkit.RELEASES[release_key]
    header = _RUNFILE_HEADER.format(version=r.version, driver=r.driver, release=release_key).encode()
    path = directory / r.runfile_name
    directory.mkdir(parents=True, exist_ok=True)
    # zipimport finds an archive behind any prefix, the way self-extracting archives are read.
    path.write_bytes(header + _installer_zip())
    path.chmod(0o755)
    return path


# --------------------------------------------------------------------------- one machine


def lay_out(root: Path, cache: Cache, python: str, *, gpus: int, gpu_model: str, free_space_mb: dict[str, int] | None,
            driver_version: str, smi_version: str | None, gcc: str | None, kernel: str, toolkits: tuple[str, ...],
            bench_noise: float, pypi_reachable: bool = True) -> None:
    compiler = sim_compiler.parse(gcc)  # raises before anything is laid out
    for d in ("usr/bin", "usr/local", "usr/share/man", "var/log", "var/tmp", "tmp", "opt", "etc", "root", "srv",
              "proc/driver/nvidia"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for d in ("tmp", "var/tmp"):
        (root / d).chmod(0o1777)  # world-writable and sticky, as on every Linux host
    for package in (SIMHOST, SIMCOMMANDS):
        shutil.copytree(package, root / host_state.STATE_DIR / "lib" / package.name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    st = machine.default_state(gpus=gpus, gpu_model=gpu_model, driver_version=driver_version,
                               smi_version=smi_version, free_space_mb=free_space_mb, gcc=gcc, kernel=kernel,
                               python=python, bench_noise=bench_noise)
    st["bench"]["model"] = sim_serving.served_model_for(st["gpus"])  # what fits its GPUs
    host_state.save(root, st)
    sim_runfile.write_proc_version(root, st)
    sim_kernel.write_proc_files(root, st)
    # The interpreter the sim's installers run with, by a name of its own on the host's PATH.
    (root / "usr" / "bin" / "sim-python").symlink_to(python)
    _write_command(root / "usr" / "bin" / "nvidia-smi", python, "simcommands.smi")
    _write_command(root / "usr" / "bin" / "df", python, "simcommands.mounts", "df_main")
    _write_command(root / "usr" / "bin" / "lsmod", python, "simhost.disk", "lsmod_main")
    _write_command(root / "usr" / "bin" / "mount", python, "simcommands.mounts", "mount_main")
    _write_command(root / "usr" / "bin" / "findmnt", python, "simcommands.mounts", "findmnt_main")
    _write_command(root / "usr" / "bin" / "uname", python, "simhost.kernel", "uname_main")
    _write_command(root / "usr" / "bin" / "ldd", python, "simcommands.libc", "ldd_main")
    _write_command(root / "usr" / "bin" / "du", python, "simcommands.du", "du_main")
    _write_command(root / "usr" / "bin" / "dpkg", python, "simhost.dpkg", "dpkg_main")
    _write_command(root / "usr" / "bin" / "dpkg-query", python, "simhost.dpkg", "dpkg_query_main")
    sim_dpkg.write_database(root, st)
    _write_compiler(root / "usr" / "bin", python, compiler)
    _link_host_programs(root / "usr" / "bin", shown=lambda name: sim_compiler.shown_from_host(name, compiler)
                        and name not in SCHEDULER_COMMANDS)
    _link_host_system_programs(root / "usr" / "sbin", own=root / "usr" / "bin")
    (root / "etc" / "os-release").write_text(OS_RELEASE)
    for key in toolkits:
        toolkit.install(root / "usr" / "local" / f"cuda-{toolkit.RELEASES[key].short}", toolkit.RELEASES[key],
                        python, man_dir=root / "usr" / "share" / "man")
    # What the filesystems' free space already counts: a toolkit installed later takes its room (state.py).
    host_state.update(root, lambda state: state.__setitem__(
        "toolkits_at_build", [f"/usr/local/cuda-{toolkit.RELEASES[key].short}" for key in toolkits]))
    if toolkits:
        # As the host sees it inside its sandbox: /usr/local/cuda -> /usr/local/cuda-12.8.
        (root / "usr" / "local" / "cuda").symlink_to(f"/usr/local/cuda-{toolkit.RELEASES[toolkits[0]].short}")
    wheels.copy_indexes(cache.pypi, root / "srv" / "pypi")
    venv_dir = host_state.host_path(root, VENV_DIR)
    # The machine's own pip configuration: its PyPI is the sim's index, and, as on a box set up for
    # PyTorch's cu128 wheels, the cu128 index is an extra index (so a backup knows where +cu128
    # builds come from). Its cache lies in the host's home, and options that the computer running the
    # sim may set globally (find-links, constraints) are cleared so every sim resolves the same packages.
    # Every path is the one the host sees inside its sandbox.
    # Without a route to PyPI (an air-gapped machine), the configuration names an index that is not there,
    # as PyPI is not there for such a machine, and no extra index: pip finds a package only where a command
    # names the mirror.
    indexes = ("index-url = file:///srv/pypi/simple\nextra-index-url = file:///srv/pypi/simple-cu128\n"
               if pypi_reachable else "index-url = file:///srv/no-route-to-pypi/simple\n")
    pip_conf = ("[global]\n"
                + indexes +
                "find-links =\n"
                "constraint =\n"
                "cache-dir = /root/.cache/pip\n"
                "disable-pip-version-check = true\n")
    sim_venv.copy(cache.venv, cache.venv_origin, venv_dir, pip_conf, seen_as=VENV_DIR)
    # os.uname() asks this machine's kernel, which no program inside can change: the venv's interpreter reads
    # the sim's kernel where uname and /proc/version already show it.
    for site in venv_dir.glob("lib/python*/site-packages"):
        (site / "sitecustomize.py").write_text(KERNEL_AS_SHOWN)


# The seed's machine runs Ubuntu 24.04; the sandbox shows this file as /etc/os-release.
OS_RELEASE = """PRETTY_NAME="Ubuntu 24.04.3 LTS"
NAME="Ubuntu"
VERSION_ID="24.04"
VERSION="24.04.3 LTS (Noble Numbat)"
VERSION_CODENAME=noble
ID=ubuntu
ID_LIKE=debian
HOME_URL="https://www.ubuntu.com/"
SUPPORT_URL="https://help.ubuntu.com/"
BUG_REPORT_URL="https://bugs.launchpad.net/ubuntu/"
UBUNTU_CODENAME=noble
"""

KERNEL_AS_SHOWN = '''"""os.uname() and platform.uname() with the kernel release and version /proc shows."""
import os


def _uname(_real=os.uname):
    real = _real()
    try:
        with open("/proc/sys/kernel/osrelease") as f:
            release = f.read().strip()
        with open("/proc/version") as f:
            version = f.read().strip()
    except OSError:
        return real
    version = version[version.index(" #") + 1:] if " #" in version else real.version
    return os.uname_result((real.sysname, real.nodename, release or real.release, version, real.machine))


os.uname = _uname
'''

_COMMAND = """#!{python} -IS
# {name} of a simulated GPU host; the sim root is found from this file's own location.
import os, sys
here = os.path.dirname(os.path.realpath(__file__))
root = here
while not os.path.isfile(os.path.join(root, ".sim", "state.json")):
    if os.path.dirname(root) == root:
        sys.exit("{name}: not inside a simulated GPU host")
    root = os.path.dirname(root)
sys.path.insert(0, os.path.join(root, ".sim", "lib"))
from pathlib import Path
from {module} import {function}
sys.exit({function}(sys.argv[1:], Path(root)))
"""


def _link_host_programs(bin_dir: Path, shown) -> None:
    """The sim's /usr/bin: its own commands, and links to this machine's programs, which the sandbox
    shows read-only at HOST_USR_BIN (bash, python3, grep... as on any host), but for those `shown`
    keeps out (this machine's compiler, where the sim's state says otherwise)."""
    for name in os.listdir("/usr/bin"):
        link = bin_dir / name
        if shown(name) and not link.exists() and not link.is_symlink():
            link.symlink_to(f"{HOST_USR_BIN}/{name}")


def _write_compiler(bin_dir: Path, python: str, compiler: sim_compiler.Compiler | None) -> None:
    """gcc, g++ and cpp of the sim's state, under Ubuntu's names; nothing when it has no compiler."""
    if compiler is None:
        return
    for name, target in sim_compiler.layout(compiler).items():
        if target is None:
            _write_command(bin_dir / name, python, "simhost.compiler")
        else:
            (bin_dir / name).symlink_to(target)


def _link_host_system_programs(sbin_dir: Path, own: Path) -> None:
    """The sim's /usr/sbin: links to this machine's, shown at HOST_USR_SBIN, except where the sim has
    its own program of that name (lsmod), which wins there too."""
    sbin_dir.mkdir(parents=True, exist_ok=True)
    for name in os.listdir("/usr/sbin") if os.path.isdir("/usr/sbin") else ():
        link = sbin_dir / name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(f"/usr/bin/{name}" if (own / name).is_file() and not (own / name).is_symlink()
                            else f"{HOST_USR_SBIN}/{name}")


def _write_command(path: Path, python: str, module: str, function: str = "main") -> None:
    path.write_text(_COMMAND.format(python=python, name=path.name, module=module, function=function))
    path.chmod(0o755)
