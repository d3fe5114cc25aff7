"""Paths a command writes or names: which files and directories are critical, which writes are harmless."""

from __future__ import annotations

import fnmatch
import posixpath
import re

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Arg
from agent.safety.classifier.words import _expand_braces
from tools.base import RiskClass

# --------------------------------------------------------------------------- files and paths

_HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_RAW_DISK = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|loop\d|nbd\d|sr\d|"
    r"disk/|mapper/|root$|mem$|kmem$|port$)"
)
_CRITICAL_FILES = frozenset(
    {"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/fstab",
     "/etc/crypttab", "/etc/ld.so.preload", "/etc/ld.so.cache"}
)
_CRITICAL_DIRS = (
    "/boot/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/usr/bin/", "/usr/sbin/", "/usr/lib/",
    "/usr/lib32/", "/usr/lib64/", "/usr/libexec/", "/etc/sudoers.d/",
)
# Directories whose recursive removal (or chmod -R) wipes the system: refused outright.
_SYSTEM_DIRS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
        "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/usr", "/var", "/usr/bin",
        "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include", "/usr/share",
        "/usr/src", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin", "/usr/local/share",
        "/var/lib", "/var/log", "/var/cache", "/var/spool", "/etc/alternatives",
    }
)


def _write_risk(path: str) -> tuple[RiskClass, str, str] | None:
    """How bad writing to path is: None for harmless sinks, else (class, kind, explanation)."""
    if path in _HARMLESS_SINKS or re.fullmatch(r"/dev/fd/[0-9]+|/proc/self/fd/[0-9]+", path):
        return None
    norm = posixpath.normpath(path) if path.startswith("/") else path
    if _RAW_DISK.match(norm):
        return FORBIDDEN, "raw-disk", ", a raw disk or memory device, destroying what it holds"
    if norm.startswith("/dev/"):
        return DESTRUCTIVE, "device", ", a device node"
    if norm == "/proc/sysrq-trigger":
        return DESTRUCTIVE, "sysrq", ", which can crash or reboot the machine"
    if norm.startswith("/sys/") and posixpath.basename(norm) in ("remove", "reset", "unbind", "rescan"):
        return DESTRUCTIVE, "sysfs", ", which detaches or resets a device"
    if norm in _CRITICAL_FILES or norm.startswith(_CRITICAL_DIRS):
        return DESTRUCTIVE, "system-file", ", a file the system needs to boot, log in or load programs"
    return MUTATING, "file", ""


def _system_dir_hit(arg: Arg) -> str | None:
    """The system directory a recursive operation on arg would wipe, if any (`/`, `/usr/*`, `/u*`)."""
    if arg.text is None:
        return None
    for variant in _expand_braces(arg.text):
        path = variant
        while True:
            stripped = re.sub(r"/(\*|\.\*|\.)?$", "", path)
            if stripped == path:
                break
            path = stripped
        if not path:
            path = "/"
        if not path.startswith("/"):
            continue
        norm = posixpath.normpath(path)
        norm = "/" if norm.startswith("//") and norm.strip("/") == "" else norm
        if norm in _SYSTEM_DIRS:
            return norm
        if arg.pattern and any(fnmatch.fnmatchcase(d, norm) for d in _SYSTEM_DIRS):
            return norm
    return None
