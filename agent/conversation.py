"""The message list of a session, with what the loop and compaction need to know of it without re-reading it.

Each message is hashed as the transcript stores it (redacted), into a running digest that each
`model_request` event records: a replay computes the same digest, and the request's digest costs
nothing however long the list is. Each message's recorded size and the turn it came in are kept for
the context estimate and for compaction's "turns 3-17 folded" (agent/compaction.py).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable


class Conversation:
    """The messages sent to the model, in order."""

    def __init__(self, redact: Callable[[Any], Any]):
        self._redact = redact
        self.messages: list[dict] = []
        self.sizes: list[int] = []  # each message's size as recorded, in bytes
        self.turns: list[int] = []  # the turn each message came in
        self._hash = hashlib.sha256()

    def add(self, message: dict, turn: int) -> None:
        self.messages.append(message)
        encoded = json.dumps(self._redact(message), sort_keys=True, default=str).encode()
        self._hash.update(encoded)
        self.sizes.append(len(encoded))
        self.turns.append(turn)

    def replace(self, messages: list[dict], turn: int) -> None:
        """Replace the whole list (a compaction), its digest and sizes computed again; a kept message keeps
        the turn it came in, a new one is of `turn`."""
        came_in = dict(zip(map(id, self.messages), self.turns))
        self.messages, self.sizes, self.turns = [], [], []
        self._hash = hashlib.sha256()
        for message in messages:
            self.add(message, came_in.get(id(message), turn))

    def digest(self) -> str:
        return self._hash.hexdigest()[:16]

    def first_user_index(self) -> int | None:
        return next((i for i, m in enumerate(self.messages) if m.get("role") == "user"), None)

    def __len__(self) -> int:
        return len(self.messages)


class Compactor:
    """When a session's conversation nears the model's context, its older turns are folded into a summary
    (agent/compaction.py says how); a replay applies the recorded folds where the live session made them."""

    def __init__(self, session: Any, context_tokens: int | None, live: bool):
        self.session = session
        self.context_tokens = context_tokens  # None: the model's own or a default (compaction.context_limit)
        self.live = live  # False (replay): only the compactions of the record are applied
        self.recorded: list[dict] = []
        self._tools_tokens: int | None = None

    def prompt_tokens_estimate(self) -> int:
        """The next request's prompt, estimated from the recorded size of every message and the tools."""
        from agent.compaction import message_tokens  # lazy: only a long session needs it

        if self._tools_tokens is None:
            self._tools_tokens = message_tokens(len(json.dumps(self.session.schemas, sort_keys=True)))
        return self._tools_tokens + sum(message_tokens(size) for size in self.session.conversation.sizes)

    def before_request(self) -> None:
        """Fold the older turns if the next request would near the context (or the record folded here)."""
        s = self.session
        if self.recorded:
            ev = self.recorded.pop(0)
            s.tokens += ev.get("tokens", 0)
            self._fold(ev["folded"][1], ev["summary"], ev.get("method", "built"), ev.get("limit", 0),
                       ev.get("note", ""), tokens=ev.get("tokens", 0))
            return
        if not self.live:
            return
        from agent import compaction  # lazy: most sessions never get near their context

        limit, source = compaction.context_limit(s.model, self.context_tokens)
        if self.prompt_tokens_estimate() <= limit * compaction.TRIGGER:
            return
        conversation = s.conversation
        cut = compaction.cut_point(conversation.messages, conversation.sizes, limit)
        head = conversation.first_user_index()
        if cut is None or head is None or cut <= head + 1:
            return
        _, previous = compaction.split_summary(_content(conversation.messages[head]))
        facts = {"backups": [b.model_dump(mode="json") for b in s.gate.ledger.all()],
                 "refused": [{"subject": d.subject, "rule": d.rule, "reason": d.reason} for d in s.refused]}
        summary = compaction.summarize(s.model, previous, conversation.messages[head + 1:cut], facts, limit)
        tokens = summary.usage.total_tokens if summary.usage is not None else 0
        s.tokens += tokens
        self._fold(cut, summary.text, summary.method, limit, summary.note, source, tokens)

    def _fold(self, cut: int, summary: str, method: str, limit: int, note: str = "", source: str = "",
              tokens: int = 0) -> None:
        from agent import compaction  # lazy: as above

        conversation = self.session.conversation
        messages = conversation.messages
        head = conversation.first_user_index()
        if head is None or not head + 1 < cut <= len(messages):
            return  # nothing to fold there (a replay whose record differs: its next digest says so)
        original, _ = compaction.split_summary(_content(messages[head]))
        turns = (conversation.turns[head + 1], conversation.turns[cut - 1])
        first = {"role": "user", "content": compaction.with_summary(original, summary, turns, method)}
        before = self.prompt_tokens_estimate()
        kept = messages[:head] + [first] + messages[cut:]
        self.session.emit("compaction", turn=self.session.turns, folded=[head + 1, cut], turns=list(turns),
                          messages_before=len(messages), messages_after=len(kept), tokens_before=before, limit=limit,
                          **({"limit_source": source} if source else {}), method=method,
                          **({"note": note} if note else {}), tokens=tokens, summary=summary)
        conversation.replace(kept, self.session.turns)


def _content(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""
