"""What a session's backups really undo of one step, for the operator who approves it.

The gate asks for any verified backup of the host before a change; that is a rule about order, not a
promise that the backup undoes the change. The approval panel says which backup undoes this step, and
how, or that none does:

- a pip-freeze backup puts one interpreter's packages back (restore_backup), as far as its rehearsal found
  every pin can be fetched again;
- its system reading lets restore_backup system=true remove the CUDA toolkits installed since and put
  the `cuda` link back; system packages and the driver it records and compares, but does not put back;
- no backup holds a toolkit's files: a removed toolkit comes back only from its installer.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from tools.base import Action, BackupRecord, Risk

CUDA_PREFIX = "/usr/local/cuda"
_PIP = re.compile(r"pip[0-9.]*")
_PYTHON = re.compile(r"python[0-9.]*")
_APT = re.compile(r"(apt|apt-get|aptitude):")
_TOOLKIT_PACKAGE = re.compile(r"cuda-(toolkit|[0-9])|cuda$|cuda=")


@dataclass(frozen=True)
class Cover:
    backup: BackupRecord | None  # the backup that undoes the step; None when none does
    says: str  # how it is undone, or why nothing undoes it: one line for the approval panel


def what_undoes(tool: str, action: Action, risk: Risk, backups: list[BackupRecord]) -> Cover:
    """The backup among `backups` (this host's verified ones, oldest first) that undoes the step, and how."""
    words = _words(action.subject) if tool == "ssh_exec" else []
    area = _area(tool, risk, words)
    freezes = [b for b in backups if b.kind == "pip-freeze"]
    if area == "python":
        return _python(action.interpreter if tool != "ssh_exec" else _interpreter(words), freezes,
                       typed=tool != "ssh_exec")
    if area in ("toolkit", "apt-toolkit"):
        readings = [b for b in backups if "system.txt" in b.files]
        if not readings:
            return Cover(None, "nothing: no backup of this session recorded the system state (toolkits, cuda link)")
        b = readings[-1]
        tail = ("; the packages apt installed are listed, to remove by hand" if area == "apt-toolkit" else "")
        return Cover(b, f"restore_backup {b.backup_id} system=true removes the toolkits installed since and puts "
                        f"the cuda link back{tail}")
    if area == "toolkit-files":
        return Cover(None, "nothing: a backup records which toolkits are there, not their files; a removed toolkit "
                           "comes back only from its installer")
    if area == "packages":
        return Cover(None, "nothing: system packages are recorded and compared by a backup, not put back")
    if area == "driver":
        return Cover(None, "nothing: the driver is recorded by a backup, not put back; going back needs the old "
                           "driver's installer, and often a reboot")
    if area == "conda":
        return Cover(None, "nothing: a pip-freeze backup does not put conda packages back")
    if area == "rollback":
        return Cover(None, "this step is itself a rollback; what it replaces is kept only by a backup taken now")
    kept = "Python packages" + (" and the toolkits and cuda link" if any("system.txt" in b.files for b in backups)
                                else "")
    return Cover(None, f"not known: this session's backups put back {kept}; none is known to undo this command")


def _python(interpreter: str | None, freezes: list[BackupRecord], typed: bool) -> Cover:
    if not freezes:
        return Cover(None, "nothing: no pip-freeze backup was taken in this session")
    if interpreter is not None:
        same = [b for b in freezes if _env(b.target) == _env(interpreter)]
        if not same:
            taken = ", ".join(sorted({b.target for b in freezes}))
            return Cover(None, f"nothing: no backup is of {interpreter} (backed up: {taken})")
        b = same[-1]
        return Cover(b, f"restore_backup {b.backup_id} puts the packages of {b.target} back as they were"
                        + _rehearsed(b))
    b = freezes[-1]
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


def _area(tool: str, risk: Risk, words: list[str]) -> str | None:
    rule = risk.rule
    if tool == "pip_install":
        return "python"
    if tool == "restore_backup":
        return "rollback"
    if tool == "install_runfile":
        return "driver" if rule.endswith(":driver") else "toolkit"
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


def _env(python: str) -> str:
    """A venv's root for its python or pip (/opt/venv/bin/python -> /opt/venv); other paths as they are."""
    return python.rsplit("/bin/", 1)[0] if "/bin/" in python else python
