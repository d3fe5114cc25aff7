"""The node's scheduler state, read and replaced atomically (the state file of a simulated host)."""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

FILE = "cluster.json"


def load(root: Path) -> dict:
    with open(root / ".sim" / FILE, encoding="utf-8") as f:
        return json.load(f)


def save(root: Path, state: dict) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".cluster-", dir=root / ".sim")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=2, sort_keys=True)
    os.replace(tmp, root / ".sim" / FILE)


def running(jobs: list[float], drained_at: float | None) -> list[int]:
    """Indexes of the jobs still running: each ends its seconds after the drain, none before one."""
    now = time.time()
    return [i for i, secs in enumerate(jobs) if drained_at is None or now < drained_at + secs]


def fail(text: str, code: int = 1) -> int:
    """What the real client does on an error: its words on stderr, and its exit code."""
    print(text, file=sys.stderr)
    return code
