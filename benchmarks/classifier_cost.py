"""What the command classifier costs: pathological inputs against an ordinary command.

    python benchmarks/classifier_cost.py [--repeat 5] [--json]

Every command must be judged in at most 100 ms; past a work budget it is refused as too complex
to judge (rule `too-complex`), never slow. Each input is classified `--repeat` times and the
fastest run is kept (the machine's noise only ever adds time). The figure that matters is the
ratio of each input's time to that of an ordinary discovery command, measured in the same run,
and the absolute worst case against the 100 ms bound.
"""

from __future__ import annotations

import argparse
import base64
import json
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent.safety.classifier import classify  # noqa: E402

BOUND_MS = 100.0


def nested(command: str, levels: int, quote=shlex.quote) -> str:
    for _ in range(levels):
        command = "bash -c " + quote(command)
    return command


def inputs() -> dict[str, str]:
    """The slow inputs a reviewer found, and more of their kind."""
    return {
        "ordinary: nvidia-smi | grep | head": "nvidia-smi --query-gpu=name,driver_version --format=csv | grep -i h200 | head -1",
        "ordinary: python version probe": "python3 -c 'import torch; print(torch.__version__, torch.version.cuda)'",
        "300 pipes": " | ".join(["cat"] * 300),
        "10,000 pipes": " | ".join(["cat"] * 10_000),
        "2,000 && commands": " && ".join(["ls /tmp"] * 2_000),
        "480 kB echo | base64 -d | sh": f"echo {base64.b64encode(b'echo hi; ' * 53_000).decode()} | base64 -d | sh",
        "12 kB echo | base64 -d | sh": f"echo {base64.b64encode(b'echo hi; ' * 1_000).decode()} | base64 -d | sh",
        "7 nested bash -c": nested("ls", 7),
        "14 nested bash -c": nested("ls", 14),
        "14 nested bash -c (double quotes)": nested("ls", 14, quote=lambda c: '"' + c.replace("\\", "\\\\")
                                                    .replace('"', '\\"').replace("$", "\\$") + '"'),
        "5,000 arguments": "ls " + "a " * 5_000,
        "2,000 assignments": "x=a; " * 2_000 + "$x",
        "500 nested if": "if true; then " * 500 + "ls" + "; fi" * 500,
        "3,000-line heredoc": "cat <<EOF\n" + "line $x\n" * 3_000 + "EOF",
        "python -c with 2,000 statements": "python3 -c '" + "print(1);" * 2_000 + "'",
        "sed with 2,000 commands": "sed -n -e '" + "s/a/b/;" * 2_000 + "' f",
        "brace product": "echo " + "{a,b}" * 12,
        "bash -c ''''": "bash -c ''''",
    }


def fastest_ms(command: str, repeat: int) -> tuple[float, str]:
    best, rule = float("inf"), ""
    for _ in range(repeat):
        start = time.perf_counter()
        risk = classify(command)
        best = min(best, (time.perf_counter() - start) * 1000)
        rule = f"{risk.cls.value} {risk.rule}"
    return best, rule


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per input; the fastest is kept")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()
    results = {}
    for name, command in inputs().items():
        ms, verdict = fastest_ms(command, args.repeat)
        results[name] = {"bytes": len(command.encode()), "ms": round(ms, 2), "verdict": verdict}
    baseline = results["ordinary: nvidia-smi | grep | head"]["ms"]
    worst = max(results.values(), key=lambda r: r["ms"])
    for result in results.values():
        result["ratio"] = round(result["ms"] / baseline, 1)
    if args.json:
        print(json.dumps({"results": results, "worst_ms": worst["ms"], "bound_ms": BOUND_MS}, indent=1))
    else:
        print(f"{'input':38} {'bytes':>9} {'ms':>8} {'x ordinary':>11}  verdict")
        for name, result in results.items():
            print(f"{name:38} {result['bytes']:>9} {result['ms']:>8.2f} {result['ratio']:>11}  {result['verdict']}")
        print(f"worst: {worst['ms']:.1f} ms (bound {BOUND_MS:.0f} ms)")
    return 0 if worst["ms"] <= BOUND_MS else 1


if __name__ == "__main__":
    sys.exit(main())
