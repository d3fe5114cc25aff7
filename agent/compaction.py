"""Compaction: when a conversation nears the model's context, its older turns are folded into a summary.

The message list keeps the system prompt, the first user message (the goal or the first request)
and the most recent turns; everything in between is replaced by a summary appended to that first
user message (one message, so chat templates that want user and assistant turns to alternate
still accept the list). The summary is written by the model when one is live (a request without
tools that asks for it) and built from the folded messages otherwise: the calls made, the latest
result of each, what the model last said, the backups and refusals so far. A scripted model always
gets the built one, so a test or a benchmark is deterministic.

The summary is only the model's memory. What may run never depends on it: backups, approvals and
the scope stay in the gate and its ledger, which compaction does not touch.

Each compaction is a `compaction` event (where it cut, the summary, who wrote it); a replay applies
the recorded one at the same point instead of asking anyone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agent.model.protocol import BYTES_PER_TOKEN, ModelError

# Context sizes by model family, for a model whose server does not say its own (llama.cpp does).
KNOWN_CONTEXTS = (
    (re.compile(r"^(gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-5|o1|o3|o4)"), 128_000),
    (re.compile(r"^(claude)"), 200_000),
)
DEFAULT_CONTEXT = 32_000  # an unknown model, e.g. a local one: what most of them are served with

# Compact when the prompt is estimated above this share of the context; the reply needs room too.
TRIGGER = 0.75
# After a compaction the recent turns kept take at most this share of the context.
KEEP = 0.30
# The summary itself stays within this share of the context (and the hard cap below).
SUMMARY_SHARE = 0.08
SUMMARY_MAX_CHARS = 12_000
# What the model is asked to summarise: each folded message at most this long.
FOLDED_MESSAGE_CHARS = 1_500
LATEST_FACTS = 40  # results kept in a built summary, the most recent

SUMMARY_HEADER = "[Summary of the earlier conversation"
SUMMARY_REQUEST = (
    "You are summarising the earlier part of a session in which an assistant upgrades GPU machines through "
    "tools. Write a short factual summary for the assistant to go on from: what was found on each host "
    "(versions, GPUs, disk), which changes ran and how they ended, what failed or was refused, what is left "
    "to do. Keep exact versions, paths, backup ids and figures. No advice, no preamble.")

# The process's setting from the command line (--context-tokens), for sessions that are not given one.
_configured: int | None = None


def configure(context_tokens: int | None) -> None:
    """Set the context size every session of this process assumes unless it is given its own."""
    global _configured
    _configured = context_tokens


def context_limit(model: Any, given: int | None = None) -> tuple[int, str]:
    """The context size a session keeps within, and where it comes from."""
    if given:
        return given, "given"
    if _configured:
        return _configured, "--context-tokens"
    learned = getattr(model, "context_size", None)
    if isinstance(learned, int) and learned > 0:
        return learned, "model server"
    name = str(getattr(model, "name", "")).lower().rpartition("/")[2]
    for pattern, size in KNOWN_CONTEXTS:
        if pattern.match(name):
            return size, f"default for {name}"
    return DEFAULT_CONTEXT, "default"


def message_tokens(size_bytes: int) -> int:
    """A message's share of the prompt estimate, from the size of its JSON (a little over its text)."""
    return (size_bytes + BYTES_PER_TOKEN - 1) // BYTES_PER_TOKEN + 4


def writes_summaries(model: Any) -> bool:
    """Whether the model is asked to write the summary: a live one, not a scripted or replayed one."""
    declared = getattr(model, "writes_summaries", None)
    if declared is not None:
        return bool(declared)
    from agent.model.scripted import ScriptedModel  # lazy: only when a compaction happens

    inner = getattr(model, "model", model)  # chat wraps its model
    return not isinstance(inner, ScriptedModel) and not isinstance(model, ScriptedModel)


def cut_point(messages: list[dict], sizes: list[int], limit: int) -> int | None:
    """Where the kept tail starts: the earliest turn boundary after which at most KEEP of the context
    remains, never before message 2 (system prompt and first user message stay). None: nothing to fold."""
    budget = int(limit * KEEP)
    kept = 0
    cut = None
    for i in range(len(messages) - 1, 1, -1):
        kept += message_tokens(sizes[i])
        if kept > budget:
            break
        if messages[i].get("role") in ("assistant", "user"):  # a turn starts here: its tool results follow it
            cut = i
    if cut is None:  # even the last turn alone is over the share: keep just it
        cut = next((i for i in range(len(messages) - 1, 1, -1) if messages[i].get("role") in ("assistant", "user")),
                   None)
    if cut is None or cut <= 2:
        return None
    return cut


@dataclass
class Summary:
    text: str
    method: str  # "model" | "built"
    note: str = ""  # why the model's summary was not used
    usage: Any = None


def summarize(model: Any, previous: str, folded: list[dict], facts: dict, limit: int) -> Summary:
    """The summary of `folded` (with the previous summary folded into it): the model's, or a built one."""
    cap = min(SUMMARY_MAX_CHARS, int(limit * SUMMARY_SHARE * BYTES_PER_TOKEN))
    built = build_summary(previous, folded, facts, cap)
    if not writes_summaries(model):
        return Summary(built, "built")
    request = [{"role": "system", "content": SUMMARY_REQUEST},
               {"role": "user", "content": _folded_text(previous, folded, int(limit * 0.4 * BYTES_PER_TOKEN))}]
    try:
        reply = model.complete(request, [])
    except ModelError as e:
        return Summary(built, "built", note=f"the model's summary failed: {e}")
    text = (reply.text or "").strip()
    if not text or reply.tool_calls:
        return Summary(built, "built", note="the model's summary was empty", usage=reply.usage)
    # The safety facts are appended from the record whatever the model wrote: they must not be lost.
    return Summary(text[:cap] + "\n" + _safety_lines(facts), "model", usage=reply.usage)


def _folded_text(previous: str, folded: list[dict], cap: int) -> str:
    parts = [f"Earlier summary:\n{previous}"] if previous else []
    for m in folded:
        role = m.get("role")
        if role == "assistant":
            calls = "; ".join(f"{c['function']['name']}({c['function']['arguments']})" for c in m.get("tool_calls") or [])
            parts.append(f"assistant: {(m.get('content') or '').strip()[:FOLDED_MESSAGE_CHARS]}"
                         + (f"\ncalls: {calls[:FOLDED_MESSAGE_CHARS]}" if calls else ""))
        else:
            parts.append(f"{role}: {_text(m)[:FOLDED_MESSAGE_CHARS]}")
    text = "\n\n".join(parts)
    return text if len(text) <= cap else "[...]\n" + text[-cap:]


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)


_FACT = re.compile(r"^- \[(?P<key>[^\]]+)\] (?P<text>.*)$")
_CALLS = re.compile(r"^Calls folded so far: (?P<n>\d+)")


def build_summary(previous: str, folded: list[dict], facts: dict, cap: int) -> str:
    """A summary built from the folded messages alone: deterministic, bounded by `cap` characters."""
    latest: dict[str, str] = {}
    calls_before = 0
    for line in previous.splitlines():
        m = _FACT.match(line)
        if m and not m.group("key").startswith(("backup", "refused")):
            latest[m.group("key")] = m.group("text")
        c = _CALLS.match(line)
        if c:
            calls_before = int(c.group("n"))
    pending: dict[str, str] = {}  # call id -> key of its fact, until its result comes
    said = ""
    calls = 0
    for m in folded:
        role = m.get("role")
        if role == "assistant":
            said = (m.get("content") or "").strip() or said
            for c in m.get("tool_calls") or []:
                calls += 1
                name, raw = c["function"]["name"], c["function"]["arguments"]
                key = f"{name} {_short_args(raw)}"
                pending[c["id"]] = key
                latest.pop(key, None)
                latest[key] = "(no result)"
        elif role == "tool":
            key = pending.pop(m.get("tool_call_id"), None)
            if key is not None:
                latest[key] = _first_line(_text(m))
    lines = [f"Calls folded so far: {calls_before + calls}"]
    if said:
        lines.append(f"What you said last in the folded part: {said[:400]}")
    keep = list(latest.items())[-LATEST_FACTS:]
    facts_lines = [f"- [{k}] {v}" for k, v in keep]
    safety = _safety_lines(facts)
    body = "\n".join(lines + ["Latest result of each call (oldest first):"] + facts_lines)
    while len(body) + len(safety) + 1 > cap and facts_lines:
        facts_lines.pop(0)  # the oldest facts go first
        body = "\n".join(lines + ["Latest result of each call (oldest first):"] + facts_lines)
    return (body + "\n" + safety)[:cap]


def _safety_lines(facts: dict) -> str:
    """Backups and refusals as the gate has them: the summary repeats them for the model only."""
    lines = ["Kept by the safety layer itself (this summary never decides what may run):"]
    for b in facts.get("backups", [])[-10:]:
        lines.append(f"- [backup {b['backup_id']}] verified backup of {b['target']} on {b['host']}")
    for r in facts.get("refused", [])[-10:]:
        lines.append(f"- [refused {r['subject'][:80]}] {r['rule']}: {r['reason'][:160]}")
    if len(lines) == 1:
        lines.append("- no verified backup and no refusal so far")
    return "\n".join(lines)


def _short_args(raw: str) -> str:
    try:
        value = json.loads(raw)
    except (ValueError, TypeError):
        return raw[:120]
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False)[:160]
    return str(value)[:160]


def _first_line(text: str) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line[:200]


def with_summary(first_user: str, summary: str, turns: tuple[int, int], method: str) -> str:
    """The first user message with the summary of the folded turns after it."""
    who = "written by the model" if method == "model" else "built from the record"
    return (f"{first_user}\n\n{SUMMARY_HEADER}, turns {turns[0]} to {turns[1]}, folded to stay within the model's "
            f"context; {who}]\n{summary}")


def split_summary(content: str) -> tuple[str, str]:
    """A first user message as (what the user wrote, the summary appended to it by a compaction, or "")."""
    marker = "\n\n" + SUMMARY_HEADER
    original, found, rest = content.partition(marker)
    if not found:
        return content, ""
    return original, rest.partition("]\n")[2]
