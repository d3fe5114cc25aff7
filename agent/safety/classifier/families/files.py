"""Files: read-only file tools, and rm, mv, cp, ln, chmod/chown, truncate, shred, dd, tee."""

from __future__ import annotations

import posixpath

from agent.safety.classifier.command import DESTRUCTIVE, FORBIDDEN, MUTATING, Analysis, Arg, _Cmd
from agent.safety.classifier.options import _abbreviates, _getopt, _long_options, _operands, _short_options
from agent.safety.classifier.paths import _HARMLESS_SINKS, _system_dir_hit, _write_risk
from agent.safety.classifier.registry import _HANDLERS, _handles, _handles_matching, _simple

# Read-only commands whose arguments cannot make them write, run programs or change state.
_FREE_ARGS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "readlink", "realpath", "stat", "which",
        "whereis", "basename", "dirname", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum",
        "sha512sum", "b2sum", "cksum", "cut", "tr", "column", "nl", "tac", "uname", "id", "whoami", "groups",
        "uptime", "df", "du", "free", "lscpu", "lsblk", "lspci", "lsmod", "nproc", "printenv", "echo", "true",
        "false", "sleep", "test", "[", "pwd", "type", "jq", "diff", "cmp", "od", "strings", "ps", "pgrep",
        "pidof", "lsof", "getconf", "locale", "lsb_release", "arch", "tty", "w", "who", "cd", ":",
    }
)


def _allow_free(an: Analysis, cmd: _Cmd) -> None:
    an.allow(cmd)


for _name in _FREE_ARGS:
    _HANDLERS[_name] = _allow_free


@_handles("tee")
def _tee(an: Analysis, cmd: _Cmd) -> None:
    targets = _operands(cmd.args)
    risky = [t for t in targets if t.text not in _HARMLESS_SINKS]
    for target in risky:
        an.write(target, "`tee`", "tee")
    if not risky:
        an.allow(cmd)


@_handles("rm")
def _rm(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    if any(n == "--no-preserve-root" or _abbreviates(n, "--no-preserve-root", 6) for n in longs):
        an.add(FORBIDDEN, "forbidden:rm-root", "`rm --no-preserve-root` is only ever used to delete the whole filesystem")
        return
    recursive = bool(shorts & {"r", "R"}) or any(n == "--recursive" or _abbreviates(n, "--recursive", 5) for n in longs)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            what = "the root filesystem" if hit == "/" else f"the system directory {hit}"
            an.add(FORBIDDEN, "forbidden:rm-system-dir", f"`rm -r {target.text}` wipes {what}")
            return
    targets = [t.text for t in _operands(cmd.args) if t.text]
    shown = ", ".join(targets[:3]) + (", ..." if len(targets) > 3 else "") if targets else "files"
    an.add(DESTRUCTIVE, "destructive:rm", f"`rm` deletes {shown}")


def _recursive_owner_change(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    recursive = "R" in shorts or "--recursive" in _long_options(cmd.args)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            an.add(
                FORBIDDEN,
                f"forbidden:{cmd.prog}-system-dir",
                f"`{cmd.prog} -R` on {target.text} changes the permissions or owner of a whole system directory",
            )
            return
    an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` changes file permissions or ownership")


for _name in ("chmod", "chown", "chgrp", "chattr", "setfacl"):
    _HANDLERS[_name] = _recursive_owner_change


@_handles("mv")
def _mv(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    for source in operands[:-1]:
        hit = _system_dir_hit(source)
        if hit is not None:
            an.add(FORBIDDEN, "forbidden:mv-system-dir", f"`mv {source.text}` moves the system directory {hit} away")
            return
    if operands:
        _destination_check(an, cmd, operands[-1])
    an.add(DESTRUCTIVE, "destructive:mv", "`mv` can replace or remove files at its destination")


def _destination_check(an: Analysis, cmd: _Cmd, target: Arg) -> None:
    if target.text is not None:
        risk = _write_risk(target.text)
        if risk is not None and risk[0].rank >= DESTRUCTIVE.rank:
            an.write(target, f"`{cmd.prog}`", cmd.prog)


@_handles("cp", "install", "rsync")
def _copy(an: Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    if len(operands) >= 2:
        _destination_check(an, cmd, operands[-1])
    if cmd.prog == "rsync" and any(n.startswith("--del") or n == "--remove-source-files" for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "rsync:--delete", "`rsync --delete` deletes files at the destination")
    else:
        an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` writes files")


@_handles("ln")
def _ln(an: Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    operands = _operands(cmd.args)
    target_dirs = [a.text for a in _getopt(cmd.args, short_value="tS", long_value={"--target-directory",
                                                                                   "--suffix"}).values("-t")]
    link = operands[-1].text if len(operands) >= 2 and not target_dirs else None
    if "f" in shorts or "--force" in longs:
        an.add(DESTRUCTIVE, "ln:-f", "`ln -f` replaces an existing file or link")
    elif link is not None and posixpath.normpath(link) == "/usr/local/cuda":
        an.add(DESTRUCTIVE, "ln:/usr/local/cuda", "`ln` onto /usr/local/cuda replaces the link that selects the toolkit")
    else:
        an.add(MUTATING, "mutating:ln", "`ln` creates a new link")


@_handles("truncate")
def _truncate(an: Analysis, cmd: _Cmd) -> None:
    for target in _operands(cmd.args):
        _destination_check(an, cmd, target)
    an.add(DESTRUCTIVE, "destructive:truncate", "`truncate` cuts files to a new size, discarding data")


@_handles("shred")
def _shred(an: Analysis, cmd: _Cmd) -> None:
    if any((t.text or "").startswith("/dev/") for t in _operands(cmd.args)):
        an.add(FORBIDDEN, "forbidden:shred", "`shred` on a device overwrites the whole disk")
    else:
        an.add(DESTRUCTIVE, "destructive:shred", "`shred` overwrites and destroys files")


@_handles("dd")
def _dd(an: Analysis, cmd: _Cmd) -> None:
    for text in cmd.texts:
        if text and text.startswith("of="):
            target = text[3:]
            risk = _write_risk(target)
            if target.startswith("/dev/") and risk is not None:
                an.add(FORBIDDEN, "forbidden:dd", f"`dd of={target}` writes raw data onto a device")
            elif risk is not None and risk[0] is DESTRUCTIVE:
                an.write(Arg(target), "`dd`", "dd")
    an.add(MUTATING, "mutating:dd", "`dd` copies raw data and writes it to its output")


@_handles_matching(r"mkfs.*")
@_handles("mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "wipefs", "blkdiscard")
def _wipe_filesystem(an: Analysis, cmd: _Cmd) -> None:
    family = "mkfs" if cmd.prog.startswith(("mkfs", "mke2fs", "mkdosfs", "mkntfs")) else cmd.prog
    an.add(FORBIDDEN, f"forbidden:{family}", f"`{cmd.prog}` erases a filesystem or a whole device")


# Archives: until their specs say which forms only list, every use writes files.
_HANDLERS["tar"] = _simple(MUTATING, "`tar` creates or unpacks archives, writing files")
_HANDLERS["unzip"] = _simple(MUTATING, "`unzip` unpacks an archive, writing files")
