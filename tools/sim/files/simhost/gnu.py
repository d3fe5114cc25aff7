"""What the sim's own coreutils (df, uname) share: GNU option parsing with coreutils' own messages,
and handing a form the sim does not answer (--help, --version) to this machine's program."""

from __future__ import annotations

import getopt
import os
import shutil
import sys

# Inside the sim's sandbox this machine's own programs are here (the sim's /usr/bin links to them).
HOST_USR_BIN = "/.host/usr/bin"


class Usage(Exception):
    """A command line the program refuses; str() is its first line of complaint."""


def parse(prog: str, argv: list[str], shorts: str, longs: list[str]) -> tuple[list[tuple[str, str]], list[str]]:
    """getopt_long as coreutils calls it: options anywhere, `--` ends them, long options by any unique
    prefix. Raises Usage with the message the real program prints."""
    try:
        return getopt.gnu_getopt(argv, shorts, longs)
    except getopt.GetoptError as e:
        raise Usage(_message(e, shorts, longs)) from None


def _message(e: getopt.GetoptError, shorts: str, longs: list[str]) -> str:
    opt = e.opt
    if len(opt) == 1:
        if "requires argument" in e.msg:
            return f"option requires an argument -- '{opt}'"
        return f"invalid option -- '{opt}'"
    names = [name.rstrip("=") for name in longs]
    matches = [n for n in names if n.startswith(opt)]
    if opt not in names and len(matches) > 1:
        return f"option '--{opt}' is ambiguous; possibilities: " + " ".join(f"'--{n}'" for n in matches)
    full = opt if opt in names else (matches[0] if matches else opt)
    if "must not have an argument" in e.msg:
        return f"option '--{full}' doesn't allow an argument"
    if "requires argument" in e.msg:
        return f"option '--{full}' requires an argument"
    return f"unrecognized option '--{opt}'"


def quote(text: str) -> str:
    """How coreutils' quote() writes an operand: curved quotes in a UTF-8 locale, straight ones in C.
    (getopt's own complaints always use straight quotes.)"""
    locale = next((os.environ[k] for k in ("LC_ALL", "LC_CTYPE", "LANG") if os.environ.get(k)), "C")
    utf8 = locale.lower().replace("-", "").endswith("utf8")
    return f"\u2018{text}\u2019" if utf8 else f"'{text}'"


def refuse(prog: str, message: str) -> int:
    sys.stderr.write(f"{prog}: {message}\nTry '{prog} --help' for more information.\n")
    return 1


def host_program(name: str, argv: list[str]) -> int:
    """This machine's own program, for what reads the same on any host (--help, --version)."""
    own = os.path.dirname(os.path.realpath(sys.argv[0]))
    search = os.pathsep.join([HOST_USR_BIN, *(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                               if d and os.path.realpath(d) != own)])
    real = shutil.which(name, path=search)
    if real is None:
        sys.stderr.write(f"{name}: command not found\n")
        return 127
    os.execv(real, [name, *argv])
    return 1
