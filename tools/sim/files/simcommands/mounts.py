"""df, mount (listing) and findmnt of the simulated host: one table of filesystems.

All three answer from the sim's free_space_mb table through df's own rows (simhost/disk.py), beside the
pseudo filesystems every Linux box has, so they name one device per mount point, and none shows this
machine's mounts or the folder the sim lies in. A toolkit installed since the build takes its room from the
filesystem it lies on, and gives it back when removed, as on a real disk (the installer's own check, which
travels in the runfile, still reads the free space the sim was built with). Mounting is refused as for a
user who may not.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from simhost import disk, gnu, toolkit
from simhost import state as host_state

_MIB = 1024 * 1024
# Where teams put toolkits (as inspect_host looks for them).
_TOOLKIT_GLOBS = ("usr/local/cuda-*", "opt/cuda-*", "opt/*/cuda-*")
_plain_rows = disk._rows


def installed_toolkits(root) -> dict[str, int]:
    """Each toolkit directory, as the host sees it, and the room it takes: the installer's own figure."""
    found: dict[str, int] = {}
    root = Path(root)
    for pattern in _TOOLKIT_GLOBS:
        for path in root.glob(pattern):
            if path.is_symlink() or not path.is_dir():
                continue
            try:
                version = json.loads((path / "version.json").read_text())["cuda"]["version"]
            except (OSError, ValueError, KeyError, TypeError):
                continue
            release = toolkit.RELEASES.get(".".join(str(version).split(".")[:2]))
            if release is not None:
                found["/" + str(path.relative_to(root))] = release.install_need_bytes
    return found


def _taken_mb(st: dict, root) -> dict[str, int]:
    """By mount point, what the toolkits installed since the build take, by the installer's own figure each."""
    taken: dict[str, int] = {}
    if st.get("toolkits_at_build") is None:  # a sim built before this was kept: nothing to count from
        return taken
    for sys_path, need in installed_toolkits(root).items():
        if sys_path not in st["toolkits_at_build"]:
            mount = host_state.free_space_mb(st, sys_path)[0]
            taken[mount] = taken.get(mount, 0) + need // _MIB
    return taken


def _rows(st: dict, root, path):
    rows, taken = _plain_rows(st, root, path), _taken_mb(st, root)
    for row in rows:
        took = min(taken.get(row.target, 0) * _MIB, row.avail)
        row.avail -= took
        row.used += took
        row.iused += took // _MIB * 16
    return rows


disk._rows = _rows  # df's own table, with the room installed toolkits take


def df_main(argv: list[str], root) -> int:
    return disk.df_main(argv, root)

_OPTIONS = "rw,relatime"
# What every box shows besides its disks (mount's order, after the root).
_PSEUDO = [("sysfs", "/sys", "sysfs", "rw,nosuid,nodev,noexec,relatime"),
           ("proc", "/proc", "proc", "rw,nosuid,nodev,noexec,relatime"),
           ("udev", "/dev", "devtmpfs", "rw,nosuid,relatime,size=1056893004k,nr_inodes=264223251,mode=755,inode64"),
           ("devpts", "/dev/pts", "devpts", "rw,nosuid,noexec,relatime,gid=5,mode=620,ptmxmode=000"),
           ("tmpfs", "/run", "tmpfs", "rw,nosuid,nodev,noexec,relatime,size=211378604k,mode=755,inode64"),
           ("tmpfs", "/dev/shm", "tmpfs", "rw,nosuid,nodev,inode64")]


def _all(disks: list) -> list[tuple[str, str, str, str]]:
    """(source, target, fstype, options) of every filesystem in mount's order: / first, then the pseudo ones."""
    rows = [(r.source, r.target, r.fstype, _OPTIONS) for r in disks]
    return rows[:1] + _PSEUDO + rows[1:]


def mount_main(argv: list[str], root) -> int:
    try:
        opts, args = gnu.parse("mount", argv, "lt:", ["show-labels", "types="])
    except gnu.Usage as e:
        return gnu.refuse("mount", str(e))
    if args:
        target = args[-1]
        if not os.path.exists(target):
            sys.stderr.write(f"mount: {target}: mount point does not exist.\n")
            return 32
        sys.stderr.write(f"mount: {target}: must be superuser to use mount.\n")
        return 32
    types = {v for o, v in opts if o in ("-t", "--types") for v in v.split(",")}
    for source, target, fstype, options in _all(disk._rows(host_state.load(root), root, None)):
        if not types or fstype in types:
            print(f"{source} on {target} type {fstype} ({options})")
    return 0


_COLUMNS = {"TARGET": 1, "SOURCE": 0, "FSTYPE": 2, "OPTIONS": 3}


def findmnt_main(argv: list[str], root) -> int:
    try:
        opts, args = gnu.parse("findmnt", argv, "nlo:T:t:Dr", ["noheadings", "list", "output=", "target=", "types=",
                                                               "df", "raw"])
    except gnu.Usage as e:
        return gnu.refuse("findmnt", str(e))
    given = dict(opts)
    columns = ["TARGET", "SOURCE", "FSTYPE", "OPTIONS"]
    output = given.get("-o") or given.get("--output")
    if output:
        columns = [c.strip().upper() for c in output.split(",")]
        unknown = [c for c in columns if c not in _COLUMNS and c not in ("SIZE", "USED", "AVAIL", "USE%")]
        if unknown:
            sys.stderr.write(f"findmnt: unknown column: {unknown[0]}\n")
            return 1
    elif "-D" in given or "--df" in given:
        columns = ["SOURCE", "FSTYPE", "SIZE", "USED", "AVAIL", "USE%", "TARGET"]
    st = host_state.load(root)
    disks = disk._rows(st, root, None)
    rows = _all(disks)
    target = given.get("-T") or given.get("--target")
    if target is not None:
        if not os.path.exists(target):
            sys.stderr.write(f"findmnt: {target}: No such file or directory\n")
            return 1
        [row] = disk._rows(st, root, target)
        rows = [r for r in rows if r[1] == row.target]
    elif args:
        rows = [r for r in rows if args[0] in (r[0], r[1])]
    types = {v for o, v in opts if o in ("-t", "--types") for v in v.split(",")}
    rows = [r for r in rows if not types or r[2] in types]
    if not rows:
        return 1
    sizes = {r.target: r for r in disks}

    def cell(row, column: str) -> str:
        if column in _COLUMNS:
            return row[_COLUMNS[column]]
        d = sizes.get(row[1])
        if d is None:
            return "0"
        value = {"SIZE": d.size, "USED": d.used, "AVAIL": d.avail}.get(column)
        return disk._human(value, 1024) if value is not None else disk._percent(d.used, d.size)

    table = [[cell(r, c) for c in columns] for r in rows]
    if "-n" not in given and "--noheadings" not in given:
        table.insert(0, columns)
    widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
    flat = target is not None or args or "-l" in given or "--list" in given or "-r" in given or "--raw" in given
    for n, line in enumerate(table):
        if not flat and n > 1 and "TARGET" in columns:  # the tree: every filesystem under /
            i = columns.index("TARGET")
            line[i] = ("\u251c\u2500" if n < len(table) - 1 else "\u2514\u2500") + line[i]
        if "-r" in given or "--raw" in given:
            print(" ".join(line))
        else:
            print(" ".join(cell.ljust(widths[i] + (2 if not flat and "TARGET" in columns and i == columns.index(
                "TARGET") else 0)) for i, cell in enumerate(line)).rstrip())
    return 0
