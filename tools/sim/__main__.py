"""python -m tools.sim build DIR: build a simulated GPU host and print its host spec as JSON."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

from . import DEFAULT_GPU_MODEL, GPU_MODELS, build_sim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.sim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build a sim root in DIR (new or empty) and print its host spec")
    b.add_argument("dir", type=Path)
    b.add_argument("--gpus", type=int, default=8)
    b.add_argument("--gpu-model", default=DEFAULT_GPU_MODEL, help=f"one of: {', '.join(GPU_MODELS)}")
    b.add_argument("--name", default="sim", help="host name in the printed spec")
    b.add_argument("--driver-version", default="590.48.01")
    b.add_argument("--free-space", action="append", default=[], metavar="PATH=MB",
                   help="free space of the filesystem at a system path, e.g. /tmp=2000 (repeatable)")
    args = parser.parse_args(argv)
    space = {}
    for item in args.free_space:
        path, _, mb = item.partition("=")
        space[path] = int(mb)
    start = time.monotonic()
    try:
        sim = build_sim(args.dir, gpus=args.gpus, gpu_model=args.gpu_model, driver_version=args.driver_version,
                        free_space_mb=space or None)
    except ValueError as e:  # an unknown GPU model, or a driver too old for it
        parser.error(str(e))
    print(json.dumps(dataclasses.asdict(sim.host_spec(args.name)), indent=2))
    print(f"built {sim.root} in {time.monotonic() - start:.2f}s; python {sim.python}; "
          f"indexes {', '.join(sim.index_urls)}; runfiles {', '.join(r.filename for r in sim.runfiles.values())}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
