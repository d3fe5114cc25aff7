"""df and lsmod of the simulated host.

df answers from the filesystems of the sim's state (its free_space_mb table: one ext4 filesystem
per mount point), so the installer's disk check, inspect_host and anything that runs `df` agree,
and df without a path lists those filesystems, never this machine's mounts. It takes GNU df's
options (-h -H -k -m -B -P -T -i -t -x --total --output) and prints in its layout: the column
widths, headings and rounding (sizes round up) of coreutils 9. lsmod lists the NVIDIA modules
while the driver is loaded.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass

from . import gnu
from . import state as host_state

_USED_MB = 20_480  # what the simulated filesystems hold besides their free space
_MIB = 1024 * 1024
_FSTYPE = "ext4"
_INODES_PER_MB = 64  # mke2fs's default: one inode per 16 KiB
_FILES_PER_USED_MB = 16  # files of 64 KiB on average

_SHORTS = "aB:hHiklmPTt:vx:"
_LONGS = ["all", "block-size=", "human-readable", "si", "inodes", "local", "output=", "portability", "print-type",
          "type=", "exclude-type=", "total", "sync", "no-sync", "help", "version"]
# --output's fields in df's own order, with their headings (size's depends on the units).
_OUTPUT_FIELDS = {"source": "Filesystem", "fstype": "Type", "itotal": "Inodes", "iused": "IUsed",
                  "iavail": "IFree", "ipcent": "IUse%", "size": None, "used": "Used", "avail": "Avail",
                  "pcent": "Use%", "file": "File", "target": "Mounted on"}
_MIN_WIDTH = {"source": 14, "fstype": 4, "size": 5, "used": 5, "avail": 5, "pcent": 4,
              "itotal": 5, "iused": 5, "iavail": 5, "ipcent": 5}
_LEFT = {"source", "fstype", "file", "target"}


class _BadBlockSize(gnu.Usage):
    pass


@dataclass
class Options:
    human: int | None = None  # 1024 for -h, 1000 for -H
    block: int = 1024
    suffix: str = ""  # -BM prints 100M where -m prints 100
    posix: bool = False
    print_type: bool = False
    inodes: bool = False
    total: bool = False
    types: tuple[str, ...] = ()
    excluded: tuple[str, ...] = ()
    output: list[str] | None = None


@dataclass
class Row:
    source: str
    target: str
    file: str
    size: int  # bytes
    used: int
    avail: int
    itotal: int
    iused: int
    fstype: str = _FSTYPE

    @property
    def iavail(self) -> int:
        return self.itotal - self.iused


def df_main(argv: list[str], root) -> int:
    try:
        opts, paths = _options(argv)
    except _BadBlockSize as e:  # df says this one without pointing at --help
        sys.stderr.write(f"df: {e}\n")
        return 1
    except gnu.Usage as e:
        return gnu.refuse("df", str(e))
    if opts is None:
        return gnu.host_program("df", argv)
    st = host_state.load(root)
    rows, failed = [], False
    for path in paths or [None]:
        if path is not None and not os.path.exists(path):
            sys.stderr.write(f"df: {path}: No such file or directory\n")
            failed = True
            continue
        rows += _rows(st, root, path)
    rows = [r for r in rows if (not opts.types or r.fstype in opts.types) and r.fstype not in opts.excluded]
    if not rows:
        if not failed:
            sys.stderr.write("df: no file systems processed\n")
        return 1
    if opts.total:
        rows.append(Row("total", "-", "-", sum(r.size for r in rows), sum(r.used for r in rows),
                        sum(r.avail for r in rows), sum(r.itotal for r in rows), sum(r.iused for r in rows), "-"))
    sys.stdout.write(_table(opts, rows))
    return 1 if failed else 0


def _options(argv: list[str]) -> tuple[Options | None, list[str]]:
    """The options, or None for --help and --version (this machine's df answers those)."""
    # --output takes an optional argument, which getopt cannot express: bare, it means every field.
    argv = [a + "=*" if a.startswith("--o") and "=" not in a and "--output".startswith(a) else a for a in argv]
    parsed, paths = gnu.parse("df", argv, _SHORTS, _LONGS)
    o = Options()
    for flag, value in parsed:
        name = flag.lstrip("-")
        if name in ("help", "version"):
            return None, paths
        if name in ("h", "human-readable"):
            o.human = 1024
        elif name in ("H", "si"):
            o.human = 1000
        elif name == "k":
            o.human, o.block, o.suffix = None, 1024, ""
        elif name == "m":
            o.human, o.block, o.suffix = None, _MIB, ""
        elif name in ("B", "block-size"):
            o.human = None
            o.block, o.suffix = _block_size(value, flag)
        elif name in ("P", "portability"):
            o.posix = True
        elif name in ("T", "print-type"):
            o.print_type = True
        elif name in ("i", "inodes"):
            o.inodes = True
        elif name == "total":
            o.total = True
        elif name in ("t", "type"):
            o.types += (value,)
        elif name in ("x", "exclude-type"):
            o.excluded += (value,)
        elif name == "output":
            o.output = _output_fields(value, o.output)
    if o.output is not None:
        for letter, on in (("i", o.inodes), ("P", o.posix), ("T", o.print_type)):
            if on:
                raise gnu.Usage(f"options -{letter} and --output are mutually exclusive")
    return o, paths


def _block_size(spec: str, flag: str) -> tuple[int, str]:
    """-B's SIZE: 1K, 4096, M, MB, KiB... With no number, values carry the unit (-BM: 100M)."""
    m = re.fullmatch(r"(\d*)([kKMGTPEZY]?)(iB|B)?", spec)
    if not spec or m is None or (m.group(3) and not (m.group(1) or m.group(2))):
        raise _BadBlockSize(f"invalid {'-B' if flag == '-B' else '--block-size'} argument '{spec}'")
    number = int(m.group(1) or 1)
    letter = m.group(2).upper()
    si = m.group(3) == "B" and bool(letter)
    power = "KMGTPEZY".index(letter) + 1 if letter else 0
    size = number * (1000 if si else 1024) ** power
    if size == 0:
        raise _BadBlockSize(f"invalid {'-B' if flag == '-B' else '--block-size'} argument '{spec}'")
    suffix = "" if m.group(1) else (("k" if letter == "K" else letter) + "B" if si else letter)
    return size, suffix


def _output_fields(value: str, before: list[str] | None) -> list[str]:
    fields = list(before or [])
    for name in (list(_OUTPUT_FIELDS) if value == "*" else value.split(",")):
        if name not in _OUTPUT_FIELDS:
            raise gnu.Usage(f"option --output: field {gnu.quote(name)} unknown")
        if name in fields:
            raise gnu.Usage(f"option --output: field {gnu.quote(name)} used more than once")
        fields.append(name)
    return fields


def _rows(st: dict, root, path: str | None) -> list[Row]:
    """The filesystem a path lies on, or every filesystem of the sim (df without a path)."""
    table = st["free_space_mb"]
    if path is None:
        mounts = sorted(table, key=lambda mount: (mount != "/", mount))
    else:
        sys_path = host_state.system_path(root, path) or "/"
        mounts = [host_state.free_space_mb(st, sys_path)[0]]
    rows = []
    for mount in mounts:
        free_mb = int(table.get(mount, table.get("/", 1 << 20)))
        total_mb = free_mb + _USED_MB
        device = "/dev/nvme0n1p2" if mount == "/" else f"/dev/nvme0n1p{3 + sorted(table).index(mount)}"
        rows.append(Row(device, mount, "-" if path is None else path, total_mb * _MIB, _USED_MB * _MIB,
                        free_mb * _MIB, total_mb * _INODES_PER_MB, _USED_MB * _FILES_PER_USED_MB))
    return rows


def _table(o: Options, rows: list[Row]) -> str:
    fields = o.output or (["source"] + (["fstype"] if o.print_type else []) +
                          (["itotal", "iused", "iavail", "ipcent"] if o.inodes else ["size", "used", "avail", "pcent"])
                          + ["target"])
    grid = [[_heading(o, f) for f in fields]] + [[_cell(o, r, f) for f in fields] for r in rows]
    widths = [max(_MIN_WIDTH.get(f, 0), *(len(line[i]) for line in grid)) for i, f in enumerate(fields)]
    out = []
    for line in grid:
        cells = [c.ljust(w) if f in _LEFT else c.rjust(w) for c, w, f in zip(line, widths, fields)]
        out.append(" ".join(cells).rstrip() + "\n")
    return "".join(out)


def _heading(o: Options, field: str) -> str:
    if field == "size":
        return "Size" if o.human else (f"{o.block}-blocks" if o.posix else f"{_unit_name(o.block)}-blocks")
    if field == "avail" and not o.human and o.output is None:
        return "Available"
    if field == "pcent" and o.posix and not o.human:
        return "Capacity"
    return _OUTPUT_FIELDS[field]


def _cell(o: Options, r: Row, field: str) -> str:
    if field in ("size", "used", "avail"):
        value = getattr(r, field)
        return _human(value, o.human) if o.human else f"{_ceil_div(value, o.block)}{o.suffix}"
    if field in ("itotal", "iused", "iavail"):
        value = getattr(r, field)
        return _human(value, o.human) if o.human else str(value)
    if field == "pcent":
        return _percent(r.used, r.used + r.avail)
    if field == "ipcent":
        return _percent(r.iused, r.itotal)
    return getattr(r, field)


def _percent(used: int, total: int) -> str:
    return "-" if total == 0 else f"{_ceil_div(used * 100, total)}%"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _unit_name(size: int) -> str:
    """A block size as df's heading names it: 1K, 2K, 1M, 1kB, 1B."""
    for power in range(8, 0, -1):
        if size % 1024 ** power == 0:
            return f"{size // 1024 ** power}{'KMGTPEZY'[power - 1]}"
        if size % 1000 ** power == 0:
            return f"{size // 1000 ** power}{'kMGTPEZY'[power - 1]}B"
    return f"{size}B"


def _human(value: int, base: int) -> str:
    """-h and -H: at most three digits and a unit, one decimal below 10, rounded up as df does."""
    letters = "KMGTPEZY" if base == 1024 else "kMGTPEZY"
    if value < base:
        return str(value)
    power = 1
    while value >= base ** (power + 1):
        power += 1
    tenths = _ceil_div(value * 10, base ** power)
    if tenths < 100:
        return f"{tenths // 10}.{tenths % 10}{letters[power - 1]}"
    whole = _ceil_div(value, base ** power)
    if whole >= base:  # rounding up reached the next unit
        return f"1.0{letters[power]}"
    return f"{whole}{letters[power - 1]}"


def lsmod_main(argv: list[str], root) -> int:
    st = host_state.load(root)
    sys.stdout.write("Module                  Size  Used by\n")
    if st["driver"]["loaded"]:
        sys.stdout.write("nvidia_uvm           2076672  0\n"
                         "nvidia_drm            139264  0\n"
                         "nvidia_modeset       1830912  1 nvidia_drm\n"
                         f"nvidia              {104_857_600 + 4096 * len(st['gpus']):>9}  "
                         f"{2 + len(st['gpus'])} nvidia_uvm,nvidia_modeset\n")
    return 0
