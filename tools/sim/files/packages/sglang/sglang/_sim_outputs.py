"""What the simulated model answers: greedy, so the same prompt on the same stack gives the same text.

An arithmetic question ("What is 17 + 25?") gets its answer, as a served model of this size gets such
questions right; any other prompt gets words drawn from the prompt's hash. A machine told `numerics:
drift` answers differently once torch is built for CUDA 13 (the new build's kernels): some answers are off
by one and free text leaves the old words after a few tokens, as greedy decoding diverges once one logit
moves, while throughput still rises.
"""

import hashlib
import re

_QUESTION = re.compile(r"What is (\d+) ([+*-]) (\d+)\?\s*(?:A:|Answer:)?\s*$")
_WORDS = ("the", "model", "serves", "tokens", "from", "a", "cache", "of", "keys", "and", "values", "on",
          "each", "GPU", "while", "batches", "grow", "under", "load", "so", "latency", "stays", "low", "for",
          "short", "prompts", "but", "long", "ones", "need", "more", "memory", "than", "we", "had", "planned")


def drifting(state, torch_cuda):
    bench = (state or {}).get("bench") or {}
    return bench.get("numerics") == "drift" and str(torch_cuda or "").split(".")[0] == "13"


def _digest(text):
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def complete(prompt, max_tokens, drift):
    """The greedy continuation of `prompt`, at most `max_tokens` words."""
    asked = _QUESTION.search(prompt)
    if asked:
        a, op, b = int(asked.group(1)), asked.group(2), int(asked.group(3))
        answer = a + b if op == "+" else a - b if op == "-" else a * b
        if drift and _digest(prompt)[0] % 3 == 0:
            answer += 1
        return " " + " ".join([str(answer)][:max(max_tokens, 0)])
    words = []
    for i in range(max(max_tokens, 0)):
        seed = prompt + ("|drift" if drift and i >= 4 else "") + "|%d" % i
        words.append(_WORDS[_digest(seed)[0] % len(_WORDS)])
    return (" " + " ".join(words)) if words else ""
