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

# /proc/PID/root and /proc/PID/task/TID/root (thread-self is a task too) open the root as that process sees it.
_PROC_ROOT = re.compile(r"^/proc/[^/]+/(task/[^/]+/)?root(?=/|$)")
_PROC_UNKNOWN = re.compile(r"^/proc/[^/]+/(task/[^/]+/)?(cwd|fd/\d+|map_files)(?=/|$)")


def tilde_user(path: str) -> str | None:
    """The `~name` a path starts with, when it is not the login user's own `~` or `~/`: bash replaces it
    with that user's home (or $PWD, $OLDPWD for `~+`, `~-`), a directory the text cannot know."""
    if not path.startswith("~") or path == "~" or path.startswith("~/"):
        return None
    return path.split("/", 1)[0]


def _parent_after(path: str) -> str | None:
    """The component a `..` follows, when one does: the kernel goes up from wherever that component
    leads, and it may be a symlink (`/var/run/../dev` is `/dev`, `/sys/dev/char/10:130/..` is anywhere)."""
    previous = None
    for part in path.split("/"):
        if part == ".." and previous not in (None, "", ".", ".."):
            return previous
        if part not in ("", "."):
            previous = part
    return None


def normalize(path: str, cwd: str | None = "/") -> str | None:
    """The path the kernel opens, read lexically: `//` and `/./` resolved, `~/` read as the login
    directory, `/proc/PID/root/x` read as `/x`. None when it cannot be known here: relative to an
    unknown directory, a `~name` home, through `/proc/PID/cwd`, or a `..` after a component (the
    component may be a symlink, and `..` goes up from where it leads). Relative paths are read
    against cwd."""
    if path.startswith("~"):
        if tilde_user(path) is not None:
            return None
        path = "/~" + path[1:]  # the login directory, as the analysis' cwd names it
    if not path.startswith("/"):
        if cwd is None:
            return None
        path = cwd.rstrip("/") + "/" + path
    if _parent_after(path) is not None:
        return None
    parts = [part for part in path.split("/") if part not in ("", ".", "..")]  # `/..` is `/`
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


def _unknown_path(path: str) -> str:
    """Why normalize could not place path, with what to write instead."""
    user = tilde_user(path)
    if user is not None:
        return (f"`{path}` starts in the home directory of `{user}`, which the command's text cannot know "
                f"(`~sys` is /dev on Debian); write the absolute path")
    parent = _parent_after(path)
    if parent is not None:
        return (f"`{path}` goes up (`..`) from wherever `{parent}` leads, which may be a symlink to anywhere; "
                f"write the path without `..`")
    return f"`{path}` resolves through a directory the classifier cannot know"


# Device files that only produce or swallow bytes: reading them changes nothing.
_READABLE_DEVICES = frozenset(
    {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/stdin", "/dev/tty"}
)
_READABLE_DEVICE_PATTERN = re.compile(r"/dev/fd/\d+|/proc/self/fd/\d+|/proc/thread-self/fd/\d+")
# Attributes under /sys/firmware that only report a fixed value (whether the machine booted 32- or 64-bit
# UEFI); the rest of /sys/firmware (EFI variables, ACPI tables, DMI) stays refused.
_PLAIN_FIRMWARE_FILES = frozenset({"/sys/firmware/efi/fw_platform_size"})
# Files under /proc and /sys whose reading takes data others need or arms something.
_CONSUMING_READS = re.compile(
    r"^/proc/kmsg$|^/proc/sysrq-trigger$|^/proc/[^/]+/(task/[^/]+/)?(mem|clear_refs|pagemap)$|/trace_pipe(_raw)?$|"
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
        return MUTATING, "unknown-path", _unknown_path(path)
    if norm in _READABLE_DEVICES or _READABLE_DEVICE_PATTERN.fullmatch(norm) or norm in _PLAIN_FIRMWARE_FILES:
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
    "/dev/watchdog0", "/dev/char/10:130", "/dev/mem", "/proc/1/task/1/mem", "/proc/self/task/1/mem",
)


def _glob_matches(pattern: str, path: str) -> bool:
    """Whether bash could expand pattern to path: component by component, `*` never crossing a `/`."""
    wanted, parts = pattern.split("/"), path.split("/")
    return len(wanted) == len(parts) and all(_component_regex(w).fullmatch(p) for w, p in zip(wanted, parts))


_BRACKET = re.compile(r"\[(!|\^)?(\]?([^\]\[]|\[:[a-z]+:\]|\[=.=\]|\[\.[^]]*\.\]|\[)*)\]")
_CLASS_SETS = {"alpha": "a-zA-Z", "alnum": "a-zA-Z0-9", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
               "xdigit": "0-9a-fA-F", "space": " \\t\\n\\r\\f\\v", "blank": " \\t", "punct": "!-/:-@\\[-`{-~",
               "word": "a-zA-Z0-9_"}


def _component_regex(pattern: str) -> re.Pattern[str]:
    """One path component's glob as bash reads it: `*`, `?`, brackets with `!`/`^` and POSIX classes
    (`[[:alpha:]]`, which fnmatch does not know). A bracket this cannot read matches any character,
    so an unusual pattern is judged by what it might match, never by what it surely does not."""
    out, index = [], 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            out.append(re.escape(pattern[index + 1]))
            index += 2
            continue
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            bracket = _BRACKET.match(pattern, index)
            if bracket is None:
                out.append(re.escape(char))
            else:
                out.append(_bracket_regex(bracket.group(0)))
                index = bracket.end()
                continue
        else:
            out.append(re.escape(char))
        index += 1
    return re.compile("".join(out), re.DOTALL)


def _bracket_regex(bracket: str) -> str:
    body = bracket[1:-1]
    negated = body[:1] in ("!", "^")
    body = body[1:] if negated else body
    items: list[str] = []
    index = 0
    while index < len(body):
        named = re.match(r"\[:([a-z]+):\]", body[index:])
        if named:
            if named.group(1) not in _CLASS_SETS:
                return "."  # cntrl, graph, print...: read as any character
            items.append(_CLASS_SETS[named.group(1)])
            index += named.end()
            continue
        if body[index] == "[" and body[index + 1:index + 2] in ("=", "."):
            return "."  # equivalence classes and collating symbols depend on the locale
        if index + 2 < len(body) and body[index + 1] == "-":
            items.append(re.escape(body[index]) + "-" + re.escape(body[index + 2]))
            index += 3
            continue
        items.append(re.escape(body[index]))
        index += 1
    try:
        return re.compile(("[^" if negated else "[") + "".join(items) + "]").pattern
    except re.error:
        return "."


def pattern_read_risk(pattern: str | None, cwd: str | None = "/") -> tuple[RiskClass, str, str] | None:
    """read_risk for an unquoted glob: not read-only when it could name a file read_risk refuses."""
    if pattern is None:
        return MUTATING, "unknown-path", "a path known only when the command runs"
    norm = normalize(pattern, cwd)
    if norm is None:
        return MUTATING, "unknown-path", _unknown_path(pattern)
    hit = next((sample for sample in _SIDE_EFFECT_SAMPLES if _glob_matches(norm, sample)), None)
    if hit is not None:
        return MUTATING, "side-effect-read", f"the pattern `{pattern}` may name {hit}, which is consumed or acts when read"
    parts = norm.split("/")
    if len(parts) > 4 and _glob_matches("/".join(parts[:2]), "/proc") and any(
            _glob_matches(parts[3], name) for name in ("root", "cwd", "fd", "map_files", "task")):
        return MUTATING, "unknown-path", (f"the pattern `{pattern}` may lead through /proc/PID/root, cwd or a task's, "
                                          f"to a place the classifier cannot know")
    if len(parts) > 2 and _glob_matches(parts[1], "dev"):  # `/d[[:alpha:]]v/x` may be any device
        fixed = "/".join(parts[2:])
        return read_risk("/dev/" + re.split(r"[*?\[]", fixed, maxsplit=1)[0] + "x", "/")
    return None


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


def in_trusted_places(an, prog: str, files: list) -> bool:
    """Files a newly accepted reader opens (ldd, nm, xxd...): none in a world-writable directory, where a
    planted symlink or FIFO (`/tmp/wd -> /dev/watchdog`) is what the name opens and no text check sees it.
    Records why when one is there."""
    for arg in files:
        text = arg.text or ""
        norm = normalize(text, an.cwd) if text else None
        if norm is None or (norm + "/").startswith(UNTRUSTED_DIRS):
            an.add(RiskClass.MUTATING, f"{prog}:untrusted-place",
                   f"`{prog} {text}` opens a file in a world-writable directory (or one the classifier cannot "
                   f"place), where a planted symlink or FIFO decides what is opened")
            return False
    return True
