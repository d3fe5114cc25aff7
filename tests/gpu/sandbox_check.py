"""The read sandbox on a real GPU machine: what a read may do there, and what it may not.

Run from the repository's root with the interpreter that holds torch (docs/gpu.md):

    python3 tests/gpu/sandbox_check.py > sandbox-check.json

It prints one JSON object: the mechanism the probe chose, and for each check the command, its exit
code, the first lines of its output and whether it came out as a read must (queries work, changes fail),
and what a read costs (`nvidia-smi -L` and `cat /etc/os-release`, median of 20, plain and sandboxed).

`UPGRADE_AGENT_SANDBOX_MECHANISM=landlock` forces the Landlock mode where the probe picks namespaces (as
root), and `UPGRADE_AGENT_SANDBOX_SERVER=0` starts a launcher per read instead of the host's server.
"""

from __future__ import annotations

import json
import os
import shlex
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from tools.hosts.base import HostSpec  # noqa: E402
from tools.hosts.local import LocalHost  # noqa: E402
from tools.sandbox import SandboxedHost, probe_host  # noqa: E402

PY = shlex.quote(os.environ.get("UPGRADE_AGENT_GPU_PYTHON", sys.executable))
WORK = [  # reads that must work in the sandbox
    ("nvidia-smi query", "nvidia-smi --query-gpu=name,driver_version,memory.total,persistence_mode,clocks.sm "
                         "--format=csv,noheader"),
    ("nvidia-smi -q", "nvidia-smi -q | head -n 40"),
    ("nvidia-smi -L", "nvidia-smi -L"),
    ("torch device probe", f"{PY} -c \"import torch; print(torch.__version__, torch.version.cuda, "
                           "torch.cuda.is_available(), torch.cuda.get_device_name(0)); "
                           "x = torch.ones(1024, device='cuda'); print(float(x.sum()))\""),
    ("NVML via ctypes", f"{PY} -c \"import ctypes; n = ctypes.CDLL('libnvidia-ml.so.1'); print(n.nvmlInit_v2()); "
                        "c = ctypes.c_uint(); print(n.nvmlDeviceGetCount_v2(ctypes.byref(c)), c.value)\""),
]
FAIL = [  # changes that must fail in the sandbox even though the GPU's nodes are visible
    # nvidia-smi exits 0 when it refuses a persistence change ("Insufficient Permissions"): the message and
    # the GPU's state read afterwards decide. `-pm 1` on a GPU already in persistence mode changes nothing.
    ("persistence mode off", "nvidia-smi -pm 0"),
    ("lock GPU clocks", "nvidia-smi -lgc 1000,1500"),
    ("set power limit", "nvidia-smi -pl 500"),
    ("compute mode", "nvidia-smi -c EXCLUSIVE_PROCESS"),
    ("MIG mode", "nvidia-smi -mig 1"),
    ("reset clocks", "nvidia-smi -rgc"),
    ("write under /usr/local", "touch /usr/local/.sandbox-check"),
    ("load a module", "modprobe dummy"),
    ("read /proc/kmsg", "head -c 100 /proc/kmsg"),
]


def inspect_in_sandbox(host: LocalHost) -> dict:
    """inspect_host as a session runs it: every command of it through the read sandbox."""
    from tools.base import ArtifactStore, ToolContext
    from tools.inspect_host import InspectHost
    from tools.sandbox import SandboxedHosts

    class One:
        def get(self, name):
            return host

    tool = InspectHost()
    ctx = ToolContext(hosts=SandboxedHosts(One()), artifacts=ArtifactStore(None))
    result = tool.run(ctx, tool.parse_args({"host": "gpu", "python": os.environ.get("UPGRADE_AGENT_GPU_PYTHON",
                                                                                    sys.executable)}))
    facts = result.model_dump(mode="json")
    return {"gpus": facts["gpu_count"], "driver": facts["driver"], "python": facts["python"],
            "toolkit_on_path": facts["toolkit_on_path"], "notes": facts["notes"]}


def read_cost(host, sandboxed) -> dict:
    """Median milliseconds of two quick reads, plain and in the sandbox, taking turns."""
    import statistics
    import time
    out = {}
    for command in ("nvidia-smi -L", "cat /etc/os-release"):
        times = {"plain": [], "sandboxed": []}
        for _ in range(20):
            for name, runner in (("plain", host), ("sandboxed", sandboxed)):
                start = time.perf_counter()
                r = runner.run(command, timeout=60)
                if r.exit_code != 0:
                    out[command] = {"failed": name, "result": r.stderr[-300:]}
                    break
                times[name].append(time.perf_counter() - start)
        if command in out:
            continue
        med = {k: statistics.median(v) * 1000 for k, v in times.items()}
        out[command] = {k: round(v, 2) for k, v in med.items()} | {"ratio": round(med["sandboxed"] / med["plain"], 2)}
    return out


def main() -> int:
    import dataclasses
    from tools.sandbox import host as sandbox_host
    host = LocalHost(HostSpec(name="gpu", transport="local"))
    info = probe_host(host)
    forced = os.environ.get("UPGRADE_AGENT_SANDBOX_MECHANISM")
    if forced:
        info = dataclasses.replace(info, mechanism=forced)
    host._read_sandbox = info  # what SandboxedHosts finds for inspect_host, as a session's probe leaves it
    sandboxed = SandboxedHost(host, info)
    out = {"sandbox": info.as_event("gpu"), "server": sandbox_host.SERVER_ENABLED, "checks": []}
    before = host.run("nvidia-smi --query-gpu=persistence_mode,clocks.sm,power.limit,compute_mode "
                      "--format=csv,noheader").stdout.strip()
    ok = True
    for expect, cases in (("works", WORK), ("fails", FAIL)):
        for name, command in cases:
            r = sandboxed.run(command, timeout=120)
            refused = r.exit_code != 0 or "Insufficient Permissions" in r.stdout + r.stderr
            as_expected = not refused if expect == "works" else refused
            ok &= as_expected
            out["checks"].append({"check": name, "command": command, "expect": expect, "exit_code": r.exit_code,
                                  "as_expected": as_expected, "stdout": r.stdout[-600:], "stderr": r.stderr[-400:],
                                  "hint": (r.hint or "")[:160]})
    after = host.run("nvidia-smi --query-gpu=persistence_mode,clocks.sm,power.limit,compute_mode "
                     "--format=csv,noheader").stdout.strip()
    out["inspect_host"] = inspect_in_sandbox(host)
    out["read_cost_ms"] = read_cost(host, sandboxed)
    ok &= out["inspect_host"].get("gpus", 0) > 0
    out["gpu_state_before"], out["gpu_state_after"] = before, after
    out["gpu_state_unchanged"] = before.split(",")[0] == after.split(",")[0] and \
        before.split(",")[2:] == after.split(",")[2:]  # the SM clock moves by itself
    ok &= out["gpu_state_unchanged"]
    out["ok"] = bool(ok)
    print(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
