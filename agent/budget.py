"""What one session may spend: the goal file's `budget:` and the loop's limits are this one model."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Budget(BaseModel):
    """Turns count per request (each chat message gets them anew); tokens and minutes per session."""

    model_config = ConfigDict(extra="forbid")

    turns: int = Field(default=40, ge=1)
    tokens: int | None = Field(default=None, ge=1)
    minutes: float | None = Field(default=None, gt=0, allow_inf_nan=False)  # .inf would be no budget at all

    @property
    def max_wall_s(self) -> float | None:
        return self.minutes * 60 if self.minutes else None

    def spent(self, turns: int, tokens: int, elapsed_s: float, tokens_estimated: bool = False) -> str | None:
        """Why no new turn may start (turns of this request, tokens and seconds of the session), or None.

        `tokens_estimated`: some of the tokens were counted from the text's size, the server having
        reported none; the message says so.
        """
        if turns >= self.turns:
            return f"turn budget of {self.turns} reached"
        if self.tokens is not None and tokens >= self.tokens:
            how = ", estimated from the text's size: the model server reports no usage" if tokens_estimated else ""
            return f"token budget of {self.tokens} reached ({tokens} used{how})"
        if self.max_wall_s is not None and elapsed_s >= self.max_wall_s:
            return f"time budget of {self.max_wall_s:g} s reached"
        return None

    def as_record(self) -> dict:
        """The form a transcript's session_start keeps (the loop's limits, in seconds)."""
        return {"max_turns": self.turns, "max_tokens": self.tokens, "max_wall_s": self.max_wall_s}

    @classmethod
    def from_record(cls, record: dict) -> "Budget":
        wall = record.get("max_wall_s")
        return cls(turns=record.get("max_turns") or 40, tokens=record.get("max_tokens"),
                   minutes=wall / 60 if wall else None)
