"""What the claim check gives: one Finding per statement, and the ClaimCheck that holds them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Finding:
    """One statement of the answer and what the record says about it."""

    kind: str  # throughput | change | version | toolkit | step
    quote: str  # the words of the answer it checks
    says: str  # "the model says 96.02 tok/s after"
    record: str  # "measured 95.91 (median of 3 runs, turn 5, call 1)"
    agrees: bool

    @property
    def text(self) -> str:
        return f"{self.says}; {self.record}"


@dataclass
class ClaimCheck:
    """The findings about one final answer."""

    answer: str | None
    answer_turn: int | None
    findings: list[Finding] = field(default_factory=list)

    @property
    def differences(self) -> list[Finding]:
        return [f for f in self.findings if not f.agrees]

    @property
    def confirmed(self) -> list[Finding]:
        return [f for f in self.findings if f.agrees]

    @property
    def headline(self) -> str:
        """`Checked against the record: 2 claims differ, 3 confirmed`, and the like."""
        if not self.answer:
            return "Checked against the record: the model gave no final answer"
        if not self.findings:
            return "Checked against the record: the answer states nothing the record can confirm or contradict"
        n, ok = len(self.differences), len(self.confirmed)
        if not n:
            return f"Checked against the record: {count(ok, 'claim')} confirmed, none differ"
        return (f"Checked against the record: {count(n, 'claim')} {'differs' if n == 1 else 'differ'}"
                + (f", {ok} confirmed" if ok else ""))

    def lines(self, confirmed: bool = False) -> list[str]:
        """Short lines for a terminal: the headline, each difference, and each confirmation if asked."""
        out = [self.headline] + [f"  differs: {f.text}" for f in self.differences]
        return out + ([f"  confirmed: {f.text}" for f in self.confirmed] if confirmed else [])


def count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"
