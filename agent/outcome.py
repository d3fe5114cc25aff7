"""How a request of a session ends, and the replies a model server cut off on the way.

A reply the server cut off at its token limit is never a final answer: the model is asked to go on,
a bounded number of times, and the request ends as "cut_off" when it never finishes. What the model
said in the replies cut off is kept, so the final answer it ends with is whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent.model import AssistantTurn

# Replies in a row the server may cut off at its token limit before the request ends as cut off.
MAX_CUT_OFF_TURNS = 3
# What the model reads for a call of a reply the server cut off.
CUT_OFF_CALL = ("not run: your reply was cut off by the model server's limit on generated tokens before it ended, "
                "so this call of it may be incomplete; send the calls again, fewer or shorter at once")
# What the model reads after a reply the server cut off: the next turn goes on from there.
GO_ON = "[your reply was cut off by the model server's limit on generated tokens; go on from exactly where it stopped]"


@dataclass
class Outcome:
    """How a `send` ended."""

    status: str  # done | budget | malformed | cut_off | model_error | interrupted | crashed
    reason: str = ""
    final_text: str = ""
    kind: str = ""  # for model_error, what failed: ModelError.kind (config, rejected, context, server, unreachable,
    # stopped)


@dataclass
class CutOffReplies:
    """The replies of one request the server cut off, in a row, and what they said."""

    streak: int = 0
    said: list[str] = field(default_factory=list)

    def new_request(self) -> None:
        self.streak, self.said = 0, []  # an earlier request's unfinished reply is not this one's

    def replied(self, reply: AssistantTurn) -> None:
        self.streak = self.streak + 1 if reply.cut_off else 0
        if reply.tool_calls:
            self.said = []  # the model acted instead of finishing what it was saying

    def answer(self, reply: AssistantTurn) -> Outcome | None:
        """A reply without tool calls: the final answer (with what the replies cut off before it said), the
        end of a request cut off too often, or None: the model is to go on."""
        if not reply.cut_off:
            text, self.said = "".join(self.said) + reply.text, []
            return Outcome("done", "final answer", text)
        self.said.append(reply.text)
        return self.ends(reply)

    def ends(self, reply: AssistantTurn) -> Outcome | None:
        """Cut off too many times in a row: the request ends as cut off, never as done."""
        if self.streak < MAX_CUT_OFF_TURNS:
            return None
        return Outcome("cut_off", f"the model's reply was cut off by the model server's limit on generated tokens "
                                  f"{MAX_CUT_OFF_TURNS} times in a row (finish_reason {reply.finish_reason!r}): raise "
                                  f"that limit (llama.cpp: --n-predict; vLLM and others: max_tokens)",
                       "".join(self.said))
