"""Per-host wall time of `agent fleet` against `ansible-playbook` running the exported playbook, on the same sims.

    python benchmarks/fleet_vs_ansible.py [--hosts 4] [--json] [--build-inside [--cold-cache]]

The recipe is read from the committed canary run (transcripts/cuda13-upgrade.jsonl); the playbook is
`agent recipe RECIPE --ansible` of it. Each engine gets N fresh default sims and runs them all in one
batch (`--canary 0 --batch N`): per host the preflight, the backup, 5+1 benchmark runs before, the CUDA
runfile, the cu130 wheels, the check, 5+1 runs after and the gate. Building the sims is left out of
both figures: each engine's N sims are built here, untimed, the same way from the same warm sim cache, and
agent fleet is given its own with `--sims` (the flag that rolls over an earlier rollout's machines). With
`--build-inside` agent fleet builds its sims inside its run, as the first measurements did, and their build
time measured apart is taken off its wall (under load, building four sims side by side on two cores takes
longer than one after another, so this favours ansible-playbook); with `--cold-cache` as well, it also
builds a sim cache of its own there (its HOME is the run's folder). The ratio is agent fleet's wall over ansible-playbook's,
in one run. The load average is read before and after (the machine may be busy with other work).

The breakdown says where each engine's time goes, per host, from the records each engine writes:

- agent fleet: each host's transcript (`<dir>/<host>.jsonl`) and the fleet's (`fleet.jsonl`). A tool's
  time is its `tool_result`'s `ended - started` (its `duration_s`); the final state and the checks are
  the time from the session's last `model_response` to the last `check` event (verify_end writes its
  `final_state` and `check` events once they have all ended); the gate is from there to `goal_result`.
  The host's set-up is from the `fleet_batch` event's `t` to its transcript's `session_start` `t`
  (the sim build, the session, the transcript's opening); the sims' build time measured apart is a
  line of its own, negative, as it is taken off the wall;
  "loop + record" is what is left of the session (`session_start` to `session_end`): the model
  protocol, the gate's decisions and the transcript's writes between the tools; the tail is from
  `session_end` to the host's end (`fleet_batch` `t` + `fleet_host` `duration_s`).
- ansible-playbook: the `junit` callback that ships with ansible-core (enabled by an ansible.cfg in the
  run's folder, `JUNIT_OUTPUT_DIR`): each task's time on each host is that host's result time less the
  task's start (the linear strategy starts a task on every host of the batch at once, so it includes
  the controller's templating, the worker fork and the connection, and a wait for a fork).
  The playbook's task names map to the parts.

For both, "outside the hosts" is the wall time less the host's own total (the process's start, the
inventory, the fleet's record and report, or ansible's parsing and the gaps between tasks). The parts
of a host add up to the engine's wall time: the hosts run side by side, so a part's seconds are a host's
own, averaged over the hosts, and not a share of the wall (divide by N for that).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from ansible_sims import ansible_env, ansible_playbook, recap, sims_for_ansible  # noqa: E402

from agent.fleet.recipe import dump_recipe, recipe_from_transcript  # noqa: E402
from tools.sim.build import base_python, cache_home, ensure_cache  # noqa: E402

PARTS = ("set-up", "sim build, measured apart (taken off)", "preflight", "backup", "drain", "bench before", "steps",
         "checks + final state", "bench after", "gate", "rollback", "loop + record", "tail", "outside the hosts")
FLEET_FIELDS = ("tool_result.started/ended (= duration_s); t of fleet_batch, session_start, the last model_response, "
                "check, goal_result, session_end; fleet_host.duration_s")
ANSIBLE_FIELDS = "junit testcase time (the host's result time less the task's start)"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _tool_part(tool: str, args: dict, seen_inspect: bool) -> str:
    if tool == "inspect_host" and not seen_inspect:
        return "preflight"
    if tool == "run_bench":
        return f"bench {args.get('label')}" if args.get("label") in ("before", "after") else "run_bench"
    return {"pip_freeze_backup": "backup", "drain_node": "drain", "undrain_node": "drain",
            "restore_backup": "rollback"}.get(tool, f"step: {tool}")


def fleet_breakdown(rollout: Path, wall_raw: float, build_s: float) -> tuple[dict, dict]:
    """Per host: seconds by part (adding up to wall_raw - build_s), and seconds by tool."""
    fleet = _events(rollout / "fleet.jsonl")
    batch_t = {h: e["t"] for e in fleet if e["type"] == "fleet_batch" for h in e["hosts"]}
    duration = {e["host"]: e["duration_s"] for e in fleet if e["type"] == "fleet_host"}
    parts, tools = {}, {}
    for host, began in batch_t.items():
        ev = _events(rollout / f"{host}.jsonl")
        start = next(e["t"] for e in ev if e["type"] == "session_start")
        end = next(e["t"] for e in reversed(ev) if e["type"] == "session_end")
        p = {k: 0.0 for k in PARTS}
        per_tool: dict[str, float] = {}
        args = {e["call_id"]: e.get("arguments") or {} for e in ev if e["type"] == "tool_call"}
        seen_inspect = False
        for e in ev:
            if e["type"] != "tool_result":
                continue
            s = e["ended"] - e["started"]
            a = args.get(e["call_id"]) if isinstance(args.get(e["call_id"]), dict) else {}
            part = _tool_part(e["tool"], a, seen_inspect)
            seen_inspect = seen_inspect or e["tool"] == "inspect_host"
            if part.startswith("step: "):  # a step counts in "steps"; its own line is a detail of that
                p["steps"] += s
            p[part] = p.get(part, 0.0) + s
            name = e["tool"] + (f" {a['label']}" if e["tool"] == "run_bench" and a.get("label") else "")
            per_tool[name] = per_tool.get(name, 0.0) + s
        checks = [e["t"] for e in ev if e["type"] in ("final_state", "check")]
        if checks:
            first_final = min(i for i, e in enumerate(ev) if e["type"] in ("final_state", "check"))
            asked = max(e["t"] for e in ev[:first_final] if e["type"] == "model_response")
            p["checks + final state"] = max(checks) - asked
            result = next((e["t"] for e in ev if e["type"] == "goal_result"), max(checks))
            p["gate"] = result - max(checks)
        inside = sum(v for k, v in p.items() if not k.startswith("step: "))
        p["loop + record"] = (end - start) - inside
        host_end = began + duration[host]
        p["set-up"] = start - began
        p["sim build, measured apart (taken off)"] = -build_s
        p["tail"] = host_end - end
        p["outside the hosts"] = wall_raw - duration[host]
        parts[host], tools[host] = p, per_tool
    return parts, tools


def _task_names(book: Path) -> list[str]:
    """The playbook's task names, as written (the play's own name, at column 0, left out)."""
    out = []
    for m in re.finditer(r"^ +- name: !unsafe (\".*\")$", book.read_text(), re.MULTILINE):
        out.append(yaml.safe_load(m.group(1)))
    return out


def _task_part(task: str) -> str:
    for prefix, part in (("preflight", "preflight"), ("backup", "backup"), ("drain", "drain"), ("undrain", "drain"),
                         ("benchmark before", "bench before"), ("benchmark after", "bench after"),
                         ("benchmark gate", "gate"), ("check ", "checks + final state"), ("rollback", "rollback")):
        if task.startswith(prefix):
            return part
    m = re.match(r"step \d+ of \d+: (\w+)", task)
    return f"step: {m.group(1)}" if m else "other tasks"


def ansible_breakdown(junit_dir: Path, book: Path, wall: float) -> tuple[dict, dict]:
    """Per host: seconds by part (adding up to wall), and seconds by task."""
    names = sorted(_task_names(book), key=len, reverse=True)  # the longest match first
    parts, tasks = {}, {}
    for xml in sorted(junit_dir.glob("*.xml")):
        for case in ET.parse(xml).getroot().iter("testcase"):
            m = re.match(r"\[(.+?)\] ", case.get("name", ""))
            if not m:
                continue
            host, rest = m.group(1), case.get("name")[m.end():]
            task = next((n for n in names if rest.endswith(": " + n)), rest)
            s = float(case.get("time") or 0)
            p = parts.setdefault(host, {k: 0.0 for k in PARTS})
            part = _task_part(task)
            if part.startswith("step: "):
                p["steps"] += s
            p[part] = p.get(part, 0.0) + s
            tasks.setdefault(host, {})[task] = tasks.get(host, {}).get(task, 0.0) + s
    for p in parts.values():
        p["outside the hosts"] = wall - sum(v for k, v in p.items() if not k.startswith("step: "))
    return parts, tasks


def _mean(per_host: dict[str, dict], parts: bool = True) -> dict[str, float]:
    keys = list(dict.fromkeys(k for p in per_host.values() for k in p))
    if parts:  # the parts in the order a host meets them, each step's own line after "steps"
        at = PARTS.index("steps") + 1
        keys = list(dict.fromkeys(PARTS[:at] + tuple(k for k in keys if k.startswith("step: ")) + PARTS[at:]
                                  + tuple(keys)))
    n = len(per_host) or 1
    return {k: round(sum(p.get(k, 0.0) for p in per_host.values()) / n, 3) for k in keys}


def table(fleet: dict[str, float], ansible: dict[str, float], hosts: int) -> str:
    rows = [k for k in dict.fromkeys(list(fleet) + list(ansible))
            if abs(fleet.get(k, 0.0)) >= 0.0005 or abs(ansible.get(k, 0.0)) >= 0.0005]
    lines = ["| part (s per host, mean) | agent fleet | ansible-playbook | difference | difference / N |",
             "|---|---|---|---|---|"]
    for k in rows:
        f, a = fleet.get(k, 0.0), ansible.get(k, 0.0)
        label = f"  {k}" if k.startswith("step: ") else k
        lines.append(f"| {label} | {f:.2f} | {a:.2f} | {f - a:+.2f} | {(f - a) / hosts:+.2f} |")
    total_f = sum(v for k, v in fleet.items() if not k.startswith("step: "))
    total_a = sum(v for k, v in ansible.items() if not k.startswith("step: "))
    lines.append(f"| total (= wall) | {total_f:.2f} | {total_a:.2f} | {total_f - total_a:+.2f} | "
                 f"{(total_f - total_a) / hosts:+.2f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--build-inside", action="store_true",
                        help="let agent fleet build its sims inside its run, their build measured apart and taken off")
    parser.add_argument("--cold-cache", action="store_true",
                        help="with --build-inside: agent fleet builds its own sim cache inside its run too")
    args = parser.parse_args()
    load_before = loadavg()
    work = Path(tempfile.mkdtemp(prefix="fleet-vs-ansible-"))
    recipe = work / "recipe.yaml"
    recipe.write_text(dump_recipe(recipe_from_transcript(ROOT / "transcripts" / "cuda13-upgrade.jsonl")))
    # One sim cache for both engines, the one this process builds the ansible sims from. ansible_env gives the
    # engines HOME=work, so without this agent fleet's sims (built inside its run) would first build a cache of
    # their own in work/.cache (wheels, indexes, a template venv: seconds), charged to agent fleet's wall while
    # the sim build taken off it was measured warm. `--cold-cache` keeps that, as the first measurement had it.
    ensure_cache(base_python())  # built here, untimed, if the sources changed since it was last built
    if not (args.build_inside and args.cold_cache):
        os.environ["XDG_CACHE_HOME"] = str(cache_home().parent)
    env = ansible_env(work)
    book = work / "book.yml"
    subprocess.run([sys.executable, "-m", "app.cli", "recipe", str(recipe), "--ansible", "--canary", "0", "--batch",
                    str(args.hosts), "-o", str(book)], check=True, env=env, cwd=ROOT, capture_output=True)
    names = {f"gpu{i:02}": {} for i in range(1, args.hosts + 1)}
    start = time.monotonic()
    inventory, _ = sims_for_ansible(work / "ansible", names)
    build_s = time.monotonic() - start
    # ansible-core's junit callback, for the per-task times: ansible-playbook runs in `work` (ansible_playbook's
    # cwd), so an ansible.cfg there enables it; its options are read from the environment only.
    (work / "ansible.cfg").write_text("[defaults]\ncallbacks_enabled = junit\n")
    os.environ.update({"JUNIT_OUTPUT_DIR": str(work / "junit"), "JUNIT_HIDE_TASK_ARGUMENTS": "true"})
    start = time.monotonic()
    played = ansible_playbook(inventory, book, work)
    ansible_s = time.monotonic() - start
    assert all(c.get("changed") and not c.get("failed") for c in recap(played.stdout).values()), played.stdout[-2000:]
    (work / "hosts.ini").write_text("[gpu]\n" + "\n".join(names) + "\n\n[gpu:vars]\nagent_transport=sim\n")
    sims = [] if args.build_inside else ["--sims", str(sims_for_ansible(work / "fleet", names)[1]["gpu01"].parent)]
    taken_off = build_s if args.build_inside else 0.0
    start = time.monotonic()
    fleet = subprocess.run([sys.executable, "-m", "app.cli", "fleet", str(recipe), "-i", str(work / "hosts.ini"),
                            "--canary", "0", "--batch", str(args.hosts), "--dir", str(work / "rollout"), *sims],
                           env=env, cwd=ROOT, capture_output=True, text=True, check=False)
    fleet_raw = time.monotonic() - start
    fleet_s = fleet_raw - taken_off
    assert fleet.returncode == 0, fleet.stderr[-2000:]
    load_after = loadavg()
    f_parts, f_tools = fleet_breakdown(work / "rollout", fleet_raw, taken_off)
    a_parts, a_tasks = ansible_breakdown(work / "junit", book, ansible_s)
    assert set(a_parts) == set(names) == set(f_parts), (sorted(a_parts), sorted(f_parts))
    f_mean, a_mean = _mean(f_parts), _mean(a_parts)
    out = {"hosts": args.hosts, "sim_build_s": round(build_s, 2), "ansible_s": round(ansible_s, 2),
           "fleet_s": round(fleet_s, 2), "ansible_per_host_s": round(ansible_s / args.hosts, 2),
           "fleet_per_host_s": round(fleet_s / args.hosts, 2), "ratio": round(fleet_s / ansible_s, 3),
           "sims": "built inside agent fleet's run, taken off" if args.build_inside else "built before, untimed",
           "sim_cache": "cold for agent fleet" if args.build_inside and args.cold_cache else "shared, warm",
           "loadavg_before": load_before, "loadavg_after": load_after}
    breakdown = {"fields": {"agent fleet": FLEET_FIELDS, "ansible-playbook": ANSIBLE_FIELDS},
                 "mean_s": {"agent fleet": f_mean, "ansible-playbook": a_mean},
                 "difference_s": {k: round(f_mean.get(k, 0.0) - a_mean.get(k, 0.0), 3)
                                  for k in dict.fromkeys(list(f_mean) + list(a_mean))},
                 "fleet_tools_mean_s": _mean(f_tools, False), "ansible_tasks_mean_s": _mean(a_tasks, False),
                 "per_host_s": {"agent fleet": {h: {k: round(v, 3) for k, v in p.items()} for h, p in f_parts.items()},
                                "ansible-playbook": {h: {k: round(v, 3) for k, v in p.items()}
                                                     for h, p in a_parts.items()}}}
    if args.json:
        print(json.dumps({**out, "breakdown": breakdown}))
        return 0
    print("\n".join(f"{k}: {v}" for k, v in out.items()))
    print(f"\nbreakdown, seconds of each host's own time by part, mean over {args.hosts} hosts (the hosts run side by "
          "side, so a host's parts add up to the wall time; / N is the share of the per-host figure)")
    print(f"agent fleet: {FLEET_FIELDS}\nansible-playbook: {ANSIBLE_FIELDS}\n")
    print(table(f_mean, a_mean, args.hosts))
    print("\nagent fleet, by tool (s per host, mean): "
          + ", ".join(f"{k} {v:.2f}" for k, v in breakdown["fleet_tools_mean_s"].items()))
    print("ansible-playbook, by task (s per host, mean): "
          + ", ".join(f"{k} {v:.2f}" for k, v in breakdown["ansible_tasks_mean_s"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
