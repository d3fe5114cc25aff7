"""Start-up cost of the `agent` command: wall time and first-party modules loaded, per subcommand.

    python benchmarks/startup.py [--runs 15] [--json]
    python benchmarks/startup.py --root OTHER_CHECKOUT --module agent.cli   # an older layout, to compare

Each subcommand runs as a fresh interpreter (`python -m MODULE ...` with PYTHONPATH=ROOT), the way
a user's shell starts it; the figure is the median of the runs. `exec` runs `true` on the local
host through the host layer and the gate; nothing leaves the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {
    "--help": ["--help"],
    "classify": ["classify", "--", "ls", "-la", "/usr/local"],
    "exec local": ["exec", "local", "--", "true"],
    "tools": ["tools"],
}
FIRST_PARTY = ("app", "agent", "tools", "prompts")
# Prints the first-party modules a command imported, after it ran (atexit runs after main returns).
PROBE = ("import atexit, sys, runpy\n"
         "atexit.register(lambda: print('MODULES', sum(1 for m in list(sys.modules) "
         "if m.split('.')[0] in {first_party!r}), file=sys.stderr))\n"
         "sys.argv = [{module!r}] + sys.argv[1:]\n"
         "runpy.run_module({module!r}, run_name='__main__')\n")


def one_run(root: Path, module: str, argv: list[str]) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(root)}
    code = PROBE.format(module=module, first_party=FIRST_PARTY)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *argv], env=env, cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    modules = next((int(line.split()[1]) for line in done.stderr.splitlines() if line.startswith("MODULES ")), -1)
    return wall, modules


def measure(root: Path, module: str, runs: int) -> dict:
    out = {}
    for name, argv in COMMANDS.items():
        walls, modules = [], -1
        for _ in range(runs):
            wall, modules = one_run(root, module, argv)
            walls.append(wall)
        out[name] = {"median_s": round(statistics.median(walls), 4), "min_s": round(min(walls), 4),
                     "first_party_modules": modules}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", type=Path, default=ROOT, help="the checkout to measure (default: this one)")
    ap.add_argument("--module", default="app.cli", help="the CLI module in that checkout (default app.cli)")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    result = measure(args.root.resolve(), args.module, args.runs)
    if args.json:
        print(json.dumps(result))
        return 0
    for name, r in result.items():
        print(f"agent {name:12} {r['median_s'] * 1000:7.0f} ms median ({r['min_s'] * 1000:.0f} ms min), "
              f"{r['first_party_modules']} first-party modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
