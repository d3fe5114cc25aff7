"""How fast the simulated server decodes, given what is installed.

The figures are the story's: single-stream output throughput of 89.5 tok/s with torch built for
CUDA 12.8 on the 12.8 toolkit, 96.1 tok/s with torch for CUDA 13.0 on a 13.x toolkit. Each run
adds noise of a configurable standard deviation (default 0.25 tok/s, clipped at two deviations),
so a single before/after pair can mislead the way a real one can. Mismatched stacks never get
here: the fake packages raise the real errors first (torch, sgl_kernel, the JIT's CUDA check).

Nothing sleeps: a benchmark whose figures say 12 minutes returns in a fraction of a second. So
every benchmark ends with lines that say its figures are simulated time on the sim's GPUs, how
much real time its own process took (not the command around it, which a caller timing the whole
command measures), and, for the serving benchmarks, that the server they measure was
brought up inside the benchmark process (no server process runs on the simulated host).
"""

from __future__ import annotations

import os
import random
import statistics
import time
from dataclasses import dataclass

from . import state as host_state

# Single-stream decode throughput (tok/s) by the CUDA major version torch was built for.
DECODE_TOK_S = {"12": 89.5, "13": 96.1}
# Tokens per second the server prefills at, for time to first token.
PREFILL_TOK_S = 2_150.0


def rng() -> random.Random:
    # Fresh entropy every run: a benchmark's noise is not reproducible, even with the same seed.
    return random.Random(os.urandom(16))


def decode_tok_s(root, torch_cuda: str, r: random.Random | None = None) -> float:
    st = host_state.load(root)
    sd = float(st.get("bench", {}).get("noise_sd", 0.25))
    base = DECODE_TOK_S.get(torch_cuda.split(".")[0], DECODE_TOK_S["12"])
    noise = (r or rng()).gauss(0.0, sd) if sd > 0 else 0.0
    return base + max(-2 * sd, min(2 * sd, noise))


def max_running_requests(root) -> int:
    return int(host_state.load(root).get("bench", {}).get("max_running_requests", 48))


def served_model(root) -> str:
    return host_state.load(root).get("bench", {}).get("model", "default")


def aggregate_tok_s(single_stream: float, concurrency: int, max_running: int) -> float:
    """Batching helps sub-linearly: the all-reduces over PCIe grow with the batch."""
    c = max(1, min(concurrency, max_running))
    return single_stream * c ** 0.8


@dataclass
class ServingRun:
    completed: int
    total_input: int
    total_output: int
    duration_s: float
    concurrency: int
    output_tok_s: float
    ttft_ms: list[float]
    tpot_ms: list[float]
    itl_ms: list[float]
    e2e_ms: list[float]

    @property
    def request_throughput(self) -> float:
        return self.completed / self.duration_s

    @property
    def input_throughput(self) -> float:
        return self.total_input / self.duration_s

    @property
    def output_throughput(self) -> float:
        return self.total_output / self.duration_s

    @property
    def total_throughput(self) -> float:
        return (self.total_input + self.total_output) / self.duration_s

    @property
    def mean_concurrency(self) -> float:
        return sum(self.e2e_ms) / 1000.0 / self.duration_s


def simulate_serving(single_stream_tok_s: float, input_lens: list[int], output_lens: list[int],
                     max_concurrency: int | None, max_running: int, r: random.Random) -> ServingRun:
    """Latencies consistent with an aggregate output throughput; nothing sleeps."""
    n = len(input_lens)
    concurrency = max(1, min(max_concurrency or n, n, max_running))
    aggregate = aggregate_tok_s(single_stream_tok_s, concurrency, max_running)
    total_out = sum(output_lens)
    # The duration is what the throughput says; prefill takes its share of it, decode the rest,
    # so the latencies add up to the duration the way they do in a real run.
    duration = total_out / aggregate
    busy = duration * concurrency
    firsts = [inp / PREFILL_TOK_S * (1.0 + 0.15 * (concurrency - 1) ** 0.5) * r.uniform(0.95, 1.05)
              for inp in input_lens]
    prefill_share = min(sum(firsts), 0.5 * busy)
    firsts = [f * prefill_share / sum(firsts) for f in firsts] if sum(firsts) else firsts
    decode_steps = sum(max(out - 1, 0) for out in output_lens) or 1
    step_mean = (busy - prefill_share) / decode_steps
    ttft, tpot, itl, e2e = [], [], [], []
    for first, out in zip(firsts, output_lens):
        step = step_mean * r.uniform(0.985, 1.015)
        ttft.append(first * 1000)
        tpot.append(step * 1000)
        itl.extend(step * r.uniform(0.9, 1.1) * 1000 for _ in range(min(out - 1, 16)))
        e2e.append((first + step * max(out - 1, 0)) * 1000)
    return ServingRun(n, sum(input_lens), total_out, duration, concurrency, aggregate, ttft, tpot, itl or [0.0], e2e)


def percentile(values: list[float], p: float) -> float:
    data = sorted(values)
    if not data:
        return 0.0
    k = (len(data) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(data) - 1)
    return data[lo] + (data[hi] - data[lo]) * (k - lo)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


# --------------------------------------------------------------------------- what is simulated

NOTE = "simulated host: "


def simulated_notes(root, server: str | None) -> list[str]:
    """The lines a benchmark ends with: which figures are simulated, and where its server ran.

    server: the server a serving benchmark measures ("SGLang", "vLLM"); None for a benchmark that
    runs the model in its own process anyway, as bench_one_batch does on a real host too.
    """
    st = host_state.load(root)
    gpus = st.get("gpus", [])
    on = f"{len(gpus)}x {gpus[0]['name']}" if gpus else "the simulated GPUs"
    lines = []
    if server:
        lines.append(f"{NOTE}the {server} server was brought up inside this benchmark process for the run "
                     f"(--host, --port and --base-url are not used), so no server process runs on this host "
                     f"before or after it")
    # Said as what it is: a tool that times the whole command (sandbox, shell, interpreter) sees more.
    lines.append(f"{NOTE}durations, throughputs and latencies above are simulated time on {on}; the benchmark's "
                 f"own process took {real_seconds():.2f} s of real time to this line; starting the command that "
                 f"ran it is not included")
    return lines


def real_seconds() -> float:
    """Real time since this process started (the interpreter's start-up included)."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return time.process_time()
