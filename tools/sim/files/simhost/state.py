"""The sim root and its state file.

A sim root is a directory that stands for `/` of a GPU machine. It is recognised by
ROOT/.sim/state.json, which holds what a real machine keeps in its kernel and hardware: the GPUs,
the loaded driver, free space per mount point, the compiler. Commands find the root by walking
up from their own location, so no environment variable is needed.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

STATE_DIR = ".sim"
STATE_FILE = "state.json"


def find_root(start: str | os.PathLike) -> Path | None:
    """The sim root that contains `start` (a file or directory), or None."""
    path = Path(os.path.realpath(start))
    for candidate in (path, *path.parents):
        if (candidate / STATE_DIR / STATE_FILE).is_file():
            return candidate
    return None


def load(root: Path) -> dict:
    with open(root / STATE_DIR / STATE_FILE, encoding="utf-8") as f:
        return json.load(f)


def save(root: Path, state: dict) -> None:
    """Replace the state file atomically: a reader never sees half a file."""
    directory = root / STATE_DIR
    fd, tmp = tempfile.mkstemp(prefix=".state-", dir=directory)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, directory / STATE_FILE)


def update(root: Path, change) -> dict:
    state = load(root)
    change(state)
    save(root, state)
    return state


def host_path(root: Path, system_path: str) -> Path:
    """Where a system path ("/usr/local/cuda") lies on the host running the sim."""
    return Path(str(root).rstrip("/") + "/" + system_path.lstrip("/"))


def system_path(root: Path, path: str | os.PathLike) -> str | None:
    """The system path ("/tmp") of a host path inside the root; None when it lies outside."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if real == real_root:
        return "/"
    if real.startswith(real_root.rstrip("/") + "/"):
        return real[len(real_root.rstrip("/")):]
    return None


def free_space_mb(state: dict, sys_path: str) -> tuple[str, int]:
    """(mount point, free MB) for a system path: the longest configured mount point above it."""
    table = state.get("free_space_mb", {})
    best = "/"
    for mount in table:
        prefix = mount.rstrip("/") + "/"
        if (sys_path == mount or sys_path.startswith(prefix) or mount == "/") and len(mount) > len(best):
            best = mount
    return best, int(table.get(best, table.get("/", 1 << 20)))
