"""What a session's backups really undo of one step: the backup the gate asks for, and the panel's words.

The gate asks, before a change, for the backup that undoes it (`required_backup`): a pip change needs a
pip-freeze backup of that environment, a toolkit or `cuda` link change a backup with a system reading, and
a change no backup undoes needs an approval that says so. The approval panel says which backup undoes
this step, and how, or that none does (`what_undoes`):

- a pip-freeze backup puts one interpreter's packages back (restore_backup), as far as its rehearsal found
  every pin can be fetched again;
- its system reading lets restore_backup system=true remove the CUDA toolkits installed since and put
  the `cuda` link back; system packages and the driver it records and compares, but does not put back;
- no backup holds a toolkit's files: a removed toolkit comes back only from its installer.
"""

from __future__ import annotations

import os.path
import re
import shlex
from dataclasses import dataclass
from typing import Literal

from tools.base import Action, BackupRecord, Risk
from tools.system_state import LISTED_TOOLKIT

CUDA_PREFIX = "/usr/local/cuda"
_PIP = re.compile(r"pip[0-9.]*")
_PYTHON = re.compile(r"python[0-9.]*")
# The system package managers whose installs a backup records and compares, but does not put back.
_APT = re.compile(r"(apt|apt-get|aptitude|dnf|yum|microdnf|zypper|rpm):")
_TOOLKIT_PACKAGE = re.compile(r"cuda-(toolkit|[0-9])|cuda$|cuda=")


@dataclass(frozen=True)
class Cover:
    backup: BackupRecord | None  # the backup that undoes the step; None when none does
    says: str  # how it is undone, or why nothing undoes it: one line for the approval panel


@dataclass(frozen=True)
class Requirement:
    """The backup the gate asks for before a change, and whether this session has it.

    `kind`: "environment" (a pip-freeze backup of the interpreter the step changes), "system" (a backup
    whose system reading exists), "irreversible" (no backup undoes the step: it needs an approval that
    says so, and still a backup before it, whose system reading records the state it starts from), or
    "any" (a rollback, or a command whose effect is not known: any verified backup of the host, the rule
    of order the gate always had)."""

    kind: Literal["environment", "system", "irreversible", "any"]
    backup: BackupRecord | None  # the verified backup that meets it; None: none does yet
    # When none does: what the backup must be and what to take, e.g. "of /opt/venv/bin/python: take
    # pip_freeze_backup with python=/opt/venv/bin/python"; or only ": take one with pip_freeze_backup".
    missing: str
    why: str = ""  # irreversible: why nothing undoes it


TAKE_BACKUP = ": take one with pip_freeze_backup"


def required_backup(tool: str, action: Action, risk: Risk, backups: list[BackupRecord],
                    default_python: str | None) -> Requirement:
    """What the gate needs among `backups` (this host's verified ones, oldest first) before this change.

    `default_python` is the interpreter a call that names none uses on this host (its configured one, else
    python3): a typed pip_install without `python`, and a bare `pip` of a shell command, change that one.
    None where the gate was not told (a host added mid-chat): then any pip-freeze backup of the host counts
    for them, as the approval panel says ("if that is the host's default interpreter")."""
    words = _words(action.subject) if tool == "ssh_exec" else []
    area = _area(tool, action, risk, words)
    if area == "python":
        named = action.interpreter if tool != "ssh_exec" else _interpreter(words)
        target = named or default_python
        freezes = [b for b in backups if b.kind == "pip-freeze"]
        same = [b for b in freezes if target is None or same_environment(b.target, target)]
        if target is None:
            return Requirement("environment", same[-1] if same else None, TAKE_BACKUP)
        taken = ", ".join(sorted({b.target for b in freezes}))
        how = (f"take pip_freeze_backup with python={target}" if named else
               f"take pip_freeze_backup with python left out (the host's default interpreter, {target})")
        return Requirement("environment", same[-1] if same else None,
                           f" for {target}" + (f" (backed up: {taken}, which does not undo a change to {target})"
                                             if taken else "") + f": {how}")
    if area in ("toolkit", "apt-toolkit"):
        # A record that lists no files at all was not written by pip_freeze_backup (which lists every file
        # it wrote, system.txt among them): it says nothing either way, and counts as before.
        readings = [b for b in backups if "system.txt" in b.files or not b.files]
        return Requirement("system", readings[-1] if readings else None,
                           " that recorded its system state (system.txt: the toolkits and the cuda link), which a "
                           "toolkit or link change needs to be undone: take pip_freeze_backup, which records it")
    latest = backups[-1] if backups else None
    if area in _UNDONE_BY_NONE:
        return Requirement("irreversible", latest, TAKE_BACKUP, why=_UNDONE_BY_NONE[area])
    # A rollback, or a shell command whose effect is not known (area None): nothing says which backup would
    # undo it, so the gate keeps its rule of order, any verified backup of the host; the approval (the
    # operator, who reads "not known" on the panel, or an exact command rule) is what lets it run.
    return Requirement("any", latest, TAKE_BACKUP)


_UNDONE_BY_NONE = {
    "toolkit-elsewhere": "a backup records the toolkits at /usr/local/cuda-* only, and a restore removes only those: "
                         "a toolkit installed anywhere else is neither recorded nor removed (it comes off by hand)",
    "toolkit-files": "a backup records which toolkits are there, not their files; a removed toolkit comes back "
                     "only from its installer",
    "packages": "system packages are recorded and compared by a backup, not put back",
    "driver": "the driver is recorded by a backup, not put back; going back needs the old driver's installer, "
              "and often a reboot",
    "conda": "a pip-freeze backup does not put conda packages back",
}


def what_undoes(tool: str, action: Action, risk: Risk, backups: list[BackupRecord],
                default_python: str | None = None) -> Cover:
    """The backup among `backups` (this host's verified ones, oldest first) that undoes the step, and how."""
    words = _words(action.subject) if tool == "ssh_exec" else []
    area = _area(tool, action, risk, words)
    freezes = [b for b in backups if b.kind == "pip-freeze"]
    if area == "python":
        return _python(action.interpreter if tool != "ssh_exec" else _interpreter(words), freezes,
                       typed=tool != "ssh_exec", default_python=default_python)
    if area in ("toolkit", "apt-toolkit"):
        readings = [b for b in backups if "system.txt" in b.files]
        if not readings:
            return Cover(None, "nothing: no backup of this session recorded the system state (toolkits, cuda link)")
        b = readings[-1]
        tail = ("; the packages apt installed are listed, to remove by hand" if area == "apt-toolkit" else "")
        return Cover(b, f"restore_backup {b.backup_id} system=true removes the toolkits installed since and puts "
                        f"the cuda link back{tail}")
    if area in _UNDONE_BY_NONE:
        return Cover(None, f"nothing: {_UNDONE_BY_NONE[area]}")
    if area == "rollback":
        return Cover(None, "this step is itself a rollback; what it replaces is kept only by a backup taken now")
    kept = "Python packages" + (" and the toolkits and cuda link" if any("system.txt" in b.files for b in backups)
                                else "")
    return Cover(None, f"not known: this session's backups put back {kept}; none is known to undo this command")


def _python(interpreter: str | None, freezes: list[BackupRecord], typed: bool,
            default_python: str | None = None) -> Cover:
    if not freezes:
        return Cover(None, "nothing: no pip-freeze backup was taken in this session")
    if interpreter is not None:
        same = [b for b in freezes if same_environment(b.target, interpreter)]
        if not same:
            taken = ", ".join(sorted({b.target for b in freezes}))
            return Cover(None, f"nothing: no backup is of {interpreter} (backed up: {taken})")
        b = same[-1]
        return Cover(b, f"restore_backup {b.backup_id} puts the packages of {b.target} back as they were"
                        + _rehearsed(b))
    # The host's default interpreter, when the gate knows it: the backup of that one, else the latest.
    b = next((f for f in reversed(freezes) if default_python and same_environment(f.target, default_python)),
             freezes[-1])
    which = "the host's default interpreter" if typed else "the `pip` this command finds first on PATH"
    return Cover(b, f"restore_backup {b.backup_id} puts the packages of {b.target} back, if that is {which}"
                    + _rehearsed(b))


def _rehearsed(b: BackupRecord) -> str:
    if b.rehearsed is True:
        return "; rehearsed: every pin can be fetched again" + (
            f" (give restore_backup index_url {b.rehearsed_with})" if b.rehearsed_with else "")
    if b.rehearsed is False:
        return "; but its rehearsal found pins a restore could not fetch: it needs an index_url that holds them"
    return ""


def _area(tool: str, action: Action, risk: Risk, words: list[str]) -> str | None:
    rule = risk.rule
    if tool == "pip_install":
        return "python"
    if tool == "restore_backup":
        return "rollback"
    if tool == "install_runfile":
        if rule.endswith(":driver"):
            return "driver"
        # A backup lists the toolkits at /usr/local/cuda-* and a restore removes those installed since: only a
        # toolkit put there is undone by one (anywhere else, /opt/cuda-13.0 among them, it is neither seen nor
        # removed).
        return "toolkit" if LISTED_TOOLKIT.match(str((action.args or {}).get("toolkit_path") or "")) else \
            "toolkit-elsewhere"
    cuda_paths = any(w.startswith(CUDA_PREFIX) for w in words)
    if rule.startswith(("pip:", "uv:")):
        return "python"
    if rule == "runfile:toolkit-only":
        return "toolkit"
    if rule.startswith("runfile:") or rule.endswith(":driver-install"):
        return "driver"
    if rule.startswith("ln:") and cuda_paths:
        return "toolkit"
    if rule.startswith(("destructive:rm", "destructive:unlink", "rm:")) and cuda_paths:
        # The link itself is put back from the reading; through it, or any other path, a toolkit's files go.
        link_only = all(w == CUDA_PREFIX for w in words if w.startswith(CUDA_PREFIX))
        return "toolkit" if link_only else "toolkit-files"
    if rule.startswith("conda:"):
        return "conda"
    if _APT.match(rule) or rule.startswith("dpkg"):
        cuda = any(_TOOLKIT_PACKAGE.match(w) for w in words)
        if cuda and rule.endswith((":remove", ":purge", ":autoremove")):
            return "toolkit-files"
        if cuda and rule.endswith(":install"):
            return "apt-toolkit"
        return "packages"
    return None


def _words(command: str) -> list[str]:
    try:
        return shlex.split(command)
    except ValueError:  # an unbalanced quote: the words as they stand are close enough to look for paths
        return command.split()


def _interpreter(words: list[str]) -> str | None:
    """The interpreter a shell command's pip belongs to, when the command names it by its path."""
    for i, w in enumerate(words):
        name = w.rsplit("/", 1)[-1]
        if _PIP.fullmatch(name) or (_PYTHON.fullmatch(name) and words[i + 1:i + 3] == ["-m", "pip"]):
            return w if "/" in w else None
    return None


# Directories whose interpreters are each an environment of their own: /usr/bin/python3.11 and
# /usr/bin/python3.12 share a bin/ but not their site-packages.
_SHARED_BINS = ("/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin")


def same_environment(backed_up: str, changed: str) -> bool:
    """Whether a backup of interpreter `backed_up` holds the packages a change through `changed` touches."""
    return _env(backed_up) == _env(changed)


def _env(python: str) -> str:
    """A venv's root for its python or pip (/opt/venv/bin/python -> /opt/venv); an interpreter of a shared
    bin directory stands for itself, its pip for it (/usr/bin/pip3.12 -> /usr/bin/python3.12). Spellings of
    one path (//, /./, .., a trailing /) are one."""
    path = os.path.normpath(python) if python.startswith("/") else python
    if "/bin/" not in path:
        return path
    directory, name = os.path.split(path)
    if directory in _SHARED_BINS:
        return os.path.join(directory, "python" + name[len("pip"):] if _PIP.fullmatch(name) else name)
    return path.rpartition("/bin/")[0]
