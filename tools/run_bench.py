"""run_bench: run a benchmark several times, read one metric, compare labelled results.

The proof that an upgrade helped is a benchmark taken before and after it. One run
proves little: serving benchmarks vary by a few percent from run to run. So the tool
runs the command `warmup` + `runs` times, reads one number from each measured run
with a named parser, and keeps the values under a label ("before", "after") in the
session's store, where a later call can compare against them.

Parsers are pure functions of the output text, tested against real output samples in
tests/data/bench/.
"""

from __future__ import annotations

import math
import re
import statistics

from pydantic import BaseModel, Field, field_validator

from tools.base import Action, StrictArgs, Tool, ToolContext, ToolError, Workload, run_live
from tools.bench_parsers import (  # noqa: F401  (the parsers live there; imported from here too)
    DEFAULT_METRIC,
    NAMED_PARSERS,
    Metric,
    ParseError,
    default_metric,
    higher_is_better,
    parse_json_key,
    parse_one_batch_result,
    parse_regex,
    parse_serving_result,
    read_metric,
    serving_metric_name,
)
from tools.hosts import CommandResult, CommandText, EnvVars, HostError, command_subject

STORE_KEY = "run_bench"  # ctx.store[STORE_KEY][label] -> the Result of that label, as a dict

SERVING_METRICS_DOC = (
    "output_throughput (tok/s), total_throughput, input_throughput, request_throughput (req/s), "
    "mean_ttft_ms, median_ttft_ms, p99_ttft_ms, mean_itl_ms, median_itl_ms, p95_itl_ms (sglang), "
    "p99_itl_ms, max_itl_ms (sglang), mean_tpot_ms, median_tpot_ms, p99_tpot_ms, "
    "mean_e2e_latency_ms, median_e2e_latency_ms (sglang), mean_e2el_ms, median_e2el_ms (vllm, when "
    "selected), benchmark_duration_s, successful_requests, failed_requests (vllm), total_input_tokens, "
    "total_generated_tokens, concurrency (sglang), peak_output_throughput (newer versions)"
)
ONE_BATCH_METRICS_DOC = (
    "decode_median_throughput (token/s), decode_median_latency_s, prefill_throughput, prefill_latency_s, "
    "total_throughput, total_latency_s"
)


# --------------------------------------------------------------------------- comparison


def ranges_overlap(a_min: float, a_max: float, b_min: float, b_max: float) -> bool:
    return a_min <= b_max and b_min <= a_max


class BenchComparison(BaseModel):
    baseline_label: str
    baseline_median: float
    baseline_min: float
    baseline_max: float
    ratio: float | None  # this median / baseline median; None when the baseline median is 0
    change_percent: float | None  # (ratio - 1) * 100: the change of the metric itself
    higher_is_better: bool | None  # None when the metric's name does not say (json/regex)
    significant: bool
    verdict: str
    # How this run's command line (environment and directory included) differs from the baseline's:
    # a comparison of two different things is still made, and says so.
    not_like_for_like: str | None = None
    toolkits_differ: str | None = None  # the same command, each side with its own toolkit's CUDA_HOME


def compare(label: str, values: list[float], baseline_label: str, baseline: dict,
            better_when_higher: bool | None) -> BenchComparison:
    """This label's values against a baseline's, with the significance rule below.

    significant: both sides have at least 2 measured runs and their [min, max] ranges
    do not overlap (touching counts as overlap). The difference is then larger than
    the run-to-run spread of either side. One run per side shows no spread, so it can
    never be called significant.
    """
    base_values = [float(v) for v in baseline["values"]]
    median, base_median = statistics.median(values), statistics.median(base_values)
    apart = not ranges_overlap(min(values), max(values), min(base_values), max(base_values))
    enough_runs = len(values) >= 2 and len(base_values) >= 2
    significant = apart and enough_runs
    ratio = median / base_median if base_median != 0 else None
    change = (ratio - 1) * 100 if ratio is not None else None

    if change is None:
        verdict = f"{baseline_label}'s median is 0; no ratio can be given"
    elif median == base_median:
        verdict = f"{label} and {baseline_label} have the same median"
    else:
        up = median > base_median
        word = ("higher" if up else "lower") if better_when_higher is None else (
            "faster" if up == better_when_higher else "slower")
        verdict = f"{label} is {abs(change):.1f}% {word} than {baseline_label}"
    if change is not None and median != base_median:
        if significant:
            verdict += " (ranges do not overlap)"
        elif not enough_runs:
            verdict += ", but one run on a side shows no spread: not significant (measure with runs >= 2)"
        else:
            verdict += ", within the noise (ranges overlap)"
    return BenchComparison(
        baseline_label=baseline_label,
        baseline_median=base_median,
        baseline_min=min(base_values),
        baseline_max=max(base_values),
        ratio=None if ratio is None else round(ratio, 4),
        change_percent=None if change is None else round(change, 2),
        higher_is_better=better_when_higher,
        significant=significant,
        verdict=verdict,
    )


# --------------------------------------------------------------------------- the tool


class RunBenchArgs(StrictArgs):
    host: str = Field(description="Name of the host to run on, exactly as the session lists it.")
    command: CommandText = Field(description="The benchmark command (bash syntax), e.g. `python -m sglang.bench_serving "
                                     "--backend sglang --dataset-name random --num-prompts 200`. The same command "
                                     "should be used for the labels you compare.")
    parser: str = Field(description=(
        "How to read the metric from each run's stdout (stderr when stdout has none): "
        "'sglang_bench_serving' (python -m sglang.bench_serving), 'vllm_bench_serve' (vllm bench serve), "
        "'sglang_bench_one_batch' (python -m sglang.bench_one_batch; the lines after 'Benchmark ...'), "
        "'json:KEY' (JSON-lines output; the last line with KEY; dots for nested keys), or "
        "'regex:PATTERN' (a Python regex with exactly one capture group; its last match)."))
    metric: str | None = Field(None, description=(
        "Which metric to measure. sglang_bench_serving and vllm_bench_serve (default output_throughput): "
        f"{SERVING_METRICS_DOC}. sglang_bench_one_batch (default decode_median_throughput): "
        f"{ONE_BATCH_METRICS_DOC}. For json:KEY and regex:PATTERN it is only the name the value is reported "
        "under (default KEY, or 'value')."))
    runs: int = Field(3, ge=1, le=20, description="Measured runs, 1 to 20. Use at least 2 (3 is better) so a "
                                                  "comparison can tell a change from noise.")
    warmup: int = Field(1, ge=0, le=5, description="Runs before the measured ones whose values are not counted "
                                                   "(caches, CUDA graphs, JIT), 0 to 5.")
    label: str = Field(min_length=1, max_length=64, description="Name to keep this result under, e.g. 'before' or "
                                                                "'after'. A label used again is replaced.")
    compare_to: str | None = Field(None, description="Label of an earlier result of this session to compare "
                                                     "with (same parser and metric), e.g. 'before'.")
    timeout: float = Field(1800, gt=0, le=86_400, description="Wall-clock seconds per run before it is killed.")
    env: EnvVars | None = Field(None, description="Extra environment variables for the command.")
    cwd: str | None = Field(None, description="Directory to run in (default: the user's home directory).")

    @field_validator("parser")
    @classmethod
    def _known_parser(cls, parser: str) -> str:
        if parser in NAMED_PARSERS:
            return parser
        if parser.startswith("json:"):
            if not parser[len("json:"):].strip():
                raise ValueError("json: needs a key, e.g. 'json:output_throughput'")
            return parser
        if parser.startswith("regex:"):
            try:
                groups = re.compile(parser[len("regex:"):]).groups
            except re.error as e:
                raise ValueError(f"the regex does not compile: {e}") from None
            if groups != 1:
                raise ValueError(f"the regex must have exactly one capture group, it has {groups}")
            return parser
        raise ValueError(f"unknown parser {parser!r}; use one of {', '.join(NAMED_PARSERS)}, 'json:KEY' "
                         f"or 'regex:PATTERN'")


class RunBenchResult(BaseModel):
    host: str
    command: str
    label: str
    parser: str
    metric: str
    unit: str | None
    values: list[float]  # one per measured run, in order
    median: float
    min: float
    max: float
    spread: float  # max - min
    relative_spread: float | None  # spread / median; None when the median is 0
    durations_s: list[float]  # wall-clock seconds of each measured run
    # On a simulated host those seconds are real time while the benchmark's own figures are simulated.
    simulated_host: bool = False
    warmup_values: list[float] = Field(default_factory=list)  # read from the warmup runs, not counted
    comparison: BenchComparison | None = None
    artifacts: list[str] = Field(default_factory=list)  # whole output of every run, warmups first
    output_tail: str = ""  # the end of the last run's output


class RunBench(Tool):
    """Run a benchmark command several times and measure one metric, to compare before and after a change.

    Runs `warmup` unmeasured runs, then `runs` measured ones, one after the other, and
    reads the metric from each with the named `parser`. Returns every value, the
    median, min, max and spread, and keeps the result under `label` for this session.

    To prove an upgrade helped: measure with label 'before', make the change, then run
    the same command with label 'after' and compare_to 'before'. The comparison gives
    the ratio of the medians and `significant`: true only when both sides had at least
    2 runs and their [min, max] ranges do not overlap, i.e. the difference is larger
    than the run-to-run spread. A change within the spread is noise, not a result.

    The known benchmark entry points of sglang and vllm (and the project's bench
    scripts) count as read-only here, in run_bench (through ssh_exec they are a change),
    but not with --trust-remote-code (it runs code that comes with the model: a
    destructive step); any other command is judged like an ssh_exec command.
    A run that fails (non-zero exit, timeout) or whose output lacks the metric stops
    the tool with the exit code and the end of its output: read it, it usually says
    what is wrong (e.g. a PyTorch build that does not match the CUDA toolkit).

    The tool runs only the command: what the workload needs must be up before, or be
    started by the command itself. sglang.bench_serving and `vllm bench serve` measure a
    server that is already serving (e.g. `python -m sglang.launch_server`);
    sglang.bench_one_batch loads the model in its own process. On a simulated host the
    serving benchmarks bring their server up inside the benchmark process for the run,
    and their durations and latencies are simulated GPU time: the run durations this
    tool reports there are real time, and far shorter.
    """

    name = "run_bench"
    pinned = ("command", "env", "cwd")
    Args = RunBenchArgs
    Result = RunBenchResult

    def action(self, args: RunBenchArgs) -> Action:
        # risk None and a workload: the gate classifies the command as a benchmark workload,
        # where the entry points of sglang and vllm are read-only.
        # Alone on its host: two benchmarks sharing the GPUs would both measure the wrong thing.
        return Action(host=args.host, subject=bench_subject(args), risk=None, exclusive=True, label=args.label,
                      workload=Workload(command=args.command, env=dict(args.env or {}), cwd=args.cwd),
                      args={"command": args.command, "env": dict(args.env or {}), "cwd": args.cwd},
                      defaults={"env": {}, "cwd": None})

    def run(self, ctx: ToolContext, args: RunBenchArgs) -> RunBenchResult:
        metric = args.metric or default_metric(args.parser)
        labels: dict[str, dict] = ctx.store.setdefault(STORE_KEY, {})
        baseline = self._baseline(labels, args, metric)  # checked first: a bad label must not cost a benchmark

        try:
            host = ctx.hosts.get(args.host)
        except HostError as e:
            raise ToolError(str(e)) from None

        artifacts: list[str] = []
        warmup_values: list[float] = []
        values: list[float] = []
        durations: list[float] = []
        unit: str | None = None
        simulated = host.spec.transport == "sim"
        schedule = [("warmup", i, args.warmup) for i in range(1, args.warmup + 1)] + \
                   [("run", i, args.runs) for i in range(1, args.runs + 1)]
        for kind, i, of in schedule:
            what = f"{'warmup ' if kind == 'warmup' else ''}run {i} of {of}"
            if ctx.cancel.is_set():
                raise ToolError(f"cancelled {ctx.cancel_reason()} before {what}; measured so far: {values or 'nothing'}")
            last = self._run_once(ctx, host, args, what)
            saved = ctx.artifacts.save(f"{ctx.call_id}-{kind}{i}.txt",
                                       ctx.redact(_whole_output(args, last, simulated)))
            if saved:
                artifacts.append(saved)
            self._check_finished(ctx, args, last, what, saved)
            found = _read_run_metric(args.parser, metric, last, what, saved)
            unit = found.unit
            if kind == "warmup":
                warmup_values.append(found.value)
                ctx.emit("progress", {"warmup": i, "of": of, "value": found.value})
            else:
                values.append(found.value)
                durations.append(round(last.duration_s, 3))
                ctx.emit("progress", {"run": i, "of": of, "value": found.value})

        median = statistics.median(values)
        spread = round(max(values) - min(values), 9)  # 89.9 - 89.1 is 0.8000000000000114 in floats
        comparison = None
        if baseline is not None:
            comparison = compare(args.label, values, args.compare_to, baseline, higher_is_better(metric, unit))
            if baseline.get("command") and _same_but_toolkit(baseline["command"], bench_subject(args)):
                comparison.toolkits_differ = (f"{args.label} and {args.compare_to} ran the same command, each with "
                                              "the CUDA toolkit of its side (CUDA_HOME): like for like across the "
                                              "upgrade")
            elif baseline.get("command") and baseline["command"] != bench_subject(args):
                comparison.not_like_for_like = (f"{args.label} ran `{bench_subject(args)}`, {args.compare_to} ran "
                                                f"`{baseline['command']}`: say why in the report (e.g. CUDA_HOME for "
                                                f"a new toolkit), or measure both alike")
        result = RunBenchResult(
            host=args.host, command=bench_subject(args), label=args.label, parser=args.parser, metric=metric,
            unit=unit, values=values, median=median, min=min(values), max=max(values), spread=spread,
            relative_spread=round(spread / abs(median), 4) if median else None, durations_s=durations,
            simulated_host=simulated, warmup_values=warmup_values, comparison=comparison, artifacts=artifacts,
            output_tail=ctx.redact(_tail(last.stdout if last.stdout.strip() else last.stderr)),
        )
        labels[args.label] = result.model_dump(mode="json")
        return result

    def render(self, result: RunBenchResult) -> str:
        unit = f" ({result.unit})" if result.unit else ""
        lines = [
            f"{result.label}: {result.metric}{unit} on {result.host}, {len(result.values)} measured run(s)"
            + (f" after {len(result.warmup_values)} warmup" if result.warmup_values else ""),
            f"values: {', '.join(_num(v) for v in result.values)}",
            f"median {_num(result.median)}, min {_num(result.min)}, max {_num(result.max)}, spread "
            f"{_num(result.spread)}" + (f" ({result.relative_spread * 100:.1f}% of the median)"
                                        if result.relative_spread is not None else ""),
            f"{_durations_label(result)}: {', '.join(_seconds(d) for d in result.durations_s)}",
        ]
        c = result.comparison
        if c is not None:
            ratio = "n/a" if c.ratio is None else f"{c.ratio:.4f} ({c.change_percent:+.2f}%)"
            lines += [
                f"against {c.baseline_label}: median {_num(c.baseline_median)} (min {_num(c.baseline_min)}, "
                f"max {_num(c.baseline_max)}); ratio {ratio}; significant: {'yes' if c.significant else 'no'}",
                f"verdict: {c.verdict}",
            ] + ([f"not like for like: {c.not_like_for_like}"] if c.not_like_for_like else []) \
                + ([f"toolkits: {c.toolkits_differ}"] if c.toolkits_differ else [])
        if result.artifacts:
            lines.append(f"whole outputs: {', '.join(result.artifacts)}")
        if result.output_tail:
            lines.append(f"--- end of the last run's output ---\n{result.output_tail}")
        return "\n".join(lines)

    # -- steps

    def _baseline(self, labels: dict[str, dict], args: RunBenchArgs, metric: str) -> dict | None:
        if args.compare_to is None:
            return None
        baseline = labels.get(args.compare_to)
        if baseline is None:
            have = ", ".join(repr(k) for k in labels) or "none yet"
            raise ToolError(f"no result labelled {args.compare_to!r} in this session (labels: {have}); "
                            f"a baseline is measured before its host's first change, and the gate refuses one "
                            f"measured after it: compare to one of those, or leave compare_to out and report that "
                            f"no {args.compare_to!r} was measured")
        if baseline["parser"] != args.parser or baseline["metric"] != metric:
            raise ToolError(
                f"not comparable: {args.compare_to!r} measured {baseline['metric']} with parser "
                f"{baseline['parser']}, this call measures {metric} with parser {args.parser}; use the same "
                f"parser and metric as the baseline")
        return baseline

    def _run_once(self, ctx: ToolContext, host, args: RunBenchArgs, what: str) -> CommandResult:
        try:
            return run_live(ctx, host, args.command, timeout=args.timeout, cwd=args.cwd, env=args.env,
                            cancel=ctx.cancel)
        except HostError as e:
            raise ToolError(f"{what}: {e}") from None

    def _check_finished(self, ctx: ToolContext, args: RunBenchArgs, r: CommandResult, what: str,
                        artifact: str | None) -> None:
        if r.cancelled:
            raise ToolError(f"cancelled {ctx.cancel_reason()} during {what}; the command was killed")
        if r.timed_out:
            raise ToolError(f"{what} timed out after {args.timeout:g}s and was killed; raise `timeout` if the "
                            f"benchmark needs longer, or make it smaller.{_failure_tail(r, artifact)}")
        if r.connection_lost:
            raise ToolError(f"{what}: the connection was lost while it ran; it was not run again."
                            f"{_failure_tail(r, artifact)}")
        if r.exit_code != 0:
            hint = f"\nhint: {r.hint}" if r.hint else ""
            raise ToolError(f"{what} failed with exit code {r.exit_code} after {r.duration_s:.1f}s: "
                            f"{args.command}{hint}{_failure_tail(r, artifact)}")


def _read_run_metric(parser: str, metric: str, r: CommandResult, what: str, artifact: str | None) -> Metric:
    """The metric from stdout, or from stderr when stdout lacks it (some scripts log their results)."""
    streams = [text for text in (r.stdout, r.stderr) if text.strip()]
    first: ParseError | None = None
    for text in streams:
        try:
            return read_metric(parser, metric, text)
        except ParseError as e:
            first = first or e
    reason = first or "the command printed nothing"
    raise ToolError(f"{what}: parser {parser} found no {metric} in the output (exit code {r.exit_code}): "
                    f"{reason}{_failure_tail(r, artifact)}")


# A CUDA toolkit's directory, as CUDA_HOME (or a PATH entry) names it: /usr/local/cuda-12.8, /opt/cuda-13.0.
_TOOLKIT_DIR = re.compile(r"/[\w./-]*cuda-\d+\.\d+")


def _same_but_toolkit(before: str, after: str) -> bool:
    """Two command lines that differ only in which toolkit directory they name: the two sides of a
    toolkit upgrade, each benchmarked with its own toolkit, as the system prompt asks."""
    return before != after and _TOOLKIT_DIR.sub("<toolkit>", before) == _TOOLKIT_DIR.sub("<toolkit>", after)


def bench_subject(args: RunBenchArgs) -> str:
    """The command as the gate classifies it and an approval binds to, with its env and cwd."""
    return command_subject(args.command, args.env, args.cwd)


TAIL_LINES = 30
TAIL_CHARS = 3000


def _tail(text: str, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last lines of an output, for the model; progress bars' carriage returns keep only the last update."""
    kept = [line.rsplit("\r", 1)[-1].rstrip() for line in text.rstrip().splitlines()[-lines:]]
    out = "\n".join(kept)
    if len(out) > chars:
        out = "[...]" + out[-chars:]
    return out


def _failure_tail(r: CommandResult, artifact: str | None) -> str:
    parts = []
    for stream, text in (("stderr", r.stderr), ("stdout", r.stdout)):
        parts.append(f"\n--- {stream} (end) ---\n{_tail(text)}" if text.strip() else f"\n--- {stream}: empty ---")
    if artifact:
        parts.append(f"\nwhole output: {artifact}")
    return "".join(parts)


def _seconds(d: float) -> str:
    return f"{d:.2f}" if d < 10 else f"{d:.1f}"  # a sub-second run is not "0.1"


def _durations_label(result: RunBenchResult) -> str:
    if result.simulated_host:
        return (f"run durations (s of real time; {result.host} is a simulated host, whose benchmarks report "
                f"simulated GPU time)")
    return "run durations (s)"


def _whole_output(args: RunBenchArgs, r: CommandResult, simulated: bool = False) -> str:
    status = ("cancelled" if r.cancelled else "timed out" if r.timed_out else
              "connection lost" if r.connection_lost else f"exit code {r.exit_code}")
    took = f"{r.duration_s:.3f}s" + (" of real time on a simulated host" if simulated else "")
    return (f"$ {bench_subject(args)}\n# host {args.host}, {status}, {took}\n"
            f"--- stdout ---\n{r.stdout}\n--- stderr ---\n{r.stderr}")


def _num(v: float) -> str:
    return f"{v:.6g}" if math.isfinite(v) else str(v)
