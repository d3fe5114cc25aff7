"""What a CUDA toolkit's runfile needs on disk, known before anything is copied or run.

NVIDIA's installer checks its free space only once it runs: after the runfile (about 4 GB) has been
fetched, and after it has been unpacked. So the needs are known here first, in two places:

    the temp dir   where the installer unpacks its payload
    the target     the parent of the toolkit's directory, where the toolkit goes

Read, in order of trust:

1. the runfile's own header, where its bytes are on the host: a CUDA runfile is a makeself archive,
   whose shell header states the payload's size ("Uncompressed size: N KB", what `--info` prints).
   Reading the first bytes with `head` runs nothing of it. The toolkit installed is the payload less
   the installer's own files, so the payload bounds both places.
2. a table per release: what NVIDIA's installer asks of each place ("Need N bytes"), as it says it.
3. otherwise an estimate from the runfile's size: its payload unpacks to about twice it.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# What the installer of each release asks to find free, in bytes: (temp dir, target).
RELEASE_NEEDS: dict[str, tuple[int, int]] = {
    "12.8": (9_014_706_176, 7_526_133_760),
    "13.0": (8_633_061_376, 7_152_115_712),
    "13.1": (8_764_416_000, 7_263_797_248),
}
# Without a header or a known release: factors of the runfile's size.
TMP_FACTOR = 2.0
TARGET_FACTOR = 1.5
# The bytes of a runfile read for its header: makeself's is a few hundred lines (NVIDIA's carries no licence).
HEADER_BYTES = 65536
UNCOMPRESSED = re.compile(rb"Uncompressed size: (\d+) KB")


@dataclass(frozen=True)
class ToolkitNeeds:
    """Bytes free that an install of one toolkit needs, and where the figure comes from."""

    tmp_bytes: int
    target_bytes: int
    source: str  # "the runfile's header", "NVIDIA's installer figures for CUDA X.Y", "an estimate from ..."


def header_payload_bytes(header: bytes) -> int | None:
    """The payload's size a makeself header states, in bytes (None: not a makeself header)."""
    m = UNCOMPRESSED.search(header)
    return int(m.group(1)) * 1024 if m else None


def read_header_command(path: str) -> str:
    """The read-only command that prints the size line of a runfile on the host (nothing when it has none)."""
    return f"head -c {HEADER_BYTES} {shlex.quote(path)} 2>/dev/null | grep -a -o -m 1 'Uncompressed size: [0-9]* KB'"


def needs_for(version: str, payload_bytes: int | None = None, runfile_bytes: int | None = None) -> ToolkitNeeds | None:
    """What installing CUDA `version` (X.Y) needs free; None when nothing says (no header, release or size)."""
    known = RELEASE_NEEDS.get(version)
    if payload_bytes:
        # Unpacked whole in the temp dir; the toolkit is the payload less the installer, so the payload bounds
        # the target where the release's own figure is not known. Never less than the installer will ask.
        tmp, target = known or (0, payload_bytes)
        return ToolkitNeeds(max(payload_bytes, tmp), target, "the runfile's header")
    if known:
        return ToolkitNeeds(known[0], known[1], f"NVIDIA's installer figures for CUDA {version}")
    if runfile_bytes:
        return ToolkitNeeds(int(runfile_bytes * TMP_FACTOR), int(runfile_bytes * TARGET_FACTOR),
                            f"an estimate from the runfile's size ({runfile_bytes / 2**30:.1f} GiB)")
    return None


def gib(n: int | float) -> str:
    """A size as people read it: GiB with one decimal, MiB below one GiB."""
    return f"{n / 2**30:.1f} GiB" if n >= 2**30 else f"{n / 2**20:.0f} MiB"


@dataclass(frozen=True)
class Place:
    """One place an install writes to, what it needs there and what its mount has free."""

    path: str
    need_bytes: int
    why: str  # "the installer unpacks the runfile there"
    mount: str | None = None
    free_bytes: int | None = None


def install_places(needs: ToolkitNeeds, tmpdir: str | None, toolkit_path: str) -> list[tuple[str, int, str]]:
    """(path, bytes needed, why) of each place an install writes to: its temp dir, and the parent of its toolkit's
    directory (the directory itself does not exist yet)."""
    target = toolkit_path.rstrip("/")
    return [((tmpdir or "/tmp").rstrip("/") or "/", needs.tmp_bytes, "the installer unpacks the runfile there"),
            (target.rsplit("/", 1)[0] or "/", needs.target_bytes, "the toolkit goes there")]


def shortfalls(places: list[Place]) -> list[str]:
    """Each mount that lacks what the places on it need together, in words naming both figures (a download, the
    unpacked payload and the toolkit all exist at once while the installer copies)."""
    by_mount: dict[str, list[Place]] = {}
    for place in places:
        if place.need_bytes and place.free_bytes is not None:
            by_mount.setdefault(place.mount or place.path, []).append(place)
    out = []
    for mount, on_it in by_mount.items():
        need = sum(p.need_bytes for p in on_it)
        free = on_it[0].free_bytes
        if free < need:
            what = "; ".join(f"{gib(p.need_bytes)} in {p.path} ({p.why})" for p in on_it)
            out.append(f"the filesystem mounted at {mount} has {gib(free)} free and needs {gib(need)}: {what}")
    return out


def mount_and_free(sh, path: str) -> tuple[str | None, int | None]:
    """The mount point `path` is on (or would be, once made) and its free bytes, by `sh(command)` on the host;
    None where df cannot say."""
    r = sh(f"d={shlex.quote(path)}; while [ ! -e \"$d\" ]; do d=$(dirname \"$d\"); done; df -P -k \"$d\" | tail -1")
    parts = r.stdout.split()
    if not (r.ok and len(parts) >= 6 and parts[3].isdigit()):
        return None, None
    return " ".join(parts[5:]), int(parts[3]) * 1024
