"""Loop overhead, replay speed and memory, parallel batch wall time.

    python benchmarks/loop_overhead.py [--turns 5000] [--json]

Targets: under 1 ms of our own code per turn (transcript write included); a 5,000-turn
transcript replays in under 5 s with memory that does not grow beyond the message list;
8 one-second calls of one batch finish within 1.15 s.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pydantic import BaseModel  # noqa: E402

from agent.budget import Budget  # noqa: E402
from agent.loop import Session, run_session  # noqa: E402
from agent.model import ScriptedModel, turn  # noqa: E402
from agent.record.replay import replay  # noqa: E402
from agent.record.transcript import TranscriptWriter  # noqa: E402
from agent.safety.policy import SafetyPolicy  # noqa: E402
from tools.base import Action, Registry, Risk, RiskClass, StrictArgs, Tool  # noqa: E402

READ_ONLY = Risk(cls=RiskClass.READ_ONLY, rule="bench", reason="no-op")


class NoOp(Tool):
    """Does nothing."""

    name = "noop"

    class Args(StrictArgs):
        host: str
        n: int

    class Result(BaseModel):
        n: int

    def action(self, args):
        return Action(host=args.host, subject=f"noop {args.n}", risk=READ_ONLY)

    def run(self, ctx, args):
        return self.Result(n=args.n)


class SleepOne(NoOp):
    """Sleeps one second."""

    name = "sleep1"

    def run(self, ctx, args):
        time.sleep(1.0)
        return self.Result(n=args.n)


REGISTRY = Registry([NoOp(), SleepOne()])


def session(path: Path, script, turns: int) -> Session:
    return Session(model=ScriptedModel(script), registry=REGISTRY, gate=SafetyPolicy(scope={"h"}),
                   transcript=TranscriptWriter(path), system_prompt="bench", budget=Budget(turns=turns + 2))


def loop_overhead(tmp: Path, turns: int) -> dict:
    script = [turn(calls=[("noop", {"host": "h", "n": i})]) for i in range(turns)] + [turn("done")]
    path = tmp / "loop.jsonl"
    s = session(path, script, turns)
    t0 = time.perf_counter()
    out = run_session(s, "go")
    elapsed = time.perf_counter() - t0
    assert out.status == "done", out
    return {"turns": turns, "seconds": round(elapsed, 3), "ms_per_turn": round(elapsed / (turns + 1) * 1000, 4),
            "transcript_bytes": path.stat().st_size, "path": path}


def replay_cost(path: Path, turns: int) -> dict:
    t0 = time.perf_counter()
    report = replay(path, REGISTRY)
    elapsed = time.perf_counter() - t0
    assert report.ok, report.message
    # Memory in a second run: tracemalloc slows Python down several times, so it is not timed.
    tracemalloc.start()
    replay(path, REGISTRY)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {"turns": turns, "seconds": round(elapsed, 3), "peak_mib": round(peak / 2**20, 2)}


def message_list_mib(turns: int) -> float:
    """Memory of the message list alone for a session of this length (what replay must keep)."""
    msgs = []
    tracemalloc.start()
    for i in range(turns):
        t = turn(calls=[("noop", {"host": "h", "n": i})])
        msgs.append(t.to_message())
        msgs.append({"role": "tool", "tool_call_id": "call_0", "content": json.dumps({"n": i})})
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return round(peak / 2**20, 2)


def parallel_batch(tmp: Path) -> dict:
    script = [turn(calls=[("sleep1", {"host": "h", "n": i}) for i in range(8)]), turn("done")]
    s = session(tmp / "batch.jsonl", script, 2)
    t0 = time.perf_counter()
    run_session(s, "go")
    wall = time.perf_counter() - t0
    return {"calls": 8, "slowest_call_s": 1.0, "wall_s": round(wall, 3), "ratio_to_slowest": round(wall / 1.0, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--turns", type=int, default=5000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        loop = loop_overhead(tmp, a.turns)
        small = loop_overhead(tmp / "small", a.turns // 5)
        rep = replay_cost(loop.pop("path"), a.turns)
        rep_small = replay_cost(small.pop("path"), a.turns // 5)
        msgs = message_list_mib(a.turns)
        msgs_small = message_list_mib(a.turns // 5)
        batch = parallel_batch(tmp)
    figures = {
        "loop": loop,
        "replay": {**rep, "message_list_mib": msgs,
                   "peak_beyond_messages_mib": round(rep["peak_mib"] - msgs, 2),
                   "small": {**rep_small, "message_list_mib": msgs_small,
                             "peak_beyond_messages_mib": round(rep_small["peak_mib"] - msgs_small, 2)}},
        "parallel_batch": batch,
        "targets": {
            "loop_ms_per_turn_below_1": loop["ms_per_turn"] < 1.0,
            "replay_5000_turns_below_5s": rep["seconds"] < 5.0,
            "parallel_batch_within_1.15s": batch["wall_s"] <= 1.15,
        },
    }
    if a.json:
        print(json.dumps(figures))
    else:
        print(f"loop:   {loop['turns']} turns in {loop['seconds']} s = {loop['ms_per_turn']} ms/turn "
              f"(transcript {loop['transcript_bytes'] / 2**20:.1f} MiB)")
        print(f"replay: {rep['turns']} turns in {rep['seconds']} s, peak {rep['peak_mib']} MiB, of which the "
              f"message list alone {msgs} MiB; at {rep_small['turns']} turns: peak {rep_small['peak_mib']} MiB, "
              f"messages {msgs_small} MiB")
        print(f"batch:  8 x 1 s calls in {batch['wall_s']} s (ratio to the slowest call {batch['ratio_to_slowest']})")
        print("targets:", ", ".join(f"{k}={'met' if v else 'MISSED'}" for k, v in figures["targets"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
