"""check_outputs on a real GPU: the same greedy tokens across a change that leaves the model's numerics alone,
and different ones across a change that does not.

    python3 tests/gpu/outputs_check.py > outputs-check.json

Serves benchmarks/gpu_serve.py (gpu_decode.py's model on the first GPU) on 127.0.0.1:30100 and asks it with the
real check_outputs tool, through the read sandbox as a session does, five times: `before`; `again` (the same
server started anew); `after-change` (after moving typing_extensions and filelock, which torch imports, to the
other carried version: the recorded pip change of docs/gpu.md); `restored` (the machine's own versions back);
`float16` (the same weights served in float16: a numerics change on purpose). Each compares with `before`, and
the goal's outputs check (`same: true`) judges each. Prints one JSON object; changes nothing it does not put back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(Path(__file__).resolve().parent)]

from agent.checks import _outputs_check  # noqa: E402
from agent.goal import OutputsCheck  # noqa: E402
from tools.base import ArtifactStore, ToolContext  # noqa: E402
from tools.check_outputs import CheckOutputs  # noqa: E402
from tools.hosts import HostPool  # noqa: E402
from tools.sandbox import SandboxedHosts  # noqa: E402

from gpu_support import clean_env, gpu_python, local_spec  # noqa: E402

PORT = 30100
ENDPOINT = f"http://127.0.0.1:{PORT}"
WHEELS = Path(os.environ.get("UPGRADE_AGENT_GPU_WHEELS") or ROOT / ".gpu-change-wheels")
MOVED = ("typing_extensions", "filelock")


def serve(python: str, dtype: str) -> subprocess.Popen:
    server = subprocess.Popen([python, str(ROOT / "benchmarks" / "gpu_serve.py"), "--port", str(PORT), "--dtype", dtype],
                              stdout=subprocess.PIPE, text=True, env=clean_env())
    started = json.loads(server.stdout.readline())  # printed once the model is on the GPU, before it listens
    for _ in range(200):
        try:
            import urllib.request

            urllib.request.urlopen(ENDPOINT + "/health", timeout=1).read()
            return server, started
        except OSError:
            time.sleep(0.05)
    raise SystemExit("gpu_serve.py did not answer")


def pip(python: str, *args: str) -> str:
    # without PYTHONPATH (the GPU runner's own packages, typing_extensions among them): the venv's as they are
    r = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, timeout=300, env=clean_env())
    if r.returncode != 0:
        raise SystemExit(f"pip {' '.join(args)}: {r.stderr[-2000:]}")
    return r.stdout


def installed(python: str) -> dict[str, str]:
    out = {}
    for name in MOVED:
        for line in pip(python, "show", name).splitlines():
            if line.startswith("Version: "):
                out[name] = line.split()[1]
    return out


def other_version(name: str, now: str) -> str:
    carried = sorted(w.name.split("-")[1] for w in WHEELS.glob(f"{name}-*.whl"))
    others = [v for v in carried if v != now]
    if not others:
        raise SystemExit(f"no other version of {name} in {WHEELS} than {now}: bring both (docs/gpu.md)")
    return others[0]


def main() -> int:
    python = gpu_python()
    pool = HostPool([local_spec("gpu")])
    store: dict = {}
    ctx = ToolContext(hosts=SandboxedHosts(pool, [PORT]), artifacts=ArtifactStore(None), store=store)
    tool = CheckOutputs()
    report: dict = {"endpoint": ENDPOINT, "labels": {}}

    def ask(label: str, dtype: str = "bfloat16") -> None:
        server, started = serve(python, dtype)
        try:
            args = {"host": "gpu", "endpoint": ENDPOINT, "label": label, "max_tokens": 24}
            if label != "before":
                args["compare_to"] = "before"
            result = tool.run(ctx, tool.parse_args(args))
        finally:
            server.terminate()
            server.wait(timeout=30)
        judged = _outputs_check(OutputsCheck(label=label, same=True), store["check_outputs"]) if label != "before" else None
        report["labels"][label] = {
            "server": started, "digest": result.digest, "prompts": result.prompts,
            "first_output": result.outputs[0].strip()[:80],
            "same_outputs": None if result.comparison is None else result.comparison.same_outputs,
            "differing": None if result.comparison is None else result.comparison.differing,
            "outputs_check_same": None if judged is None else {"ok": judged.ok, "detail": judged.detail}}

    own = installed(python)
    report["versions_before"] = own
    ask("before")
    ask("again")
    moved = {name: other_version(name, version) for name, version in own.items()}
    pip(python, "install", "-q", "--no-index", "--no-deps", "--find-links", str(WHEELS),
        *[f"{n}=={v}" for n, v in moved.items()])
    report["versions_changed"] = installed(python)
    try:
        ask("after-change")
    finally:
        pip(python, "install", "-q", "--no-index", "--no-deps", "--find-links", str(WHEELS),
            *[f"{n}=={v}" for n, v in own.items()])
    report["versions_restored"] = installed(python)
    ask("restored")
    ask("float16", dtype="float16")
    pool.close()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
