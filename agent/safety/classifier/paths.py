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


# --------------------------------------------------------------------------- reading and running paths

_PROC_ROOT = re.compile(r"^/proc/[^/]+/root(?=/|$)")
_PROC_UNKNOWN = re.compile(r"^/proc/[^/]+/(cwd|fd/\d+|map_files)(?=/|$)")


def normalize(path: str, cwd: str | None = "/") -> str | None:
    """The path the kernel opens, read lexically: `//`, `/./` and `..` resolved, `/proc/PID/root/x`
    read as `/x`. None when it cannot be known here: relative to an unknown directory, or through
    `/proc/PID/cwd`. Relative paths are read against cwd."""
    if not path.startswith("/"):
        if cwd is None:
            return None
        path = cwd.rstrip("/") + "/" + path
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    norm = "/" + "/".join(parts)
    if norm == "/var/run" or norm.startswith(("/var/run/", "/var/lock/")):
        norm = "/run" + norm[len("/var/run"):] if norm.startswith("/var/run") else "/run/lock" + norm[len("/var/lock"):]
    for _ in range(8):  # /proc/self/root/proc/self/root/... : each is the same root
        stripped = _PROC_ROOT.sub("", norm)
        if stripped == norm:
            break
        norm = stripped or "/"
    if _PROC_UNKNOWN.match(norm):
        return None
    return norm


# Device files that only produce or swallow bytes: reading them changes nothing.
_READABLE_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/tty"}
)
_READABLE_DEVICE_PATTERN = re.compile(r"/dev/fd/\d+|/proc/self/fd/\d+|/proc/thread-self/fd/\d+")
# Files under /proc and /sys whose reading takes data others need or arms something.
_CONSUMING_READS = re.compile(
    r"^/proc/kmsg$|^/proc/sysrq-trigger$|^/proc/[^/]+/(mem|clear_refs|pagemap)$|/trace_pipe(_raw)?$|"
    r"^/sys/kernel/(debug|tracing)/|^/proc/acpi/|^/sys/firmware/|^/proc/bus/|^/dev/|^/run/initctl$|\.fifo$|"
    r"^/run/systemd/initctl/fifo$|^/run/dmeventd-(client|server)$|/fifo$"
)


def read_risk(path: str | None, cwd: str | None = "/") -> tuple[RiskClass, str, str] | None:
    """Why opening path for reading is not read-only, or None when it is an ordinary read.

    Device files may arm hardware (`cat /dev/watchdog` reboots the host unless it is fed), kernel
    queues are consumed by their reader (/proc/kmsg, trace_pipe), and some /proc and /sys files act
    when read; only devices that just produce bytes are allowed."""
    if path is None:
        return MUTATING, "unknown-path", "a path the classifier cannot resolve (relative to an unknown directory)"
    norm = normalize(path, cwd)
    if norm is None:
        return MUTATING, "unknown-path", f"`{path}` resolves through a directory the classifier cannot know"
    if norm in _READABLE_DEVICES or _READABLE_DEVICE_PATTERN.fullmatch(norm):
        return None
    if _CONSUMING_READS.search(norm):
        what = "a device file, whose reading can arm or drive hardware" if norm.startswith("/dev/") else \
            "a kernel file that is consumed or acts when read"
        return MUTATING, "side-effect-read", f"`{path}` is {what}"
    return None


# Files whose reading is not read-only, one for each kind: a glob that could match any of them is not
# read-only either (`cat /proc/k*`, `cat /*/kmsg`, `cat /sys/*/tracing/trace_pipe`).
_SIDE_EFFECT_SAMPLES = (
    "/proc/kmsg", "/proc/sysrq-trigger", "/proc/1/mem", "/proc/self/mem", "/proc/1/clear_refs", "/proc/1/pagemap",
    "/proc/acpi/event", "/proc/bus/pci", "/sys/kernel/tracing/trace_pipe", "/sys/kernel/tracing/per_cpu/cpu0/trace_pipe",
    "/sys/kernel/debug/tracing/trace_pipe", "/sys/kernel/debug/dri/0/amdgpu_gpu_recover", "/sys/firmware/efi",
    "/run/initctl", "/run/systemd/initctl/fifo", "/run/dmeventd-client", "/run/dmeventd-server", "/dev/watchdog",
    "/dev/watchdog0", "/dev/char/10:130", "/dev/mem",
)


def _glob_matches(pattern: str, path: str) -> bool:
    """Whether bash could expand pattern to path: component by component, `*` never crossing a `/`."""
    wanted, parts = pattern.split("/"), path.split("/")
    return len(wanted) == len(parts) and all(fnmatch.fnmatchcase(p, w) for w, p in zip(wanted, parts))


def pattern_read_risk(pattern: str | None, cwd: str | None = "/") -> tuple[RiskClass, str, str] | None:
    """read_risk for an unquoted glob: not read-only when it could name a file read_risk refuses."""
    if pattern is None:
        return MUTATING, "unknown-path", "a path known only when the command runs"
    norm = normalize(pattern, cwd)
    if norm is None:
        return MUTATING, "unknown-path", f"`{pattern}` resolves through a directory the classifier cannot know"
    hit = next((sample for sample in _SIDE_EFFECT_SAMPLES if _glob_matches(norm, sample)), None)
    if hit is not None:
        return MUTATING, "side-effect-read", f"the pattern `{pattern}` may name {hit}, which is consumed or acts when read"
    return read_risk(norm.split("*")[0].split("?")[0].split("[")[0] + "x", "/") if norm.startswith("/dev/") else None


# World-writable places where anyone may have put a program; a command run from there is not the
# system's program of that name.
UNTRUSTED_DIRS = ("/tmp/", "/var/tmp/", "/dev/", "/run/user/", "/run/lock/", "/var/lock/", "/var/crash/",
                   "/var/spool/", "/proc/", "/sys/", "/run/shm/")


def trusted_program_path(path: str) -> bool:
    """An absolute program path, without `..`, outside world-writable and virtual directories
    (after `//`, `/./` and /proc/PID/root are resolved)."""
    if not path.startswith("/") or ".." in path.split("/"):
        return False
    if _PROC_UNKNOWN.match(path) or _PROC_ROOT.match(path.replace("//", "/")):
        return False
    norm = normalize(path)
    return norm is not None and not (norm + "/").startswith(UNTRUSTED_DIRS)
