"""What the served model is asked, and how its answers are read and judged: the standard-library half of
check_outputs, which the exported playbook carries too (agent/fleet/playbook_helper.py), so a fleet and a
playbook ask the same prompts and judge the same way as a session.

The client is a small program sent with the command: it asks an OpenAI-compatible endpoint (sglang, vLLM,
TGI) the fixed prompts with temperature 0 and prints every output, or what went wrong.
"""

from __future__ import annotations

import hashlib
import json
import re

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
# max_tokens, the whole check's seconds, prompts as JSON. Prints one JSON line: the model and every output, or
# the problem. It follows no redirect (a read asks the endpoint it was given, nothing else), reads no answer past
# MAX_ANSWER_BYTES, and stops at one deadline for every request together, however slowly a server drips.
CLIENT = r"""
import json, sys, time, urllib.error, urllib.request
endpoint, model, limit, budget, prompts = sys.argv[1].rstrip("/"), sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), json.loads(sys.argv[5])
deadline, MAX_ANSWER_BYTES = time.monotonic() + budget, 4 << 20
class Answered(Exception):
    pass
class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        raise Answered("answered %s %s with a redirect (HTTP %d) to %s, which check_outputs does not follow: give "
                       "the endpoint the server itself listens on" % (req.get_method(), req.selector, code, newurl[:200]))
opener = urllib.request.build_opener(NoRedirect)
def left():
    s = deadline - time.monotonic()
    if s <= 0:
        raise TimeoutError("no whole answer within the check's timeout (%g s for all %d prompts)" % (budget, len(prompts)))
    return s
def call(path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(endpoint + path, data=data, headers={"Content-Type": "application/json"})
    try:
        r = opener.open(req, timeout=left())
    except urllib.error.HTTPError as e:
        raise Answered("answered %s %s with HTTP %d: %r" % (req.get_method(), path, e.code, e.read(300).decode("utf-8", "replace")))
    with r:
        got = b""
        while True:
            left()
            chunk = r.read1(65536)
            if not chunk:
                break
            got += chunk
            if len(got) > MAX_ANSWER_BYTES:
                raise Answered("answered %s %s with more than %d bytes: not a completion of a few tokens" % (req.get_method(), path, MAX_ANSWER_BYTES))
    try:
        return json.loads(got.decode("utf-8"))
    except (ValueError, RecursionError) as e:
        raise Answered("answered %s %s with something that is not JSON (%s): %r" % (req.get_method(), path, type(e).__name__, got[:200]))
done = []
try:
    if not model:
        listed = call("/v1/models")
        try:
            model = listed["data"][0]["id"]
            assert isinstance(model, str) and model
        except Exception:
            raise Answered("answered GET /v1/models with no model's id (data[0].id): %r" % (json.dumps(listed)[:200],))
    for i, p in enumerate(prompts):
        answer = call("/v1/completions", {"model": model, "prompt": p, "max_tokens": limit, "temperature": 0,
                                         "top_p": 1, "seed": 0})
        try:
            text = answer["choices"][0]["text"]
            assert isinstance(text, str)
        except Exception:
            raise Answered("answered prompt %d with no completion's text (choices[0].text as a string): %r" % (i, json.dumps(answer)[:200]))
        if len(text) > 64 * limit + 256:
            raise Answered("answered prompt %d with %d characters, more than %d tokens can make: not a completion" % (i, len(text), limit))
        done.append(text)
    print(json.dumps({"model": model, "outputs": done}))
except Answered as e:
    print(json.dumps({"answered": str(e), "prompts_done": len(done)}))
    sys.exit(1)
except Exception as e:
    print(json.dumps({"error": "%s: %s" % (type(e).__name__, e), "prompts_done": len(done)}))
    sys.exit(1)
"""


def client_argv(python: str, endpoint: str, model: str | None, max_tokens: int, timeout: float) -> list[str]:
    """The client's command line: the host's Python, isolated from its environment's settings."""
    return [python, "-I", "-c", CLIENT, endpoint, model or "", str(max_tokens), f"{timeout:g}", json.dumps(PROMPTS)]


def read_answers(said: dict, max_tokens: int) -> dict:
    """What the client printed, as a label's record: the model, every output, their digest and the score."""
    outputs = [whole(str(o)) for o in said["outputs"]]
    correct = sum(1 for out, answer in zip(outputs, ANSWERS) if first_number(out) == answer)
    return {"model": printable(str(said.get("model", "")), 256), "max_tokens": max_tokens, "prompts": len(outputs),
            "accuracy": round(correct / len(ANSWERS), 4), "correct": correct, "questions": len(ANSWERS),
            "digest": hashlib.sha256(json.dumps(outputs).encode()).hexdigest(), "outputs": outputs}


def unlike(before: dict, model: str | None, max_tokens: int | None) -> str:
    """How `before` was asked differently ('' when alike): another model, or another max_tokens."""
    found = []
    if model and before.get("model") and model != before["model"]:
        found.append(f"of model {before['model']!r}, not {model!r}")
    if max_tokens is not None and before.get("max_tokens") not in (None, max_tokens):
        found.append(f"for {before['max_tokens']} tokens, not {max_tokens}")
    return " and ".join(found)


def judge(after: dict, before: dict, same: bool, max_accuracy_drop: float, names: tuple[str, str]) -> tuple[bool, str]:
    """Whether `after` answers as a goal's outputs check asks against `before` (same outputs, or a score no more
    than max_accuracy_drop lower), and the line that says why. names: the two labels, as the check names them."""
    label, compare_to = names
    asked = unlike(before, after.get("model"), after.get("max_tokens"))
    if asked:  # another model's answers, or longer ones, differ whatever the upgrade did
        return False, f"{label} and {compare_to} were not asked alike ({compare_to} was asked {asked}): their outputs " \
                      "cannot be compared"
    differing = [i for i, (a, b) in enumerate(zip(after["outputs"], before["outputs"])) if a != b]
    alike = after["digest"] == before["digest"]
    drop = round(before["accuracy"] - after["accuracy"], 4)
    said = (f"{label}: {after['correct']}/{after['questions']} right, {compare_to}: {before['correct']}/"
            f"{before['questions']}; " + ("the same outputs" if alike else
                                          f"{len(differing)} of {len(after['outputs'])} outputs differ "
                                          f"(prompts {', '.join(map(str, differing))})"))
    if same and not alike:
        return False, said + "; the check asks for the same outputs"
    if drop > max_accuracy_drop:
        return False, said + f"; the score dropped by {drop:.2%}, more than the {max_accuracy_drop:.2%} allowed"
    return True, said


def first_number(text: str) -> int | None:
    found = re.search(r"-?\d+", text)
    return int(found.group()) if found else None


def printable(text: str, limit: int) -> str:
    """What a server said, safe to show anywhere: cut at `limit`, every character that is not printable (controls,
    bidi and other format characters, lone surrogates) written as its code point."""
    return "".join(ch if ch.isprintable() else f"<U+{ord(ch):04X}>" for ch in text[:limit])


def whole(text: str) -> str:
    """An output with each lone surrogate (a server's invalid escape) as U+FFFD: it must encode as UTF-8 wherever
    the record goes."""
    return "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in text)


def last_json(text: str) -> dict | None:
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None
