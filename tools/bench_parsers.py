"""How a benchmark's output is read: named parsers for the serving and one-batch benchmarks, json:KEY and
regex:PATTERN, and which way a metric is better.

Pure functions of the output text, on the standard library alone: run_bench reads its runs with them,
and the playbook `agent recipe --ansible` writes carries this file, verbatim, to read the same runs on
each host (agent/fleet/ansible.py), so a benchmark is read one way whichever engine runs it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass


class ParseError(ValueError):
    """The output holds no value the parser can read; the message says what was missing."""


@dataclass(frozen=True)
class Metric:
    value: float
    unit: str | None


_NUMBER = r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_BLOCK_START = re.compile(r"^=+ Serving Benchmark Result =+$")
_BLOCK_END = re.compile(r"^={10,}$")
_RESULT_LINE = re.compile(rf"^(?P<label>[^:]+):\s+(?P<value>{_NUMBER})$")
# Units in a label's parentheses; any other parenthesised words stay part of the name.
_UNITS = {"tok/s": "tok/s", "req/s": "req/s", "rps": "req/s", "ms": "ms", "s": "s"}


def serving_metric_name(label: str) -> tuple[str, str | None]:
    """A serving result label as a metric name and unit.

    snake_case of the label, with the time unit kept as a suffix ("Mean TTFT (ms)" ->
    mean_ttft_ms) and "token throughput" shortened to "throughput", so sglang's
    "Total token throughput", its older "Total throughput" and vLLM's "Total Token
    throughput" are all total_throughput, and the names match the keys both tools
    write to their JSON result files (output_throughput, mean_ttft_ms, ...).
    """
    unit = None
    words = label.strip()
    m = re.search(r"\(([^)]*)\)\s*$", words)
    if m and m.group(1).strip().lower() in _UNITS:
        unit = _UNITS[m.group(1).strip().lower()]
        words = words[: m.start()]
    name = re.sub(r"[^a-z0-9]+", "_", words.lower().replace("token throughput", "throughput")).strip("_")
    if unit in ("ms", "s"):
        name = f"{name}_{unit}"
    return name, unit


def parse_serving_result(text: str) -> dict[str, Metric]:
    """The metrics of the one "Serving Benchmark Result" block that sglang and vLLM print.

    Only lines inside the block count: the same words appear before it (vLLM prints
    "Maximum request concurrency: 16" when it starts) and must not be read as results.
    Lines whose value is not a number (Backend: sglang, Traffic request rate: inf) are
    settings, not metrics, and are skipped.
    """
    blocks: list[dict[str, Metric]] = []
    current: dict[str, Metric] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if _BLOCK_START.match(line):
            current = {}
            blocks.append(current)
        elif current is not None and _BLOCK_END.match(line):
            current = None
        elif current is not None:
            m = _RESULT_LINE.match(line)
            if m:
                name, unit = serving_metric_name(m.group("label"))
                current[name] = Metric(float(m.group("value")), unit)
    if not blocks:
        raise ParseError("no '============ Serving Benchmark Result ============' block in the output")
    if len(blocks) > 1:
        raise ParseError(f"{len(blocks)} 'Serving Benchmark Result' blocks in one run's output; the metric "
                         f"would be ambiguous: benchmark one configuration per command")
    if not blocks[0]:
        raise ParseError("the 'Serving Benchmark Result' block holds no numeric results")
    return blocks[0]


_ONE_BATCH_LINES = [
    (re.compile(rf"Prefill\. latency:\s*({_NUMBER}) s, throughput:\s*({_NUMBER}) token/s"), "prefill"),
    (re.compile(rf"Decode\.\s+median latency:\s*({_NUMBER}) s, median throughput:\s*({_NUMBER}) token/s"),
     "decode_median"),
    (re.compile(rf"Total\. latency:\s*({_NUMBER}) s, throughput:\s*({_NUMBER}) token/s"), "total"),
]


def parse_one_batch_result(text: str) -> dict[str, Metric]:
    """The metrics sglang's bench_one_batch prints after "Benchmark ...".

    The same lines appear earlier, after "Warmup ...", with warmup timings; only the
    lines after "Benchmark ..." are the measurement.
    """
    lines = text.splitlines()
    try:
        start = next(i for i, line in enumerate(lines) if line.strip() == "Benchmark ...")
    except StopIteration:
        raise ParseError("no 'Benchmark ...' line in the output (bench_one_batch prints it after its "
                         "warmup); did the model load?") from None
    found: dict[str, Metric] = {}
    prefill_lines = 0
    for line in lines[start + 1:]:
        for pattern, stage in _ONE_BATCH_LINES:
            m = pattern.search(line)
            if m:
                prefill_lines += stage == "prefill"
                found[f"{stage}_latency_s"] = Metric(float(m.group(1)), "s")
                found[f"{stage}_throughput"] = Metric(float(m.group(2)), "token/s")
    if prefill_lines > 1:
        raise ParseError(f"{prefill_lines} configurations after 'Benchmark ...' (a sweep of batch sizes or "
                         f"lengths); the metric would be ambiguous: give one --batch-size, --input-len and "
                         f"--output-len per command")
    if not found:
        raise ParseError("no 'Prefill.', 'Decode.' or 'Total.' result lines after 'Benchmark ...'")
    return found


def parse_json_key(text: str, key: str) -> float:
    """The number under `key` (dots for nesting: "metrics.output_throughput") in JSON output.

    JSON-lines output is read from the last line backwards, so the newest record of an
    appended results file wins; output that is one JSON document is read as a whole.
    """
    docs: list[object] = []
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                docs.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not docs:
        try:
            docs.append(json.loads(text))
        except json.JSONDecodeError:
            raise ParseError("no JSON object in the output (expected JSON lines, or one JSON document)") from None
    for doc in docs:
        value = _lookup(doc, key)
        if value is _MISSING:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ParseError(f"key {key!r} holds {json.dumps(value)[:80]}, not a number")
        return float(value)
    raise ParseError(f"no JSON object in the output has the key {key!r}")


_MISSING = object()


def _lookup(doc: object, key: str) -> object:
    for part in key.split("."):
        if not isinstance(doc, dict) or part not in doc:
            return _MISSING
        doc = doc[part]
    return doc


def parse_regex(text: str, pattern: str) -> float:
    """The number the pattern's one capture group matches, at its last match in the output."""
    matches = list(re.finditer(pattern, text, re.MULTILINE))
    if not matches:
        raise ParseError(f"the pattern {pattern!r} matches nothing in the output")
    captured = matches[-1].group(1)
    try:
        return float(captured)
    except (TypeError, ValueError):
        raise ParseError(f"the pattern {pattern!r} captured {captured!r}, not a number") from None


NAMED_PARSERS: dict[str, Callable[[str], dict[str, Metric]]] = {
    "sglang_bench_serving": parse_serving_result,
    "vllm_bench_serve": parse_serving_result,
    "sglang_bench_one_batch": parse_one_batch_result,
}
DEFAULT_METRIC = {
    "sglang_bench_serving": "output_throughput",
    "vllm_bench_serve": "output_throughput",
    "sglang_bench_one_batch": "decode_median_throughput",
}


def read_metric(parser: str, metric: str, text: str) -> Metric:
    """One metric from one run's output, by parser spec; ParseError when it is not there."""
    if parser in NAMED_PARSERS:
        metrics = NAMED_PARSERS[parser](text)
        if metric not in metrics:
            raise ParseError(f"no metric {metric!r} in the result; this output has: {', '.join(metrics)}")
        found = metrics[metric]
    elif parser.startswith("json:"):
        found = Metric(parse_json_key(text, parser[len("json:"):]), None)
    else:
        found = Metric(parse_regex(text, parser[len("regex:"):]), None)
    # inf or nan (a benchmark that divided by zero) would make every statistic meaningless.
    if not math.isfinite(found.value):
        raise ParseError(f"{metric} is {found.value}, not a finite number")
    return found


def default_metric(parser: str) -> str:
    if parser in DEFAULT_METRIC:
        return DEFAULT_METRIC[parser]
    if parser.startswith("json:"):
        return parser[len("json:"):]
    return "value"


_HIGHER_IS_BETTER = re.compile(r"throughput|goodput|per_s|tok_s|tokens_s|accept_length")
_LOWER_IS_BETTER = re.compile(r"latency|ttft|tpot|itl|e2el|duration|_ms$|_s$|time")


def higher_is_better(metric: str, unit: str | None) -> bool | None:
    """Whether a larger value is an improvement; None when the name does not say."""
    if (unit or "").endswith("/s") or _HIGHER_IS_BETTER.search(metric):
        return True
    if unit in ("ms", "s") or _LOWER_IS_BETTER.search(metric):
        return False
    return None
