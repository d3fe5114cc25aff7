"""Wall time of `agent fleet` against the number of hosts (1, 8, 32 sims by default).

    python benchmarks/fleet_scaling.py [--hosts 1 8 32] [--batch 8] [--json]

The canary is the demo's run (`agent demo`, the seed's CUDA 12.8 -> 13.0 upgrade) and the recipe
the one `agent recipe` reads from it: per host a sim built, inspect_host, pip_freeze_backup with its
rollback rehearsal, 5+1 benchmark runs before, the CUDA runfile, the cu130 wheels, 5+1 runs after,
the final freeze and inspection, the toolkit check, the gate. Each size is one `agent fleet` process
(`--canary 1 --batch 8 --max-fail 0`) over that many default sims.

Figures per size: the wall time; per host (wall / hosts); the hosts' own time added up (each host
transcript's session, from `fleet_host.duration_s`); and the parallel gain, that sum over the wall
time. The orchestration's own share is the wall time less the slowest host of each batch added up:
what the batches cost beyond their longest host (starting sessions, writing the fleet record).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def agent(args: list[str], home: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
                "TMPDIR": str(home)})
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=3600)


def measure(recipe: Path, hosts: int, batch: int, work: Path) -> dict:
    inv = work / f"hosts-{hosts}.ini"
    inv.write_text("[gpu]\n" + "".join(f"gpu{i:02}\n" for i in range(1, hosts + 1)) + "[gpu:vars]\nagent_transport=sim\n")
    out = work / f"rollout-{hosts}"
    began = time.monotonic()
    r = agent(["fleet", str(recipe), "-i", str(inv), "--canary", "1", "--batch", str(batch), "--max-fail", "0",
               "--dir", str(out), "--json"], work)
    wall = time.monotonic() - began
    if r.returncode != 0:
        raise SystemExit(f"agent fleet over {hosts} hosts failed (exit {r.returncode}): {r.stderr[-1500:]}")
    events = [json.loads(line) for line in (out / "fleet.jsonl").read_text().splitlines()]
    done = [e for e in events if e["type"] == "fleet_host"]
    per_batch: dict[int, float] = {}
    for e in done:
        per_batch[e["batch"]] = max(per_batch.get(e["batch"], 0.0), e["duration_s"])
    host_sum = sum(e["duration_s"] for e in done)
    return {"hosts": hosts, "wall_s": round(wall, 2), "per_host_s": round(wall / hosts, 2),
            "host_time_sum_s": round(host_sum, 2), "parallel_gain": round(host_sum / wall, 2),
            "slowest_per_batch_sum_s": round(sum(per_batch.values()), 2),
            "orchestration_s": round(wall - sum(per_batch.values()), 2), "batches": len(per_batch),
            "statuses": sorted({e["status"] for e in done})}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
    demo = agent(["demo", "--dir", str(work / "canary"), "--json"], work)
    if demo.returncode != 0:
        raise SystemExit(f"the canary (agent demo) failed: {demo.stderr[-1500:]}")
    recipe = work / "recipe.yaml"
    made = agent(["recipe", str(work / "canary" / "demo.jsonl"), "-o", str(recipe)], work)
    if made.returncode != 0:
        raise SystemExit(made.stderr)
    rows = [measure(recipe, n, args.batch, work) for n in args.hosts]
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"batch": args.batch, "cpus": os.cpu_count(), "load": round(load, 2), "rows": rows}))
        return 0
    print(f"agent fleet, canary 1 then batches of {args.batch}, {os.cpu_count()} CPUs, load average {load:.2f}")
    print(f"{'hosts':>5} {'wall s':>8} {'s/host':>7} {'hosts sum s':>12} {'gain':>5} {'orchestration s':>16}")
    for row in rows:
        print(f"{row['hosts']:>5} {row['wall_s']:>8} {row['per_host_s']:>7} {row['host_time_sum_s']:>12} "
              f"{row['parallel_gain']:>5} {row['orchestration_s']:>16}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
