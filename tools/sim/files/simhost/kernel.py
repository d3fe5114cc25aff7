"""The simulated host's kernel: uname, and /proc/version with /proc/sys/kernel/osrelease.

The sandbox runs on this machine's kernel, whose uname(2) no program can change; the sim's own
uname answers from the kernel in its state instead, and the sandbox shows the sim's files at
/proc/version and /proc/sys/kernel/osrelease, so `uname -r` and `cat /proc/version` agree.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import gnu
from . import state as host_state

# uname's fields in the order it prints them, with the options that ask for each.
_FIELDS = [("s", "kernel-name"), ("n", "nodename"), ("r", "kernel-release"), ("v", "kernel-version"),
           ("m", "machine"), ("p", "processor"), ("i", "hardware-platform"), ("o", "operating-system")]
_LONGS = ["all", *(long for _, long in _FIELDS), "help", "version"]


def uname_main(argv: list[str], root) -> int:
    try:
        opts, operands = gnu.parse("uname", argv, "asnrvmpio", _LONGS)
    except gnu.Usage as e:
        return gnu.refuse("uname", str(e))
    given = [o.lstrip("-") for o, _ in opts]
    if "help" in given or "version" in given:
        return gnu.host_program("uname", argv)
    if operands:
        return gnu.refuse("uname", f"extra operand {gnu.quote(operands[0])}")
    values = _values(host_state.load(root)["kernel"])
    wanted = set()
    for g in given:
        wanted |= {s for s, _ in _FIELDS} if g in ("a", "all") else \
            {s for s, long in _FIELDS if g in (s, long)}
    if not wanted:
        wanted = {"s"}
    sys.stdout.write(" ".join(values[s] for s, _ in _FIELDS if s in wanted) + "\n")
    return 0


def _values(kernel: dict) -> dict[str, str]:
    return {"s": kernel["name"], "n": os.uname().nodename, "r": kernel["release"], "v": kernel["version"],
            # Ubuntu's coreutils report the processor and platform as the machine (upstream: unknown).
            "m": kernel["machine"], "p": kernel["machine"], "i": kernel["machine"], "o": kernel["operating_system"]}


def proc_version(kernel: dict) -> str:
    return (f"{kernel['name']} version {kernel['release']} ({kernel['builder']}) ({kernel['compiler']}) "
            f"{kernel['version']}\n")


def write_proc_files(root: Path, st: dict) -> None:
    """The files the sandbox shows at /proc/version and /proc/sys/kernel/osrelease."""
    kernel = st["kernel"]
    proc = host_state.host_path(root, "/proc")
    (proc / "sys" / "kernel").mkdir(parents=True, exist_ok=True)
    (proc / "version").write_text(proc_version(kernel))
    (proc / "sys" / "kernel" / "osrelease").write_text(kernel["release"] + "\n")
