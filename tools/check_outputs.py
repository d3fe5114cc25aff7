"""check_outputs: what the served model answers to a fixed prompt set, greedy, before and after a change.

Throughput alone does not prove an upgrade: a new CUDA or kernel build can change numerics (new kernels
are where bugs live), and a faster server that answers wrongly is worse than the old one. This tool asks
the serving engine on the host (any OpenAI-compatible endpoint: sglang, vLLM, TGI) a fixed set of prompts
with temperature 0, and keeps what it answered under a label: every output, their digest, and the score on
the arithmetic questions among them (each has one right answer). With compare_to it says which outputs
differ from the earlier label's and how the score moved. A goal's `outputs` check reads the two labels.

The client is a small standard-library program sent with the command (nothing is installed); it talks to
the loopback endpoint only, as a read (the read sandbox relays the port the endpoint names).
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex

from pydantic import BaseModel, Field

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError
from tools.hosts import HostError

STORE_KEY = "check_outputs"  # ctx.store[STORE_KEY][label] -> that label's result, as a dict
_EXAMPLE = "Q: What is 2 + 3?\nA: 5\n"
# (a, op, b): arithmetic with one right answer each, asked after one worked example
QUESTIONS = ((17, "+", 25), (38, "+", 47), (3, "*", 14), (91, "-", 56), (12, "*", 12), (250, "+", 175),
             (64, "-", 29), (7, "*", 8), (123, "+", 456), (81, "-", 18), (15, "*", 6), (999, "+", 1))
FREE_TEXT = ("Explain in one sentence what a KV cache stores.",
             "Name three things to check after upgrading a CUDA toolkit.",
             "Write a haiku about GPUs.",
             "What does greedy decoding mean?")
PROMPTS = tuple(f"{_EXAMPLE}Q: What is {a} {op} {b}?\nA:" for a, op, b in QUESTIONS) + FREE_TEXT
ANSWERS = tuple(a + b if op == "+" else a - b if op == "-" else a * b for a, op, b in QUESTIONS)

# Runs on the host with its python3 (3.6+, standard library): argv endpoint, model ("" = the server's first),
# max_tokens, timeout, prompts as JSON. Prints one JSON line: the model and every output, or the error.
CLIENT = r'''
import json, sys, urllib.request
endpoint, model, limit, timeout, prompts = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(endpoint + path, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read().decode())
try:
    if not model:
        model = call("/v1/models")["data"][0]["id"]
    outputs = []
    for p in prompts:
        answer = call("/v1/completions", {"model": model, "prompt": p, "max_tokens": limit, "temperature": 0,
                                         "top_p": 1, "seed": 0})
        outputs.append(answer["choices"][0]["text"])
    print(json.dumps({"model": model, "outputs": outputs}))
except Exception as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e)}))
    sys.exit(1)
'''


class CheckOutputsArgs(StrictArgs):
    host: str = Field(description="Name of the host to run on, exactly as the session lists it.")
    endpoint: str = Field(pattern=r"^https?://(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}/?$",
                          description="The serving engine's OpenAI-compatible endpoint on the host's loopback, e.g. "
                                      "http://127.0.0.1:30000 (sglang's default port; vLLM's is 8000).")
    label: str = Field(min_length=1, max_length=64, description="Name to keep these outputs under, e.g. 'before' or "
                                                                "'after'. A label used again is replaced.")
    compare_to: str | None = Field(None, description="Label of earlier outputs of this session to compare with.")
    model: str | None = Field(None, description="The served model's name (default: the first /v1/models lists).")
    max_tokens: int = Field(24, ge=1, le=256, description="Tokens generated per prompt.")
    timeout: float = Field(120, gt=0, le=3600, description="Seconds per request before it fails.")


class OutputsComparison(BaseModel):
    compare_to: str
    same_outputs: bool
    differing: list[int]  # indexes of the prompts whose output differs
    accuracy_before: float
    accuracy_change: float  # after - before, in points of the score (0..1)
    verdict: str


class CheckOutputsResult(BaseModel):
    host: str
    endpoint: str
    label: str
    model: str
    prompts: int
    accuracy: float  # right answers / questions
    correct: int
    questions: int
    digest: str  # sha256 of every output, in order: equal digests, equal outputs
    outputs: list[str]
    comparison: OutputsComparison | None = None


class CheckOutputs(Tool):
    """Ask the served model a fixed prompt set, greedy, and keep its outputs and score; compare two labels.

    Sends 16 fixed prompts (12 arithmetic questions with one right answer each, and 4 of free text) to the
    serving engine's OpenAI-compatible endpoint on the host, temperature 0, and keeps under `label` every
    output, their digest and the score on the questions. Run it with label 'before' before the first
    change and with label 'after', compare_to 'before', once the server runs the new stack: a faster
    server whose answers changed may be a broken build (a goal's `outputs` check decides). The server must
    already be serving; the tool only asks it. A read: it changes nothing on the host.
    """

    name = "check_outputs"
    Args = CheckOutputsArgs
    Result = CheckOutputsResult

    def action(self, args: CheckOutputsArgs) -> Action:
        return Action(host=args.host, subject=f"check_outputs {args.endpoint} label={args.label}",
                      risk=Risk(cls=RiskClass.READ_ONLY, rule="tool:check_outputs",
                                reason="asks the served model fixed prompts on loopback; changes nothing"),
                      label=args.label)

    def run(self, ctx: ToolContext, args: CheckOutputsArgs) -> CheckOutputsResult:
        labels: dict[str, dict] = ctx.store.setdefault(STORE_KEY, {})
        baseline = labels.get(args.compare_to) if args.compare_to else None
        if args.compare_to and baseline is None:
            raise ToolError(f"no outputs labelled {args.compare_to!r} in this session (labels: "
                            f"{', '.join(map(repr, labels)) or 'none yet'}); a baseline is taken before the first "
                            "change: compare to one of those, or leave compare_to out")
        try:
            host = ctx.hosts.get(args.host)
            python = host.spec.python or "python3"
            command = " ".join([shlex.quote(python), "-I", "-c", shlex.quote(CLIENT), shlex.quote(args.endpoint),
                                shlex.quote(args.model or ""), str(args.max_tokens), f"{args.timeout:g}",
                                shlex.quote(json.dumps(PROMPTS))])
            r = host.run(command, timeout=args.timeout * len(PROMPTS) + 30, cancel=ctx.cancel)
        except HostError as e:
            raise ToolError(str(e)) from None
        said = _last_json(r.stdout)
        if r.exit_code != 0 or said is None or "outputs" not in said:
            why = (said or {}).get("error") or (r.stderr or r.stdout).strip()[-500:] or f"exit code {r.exit_code}"
            hint = f"\nhint: {r.hint}" if r.hint else ""
            raise ToolError(f"the server at {args.endpoint} on {args.host} did not answer: {why}; is it serving "
                            f"(curl {args.endpoint}/v1/models)?{hint}")
        outputs = [str(o) for o in said["outputs"]]
        correct = sum(1 for out, answer in zip(outputs, ANSWERS) if _first_number(out) == answer)
        result = CheckOutputsResult(
            host=args.host, endpoint=args.endpoint, label=args.label, model=str(said.get("model", "")),
            prompts=len(outputs), accuracy=round(correct / len(ANSWERS), 4), correct=correct,
            questions=len(ANSWERS), digest=hashlib.sha256(json.dumps(outputs).encode()).hexdigest(),
            outputs=[ctx.redact(o[:400]) for o in outputs])
        if baseline is not None:
            result.comparison = compare(result, args.compare_to, baseline)
        labels[args.label] = result.model_dump(mode="json")
        return result

    def render(self, result: CheckOutputsResult) -> str:
        lines = [f"{result.label}: {result.prompts} prompts to {result.model} at {result.endpoint} on {result.host}, "
                 f"greedy; arithmetic {result.correct}/{result.questions} right ({result.accuracy:.1%}); outputs "
                 f"digest {result.digest[:16]}"]
        lines += [f"  [{i}] {out.strip()[:120]!r}" for i, out in enumerate(result.outputs)]
        c = result.comparison
        if c is not None:
            lines.append(f"against {c.compare_to}: {c.verdict}")
        return "\n".join(lines)


def compare(result: CheckOutputsResult, compare_to: str, baseline: dict) -> OutputsComparison:
    before = [str(o) for o in baseline.get("outputs", [])]
    differing = [i for i, out in enumerate(result.outputs) if i >= len(before) or before[i] != out]
    same = result.digest == baseline.get("digest") and not differing
    change = round(result.accuracy - float(baseline.get("accuracy", 0.0)), 4)
    if same:
        verdict = f"the same outputs as {compare_to}, prompt for prompt"
    else:
        verdict = (f"{len(differing)} of {result.prompts} outputs differ from {compare_to} (prompts "
                   f"{', '.join(map(str, differing))}); arithmetic {baseline.get('accuracy', 0):.1%} -> "
                   f"{result.accuracy:.1%}")
        if change < 0:
            verdict += ": the answers got worse, which a faster server does not make up for"
    return OutputsComparison(compare_to=compare_to, same_outputs=same, differing=differing,
                             accuracy_before=float(baseline.get("accuracy", 0.0)), accuracy_change=change,
                             verdict=verdict)


def _first_number(text: str) -> int | None:
    found = re.search(r"-?\d+", text)
    return int(found.group()) if found else None


def _last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None
