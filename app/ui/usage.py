"""The tokens a chat used and what they cost, as the chat shows them when it ends.

Counts come from the model's answers as recorded (`model_response` usage): what the server
reported, or, where it reported none, an estimate from the text's size, which is said. A cost is
shown only where a price is known: one configured in UPGRADE_AGENT_PRICE (USD per million prompt
and completion tokens, for whatever model and server), or OpenAI's list price of the model when
the server is OpenAI's own. Otherwise the lines say how to configure one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

PRICE_ENV = "UPGRADE_AGENT_PRICE"
OPENAI_API = "https://api.openai.com/v1"

# USD per million tokens (prompt, completion): OpenAI's published list prices for standard requests.
# Cached-prompt discounts and batch prices are not applied, so the cost shown is an upper bound.
LIST_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4.1": (2.00, 8.00), "gpt-4.1-mini": (0.40, 1.60), "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00), "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.00, 8.00), "o4-mini": (1.10, 4.40),
    "gpt-5": (1.25, 10.00), "gpt-5-mini": (0.25, 2.00), "gpt-5-nano": (0.05, 0.40),
}
_SNAPSHOT = re.compile(r"-\d{4}-\d{2}-\d{2}$")  # gpt-4.1-2025-04-14 is priced as gpt-4.1


@dataclass(frozen=True)
class Price:
    prompt: float  # USD per million prompt tokens
    completion: float  # USD per million completion tokens
    source: str  # where it comes from, in words

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1_000_000


def configured_price(env: Mapping[str, str] | None = None) -> Price | None:
    """The price in UPGRADE_AGENT_PRICE, None when unset; ValueError (one line, with the fix) when unreadable."""
    raw = (os.environ if env is None else env).get(PRICE_ENV, "").strip()
    if not raw:
        return None
    parts = [p for p in re.split(r"[\s,/]+", raw.replace("$", "")) if p]
    try:
        prompt, completion = (float(p) for p in parts)
    except ValueError:
        prompt = completion = -1.0
    if prompt < 0 or completion < 0 or len(parts) != 2:
        raise ValueError(f"{PRICE_ENV}={raw!r} is not a price: give USD per million prompt tokens and per million "
                         f"completion tokens, e.g. {PRICE_ENV}=2.00,8.00")
    return Price(prompt, completion, PRICE_ENV)


def list_price(model: str, base_url: str | None) -> Price | None:
    """OpenAI's list price of `model`, when the server is OpenAI's own; None elsewhere."""
    if (base_url or OPENAI_API).rstrip("/") != OPENAI_API:
        return None  # the same name on another server (a proxy, a local server) costs what that server charges
    prices = LIST_PRICES.get(model) or LIST_PRICES.get(_SNAPSHOT.sub("", model))
    return Price(*prices, source="OpenAI's list price") if prices else None


@dataclass
class _Counts:
    prompt: int = 0
    completion: int = 0
    requests: int = 0
    estimated: int = 0  # answers whose usage was estimated: the server reported none


@dataclass
class UsageTotals:
    """Tokens per model, added up from the answers of a session."""

    by_model: dict[str, _Counts] = field(default_factory=dict)

    def add(self, model: str, usage: dict | None) -> None:
        counts = self.by_model.setdefault(model, _Counts())
        usage = usage or {}
        counts.prompt += int(usage.get("prompt_tokens") or 0)
        counts.completion += int(usage.get("completion_tokens") or 0)
        counts.requests += 1
        counts.estimated += bool(usage.get("estimated"))

    def tokens(self) -> tuple[int, int]:
        """(prompt, completion) tokens so far, over every model."""
        return (sum(c.prompt for c in self.by_model.values()), sum(c.completion for c in self.by_model.values()))

    def since(self, before: tuple[int, int]) -> str:
        """One line after a request: its tokens, and the session's so far (`before`: `tokens()` ahead of it)."""
        prompt, completion = self.tokens()
        p, c = prompt - before[0], completion - before[1]
        about = "about " if any(x.estimated for x in self.by_model.values()) else ""
        return (f"tokens: {about}{p:,} prompt + {c:,} completion for this request; {about}{prompt + completion:,} in "
                "the session")

    def lines(self, price_of: Callable[[str], Price | None], base_url: str | None = None) -> list[str]:
        """The tokens line and the cost line."""
        if not self.by_model:
            return ["tokens: none (no request reached the model)"]
        prompt = sum(c.prompt for c in self.by_model.values())
        completion = sum(c.completion for c in self.by_model.values())
        requests = sum(c.requests for c in self.by_model.values())
        estimated = sum(c.estimated for c in self.by_model.values())
        tokens = (f"tokens: {prompt:,} prompt + {completion:,} completion = {prompt + completion:,} "
                  f"over {requests} turn{'s' * (requests != 1)}")
        if estimated:
            tokens += (" (estimated from the text's size: the server reported no usage"
                       + (")" if estimated == requests else f" for {estimated} of them)"))
        else:
            tokens += " (as the server reported them)"
        return [tokens, self._cost_line(price_of, base_url, about=bool(estimated))]

    def _cost_line(self, price_of: Callable[[str], Price | None], base_url: str | None, about: bool) -> str:
        priced, unpriced, total = [], [], 0.0
        for model, c in self.by_model.items():
            price = price_of(model)
            if price is None:
                unpriced.append(model)
                continue
            cost = price.cost(c.prompt, c.completion)
            total += cost
            priced.append(f"{model} at ${price.prompt:.2f} / ${price.completion:.2f} per million prompt / "
                          f"completion tokens, {price.source}")
        where = f" at {base_url}" if base_url else ""
        hint = f"set {PRICE_ENV}=PROMPT,COMPLETION (USD per million tokens) to see one"
        if not priced:
            return f"cost: no price known for {', '.join(unpriced)}{where}; {hint}"
        line = f"cost: {'about ' if about else ''}{_usd(total)} ({'; '.join(priced)})"
        if unpriced:
            line += f", and no price known for {', '.join(unpriced)}; {hint}"
        return line


def _usd(amount: float) -> str:
    return f"${amount:.4f}" if amount < 1 else f"${amount:,.2f}"


def usage_of_record(events: Iterable[dict]) -> UsageTotals:
    """The tokens of a recorded session, per model, from its model_response events (a `model` note, as
    /model records it, moves the rest to the model named)."""
    totals, model = UsageTotals(), "?"
    for ev in events:
        if ev.get("type") == "session_start":
            model = str(ev.get("model") or "?")
        elif ev.get("type") == "note" and ev.get("kind") == "model" and ev.get("model"):
            model = str(ev["model"])
        elif ev.get("type") == "model_response":
            totals.add(model, ev.get("usage"))
    return totals


def session_usage_lines(events: Iterable[dict], base_url: str | None) -> list[str]:
    """The tokens line and the cost line of a recorded session, priced as configured or by the list price."""
    try:
        configured = configured_price()
    except ValueError:
        configured = None  # unreadable: the run said so at its start
    return usage_of_record(events).lines(lambda model: configured or list_price(model, base_url), base_url)
