"""run_bench: parsers against real output samples, and the tool end to end on the local host."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.safety.policy import classify_action
from tools.base import ArgumentError, ArtifactStore, RiskClass, ToolContext, ToolError
from tools.hosts import HostError, HostSpec, LocalHost
from tools.run_bench import (
    STORE_KEY,
    ParseError,
    RunBench,
    compare,
    higher_is_better,
    parse_json_key,
    parse_one_batch_result,
    parse_regex,
    parse_serving_result,
    read_metric,
    serving_metric_name,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "bench"


def sample(name: str) -> str:
    return (DATA / name).read_text()


# --------------------------------------------------------------------------- parsers on real samples


def values_of(metrics) -> dict[str, float]:
    return {name: m.value for name, m in metrics.items()}


def test_sglang_bench_serving_sample():
    metrics = parse_serving_result(sample("sglang_bench_serving.txt"))
    v = values_of(metrics)
    assert v["output_throughput"] == 3264.42
    assert v["total_throughput"] == 9793.26
    assert v["input_throughput"] == 6528.84
    assert v["request_throughput"] == 6.38
    assert v["successful_requests"] == 500
    assert v["benchmark_duration_s"] == 78.42
    assert v["total_generated_tokens_retokenized"] == 255873
    assert v["concurrency"] == 63.71
    assert v["mean_e2e_latency_ms"] == 9992.18
    assert v["median_e2e_latency_ms"] == 9987.65
    assert v["mean_ttft_ms"] == 312.44
    assert v["p99_ttft_ms"] == 1187.33
    assert v["median_itl_ms"] == 17.82
    assert v["p95_itl_ms"] == 24.61
    assert v["max_itl_ms"] == 1502.88
    assert metrics["output_throughput"].unit == "tok/s"
    assert metrics["request_throughput"].unit == "req/s"
    assert metrics["mean_ttft_ms"].unit == "ms"
    # Settings that are not numbers are not metrics.
    assert "backend" not in v and "traffic_request_rate" not in v


def test_older_sglang_bench_serving_sample_has_total_throughput_and_tpot():
    v = values_of(parse_serving_result(sample("sglang_bench_serving_2024.txt")))
    assert v["total_throughput"] == 3791.46  # printed as "Total throughput (tok/s):" then
    assert v["output_throughput"] == 1491.16
    assert v["mean_tpot_ms"] == 21.44
    assert v["p99_itl_ms"] == 67.11


def test_vllm_bench_serve_sample():
    metrics = parse_serving_result(sample("vllm_bench_serve.txt"))
    v = values_of(metrics)
    assert v["output_throughput"] == 989.43
    assert v["total_throughput"] == 8904.90  # "Total Token throughput", capital T
    assert v["peak_output_throughput"] == 1136.00
    assert v["request_throughput"] == 7.73
    assert v["failed_requests"] == 0
    assert v["maximum_request_concurrency"] == 16
    assert v["mean_ttft_ms"] == 146.23
    assert v["median_tpot_ms"] == 14.81
    assert v["p99_itl_ms"] == 41.34
    assert metrics["total_throughput"].unit == "tok/s"


def test_lines_before_the_serving_block_are_not_read():
    text = sample("vllm_bench_serve.txt")
    # The start-up lines look like results ("Burstiness factor: 1.0 (...)") but are outside the block.
    assert "Burstiness factor: 1.0" in text
    v = values_of(parse_serving_result(text))
    assert "burstiness_factor" not in v and "traffic_request_rate" not in v
    # A block whose numbers differ from look-alike lines before it: the block wins.
    look_alike = "Output token throughput (tok/s):         1.00      \n"
    assert values_of(parse_serving_result(look_alike + text))["output_throughput"] == 989.43
    # The block ends at its closing "=====" line; what follows is not part of it either.
    assert values_of(parse_serving_result(text + look_alike))["output_throughput"] == 989.43


def test_sglang_bench_one_batch_sample_reads_the_benchmark_not_the_warmup():
    metrics = parse_one_batch_result(sample("sglang_bench_one_batch.txt"))
    v = values_of(metrics)
    assert v == {
        "prefill_latency_s": 0.03497,
        "prefill_throughput": 14641.12,
        "decode_median_latency_s": 0.01065,
        "decode_median_throughput": 93.90,
        "total_latency_s": 0.195,
        "total_throughput": 2705.47,
    }
    assert metrics["decode_median_throughput"].unit == "token/s"
    assert metrics["prefill_latency_s"].unit == "s"


def test_bench_one_batch_without_benchmark_section_is_an_error():
    warmup_only = sample("sglang_bench_one_batch.txt").split("Benchmark ...")[0]
    with pytest.raises(ParseError, match="no 'Benchmark ...' line"):
        parse_one_batch_result(warmup_only)


def test_bench_one_batch_sweep_is_ambiguous():
    text = sample("sglang_bench_one_batch.txt")
    measured = text.split("Benchmark ...")[1]
    with pytest.raises(ParseError, match="2 configurations"):
        parse_one_batch_result(text + measured)


def test_serving_parser_without_block_or_with_two_blocks():
    with pytest.raises(ParseError, match="no '=+ Serving Benchmark Result"):
        parse_serving_result("Traceback (most recent call last):\nConnectionRefusedError: [Errno 111]\n")
    text = sample("sglang_bench_serving.txt")
    with pytest.raises(ParseError, match="2 'Serving Benchmark Result' blocks"):
        parse_serving_result(text + text)


@pytest.mark.parametrize("label, name, unit", [
    ("Output token throughput (tok/s)", "output_throughput", "tok/s"),
    ("Total Token throughput (tok/s)", "total_throughput", "tok/s"),
    ("Total throughput (tok/s)", "total_throughput", "tok/s"),
    ("Request rate configured (RPS)", "request_rate_configured", "req/s"),
    ("Mean E2E Latency (ms)", "mean_e2e_latency_ms", "ms"),
    ("P99.9 TTFT (ms)", "p99_9_ttft_ms", "ms"),
    ("Benchmark duration (s)", "benchmark_duration_s", "s"),
    ("Total generated tokens (retokenized)", "total_generated_tokens_retokenized", None),
])
def test_serving_metric_names(label, name, unit):
    assert serving_metric_name(label) == (name, unit)


def test_json_lines_sample_takes_the_newest_record():
    text = sample("sglang_bench_one_batch_result.jsonl")
    assert parse_json_key(text, "median_decode_throughput") == 93.8939
    assert parse_json_key(text, "prefill_latency") == 0.03497012


def test_json_key_nested_missing_and_not_a_number():
    text = 'loading...\n{"metrics": {"tok_s": 88.5}, "model": "llama"}\nINFO done\n'
    assert parse_json_key(text, "metrics.tok_s") == 88.5
    with pytest.raises(ParseError, match="no JSON object in the output has the key 'tok_per_s'"):
        parse_json_key(text, "tok_per_s")
    with pytest.raises(ParseError, match="not a number"):
        parse_json_key(text, "model")
    # One pretty-printed document instead of JSON lines.
    assert parse_json_key(json.dumps({"a": {"b": 3}}, indent=2), "a.b") == 3.0
    with pytest.raises(ParseError, match="no JSON object"):
        parse_json_key("plain text\n", "a")


def test_regex_takes_the_last_match():
    text = "step 1: 10.5 tok/s\nstep 2: 11.25 tok/s\nfinal: 12.75 tok/s\n"
    assert parse_regex(text, r"(\d+\.\d+) tok/s") == 12.75
    assert parse_regex(text, r"^final: (\S+)") == 12.75
    with pytest.raises(ParseError, match="matches nothing"):
        parse_regex(text, r"req/s: (\d+)")
    with pytest.raises(ParseError, match="not a number"):
        parse_regex(text, r"^(final):")


def test_read_metric_refuses_values_that_are_not_finite():
    with pytest.raises(ParseError, match="not a finite number"):
        read_metric("json:tok_s", "tok_s", '{"tok_s": Infinity}')
    with pytest.raises(ParseError, match="not a finite number"):
        read_metric(r"regex:rate: (\S+)", "value", "rate: nan")


def test_read_metric_names_the_metrics_an_output_has():
    with pytest.raises(ParseError, match=r"no metric 'p95_itl_ms'.*mean_ttft_ms"):
        read_metric("vllm_bench_serve", "p95_itl_ms", sample("vllm_bench_serve.txt"))


# --------------------------------------------------------------------------- comparison rule


def test_direction_of_metrics():
    assert higher_is_better("output_throughput", "tok/s") is True
    assert higher_is_better("decode_median_throughput", "token/s") is True
    assert higher_is_better("mean_ttft_ms", "ms") is False
    assert higher_is_better("decode_median_latency_s", "s") is False
    assert higher_is_better("value", None) is None


def test_compare_latency_lower_is_faster():
    c = compare("after", [90.0, 91.0, 92.0], "before", {"values": [100.0, 101.0, 99.0]}, better_when_higher=False)
    assert c.significant and c.change_percent == -9.0
    assert c.verdict == "after is 9.0% faster than before (ranges do not overlap)"


def test_compare_touching_ranges_are_not_significant():
    c = compare("after", [10.0, 11.0], "before", {"values": [9.0, 10.0]}, better_when_higher=True)
    assert not c.significant and "within the noise" in c.verdict


def test_compare_one_run_is_never_significant():
    c = compare("after", [110.0], "before", {"values": [100.0]}, better_when_higher=True)
    assert not c.significant and c.ratio == 1.1
    assert "one run" in c.verdict


def test_compare_unknown_direction_says_higher_or_lower():
    c = compare("b", [5.0, 5.1], "a", {"values": [4.0, 4.1]}, better_when_higher=None)
    assert c.verdict.startswith("b is 24.7% higher than a")


# --------------------------------------------------------------------------- args and action


def test_args_validation():
    base = {"host": "local", "command": "true", "label": "before"}
    RunBench.parse_args({**base, "parser": r"regex:throughput: (\d+)"})
    for parser, why in [("regex:(\\d+) (\\d+)", "exactly one capture group"),
                        ("regex:\\d+", "exactly one capture group"),
                        ("regex:(", "does not compile"),
                        ("json:", "needs a key"),
                        ("sglang", "unknown parser")]:
        with pytest.raises(ArgumentError, match=why):
            RunBench.parse_args({**base, "parser": parser})
    for runs in (0, 21):
        with pytest.raises(ArgumentError, match="runs"):
            RunBench.parse_args({**base, "parser": "vllm_bench_serve", "runs": runs})
    with pytest.raises(ArgumentError, match="warmup"):
        RunBench.parse_args({**base, "parser": "vllm_bench_serve", "warmup": 6})
    with pytest.raises(ArgumentError, match="not valid"):
        RunBench.parse_args({**base, "parser": "vllm_bench_serve", "env": {"A-B": "1"}})
    # Strict schema: nulls take the defaults.
    args = RunBench.parse_args({**base, "parser": "vllm_bench_serve", "runs": None, "metric": None})
    assert args.runs == 3 and args.warmup == 1 and args.timeout == 1800


def test_schema_documents_the_metric_names():
    schema = RunBench.schema()
    assert schema["function"]["strict"] is True
    metric_doc = schema["function"]["parameters"]["properties"]["metric"]["description"]
    for name in ("output_throughput", "mean_ttft_ms", "median_itl_ms", "decode_median_throughput",
                 "prefill_throughput"):
        assert name in metric_doc


def test_action_is_a_workload_with_env_and_cwd_in_the_subject():
    args = RunBench.parse_args({"host": "gpu1", "command": "python -m sglang.bench_serving --backend sglang",
                                "parser": "sglang_bench_serving", "label": "before",
                                "env": {"CUDA_VISIBLE_DEVICES": "0,1"}, "cwd": "/opt/my bench"})
    action = RunBench().action(args)
    assert action.host == "gpu1"
    assert action.subject == ("cd '/opt/my bench' && CUDA_VISIBLE_DEVICES=0,1 "
                              "python -m sglang.bench_serving --backend sglang")
    assert action.risk is None  # the gate classifies it as a workload
    assert action.workload is not None
    assert action.workload.command == "python -m sglang.bench_serving --backend sglang"


# --------------------------------------------------------------------------- end to end on the local host

# Prints what `python -m sglang.bench_serving` prints, with the output throughput taken
# from a list, one value per run (warmups first), so tests control the noise.
FAKE_BENCH = r'''
import json, sys
values = json.load(open(sys.argv[1]))
counter = sys.argv[2]
try:
    n = int(open(counter).read())
except FileNotFoundError:
    n = 0
open(counter, "w").write(str(n + 1))
v = values[n]
to = sys.stderr if len(sys.argv) > 3 and sys.argv[3] == "stderr" else sys.stdout
print("#Input tokens: 102400")
print("#Output tokens: 51200")
print("Starting warmup with 1 sequences...")
print("torch/cuda/__init__.py:61: FutureWarning: pynvml is deprecated", file=sys.stderr)
print("100%|" + "\u2588" * 10 + "| 100/100 [00:01<00:00, 98.12it/s]", file=sys.stderr)
print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="), file=to)
print("{:<40} {:<10}".format("Backend:", "sglang"), file=to)
print("{:<40} {:<10}".format("Traffic request rate:", float("inf")), file=to)
print("{:<40} {:<10}".format("Successful requests:", 100), file=to)
print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", v), file=to)
print("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", v * 3), file=to)
print("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"), file=to)
print("{:<40} {:<10.2f}".format("Mean TTFT (ms):", 10000 / v), file=to)
print("=" * 50, file=to)
'''


class OneHost:
    """The hosts of a test: one local host."""

    def __init__(self):
        self.host = LocalHost(HostSpec(name="local", transport="local"))

    def get(self, name: str):
        if name != "local":
            raise HostError(f"host {name!r} is not in this session's hosts (local)")
        return self.host


class Bench:
    """A fake benchmark in tmp_path and a context to run the tool with."""

    def __init__(self, tmp_path: Path):
        self.dir = tmp_path
        self.script = tmp_path / "fake_bench.py"
        self.script.write_text(FAKE_BENCH)
        self.store: dict = {}
        self.events: list[tuple[str, dict]] = []
        self.cancel = threading.Event()
        self.ctx = ToolContext(hosts=OneHost(), artifacts=ArtifactStore(tmp_path / "a"), call_id="call_1",
                               cancel=self.cancel, emit=lambda kind, data: self.events.append((kind, data)),
                               store=self.store)

    def command(self, name: str, values: list[float], stream: str = "stdout") -> str:
        (self.dir / f"{name}.json").write_text(json.dumps(values))
        return " ".join(shlex.quote(str(p)) for p in (sys.executable, self.script, self.dir / f"{name}.json",
                                                      self.dir / f"{name}.count", stream))

    def runs_started(self, name: str) -> int:
        counter = self.dir / f"{name}.count"
        return int(counter.read_text()) if counter.exists() else 0

    def run(self, **raw):
        args = RunBench.parse_args({"host": "local", "parser": "sglang_bench_serving", **raw})
        return RunBench().run(self.ctx, args)


@pytest.fixture
def bench(tmp_path):
    return Bench(tmp_path)


def test_before_after_clearly_better_is_significant(bench):
    before = bench.run(command=bench.command("before", [70.0, 89.1, 89.5, 89.9]), label="before")
    assert before.values == [89.1, 89.5, 89.9]
    assert before.warmup_values == [70.0]
    assert (before.median, before.min, before.max) == (89.5, 89.1, 89.9)
    assert before.spread == 0.8
    assert before.relative_spread == pytest.approx(0.8 / 89.5, abs=1e-4)
    assert before.metric == "output_throughput" and before.unit == "tok/s"
    assert len(before.durations_s) == 3 and all(d > 0 for d in before.durations_s)
    assert before.comparison is None

    after = bench.run(command=bench.command("after", [80.0, 95.8, 96.1, 96.4]), label="after", compare_to="before")
    c = after.comparison
    assert c is not None and c.significant
    assert c.baseline_label == "before" and c.baseline_median == 89.5
    assert c.ratio == round(96.1 / 89.5, 4) and c.change_percent == round((96.1 / 89.5 - 1) * 100, 2)
    assert c.verdict == "after is 7.4% faster than before (ranges do not overlap)"

    # Both labels stay in the session's store, values included, for the final report.
    stored = bench.store[STORE_KEY]
    assert set(stored) == {"before", "after"}
    assert stored["before"]["values"] == [89.1, 89.5, 89.9]
    assert stored["after"]["comparison"]["significant"] is True
    text = RunBench().render(after)
    assert "verdict: after is 7.4% faster than before" in text and "significant: yes" in text


def test_within_noise_is_not_significant(bench):
    bench.run(command=bench.command("before", [70.0, 89.1, 89.5, 89.9]), label="before")
    after = bench.run(command=bench.command("after", [70.0, 89.0, 90.2, 89.8]), label="after",
                      compare_to="before")
    c = after.comparison
    assert not c.significant
    assert c.ratio == round(89.8 / 89.5, 4)
    assert c.verdict == "after is 0.3% faster than before, within the noise (ranges overlap)"


def test_clearly_worse_is_significant_and_slower(bench):
    bench.run(command=bench.command("before", [89.1, 89.5, 89.9]), label="before", warmup=0)
    after = bench.run(command=bench.command("after", [80.1, 80.9, 80.5]), label="after", warmup=0,
                      compare_to="before")
    c = after.comparison
    assert c.significant and c.change_percent < 0
    assert c.verdict == "after is 10.1% slower than before (ranges do not overlap)"


def test_latency_metric_lower_is_faster(bench):
    bench.run(command=bench.command("before", [89.1, 89.5, 89.9]), label="before", warmup=0, metric="mean_ttft_ms")
    after = bench.run(command=bench.command("after", [95.8, 96.1, 96.4]), label="after", warmup=0,
                      metric="mean_ttft_ms", compare_to="before")
    assert after.unit == "ms" and after.median == round(10000 / 96.1, 2)
    assert after.comparison.significant and after.comparison.change_percent < 0
    assert " faster than before" in after.comparison.verdict


def test_progress_output_artifacts_and_tail(bench):
    result = bench.run(command=bench.command("b", [50.0, 60.0, 61.0]), label="before", runs=2, warmup=1)
    progress = [d for kind, d in bench.events if kind == "progress"]
    assert progress == [{"warmup": 1, "of": 1, "value": 50.0},
                        {"run": 1, "of": 2, "value": 60.0},
                        {"run": 2, "of": 2, "value": 61.0}]
    out = "".join(d["text"] for kind, d in bench.events if kind == "output" and d["stream"] == "stdout")
    err = "".join(d["text"] for kind, d in bench.events if kind == "output" and d["stream"] == "stderr")
    assert out.count("Serving Benchmark Result") == 3 and "FutureWarning" in err
    assert len(result.artifacts) == 3  # the warmup and both measured runs, whole
    whole = (bench.dir / result.artifacts[-1]).read_text()
    assert "Output token throughput (tok/s):         61.00" in whole and "FutureWarning" in whole
    assert "Output token throughput (tok/s):         61.00" in result.output_tail
    assert result.output_tail.endswith("=" * 50)


def test_result_on_stderr_is_read(bench):
    # stdout holds only the start-up lines; the result block went to stderr.
    result = bench.run(command=bench.command("b", [42.5, 43.5], stream="stderr"), label="x", runs=2, warmup=0)
    assert result.values == [42.5, 43.5]


def test_failing_command_stops_with_exit_code_and_tail(bench):
    script = ("import sys; print('loading model'); "
              "sys.stderr.write('RuntimeError: CUDA error: no kernel image is available for execution on the "
              "device\\n'); sys.exit(3)")
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(script)}"
    with pytest.raises(ToolError) as e:
        bench.run(command=command, label="before")
    msg = str(e.value)
    assert "warmup run 1 of 1 failed with exit code 3" in msg
    assert "no kernel image is available" in msg and "loading model" in msg
    assert "before" not in bench.store.get(STORE_KEY, {})


def test_failure_in_a_measured_run_stops_the_rest(bench):
    command = bench.command("b", [60.0]) + " || exit 7"  # the second run finds no value and fails
    with pytest.raises(ToolError, match="run 2 of 3 failed with exit code 7"):
        bench.run(command=command, label="before", warmup=0)
    assert bench.runs_started("b") == 2


def test_parser_finding_nothing_names_the_parser(bench):
    with pytest.raises(ToolError) as e:
        bench.run(command="echo 'Throughput: 12.5 requests/s'", label="before", warmup=0)
    msg = str(e.value)
    assert "parser sglang_bench_serving found no output_throughput" in msg
    assert "exit code 0" in msg and "Throughput: 12.5 requests/s" in msg


def test_unknown_metric_lists_the_ones_found(bench):
    with pytest.raises(ToolError, match=r"no metric 'p99_tpot_ms'.*output_throughput"):
        bench.run(command=bench.command("b", [60.0]), label="before", warmup=0, runs=1, metric="p99_tpot_ms")


def test_json_key_on_json_lines_output(bench):
    script = ("import json\n"
              "print('INFO loading')\n"
              "print(json.dumps({'run': 'warm', 'tok_s': 80.0}))\n"
              "print(json.dumps({'run': 'main', 'tok_s': 91.25, 'ttft_ms': 40.0}))\n"
              "print('done')\n")
    (bench.dir / "jl.py").write_text(script)
    result = bench.run(command=f"{shlex.quote(sys.executable)} jl.py", cwd=str(bench.dir), parser="json:tok_s",
                       label="j", runs=2, warmup=0)
    assert result.values == [91.25, 91.25] and result.metric == "tok_s" and result.unit is None


def test_regex_parser_end_to_end(bench):
    result = bench.run(command="echo 'decode: 90.5 tok/s'; echo 'decode: 93.75 tok/s'",
                       parser=r"regex:decode: ([\d.]+) tok/s", metric="decode_tok_s", label="r", runs=1, warmup=0)
    assert result.values == [93.75] and result.metric == "decode_tok_s"


def test_env_reaches_the_command(bench):
    result = bench.run(command='echo "rate: $BENCH_RATE"', env={"BENCH_RATE": "12.5"}, parser=r"regex:rate: (\S+)",
                       label="e", runs=1, warmup=0)
    assert result.values == [12.5]
    # `BENCH_RATE=12.5 echo "$BENCH_RATE"` would expand the variable before setting it: the exact form is shown
    assert result.command == "export BENCH_RATE=12.5; echo \"rate: $BENCH_RATE\""


def test_compare_to_missing_label_runs_nothing(bench):
    bench.run(command=bench.command("b", [60.0]), label="before", runs=1, warmup=0)
    with pytest.raises(ToolError, match=r"no result labelled 'baseline' .*labels: 'before'"):
        bench.run(command=bench.command("c", [60.0]), label="after", compare_to="baseline")
    assert bench.runs_started("c") == 0


def test_compare_to_a_different_metric_is_refused(bench):
    bench.run(command=bench.command("b", [60.0, 61.0]), label="before", runs=2, warmup=0)
    with pytest.raises(ToolError, match="not comparable"):
        bench.run(command=bench.command("c", [60.0]), label="after", runs=1, warmup=0, metric="mean_ttft_ms",
                  compare_to="before")
    with pytest.raises(ToolError, match="not comparable"):
        bench.run(command=bench.command("c", [60.0]), label="after", runs=1, warmup=0, parser="vllm_bench_serve",
                  compare_to="before")


def test_unknown_host_is_a_tool_error(bench):
    with pytest.raises(ToolError, match="not in this session's hosts"):
        bench.run(command="true", host="gpu9", label="x")


def test_cancel_during_a_run_kills_it(bench):
    threading.Timer(0.3, bench.cancel.set).start()
    t0 = time.monotonic()
    with pytest.raises(ToolError, match="cancelled by the operator during warmup run 1 of 1"):
        bench.run(command="sleep 30", label="x")
    assert time.monotonic() - t0 < 10


def test_cancel_between_runs_starts_no_more(bench):
    def on_event(kind, data):
        if kind == "progress" and data.get("run") == 1:
            bench.cancel.set()

    bench.ctx.emit = on_event
    with pytest.raises(ToolError, match=r"cancelled by the operator before run 2 of 3; measured so far: \[60.0\]"):
        bench.run(command=bench.command("b", [60.0, 61.0, 62.0]), label="x", warmup=0)
    assert bench.runs_started("b") == 1


def test_timeout_per_run(bench):
    with pytest.raises(ToolError, match="warmup run 1 of 1 timed out after 0.5s"):
        bench.run(command="sleep 30", label="x", timeout=0.5)


def test_gate_sees_a_workload_not_a_plain_command():
    # The gate routes actions with a workload to the workload classifier.
    args = RunBench.parse_args({"host": "h", "command": "python -m sglang.bench_serving", "parser":
                                "sglang_bench_serving", "label": "before"})
    action = RunBench().action(args)
    assert classify_action(action).cls is RiskClass.READ_ONLY


def test_a_comparison_of_two_different_command_lines_says_so(bench):
    bench.run(command="echo 'Output token throughput (tok/s): 10'", label="before", parser="regex:throughput \\(tok/s\\): ([0-9.]+)")
    r = bench.run(command="echo 'Output token throughput (tok/s): 11'", label="after", compare_to="before",
                  parser="regex:throughput \\(tok/s\\): ([0-9.]+)", env={"CUDA_HOME": "/usr/local/cuda-13.0"})
    assert r.comparison is not None and "CUDA_HOME=/usr/local/cuda-13.0" in r.comparison.not_like_for_like
    same = bench.run(command="echo 'Output token throughput (tok/s): 11'", label="again", compare_to="after",
                     parser="regex:throughput \\(tok/s\\): ([0-9.]+)", env={"CUDA_HOME": "/usr/local/cuda-13.0"})
    assert same.comparison.not_like_for_like is None


def test_each_side_with_its_own_toolkit_is_like_for_like(bench):
    # What the system prompt asks: "before" with the old toolkit's CUDA_HOME, "after" with the new one's.
    parser = "regex:throughput \\(tok/s\\): ([0-9.]+)"
    bench.run(command="echo 'Output token throughput (tok/s): 10'", label="before", parser=parser,
              env={"CUDA_HOME": "/usr/local/cuda-12.8"})
    r = bench.run(command="echo 'Output token throughput (tok/s): 10'", label="after", compare_to="before",
                  parser=parser, env={"CUDA_HOME": "/usr/local/cuda-13.0"})
    assert r.comparison.not_like_for_like is None and "toolkit of its side" in r.comparison.toolkits_differ
    assert "not like for like" not in RunBench().render(r) and "toolkits:" in RunBench().render(r)
    other = bench.run(command="echo 'Output token throughput (tok/s): 11' # --num-prompts 2", label="other",
                      compare_to="before", parser=parser, env={"CUDA_HOME": "/usr/local/cuda-13.0"})
    assert other.comparison.not_like_for_like and other.comparison.toolkits_differ is None
