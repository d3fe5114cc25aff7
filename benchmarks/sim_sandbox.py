"""What the simulated host's sandbox costs per command: the sim transport against the local one.

    python benchmarks/sim_sandbox.py [--commands 100] [--json]

Both run the same commands through the host layer, taking turns in rounds so a burst of other work
on the machine slows both alike: `true`, and `nvidia-smi -L` (the sim's own program on the sim; on
the local host, the same program run directly from the sim's tree, outside any sandbox).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.hosts import HostSpec, LocalHost, SimHost  # noqa: E402
from tools.sim import build_sim  # noqa: E402


def per_command_ms(host, command: str, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        r = host.run(command)
        assert r.ok, (command, r.stderr)
    return (time.perf_counter() - t0) / n * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--commands", type=int, default=100, help="commands per client per round")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sim = build_sim(Path(tmp) / "sim")
        in_sandbox = SimHost(sim.host_spec())
        here = LocalHost(HostSpec(name="here", transport="local"))
        smi_outside = sim.sys_path("/usr/bin/nvidia-smi")  # runs from the tree; finds its state by location
        figures: dict[str, list[float]] = {"local_true": [], "sim_true": [], "local_smi": [], "sim_smi": []}
        for _ in range(args.rounds):
            figures["local_true"].append(per_command_ms(here, "true", args.commands))
            figures["sim_true"].append(per_command_ms(in_sandbox, "true", args.commands))
            figures["local_smi"].append(per_command_ms(here, f"{smi_outside} -L", args.commands // 4))
            figures["sim_smi"].append(per_command_ms(in_sandbox, "nvidia-smi -L", args.commands // 4))
    med = {k: round(statistics.median(v), 2) for k, v in figures.items()}
    result = {"ms_per_command": med, "sandbox_overhead_ms": round(med["sim_true"] - med["local_true"], 2),
              "ratio_true": round(med["sim_true"] / med["local_true"], 2),
              "ratio_nvidia_smi": round(med["sim_smi"] / med["local_smi"], 2), "rounds": args.rounds}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"true:           local {med['local_true']} ms, sim {med['sim_true']} ms "
              f"(x{result['ratio_true']}, +{result['sandbox_overhead_ms']} ms a command)")
        print(f"nvidia-smi -L:  local {med['local_smi']} ms, sim {med['sim_smi']} ms (x{result['ratio_nvidia_smi']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
