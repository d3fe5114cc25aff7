"""python -m sglang.bench_one_batch: a static batch, prefill then decode, in the real one's lines, then the
line that says its latencies are simulated time."""

import argparse
import statistics

import torch

from . import model_loader


def _one(bs, input_len, output_len, tok_s, rng, perf):
    prefill = bs * input_len / perf.PREFILL_TOK_S * rng.uniform(0.97, 1.03)
    print(f"Prefill. latency: {prefill:6.5f} s, throughput: {bs * input_len / prefill:9.2f} token/s")
    per_step = 1.0 / (perf.aggregate_tok_s(tok_s, bs, 1 << 30) / bs)
    latencies = []
    for i in range(output_len - 1):
        latency = per_step * rng.uniform(0.985, 1.015)
        latencies.append(latency)
        if i < 5:
            print(f"Decode {i}. Batch size: {bs}, latency: {latency:6.5f} s, throughput: {bs / latency:9.2f} token/s")
    total = prefill + sum(latencies)
    if output_len > 1:
        med = statistics.median(latencies)
        print(f"Decode.  median latency: {med:6.5f} s, median throughput: {bs / med:9.2f} token/s")
    print(f"Total. latency: {total:6.3f} s, throughput: {(input_len + output_len) * bs / total:9.2f} token/s")


def main(args):
    root, tok_s = model_loader.start(args.model_path, args.tp_size, args.quantization)
    perf = torch._sim_host.host()[1].perf
    rng = perf.rng()
    for bs in args.batch_size:
        for input_len in args.input_len:
            for output_len in args.output_len:
                print("Warmup ...")
                _one(bs, input_len, min(output_len, 16), tok_s, rng, perf)
                print("Benchmark ...")
                _one(bs, input_len, output_len, tok_s, rng, perf)
    print("\n".join(perf.simulated_notes(root, None)))


def parser():
    p = argparse.ArgumentParser()
    p.add_argument("--model-path", type=str, required=True)
    p.add_argument("--run-name", type=str, default="before")
    p.add_argument("--batch-size", type=int, nargs="+", default=(1,))
    p.add_argument("--input-len", type=int, nargs="+", default=(1024,))
    p.add_argument("--output-len", type=int, nargs="+", default=(16,))
    p.add_argument("--result-filename", type=str, default="result.jsonl")
    p.add_argument("--correctness-test", action="store_true")
    p.add_argument("--cut-len", type=int, default=4)
    p.add_argument("--profile", action="store_true")
    # the server arguments that decide what loads where; the others (--trust-remote-code, ...) change nothing here
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=None)
    p.add_argument("--quantization", type=str, default=None)
    return p


if __name__ == "__main__":
    # Other server arguments (--trust-remote-code, --mem-fraction-static, ...) are accepted and have no effect here.
    main(parser().parse_known_args()[0])
