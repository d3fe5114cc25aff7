"""Record transcripts/gpu-h200-check.jsonl: the read-only tools and a real benchmark on a GPU machine.

    python3 tests/gpu/record_gpu_check.py --out DIR [--name gpu-h200-check] [--host h200]

Run from the repository's root on the GPU machine (benchmarks/gpu_decode.py is run from there),
with OpenSSH's sshd available as for the GPU tests (docs/gpu.md). One session with two hosts
that are the same machine: `h200` through the local transport and `h200-ssh` through SSH to a
real sshd that this script starts on 127.0.0.1 with throwaway keys.

The model is scripted, as in tests/recording.py: a generator making the decisions an expert
would, reading the real tool results (the facts inspect_host reports against what nvidia-smi,
nvcc and pip print; the benchmark's figures; whether torch.compile worked). Everything else is
the product: the loop, the gate, the tools, the transcript, the final checks.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from agent.goal import Goal  # noqa: E402
from agent.model import turn  # noqa: E402
from agent.session_builder import build_session, goal_budget  # noqa: E402
from app.run import execute_goal  # noqa: E402

import sshd as sshd_module  # noqa: E402
from gpu_support import gpu_python, host_path_prefix, read_machine, ssh_settings, sshd_binary  # noqa: E402
from recording import GeneratorModel, last_tool_outputs  # noqa: E402

NOTE = ("recorded on a real NVIDIA GPU machine with a scripted model that makes the decisions an expert would "
        "(tests/gpu/record_gpu_check.py); the tools, the safety gate, the hosts (local, and SSH to a real sshd on "
        "127.0.0.1) and the benchmark ran for real")

BENCH = "python3 benchmarks/gpu_decode.py --batch 1 --tokens 256"


def make_goal(host: str, gpu_name: str, torch_dist: str) -> Goal:
    entry = {"python": gpu_python(), "path_prefix": host_path_prefix()}
    return Goal.model_validate({
        "goal": (f"Check that the read-only tools read the NVIDIA GPU machine {host} right, through the local "
                 f"transport ({host}) and over SSH ({host}-ssh): driver, the CUDA version it supports, GPU, "
                 f"compute capability, toolkit, torch and its CUDA build, each against what nvidia-smi, nvcc and "
                 f"pip say directly. Back up its PyTorch environment. Measure decode throughput with the "
                 f"project's benchmarks/gpu_decode.py, eager against torch.compile, and say whether the "
                 f"difference is larger than the noise. Change nothing."),
        "hosts": [{"name": host, "transport": "local", **entry},
                  {"name": f"{host}-ssh", "transport": "ssh", "target": f"{host}-ssh", **entry}],
        "authorizations": [],
        "budget": {"turns": 8},
        "success": [
            {"command": {"host": host, "run": "nvidia-smi -L", "expect_output": gpu_name}},
            {"command": {"host": f"{host}-ssh", "run": "python3 -m pip show torch",
                         "expect_output": f"Version: {torch_dist}"}},
            {"throughput": {"label": "compile", "compare_to": "eager", "min_ratio": 1.0}},
        ],
    })


# --------------------------------------------------------------------------- reading the results


def tool_json(content: str) -> dict | None:
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def stdout_of(content: str) -> str:
    m = re.search(r"--- stdout ---\n(.*?)(?:\n--- stderr|\Z)", content, re.S)
    return m.group(1) if m else ""


def facts_of(inspect: dict) -> dict:
    gpus = inspect.get("gpus") or []
    py = inspect.get("python") or {}
    return {
        "driver": (inspect.get("driver") or {}).get("version"),
        "driver_cuda": (inspect.get("driver") or {}).get("cuda_version"),
        "gpus": [(g["name"], g.get("compute_capability"), g.get("memory_total_mib")) for g in gpus],
        "toolkit": (inspect.get("toolkit_on_path") or {}).get("version"),
        "torch": py.get("torch"),
        "torch_pip": (py.get("packages") or {}).get("torch"),
        "torch_cuda": py.get("torch_cuda"),
        "cuda_available": py.get("cuda_available"),
    }


def direct_facts(smi_query: str, smi: str, nvcc: str, pip_show: str) -> dict:
    gpus = []
    for line in smi_query.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) >= 5:
            gpus.append((parts[1], parts[2], int(parts[4]) if parts[4].isdigit() else None))
    drv = re.search(r"Driver Version:\s*(\S+)", smi)
    cuda = re.search(r"CUDA Version:\s*(\S+)", smi)
    rel = re.search(r"release (\d+\.\d+)", nvcc)
    ver = re.search(r"^Version:\s*(\S+)", pip_show, re.M)
    return {"driver": drv and drv.group(1), "driver_cuda": cuda and cuda.group(1), "gpus": gpus,
            "toolkit": rel and rel.group(1), "torch_pip": ver and ver.group(1)}


def compare_facts(label: str, tool: dict, direct: dict) -> list[str]:
    return [f"{label} {key}: tool says {tool.get(key)!r}, directly {value!r}"
            for key, value in direct.items() if tool.get(key) != value]


def bench_summary(content: str) -> dict:
    out = {"ok": not content.startswith("error")}
    for key, pattern in (("values", r"^values: (.*)$"), ("median", r"^median ([0-9.e+-]+)"),
                         ("spread", r"spread ([0-9.e+-]+) \(([0-9.]+)% of the median\)"),
                         ("verdict", r"^verdict: (.*)$"), ("ratio", r"ratio ([0-9.]+) \(")):
        m = re.search(pattern, content, re.M)
        if m:
            out[key] = m.group(1) if key != "spread" else f"{m.group(1)} ({m.group(2)}%)"
    return out


# --------------------------------------------------------------------------- the expert


def expert(host: str):
    ssh = f"{host}-ssh"
    messages = yield turn(
        "Reading the machine through both transports with inspect_host, and the same facts straight from "
        "nvidia-smi, nvcc and pip, in one batch.",
        calls=[("inspect_host", {"host": host}),
               ("inspect_host", {"host": ssh}),
               ("ssh_exec", {"host": host, "command": "nvidia-smi --query-gpu=index,name,compute_cap,"
                                                     "driver_version,memory.total --format=csv,noheader,nounits"}),
               ("ssh_exec", {"host": host, "command": "nvidia-smi"}),
               ("ssh_exec", {"host": ssh, "command": "nvcc --version"}),
               ("ssh_exec", {"host": ssh, "command": "python3 -m pip show torch"})])
    out = last_tool_outputs(messages)
    local, remote = tool_json(out[0]) or {}, tool_json(out[1]) or {}
    direct = direct_facts(stdout_of(out[2]), stdout_of(out[3]), stdout_of(out[4]), stdout_of(out[5]))
    lf, rf = facts_of(local), facts_of(remote)
    problems = compare_facts(host, lf, direct) + compare_facts(ssh, rf, direct)
    problems += [f"{ssh} differs from {host} on {k}: {rf[k]!r} vs {lf[k]!r}" for k in lf if lf[k] != rf[k]]
    gpu = lf["gpus"][0] if lf["gpus"] else ("?", "?", "?")
    seen = (f"driver {lf['driver']} (supports CUDA {lf['driver_cuda']}), {len(lf['gpus'])} x {gpu[0]} "
            f"(compute capability {gpu[1]}, {gpu[2]} MiB), toolkit on PATH {lf['toolkit']}, torch {lf['torch']} "
            f"built for CUDA {lf['torch_cuda']} (CUDA available: {lf['cuda_available']})")
    if problems:
        verdict = "They disagree:\n- " + "\n- ".join(problems)
    else:
        verdict = ("inspect_host over both transports agrees with nvidia-smi, nvcc and pip on every fact: " + seen
                   + ".")
    if lf["torch_pip"] and lf["torch"] and lf["torch_pip"] != lf["torch"]:
        verdict += (f" Note that pip names the installed torch {lf['torch_pip']} while torch calls itself "
                    f"{lf['torch']}: pip's name is the one to pin when restoring (inspect_host says so too).")
    messages = yield turn(
        f"{verdict}\n\nBacking up the PyTorch environment before anything else, then measuring eager decode "
        f"throughput (batch 1, 256 tokens; 1 warmup run, 3 measured).",
        calls=[("pip_freeze_backup", {"host": host}),
               ("run_bench", {"host": host, "command": f"{BENCH} --mode eager", "parser": "json:decode_tok_s",
                              "label": "eager", "runs": 3, "warmup": 1, "timeout": 600})])
    backup, eager = last_tool_outputs(messages)
    backup_id = (tool_json(backup) or {}).get("backup_id", "?")
    e = bench_summary(eager)
    if not e["ok"]:
        yield turn(f"The eager benchmark failed on {host}, so there is nothing to compare against:\n\n{eager[:1500]}"
                   f"\n\nThe facts above stand; backup {backup_id} was taken; nothing was changed.")
        return
    messages = yield turn(
        "Now the same decode with the step compiled by torch.compile (mode reduce-overhead: CUDA graphs); the "
        "warmup run pays for the compilation, the measured runs reuse its caches.",
        calls=[("run_bench", {"host": host, "command": f"{BENCH} --mode compile", "parser": "json:decode_tok_s",
                              "label": "compile", "compare_to": "eager", "runs": 3, "warmup": 1,
                              "timeout": 600})])
    compiled = bench_summary(last_tool_outputs(messages)[0])
    fallback = None
    if not compiled["ok"]:
        messages = yield turn(
            "torch.compile did not run here (the error is above). Measuring batch 8 in eager mode instead, so "
            "the comparison still meets two real settings.",
            calls=[("run_bench", {"host": host, "command": BENCH.replace("--batch 1", "--batch 8") + " --mode eager",
                                  "parser": "json:decode_tok_s", "label": "batch8", "compare_to": "eager",
                                  "runs": 3, "warmup": 1, "timeout": 600})])
        fallback = bench_summary(last_tool_outputs(messages)[0])
    second = fallback or compiled
    lines = [
        f"## {host}: the tools read the machine right" if not problems else f"## {host}: the tools disagree",
        "",
        f"- Machine: {seen} (turn 1). " + ("Local and SSH transports report the same facts, and each matches "
                                           "nvidia-smi, nvcc --version and pip show." if not problems
                                           else "Differences: " + "; ".join(problems)),
        f"- Backup {backup_id} of {gpu_python()} (turn 2); nothing was changed.",
        f"- Decode throughput, benchmarks/gpu_decode.py batch 1, tok/s: eager values {e.get('values')}, median "
        f"{e.get('median')}, spread {e.get('spread')} (turn 2).",
    ]
    if compiled["ok"]:
        lines.append(f"- torch.compile: values {compiled.get('values')}, median {compiled.get('median')}, spread "
                     f"{compiled.get('spread')}; ratio {compiled.get('ratio')}: {compiled.get('verdict')} (turn 3).")
    else:
        lines.append("- torch.compile failed on this machine (turn 3); batch 8 eager: values "
                     f"{second.get('values')}, median {second.get('median')}; ratio {second.get('ratio')}: "
                     f"{second.get('verdict')} (turn 4).")
    yield turn("\n".join(lines))


# --------------------------------------------------------------------------- the session


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory for NAME.jsonl and NAME.artifacts/")
    ap.add_argument("--name", default="gpu-h200-check")
    ap.add_argument("--host", default="h200", help="host name in the session (the SSH one is HOST-ssh)")
    a = ap.parse_args()
    binary = sshd_binary(sshd_module.SSHD_BINARY)
    if binary is None:
        print("error: no sshd: set UPGRADE_AGENT_SSHD (docs/gpu.md)", file=sys.stderr)
        return 2
    sshd_module.SSHD_BINARY = binary
    machine = read_machine()
    goal = make_goal(a.host, machine.query[0]["name"], machine.torch["torch_dist"])
    out_dir = Path(a.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    transcript = out_dir / f"{a.name}.jsonl"
    transcript.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="gpu-check-ssh-") as tmp:
        key = sshd_module.keygen(Path(tmp) / "client" / "id_ed25519")
        server = sshd_module.SSHD(Path(tmp) / "sshd", authorized_keys=[key]).start()
        try:
            built = build_session(hosts=goal.hosts, model=GeneratorModel(expert(a.host)), mode="scripted",
                                  authorizations=goal.authorizations, budget=goal_budget(goal),
                                  transcript=transcript,
                                  start_info={"goal": goal.goal, "note": NOTE, "command": "record"})
            # Where the SSH host is and its key: files of this recording's own, never ~/.ssh.
            built.hosts.settings = ssh_settings(Path(tmp) / "client", f"{a.host}-ssh", server, key)
            code = execute_goal(goal, built.session)
        finally:
            server.stop()
    print(json.dumps({"recorded": str(transcript), "exit_code": code}))
    return code


if __name__ == "__main__":
    sys.exit(main())
