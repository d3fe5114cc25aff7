"""What a real change on the GPU machine needs: the carried wheels, a file:// index of them, and the plan.

The GPU machine has no route to a package index, so the wheels of the change travel with the
repository (docs/gpu.md): `.gpu-change-wheels/` in its root, or UPGRADE_AGENT_GPU_WHEELS. They
hold two versions of packages that torch imports (typing_extensions on `import torch`, filelock
when torch.compile caches its kernels), the one the machine has and another, and small new
packages with no dependencies. The change moves each imported package to the version the machine
does not have, where what the environment has installed accepts it (an image whose anyio wants the
newest typing_extensions keeps it: a change pip_install refuses for unmet requirements proves no
rollback), and adds the first new package it lacks; the restore takes the machine's own versions
back from the same index, as a machine without a route to PyPI must.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.sim.wheels import normalize, wheel_index

try:
    from packaging.specifiers import SpecifierSet
except ImportError:  # the GPU machine's torch environment may lack it; pip carries its own
    from pip._vendor.packaging.specifiers import SpecifierSet

from gpu_support import REPO, clean_env, gpu_python

# Imported by torch or the benchmark: the packages whose version the change moves.
MOVED = ("typing-extensions", "filelock")
# Not imported by anything the benchmark runs, with no dependencies: the package the change adds.
ADDED = ("tabulate", "termcolor")

WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)-")

# Run by the GPU interpreter: every installed distribution's requirements whose markers hold there, as
# (requirer, name, specifier).
REQUIREMENTS = """
import json
from importlib import metadata
try:
    from packaging.requirements import Requirement
except ImportError:
    from pip._vendor.packaging.requirements import Requirement
out = []
for dist in metadata.distributions():
    for text in dist.requires or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            out.append([dist.metadata["Name"], req.name, str(req.specifier)])
print(json.dumps(out))
"""


def installed_requirements() -> list[tuple[str, str, str]]:
    out = subprocess.run([gpu_python(), "-c", REQUIREMENTS], capture_output=True, text=True, env=clean_env(),
                         check=True).stdout
    return [tuple(row) for row in json.loads(out)]


def accepted(name: str, version: str, requirements: list[tuple[str, str, str]]) -> bool:
    return all(version in SpecifierSet(spec) for _, wanted, spec in requirements if normalize(wanted) == name)


def carried_wheels() -> list[Path]:
    root = Path(os.environ.get("UPGRADE_AGENT_GPU_WHEELS") or REPO / ".gpu-change-wheels")
    wheels = sorted(root.glob("*.whl"))
    if not wheels:
        raise SystemExit(f"no wheels in {root}: bring the change's wheels as docs/gpu.md says (or set "
                         "UPGRADE_AGENT_GPU_WHEELS)")
    return wheels


def versions_carried(wheels: list[Path]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for w in wheels:
        m = WHEEL.match(w.name)
        if m:
            out.setdefault(normalize(m["name"]), []).append(m["version"])
    return out


@dataclass(frozen=True)
class ChangePlan:
    pins: list[str]  # what pip_install installs
    moved: dict[str, tuple[str, str]]  # package -> (version now, version after)
    added: str  # the new package's pin
    index_url: str  # file:// index holding the new versions and the machine's own


def plan_change(freeze: dict[str, str], index_dir: Path, wheels: list[Path] | None = None,
                requirements: list[tuple[str, str, str]] | None = None) -> ChangePlan:
    """The change for an environment whose freeze (normalized name -> 'name==version') and installed requirements
    (default: the GPU interpreter's) are given."""
    wheels = wheels if wheels is not None else carried_wheels()
    requirements = installed_requirements() if requirements is None else requirements
    carried = versions_carried(wheels)
    have = {normalize(n): line.partition("==")[2] for n, line in freeze.items()}
    moved: dict[str, tuple[str, str]] = {}
    for name in MOVED:
        now = have.get(name)
        if now is None or now not in carried.get(name, []):
            raise SystemExit(f"the carried wheels must hold {name} {now} (the machine's own, for the restore) and "
                             f"another version; they hold {carried.get(name)}")
        other = [v for v in carried[name] if v != now]
        if not other:
            raise SystemExit(f"the carried wheels hold only {name} {now}, the version the machine has")
        fits = [v for v in other if accepted(name, v, requirements)]
        if fits:
            moved[name] = (now, fits[0])
    if not moved:
        raise SystemExit(f"no carried version of {MOVED} is accepted by what the environment requires: carry "
                         "versions its installed packages accept (docs/gpu.md)")
    new = next((n for n in ADDED if n in carried and n not in have), None)
    if new is None:
        raise SystemExit(f"every package of {ADDED} that was carried is installed already")
    added = f"{new}=={carried[new][0]}"
    wheel_index(wheels, index_dir)
    return ChangePlan(pins=[f"{n}=={after}" for n, (_, after) in moved.items()] + [added], moved=moved,
                      added=added, index_url=index_dir.resolve().as_uri())
