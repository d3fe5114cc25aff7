"""The system state an upgrade touches, beside the Python environment: toolkits, the `cuda` link, the CUDA and
NVIDIA system packages, and the driver. pip_freeze_backup records it (system.txt), restore_backup compares the
host with it and, when asked, puts the link back and removes the toolkits installed since.

One line per fact, tab-separated, so that the record reads as plainly as `pip freeze`:

    toolkit   /usr/local/cuda-12.8   (its link target, empty for a directory)
    cuda_link /usr/local/cuda-12.8
    package   cuda-toolkit-12-8      12.8.1-1
    driver    590.48.01
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

CUDA_LINK = "/usr/local/cuda"
# A toolkit directory the reading lists (`for d in /usr/local/cuda-*` below) and a restore removes, in the characters
# its one-line-per-toolkit record keeps whole: a toolkit anywhere else is neither recorded nor removed.
LISTED_TOOLKIT = re.compile(r"/usr/local/cuda-[A-Za-z0-9._+-]+\Z")
PACKAGE_PATTERNS = ("cuda-*", "libcuda*", "nvidia-*", "libnvidia-*", "libcudnn*", "libnccl*", "tensorrt*")

SCRIPT = (
    'for d in /usr/local/cuda-*; do [ -e "$d" ] || [ -L "$d" ] || continue; '
    'printf "toolkit\\t%s\\t%s\\n" "$d" "$(readlink "$d" 2>/dev/null)"; done; '
    f'printf "cuda_link\\t%s\\n" "$(readlink {CUDA_LINK} 2>/dev/null)"; '
    "dpkg-query -W -f='${db:Status-Abbrev}\\t${Package}\\t${Version}\\n' "
    + " ".join(shlex.quote(p) for p in PACKAGE_PATTERNS)
    + " 2>/dev/null | awk -F'\\t' '$1 ~ /^ii/ {print \"package\\t\" $2 \"\\t\" $3}'; "
    'printf "driver\\t%s\\n" "$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null '
    '| head -n 1)"; printf "end\n"'
)


@dataclass
class SystemState:
    toolkits: dict[str, str] = field(default_factory=dict)  # path -> link target ("" for a directory)
    cuda_link: str = ""
    packages: dict[str, str] = field(default_factory=dict)  # name -> version
    driver: str = ""
    # The reading ran to its end ("end" line): a rollback removes toolkits the backup did not list, so it never
    # works from a reading that may have stopped half-way (an empty list would mean "remove them all").
    complete: bool = False

    def text(self) -> str:
        lines = [f"toolkit\t{p}\t{t}" for p, t in sorted(self.toolkits.items())]
        lines.append(f"cuda_link\t{self.cuda_link}")
        lines += [f"package\t{n}\t{v}" for n, v in sorted(self.packages.items())]
        lines.append(f"driver\t{self.driver}")
        if self.complete:
            lines.append("end")
        return "\n".join(lines) + "\n"


def parse_system_state(text: str) -> SystemState:
    state = SystemState()
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        parts = rest.split("\t")
        if kind == "toolkit" and parts[0]:
            state.toolkits[parts[0]] = parts[1] if len(parts) > 1 else ""
        elif kind == "cuda_link":
            state.cuda_link = parts[0]
        elif kind == "package" and len(parts) >= 2:
            state.packages[parts[0]] = parts[1]
        elif kind == "driver":
            state.driver = parts[0].strip()
        elif kind == "end":
            state.complete = True
    return state


def system_diff(backed_up: SystemState, now: SystemState) -> list[str]:
    """The differences, one line each, in freeze_diff's form: '+ toolkit /usr/local/cuda-13.0 (not in the backup)'."""
    out = []
    for path in sorted(set(backed_up.toolkits) | set(now.toolkits)):
        if path not in backed_up.toolkits:
            out.append(f"+ toolkit {path} (not in the backup)")
        elif path not in now.toolkits:
            out.append(f"- toolkit {path} (missing now)")
        elif backed_up.toolkits[path] != now.toolkits[path]:
            out.append(f"~ toolkit link {path} -> {backed_up.toolkits[path]} (now -> {now.toolkits[path]})")
    if backed_up.cuda_link != now.cuda_link:
        out.append(f"~ {CUDA_LINK} -> {backed_up.cuda_link or '(none)'} (now -> {now.cuda_link or '(none)'})")
    for name in sorted(set(backed_up.packages) | set(now.packages)):
        b, n = backed_up.packages.get(name), now.packages.get(name)
        if b != n:
            out.append(f"+ package {name} {n} (not in the backup)" if b is None else
                       f"- package {name} {b} (missing now)" if n is None else f"~ package {name} {b} (now {n})")
    if backed_up.driver != now.driver:
        out.append(f"~ driver {backed_up.driver or '(none)'} (now {now.driver or '(none)'})")
    return out


@dataclass(frozen=True)
class SystemRollback:
    commands: list[str]  # what puts the link back and removes the toolkits installed since, in order
    by_hand: list[str]  # what no tool changes: packages and the driver, said as what differs


def system_rollback(backed_up: SystemState, now: SystemState) -> SystemRollback:
    """The link first (so it never points at a removed toolkit), then the toolkits the backup did not have."""
    commands = []
    if backed_up.cuda_link and backed_up.cuda_link != now.cuda_link:
        commands.append(f"ln -sfn {shlex.quote(backed_up.cuda_link)} {CUDA_LINK}")
    for path in sorted(set(now.toolkits) - set(backed_up.toolkits)):
        commands.append(f"rm -rf {shlex.quote(path)}" if not now.toolkits[path] else f"rm -f {shlex.quote(path)}")
    by_hand = [line for line in system_diff(backed_up, now) if " package " in f" {line} " or "driver" in line]
    return SystemRollback(commands=commands, by_hand=by_hand)
