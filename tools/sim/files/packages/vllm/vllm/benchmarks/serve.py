"""vllm bench serve: the arguments and the result block of the real one, then the lines that say what is
simulated (the server inside this process, the time)."""

import argparse
import random

import torch


def _start(model=None):
    """The vLLM server: torch on CUDA, flashinfer JIT against CUDA_HOME, the weights loaded; same failures as for
    real."""
    torch.cuda._lazy_init()
    import flashinfer

    flashinfer.jit.prepare_toolkit()
    root, simhost = torch._sim_host.host()
    from simcommands import serving

    try:
        return root, simhost.perf, serving.load(root, torch, model)
    except (torch.OutOfMemoryError, ValueError) as e:
        raise e.with_traceback(None) from None  # from the loader, as a real server's traceback ends


def _lengths(args, rng):
    n = args.num_prompts
    if args.dataset_name == "random":
        r = args.random_range_ratio
        lo_in, hi_in = int(args.random_input_len * (1 - r)), int(args.random_input_len * (1 + r))
        lo_out, hi_out = max(1, int(args.random_output_len * (1 - r))), int(args.random_output_len * (1 + r))
        return [rng.randint(lo_in, hi_in) for _ in range(n)], [rng.randint(lo_out, hi_out) for _ in range(n)]
    inputs = [max(4, min(1024, int(rng.lognormvariate(5.2, 0.8)))) for _ in range(n)]
    outputs = [max(4, min(1024, int(rng.lognormvariate(5.1, 0.7)))) for _ in range(n)]
    return inputs, outputs


def main(args):
    print(args)
    root, perf, tok_s = _start(getattr(args, "model", None))
    inputs, outputs = _lengths(args, random.Random(args.seed))
    print("Starting initial single prompt test run...")
    print("Initial test run completed. Starting main benchmark run...")
    print(f"Traffic request rate: {args.request_rate}")
    print(f"Burstiness factor: {args.burstiness} ({'Poisson process' if args.burstiness == 1.0 else 'Gamma distribution'})")
    print(f"Maximum request concurrency: {args.max_concurrency}")
    run = perf.simulate_serving(tok_s, inputs, outputs, args.max_concurrency, perf.max_running_requests(root),
                                perf.rng())

    def row(label, value, fmt="{:<10}"):
        print(("{:<40} " + fmt).format(label, value))

    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    row("Successful requests:", run.completed)
    row("Failed requests:", 0)
    if args.max_concurrency is not None:
        row("Maximum request concurrency:", args.max_concurrency)
    if args.request_rate != float("inf"):
        row("Request rate configured (RPS):", args.request_rate, "{:<10.2f}")
    row("Benchmark duration (s):", run.duration_s, "{:<10.2f}")
    row("Total input tokens:", run.total_input)
    row("Total generated tokens:", run.total_output)
    row("Request throughput (req/s):", run.request_throughput, "{:<10.2f}")
    row("Output token throughput (tok/s):", run.output_throughput, "{:<10.2f}")
    row("Peak output token throughput (tok/s):", run.output_tok_s * 1.06, "{:<10.2f}")
    row("Peak concurrent requests:", float(run.concurrency), "{:<10.2f}")
    row("Total token throughput (tok/s):", run.total_throughput, "{:<10.2f}")
    selected = [m.strip() for m in args.percentile_metrics.split(",")]
    percentiles = [float(p) for p in args.metric_percentiles.split(",")]
    series = {"ttft": ("TTFT", "Time to First Token", run.ttft_ms),
              "tpot": ("TPOT", "Time per Output Token (excl. 1st token)", run.tpot_ms),
              "itl": ("ITL", "Inter-token Latency", run.itl_ms),
              "e2el": ("E2EL", "End-to-end Latency", run.e2e_ms)}
    for key in ("ttft", "tpot", "itl", "e2el"):
        if key not in selected:
            continue
        name, header, values = series[key]
        print("{s:{c}^{n}}".format(s=header, n=50, c="-"))
        row(f"Mean {name} (ms):", perf.mean(values), "{:<10.2f}")
        row(f"Median {name} (ms):", perf.median(values), "{:<10.2f}")
        for p in percentiles:
            word = str(int(p)) if int(p) == p else str(p)
            row(f"P{word} {name} (ms):", perf.percentile(values, p), "{:<10.2f}")
    print("=" * 50)
    print("\n".join(perf.simulated_notes(root, "vLLM")))


def parser():
    p = argparse.ArgumentParser(prog="vllm bench serve", description="Benchmark the online serving throughput.")
    p.add_argument("--backend", type=str, default="openai")
    p.add_argument("--base-url", type=str, default=None)
    p.add_argument("--host", type=str, default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--endpoint", type=str, default="/v1/completions")
    p.add_argument("--model", type=str, default=None)
    p.add_argument("--tokenizer", type=str, default=None)
    p.add_argument("--label", type=str, default=None)
    p.add_argument("--dataset-name", type=str, default="random", choices=["random", "sharegpt", "hf", "custom"])
    p.add_argument("--dataset-path", type=str, default=None)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--random-input-len", "--input-len", dest="random_input_len", type=int, default=1024)
    p.add_argument("--random-output-len", "--output-len", dest="random_output_len", type=int, default=128)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--burstiness", type=float, default=1.0)
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--ignore-eos", action="store_true")
    p.add_argument("--save-result", action="store_true")
    p.add_argument("--result-dir", type=str, default=None)
    p.add_argument("--percentile-metrics", type=str, default="ttft,tpot,itl")
    p.add_argument("--metric-percentiles", type=str, default="99")
    p.add_argument("--num-warmups", type=int, default=0)
    return p
