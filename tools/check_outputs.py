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

import shlex

from pydantic import BaseModel, Field

from tools.base import Action, Risk, RiskClass, StrictArgs, Tool, ToolContext, ToolError
from tools.hosts import HostError
from tools.outputs_probe import ANSWERS, PROMPTS, client_argv, last_json, printable, read_answers, unlike

STORE_KEY = "check_outputs"  # ctx.store[STORE_KEY][label] -> that label's result, as a dict
ENDPOINT = r"^https?://(127\.0\.0\.1|localhost|\[::1\]):\d{1,5}/?$"  # on the host's loopback, nothing after the port
# A label names a set of outputs in the record and in the operator's report: plain words, as run_bench's.
LABEL = r"^[A-Za-z0-9][A-Za-z0-9._:+-]{0,63}$"


class CheckOutputsArgs(StrictArgs):
    host: str = Field(description="Name of the host to run on, exactly as the session lists it.")
    endpoint: str = Field(pattern=ENDPOINT,
                          description="The serving engine's OpenAI-compatible endpoint on the host's loopback, e.g. "
                                      "http://127.0.0.1:30000 (sglang's default port; vLLM's is 8000).")
    label: str = Field(pattern=LABEL, description="Name to keep these outputs under, e.g. 'before' or 'after' (letters, "
                                                  "digits and ._:+-). A label used again is replaced.")
    compare_to: str | None = Field(None, pattern=LABEL,
                                   description="Label of earlier outputs of this session to compare with; asked with "
                                               "the same model and max_tokens, or the comparison is refused.")
    model: str | None = Field(None, pattern=r"^[\x21-\x7e]{1,256}$",
                              description="The served model's name (default: the first /v1/models lists).")
    max_tokens: int = Field(24, ge=1, le=256, description="Tokens generated per prompt.")
    timeout: float = Field(300, gt=0, le=3600, description="Seconds for the whole check, every prompt together, before "
                                                           "it fails.")


class OutputsComparison(BaseModel):
    compare_to: str
    same_outputs: bool
    differing: list[int]  # indexes of the prompts whose output differs
    accuracy_before: float
    accuracy_change: float  # after - before, in points of the score (0..1)
    comparable: bool = True  # asked of the same model with the same max_tokens; otherwise nothing is compared
    verdict: str


class CheckOutputsResult(BaseModel):
    host: str
    endpoint: str
    label: str
    model: str
    max_tokens: int
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

    def read_ports(self, args: CheckOutputsArgs) -> list[int]:
        port = int(args.endpoint.rstrip("/").rsplit(":", 1)[1])  # the endpoint's, never one another argument names
        return [port] if 0 < port < 65536 else []

    def run(self, ctx: ToolContext, args: CheckOutputsArgs) -> CheckOutputsResult:
        labels: dict[str, dict] = ctx.store.setdefault(STORE_KEY, {})
        baseline = labels.get(args.compare_to) if args.compare_to else None
        if args.compare_to and baseline is None:
            raise ToolError(f"no outputs labelled {args.compare_to!r} in this session (labels: "
                            f"{', '.join(map(repr, labels)) or 'none yet'}); a baseline is taken before the first "
                            "change: compare to one of those, or leave compare_to out")
        if baseline is not None:
            asked = unlike(baseline, args.model, args.max_tokens)
            if asked:
                raise ToolError(f"{args.compare_to!r} was asked {asked}: outputs of other settings differ anyway, so "
                                "compare with the same model and max_tokens")
        try:
            host = ctx.hosts.get(args.host)
            argv = client_argv(host.spec.python or "python3", args.endpoint, args.model, args.max_tokens, args.timeout)
            r = host.run(shlex.join(argv), timeout=args.timeout + 30, cancel=ctx.cancel)
        except HostError as e:
            raise ToolError(str(e)) from None
        said = last_json(r.stdout)
        if r.exit_code != 0 or said is None or not isinstance(said.get("outputs"), list):
            raise ToolError(self._failure(args, r, said or {}))
        answers = read_answers(said, args.max_tokens)
        answers["outputs"] = [ctx.redact(o[:400]) for o in answers["outputs"]]
        result = CheckOutputsResult(host=args.host, endpoint=args.endpoint, label=args.label, **answers)
        if baseline is not None:
            result.comparison = compare(result, args.compare_to, baseline)
        labels[args.label] = result.model_dump(mode="json")
        return result

    @staticmethod
    def _failure(args: CheckOutputsArgs, r, said: dict) -> str:
        """Why the check has no outputs, in one message: the server answered wrongly, did not answer, or the check
        ran out of time; what the server said is shown escaped and cut short."""
        where = f"the server at {args.endpoint} on {args.host}"
        done = f" ({said['prompts_done']} of {len(PROMPTS)} prompts answered)" if said.get("prompts_done") else ""
        hint = f"\nhint: {r.hint}" if r.hint else ""
        if said.get("answered"):
            return f"{where} {printable(said['answered'], 500)}{done}{hint}"
        if r.exit_code is None:
            return (f"{where}: the check stopped before the server had answered every prompt{done} "
                    f"({printable((r.stderr or '').strip()[-200:], 200) or 'cancelled, or past its timeout'}){hint}")
        why = said.get("error") or (r.stderr or r.stdout).strip()[-500:] or f"exit code {r.exit_code}"
        return (f"{where} did not answer: {printable(why, 500)}{done}; is it serving (curl {args.endpoint}/v1/models)?"
                f"{hint}")

    def render(self, result: CheckOutputsResult) -> str:
        lines = [f"{result.label}: {result.prompts} prompts to {result.model} at {result.endpoint} on {result.host}, "
                 f"greedy, {result.max_tokens} tokens each; arithmetic {result.correct}/{result.questions} right "
                 f"({result.accuracy:.1%}); outputs digest {result.digest[:16]}"]
        lines += [f"  [{i}] {out.strip()[:120]!r}" for i, out in enumerate(result.outputs)]
        c = result.comparison
        if c is not None:
            lines.append(f"against {c.compare_to}: {c.verdict}")
        return "\n".join(lines)


def compare(result: CheckOutputsResult, compare_to: str, baseline: dict) -> OutputsComparison:
    before = [str(o) for o in baseline.get("outputs", [])]
    differing = [i for i, out in enumerate(result.outputs) if i >= len(before) or before[i] != out]
    change = round(result.accuracy - float(baseline.get("accuracy", 0.0)), 4)
    asked = unlike(baseline, result.model, result.max_tokens)
    if asked:  # the server's first model changed since the baseline: its answers are another model's
        return OutputsComparison(compare_to=compare_to, same_outputs=False, differing=differing, comparable=False,
                                 accuracy_before=float(baseline.get("accuracy", 0.0)), accuracy_change=change,
                                 verdict=f"not comparable: {compare_to} was asked {asked}")
    same = result.digest == baseline.get("digest") and not differing
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

