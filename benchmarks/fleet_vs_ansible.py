"""Per-host wall time of `agent fleet` against `ansible-playbook` running the exported playbook, on the same sims.

    python benchmarks/fleet_vs_ansible.py [--hosts 4] [--json]

The recipe is read from the committed canary run (transcripts/cuda13-upgrade.jsonl); the playbook is
`agent recipe RECIPE --ansible` of it. Each engine gets N fresh default sims and runs them all in one
batch (`--canary 0 --batch N`): per host the preflight, the backup, 5+1 benchmark runs before, the CUDA
runfile, the cu130 wheels, the check, 5+1 runs after and the gate. Building the sims is left out of
both figures (agent fleet's own sims are built inside its run, so their build time, measured apart, is
taken off its wall time). The ratio is agent fleet's wall over ansible-playbook's, in one run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ansible_sims import ansible_env, ansible_playbook, recap, sims_for_ansible  # noqa: E402

from agent.fleet.recipe import dump_recipe, recipe_from_transcript  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fleet-vs-ansible-"))
    recipe = work / "recipe.yaml"
    recipe.write_text(dump_recipe(recipe_from_transcript(ROOT / "transcripts" / "cuda13-upgrade.jsonl")))
    env = ansible_env(work)
    book = work / "book.yml"
    subprocess.run([sys.executable, "-m", "app.cli", "recipe", str(recipe), "--ansible", "--canary", "0", "--batch",
                    str(args.hosts), "-o", str(book)], check=True, env=env, cwd=ROOT, capture_output=True)
    names = {f"gpu{i:02}": {} for i in range(1, args.hosts + 1)}
    start = time.monotonic()
    inventory, _ = sims_for_ansible(work / "ansible", names)
    build_s = time.monotonic() - start
    start = time.monotonic()
    played = ansible_playbook(inventory, book, work)
    ansible_s = time.monotonic() - start
    assert all(c.get("changed") and not c.get("failed") for c in recap(played.stdout).values()), played.stdout[-2000:]
    (work / "hosts.ini").write_text("[gpu]\n" + "\n".join(names) + "\n\n[gpu:vars]\nagent_transport=sim\n")
    start = time.monotonic()
    fleet = subprocess.run([sys.executable, "-m", "app.cli", "fleet", str(recipe), "-i", str(work / "hosts.ini"),
                            "--canary", "0", "--batch", str(args.hosts), "--dir", str(work / "rollout")],
                           env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    fleet_s = time.monotonic() - start - build_s
    assert fleet.returncode == 0, fleet.stderr[-2000:]
    out = {"hosts": args.hosts, "sim_build_s": round(build_s, 2), "ansible_s": round(ansible_s, 2),
           "fleet_s": round(fleet_s, 2), "ansible_per_host_s": round(ansible_s / args.hosts, 2),
           "fleet_per_host_s": round(fleet_s / args.hosts, 2), "ratio": round(fleet_s / ansible_s, 3)}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
