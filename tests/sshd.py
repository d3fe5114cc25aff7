"""A throwaway OpenSSH server on 127.0.0.1, for the SSH tests and the SSH benchmark.

It runs the system's `sshd -D -e -f CONFIG` as the current user, with a host key,
an authorized key and a config of its own in a temporary directory, on a free
loopback port. Everything it starts is stopped by process id.

The benchmark imports this file by path, so it must stay free of pytest.
"""

from __future__ import annotations

import getpass
import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

SSHD_BINARY = "/usr/sbin/sshd"


def keygen(path: Path, *, passphrase: str = "", key_type: str = "ed25519") -> Path:
    """Write a new key pair at `path` and `path`.pub; return the private key path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, path.with_name(path.name + ".pub")):
        p.unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", key_type, "-N", passphrase, "-C", f"test-{path.name}", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path


def fingerprint(pub_path: Path) -> str:
    """SHA256:... as OpenSSH prints it (`ssh-keygen -l`)."""
    out = subprocess.run(["ssh-keygen", "-l", "-f", str(pub_path)], check=True, capture_output=True, text=True)
    return out.stdout.split()[1]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_port() -> int:
    """A loopback port nobody listens on (bound and released; connecting to it is refused)."""
    return free_port()


class SSHD:
    """One sshd listening on 127.0.0.1:port, with everything it needs under `root`."""

    def __init__(self, root: Path, *, authorized_keys: list[Path], port: int | None = None,
                 log_level: str = "VERBOSE", extra_config: str = "", skip_login_rc: bool = True):
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self.user = getpass.getuser()
        self.port = port or free_port()
        self.host_key = keygen(root / "ssh_host_ed25519_key")
        self.log_path = root / "sshd.log"
        self.authorized_keys = root / "authorized_keys"
        self.authorized_keys.write_text("".join(Path(str(k) + ".pub").read_text() for k in authorized_keys))
        self.authorized_keys.chmod(0o600)
        self.log_level = log_level
        self.extra_config = extra_config
        # The login shell sshd starts (bash -c) reads ~/.bashrc when it sees SSH_CLIENT and
        # SHLVL < 2 (Debian builds bash that way). A shell level of 1 in the session's
        # environment stops that, so a slow rc file on the test machine does not time every
        # command; the commands themselves run under `bash --noprofile --norc` anyway.
        self.skip_login_rc = skip_login_rc
        self.proc: subprocess.Popen | None = None

    # -- configuration

    @property
    def host_key_pub(self) -> Path:
        return self.host_key.with_name(self.host_key.name + ".pub")

    def host_key_fingerprint(self) -> str:
        return fingerprint(self.host_key_pub)

    def known_hosts_line(self) -> str:
        key_type, key_b64 = self.host_key_pub.read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {key_type} {key_b64}\n"

    def new_host_key(self) -> None:
        """Replace the host key (the server's identity changes); takes effect at the next start."""
        keygen(self.host_key)

    def _write_config(self) -> Path:
        config = self.root / "sshd_config"
        extra = self.extra_config
        if self.skip_login_rc:
            if "SetEnv " in extra:
                extra = extra.replace("SetEnv ", "SetEnv SHLVL=1 ", 1)
            else:
                extra = "SetEnv SHLVL=1\n" + extra
        config.write_text(
            f"""\
ListenAddress 127.0.0.1
Port {self.port}
HostKey {self.host_key}
PidFile {self.root / 'sshd.pid'}
AuthorizedKeysFile {self.authorized_keys}
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
AllowTcpForwarding yes
MaxSessions 10
MaxStartups 100:30:200
LogLevel {self.log_level}
{extra}
"""
        )
        return config

    # -- lifecycle

    def start(self, timeout: float = 10.0) -> "SSHD":
        if os.geteuid() == 0:
            # sshd running as root insists on its privilege-separation directory, which a
            # container without a running system sshd may lack.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        config = self._write_config()
        check = subprocess.run([SSHD_BINARY, "-t", "-f", str(config)], capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"sshd rejected its test config: {check.stderr.strip()}")
        log = open(self.log_path, "ab")
        seen = len(self.log())  # a restart appends: look for the new "listening" line only
        self.proc = subprocess.Popen(
            [SSHD_BINARY, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited at start ({self.proc.returncode}): {self.log()[-2000:]}")
            if f"Server listening on 127.0.0.1 port {self.port}" in self.log()[seen:]:
                return self
            time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"sshd did not start listening within {timeout}s: {self.log()[-2000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def connection_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener and their own children)."""
        if self.proc is None:
            return []
        return [pid for pid in _descendants(self.proc.pid) if _exe_name(pid) == "sshd"]

    def stop(self) -> None:
        """Stop the listener and every connection it serves (a host going down)."""
        self._signal_all(signal.SIGTERM)

    def kill(self) -> None:
        """Kill the listener and every connection at once (sshd dying under a running command).

        The commands the connections ran are left running, as they would be on a real host.
        """
        self._signal_all(signal.SIGKILL)

    def restart(self) -> None:
        self.stop()
        self.start()

    def _signal_all(self, sig: int) -> None:
        if self.proc is None:
            return
        victims = self.connection_pids()
        for pid in [self.proc.pid, *victims]:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        deadline = time.monotonic() + 5
        while any(_alive(p) for p in victims) and time.monotonic() < deadline:
            time.sleep(0.01)
        self.proc = None

    def __enter__(self) -> "SSHD":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --------------------------------------------------------------------------- /proc helpers


def _children_map() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # Field 4 (ppid) comes after the command name, which is in parentheses and may hold spaces.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    return children


def _descendants(pid: int) -> list[int]:
    children = _children_map()
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _exe_name(pid: int) -> str:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def unique_marker() -> str:
    """A `sleep` argument no other process has: `sleep 1000 0.<digits>` sleeps 1000 s and is findable."""
    return f"0.{random.randrange(10**11, 10**12)}"


def pids_matching(needle: str) -> list[int]:
    """Processes whose command line contains `needle` (pgrep -f, without matching ourselves)."""
    out = subprocess.run(["pgrep", "-f", needle], capture_output=True, text=True)
    return [int(p) for p in out.stdout.split() if int(p) != os.getpid()]


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
