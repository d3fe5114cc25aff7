"""Keep what a GPU machine's own programs print, as fixtures for the parsers' unit tests.

    python3 tests/gpu/capture_outputs.py --out tests/data/gpu/<machine>

Writes the whole output of the read-only script inspect_host runs (the text its parsers read),
once with the host entry the GPU tests use and once with a bare one (no PATH prefix, as a host
entry that names nothing but the machine), and the raw answers of nvidia-smi (header, query,
-q), nvcc --version, df and torch. Nothing here changes the machine.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from tools.hosts import HostSpec, LocalHost  # noqa: E402
from tools.inspect_host import _script  # noqa: E402

from gpu_support import TORCH_PROBE, gpu_python, local_spec  # noqa: E402

DISK_PATHS = ["/tmp", "/usr/local", "/var/tmp"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    spec = local_spec("gpu")
    host = LocalHost(spec)
    bare = LocalHost(HostSpec(name="bare", transport="local"))
    py = shlex.quote(gpu_python())
    runs = {
        "inspect_host_script.txt": (host, _script("/usr/local", gpu_python(), DISK_PATHS)),
        "inspect_host_script_bare.txt": (bare, _script("/usr/local", "python3", DISK_PATHS)),
        "nvidia-smi.txt": (host, "nvidia-smi"),
        "nvidia-smi-query.csv": (host, "nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.total,"
                                       "pci.bus_id --format=csv"),
        "nvidia-smi-q.txt": (host, "nvidia-smi -q"),
        "nvcc-version.txt": (host, "nvcc --version"),
        "torch.json": (host, f"{py} -c {shlex.quote(TORCH_PROBE)}"),
    }
    summary = {"path_prefix": spec.path_prefix, "files": {}}
    for name, (h, command) in runs.items():
        r = h.run(command, timeout=300)
        (out / name).write_text(r.stdout)
        summary["files"][name] = {"exit_code": r.exit_code, "bytes": len(r.stdout), "stderr": r.stderr[-2000:]}
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
