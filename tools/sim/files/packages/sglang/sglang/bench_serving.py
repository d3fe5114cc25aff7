"""python -m sglang.bench_serving: the arguments and the result block of the real one, then the lines that
say what is simulated (the server inside this process, the time)."""

import argparse
import json
import random
import sys

import torch

from . import model_loader


def _lengths(args, rng):
    n = args.num_prompts
    if args.dataset_name.startswith("random"):
        lo_in = max(int(args.random_input_len * args.random_range_ratio), 1)
        lo_out = max(int(args.random_output_len * args.random_range_ratio), 1)
        inputs = [rng.randint(lo_in, args.random_input_len) for _ in range(n)]
        outputs = [rng.randint(lo_out, args.random_output_len) for _ in range(n)]
    else:  # conversation-like lengths for sharegpt and the rest
        inputs = [max(4, min(1024, int(rng.lognormvariate(5.2, 0.8)))) for _ in range(n)]
        outputs = ([args.sharegpt_output_len] * n if args.sharegpt_output_len
                   else [max(4, min(1024, int(rng.lognormvariate(5.1, 0.7)))) for _ in range(n)])
        print(f"#Input tokens: {sum(inputs)}")
        print(f"#Output tokens: {sum(outputs)}")
    if args.dataset_name.startswith("random"):
        print(f"#Input tokens: {sum(inputs)}")
        print(f"#Output tokens: {sum(outputs)}")
    return inputs, outputs


def run_benchmark(args):
    root, tok_s = model_loader.start(args.model)
    simhost = torch._sim_host.host()[1]
    perf = simhost.perf
    if args.model is None:
        args.model = perf.served_model(root)
    print(f"benchmark_args={args}")
    print(f"{args}\n")
    inputs, outputs = _lengths(args, random.Random(args.seed))
    print(f"Starting warmup with {args.warmup_requests} sequences...")
    print(f"Warmup completed with {args.warmup_requests} sequences. Starting main benchmark run...")
    run = perf.simulate_serving(tok_s, inputs, outputs, args.max_concurrency, perf.max_running_requests(root),
                                perf.rng())
    retokenized = run.total_output - run.completed // 7
    peak = run.output_tok_s * 1.06
    rate = args.request_rate

    def row(label, value, fmt="{:<10}"):
        print(("{:<40} " + fmt).format(label, value))

    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    row("Backend:", args.backend)
    row("Traffic request rate:", rate)
    row("Max request concurrency:", args.max_concurrency if args.max_concurrency else "not set")
    row("Successful requests:", run.completed)
    row("Benchmark duration (s):", run.duration_s, "{:<10.2f}")
    row("Total input tokens:", run.total_input)
    row("Total input text tokens:", run.total_input)
    row("Total input vision tokens:", 0)
    row("Total generated tokens:", run.total_output)
    row("Total generated tokens (retokenized):", retokenized)
    row("Request throughput (req/s):", run.request_throughput, "{:<10.2f}")
    row("Input token throughput (tok/s):", run.input_throughput, "{:<10.2f}")
    row("Output token throughput (tok/s):", run.output_throughput, "{:<10.2f}")
    row("Peak output token throughput (tok/s):", peak, "{:<10.2f}")
    row("Peak concurrent requests:", run.concurrency)
    row("Total token throughput (tok/s):", run.total_throughput, "{:<10.2f}")
    row("Concurrency:", run.mean_concurrency, "{:<10.2f}")
    print("{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"))
    row("Mean E2E Latency (ms):", perf.mean(run.e2e_ms), "{:<10.2f}")
    row("Median E2E Latency (ms):", perf.median(run.e2e_ms), "{:<10.2f}")
    print("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"))
    row("Mean TTFT (ms):", perf.mean(run.ttft_ms), "{:<10.2f}")
    row("Median TTFT (ms):", perf.median(run.ttft_ms), "{:<10.2f}")
    row("P99 TTFT (ms):", perf.percentile(run.ttft_ms, 99), "{:<10.2f}")
    print("{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"))
    row("Mean TPOT (ms):", perf.mean(run.tpot_ms), "{:<10.2f}")
    row("Median TPOT (ms):", perf.median(run.tpot_ms), "{:<10.2f}")
    row("P99 TPOT (ms):", perf.percentile(run.tpot_ms, 99), "{:<10.2f}")
    print("{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"))
    row("Mean ITL (ms):", perf.mean(run.itl_ms), "{:<10.2f}")
    row("Median ITL (ms):", perf.median(run.itl_ms), "{:<10.2f}")
    row("P95 ITL (ms):", perf.percentile(run.itl_ms, 95), "{:<10.2f}")
    row("P99 ITL (ms):", perf.percentile(run.itl_ms, 99), "{:<10.2f}")
    row("Max ITL (ms):", max(run.itl_ms), "{:<10.2f}")
    print("=" * 50)
    # The host's own server (launch_server on port 30000, which check_outputs and curl reach) is another process:
    # the measured one is brought up here, with the stack as installed now.
    print("\n".join(note.replace("so no server process runs on this host before or after it",
                                  "not the host's own server on port 30000 (another process)")
                     for note in perf.simulated_notes(root, "SGLang")))
    # The real tool appends a JSONL line to a file named after the run in the working directory;
    # here only when asked, so a benchmark never writes outside the machine it measures.
    if args.output_file:
        with open(args.output_file, "a") as f:
            f.write(json.dumps({
                "backend": args.backend, "dataset_name": args.dataset_name, "request_rate": rate,
                "max_concurrency": args.max_concurrency, "duration": run.duration_s, "completed": run.completed,
                "total_input_tokens": run.total_input, "total_output_tokens": run.total_output,
                "request_throughput": run.request_throughput, "input_throughput": run.input_throughput,
                "output_throughput": run.output_throughput, "total_throughput": run.total_throughput,
                "mean_ttft_ms": perf.mean(run.ttft_ms), "median_ttft_ms": perf.median(run.ttft_ms),
                "mean_tpot_ms": perf.mean(run.tpot_ms), "mean_itl_ms": perf.mean(run.itl_ms),
                "mean_e2e_latency_ms": perf.mean(run.e2e_ms), "concurrency": run.mean_concurrency,
            }) + "\n")


def parser():
    p = argparse.ArgumentParser(description="Benchmark the online serving throughput.")
    p.add_argument("--backend", type=str, default="sglang",
                   choices=["sglang", "sglang-native", "sglang-oai", "sglang-oai-chat", "vllm", "vllm-chat",
                            "lmdeploy", "lmdeploy-chat", "trt", "gserver", "truss"])
    p.add_argument("--base-url", type=str, default=None)
    p.add_argument("--host", type=str, default="0.0.0.0")
    p.add_argument("--port", type=int)
    p.add_argument("--dataset-name", type=str, default="sharegpt",
                   choices=["sharegpt", "random", "random-ids", "generated-shared-prefix", "mmmu", "image", "mooncake"])
    p.add_argument("--dataset-path", type=str, default="")
    p.add_argument("--model", type=str)
    p.add_argument("--served-model-name", type=str)
    p.add_argument("--tokenizer", type=str)
    p.add_argument("--num-prompts", type=int, default=1000)
    p.add_argument("--sharegpt-output-len", type=int, default=None)
    p.add_argument("--sharegpt-context-len", type=int, default=None)
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=1024)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--request-rate", type=float, default=float("inf"))
    p.add_argument("--max-concurrency", type=int, default=None)
    p.add_argument("--output-file", type=str)
    p.add_argument("--output-details", action="store_true")
    p.add_argument("--disable-tqdm", action="store_true")
    p.add_argument("--disable-stream", action="store_true")
    p.add_argument("--return-logprob", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--disable-ignore-eos", action="store_true")
    p.add_argument("--extra-request-body", type=str)
    p.add_argument("--apply-chat-template", action="store_true")
    p.add_argument("--profile", action="store_true")
    p.add_argument("--lora-name", type=str, nargs="*", default=None)
    p.add_argument("--prompt-suffix", type=str, default="")
    p.add_argument("--pd-separated", action="store_true")
    p.add_argument("--flush-cache", action="store_true")
    p.add_argument("--warmup-requests", type=int, default=1)
    p.add_argument("--tokenize-prompt", action="store_true")
    p.add_argument("--gsp-num-groups", type=int, default=64)
    p.add_argument("--gsp-prompts-per-group", type=int, default=16)
    p.add_argument("--gsp-system-prompt-len", type=int, default=2048)
    p.add_argument("--gsp-question-len", type=int, default=128)
    p.add_argument("--gsp-output-len", type=int, default=256)
    p.add_argument("--tag", type=str, default=None)
    return p


if __name__ == "__main__":
    run_benchmark(parser().parse_args())
    sys.exit(0)
