"""du of the simulated host: what this machine's du counts, with each CUDA toolkit at its installed size.

The sim's toolkits are stand-ins of a few hundred kilobytes, while df counts the room a real one takes; so du
counts a toolkit's directory (and every directory it lies in) at the installer's own figure, as df does. The
walk, the paths and the options are this machine's du: it is run with sizes in bytes, and the sizes are then
written as the options asked. Options this does not read (--inodes, --time, -0 ...) go to du as they are.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

from simcommands.mounts import installed_toolkits
from simhost import gnu

_UNITS = {"-h": "human", "--human-readable": "human", "-k": 1024, "-m": 1024 * 1024, "-b": 1,
          "--bytes": 1}
_PASSED = {"-s", "--summarize", "-c", "--total", "-a", "--all", "-x", "--one-file-system", "-L", "-P", "-H", "-D",
           "--dereference", "--no-dereference", "-S", "--separate-dirs", "--apparent-size", "-l", "--count-links"}


def du_main(argv: list[str], root) -> int:
    unit: object = 1024
    passed: list[str] = []
    args = list(argv)
    while args:
        a = args.pop(0)
        if a in _UNITS:
            unit = _unit(a, passed)
        elif a.startswith(("-B", "--block-size")) and _block(a, args) is not None:
            unit = _block(a, args, take=True)
        elif a in _PASSED or not a.startswith("-") or a.startswith(("--max-depth=", "--exclude=")):
            passed.append(a)
        elif a in ("-d", "--max-depth", "--exclude") and args:
            passed += [a, args.pop(0)]
        elif a == "--":
            passed += [a, *args]
            args = []
        elif len(a) > 2 and a[0] == "-" and a[1] != "-" and all(f"-{c}" in _UNITS or f"-{c}" in _PASSED for c in a[1:]):
            for c in a[1:]:  # -sh, -shc: one letter each
                if f"-{c}" in _UNITS:
                    unit = _unit(f"-{c}", passed)
                else:
                    passed.append(f"-{c}")
        else:
            return gnu.host_program("du", argv)
    real = _host_du()
    if real is None:
        sys.stderr.write("du: command not found\n")
        return 127
    r = subprocess.run([real, "-B1", *passed], capture_output=True, text=True)
    sizes = installed_toolkits(root)
    for line in r.stdout.splitlines():
        size, _, path = line.partition("\t")
        if not size.isdigit():
            sys.stdout.write(line + "\n")
            continue
        here = os.path.normpath(os.path.abspath(path)) if path != "total" else None
        extra = sum(b for kit, b in sizes.items() if here is not None and (kit == here or kit.startswith(
            here.rstrip("/") + "/")))
        if path == "total":
            extra = sum(b for kit, b in sizes.items() if any(_under(kit, p) for p in _listed(r.stdout)))
        sys.stdout.write(f"{_written(int(size) + extra, unit)}\t{path}\n")
    sys.stderr.write(r.stderr)
    return r.returncode


def _unit(flag: str, passed: list[str]) -> object:
    """The unit a size option asks for; -b counts apparent sizes too, as du's own -b does (-B1 does not)."""
    if flag in ("-b", "--bytes"):
        passed.append("--apparent-size")
    return _UNITS[flag]


def _block(a: str, args: list[str], take: bool = False) -> int | None:
    """The block size of -B N, -BN or --block-size=N (N a count of bytes, or with K, M, G), else None."""
    value = a[2:] if a.startswith("-B") and len(a) > 2 else a.split("=", 1)[1] if "=" in a else (args[0] if args else "")
    scale = {"K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}.get(value[-1:].upper(), 1)
    digits = value[:-1] if scale != 1 else value
    if not (digits or scale != 1) or (digits and not digits.isdigit()):
        return None
    if take and (a in ("-B", "--block-size")):
        args.pop(0)
    return int(digits or 1) * scale


def _host_du() -> str | None:
    """This machine's du, as gnu.host_program finds it (not this one)."""
    import shutil

    own = os.path.dirname(os.path.realpath(sys.argv[0]))
    search = os.pathsep.join([gnu.HOST_USR_BIN, *(d for d in os.environ.get("PATH", "").split(os.pathsep)
                                                  if d and os.path.realpath(d) != own)])
    return shutil.which("du", path=search)


def _listed(out: str) -> list[str]:
    """The top-level paths du was given, as its last line for each names them (the lines before are inside)."""
    paths = [ln.partition("\t")[2] for ln in out.splitlines() if "\t" in ln and not ln.endswith("\ttotal")]
    return [os.path.normpath(os.path.abspath(p)) for p in paths if not any(
        q != p and _under(os.path.normpath(os.path.abspath(p)), os.path.normpath(os.path.abspath(q))) for q in paths)]


def _under(path: str, top: str) -> bool:
    return path == top or path.startswith(top.rstrip("/") + "/")


def _written(size: int, unit: object) -> str:
    """A size as du writes it: rounded up, in the unit asked; -h in K, M, G with one decimal below 10."""
    if unit != "human":
        return str(math.ceil(size / int(unit)))
    for i, suffix in enumerate(("K", "M", "G", "T", "P")):
        value = size / 1024 ** (i + 1)
        if value < 1024 or suffix == "P":
            if size < 1024:
                return str(size) if size else "0"
            return f"{math.ceil(value * 10) / 10:.1f}{suffix}" if value < 10 else f"{math.ceil(value)}{suffix}"
    return str(size)
