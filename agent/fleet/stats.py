"""The benchmark gate of a rollout: did a host get slower, beyond what its own noise explains?

A bootstrap interval of the ratio of the means (after / before, or before / after for a metric
where lower is better): both sides resampled with replacement, and the gate passes when the lower
end of the interval at the recipe's confidence is at least 1 - max_drop. With the 5 runs a side a
recipe asks for, one lucky or unlucky run cannot pass or fail a host on its own, as a comparison of
two medians can. The resampling is seeded from the values themselves, so the same record gives the
same verdict whenever it is read (a replay, a report) and the figures in a report are the gate's.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass

RESAMPLES = 4000


@dataclass(frozen=True)
class GateResult:
    passed: bool
    ratio: float  # the point estimate: better / worse side's mean, > 1 is better
    low: float  # the lower end of the interval
    high: float
    confidence: float
    floor: float  # the ratio the lower end must reach
    detail: str

    def as_dict(self) -> dict:
        return {"passed": self.passed, "ratio": round(self.ratio, 4), "low": round(self.low, 4),
                "high": round(self.high, 4), "confidence": self.confidence, "floor": round(self.floor, 4),
                "detail": self.detail}


def bootstrap_gate(before: list[float], after: list[float], max_drop_percent: float, confidence: float,
                   higher_is_better: bool | None = True, metric: str = "the metric") -> GateResult:
    if len(before) < 2 or len(after) < 2:
        raise ValueError("the gate needs at least 2 runs on each side")
    if min(before) <= 0 or min(after) <= 0:
        raise ValueError("the gate compares ratios of positive figures")
    shown = f"runs before {_fmt(before)}, after {_fmt(after)}"
    before, after = sorted(before), sorted(after)  # the order runs were measured in changes nothing
    better, worse = (before, after) if higher_is_better is False else (after, before)
    seed = hashlib.sha256(repr((before, after)).encode()).digest()
    rng = random.Random(seed)
    ratios = sorted(_mean(rng.choices(better, k=len(better))) / _mean(rng.choices(worse, k=len(worse)))
                    for _ in range(RESAMPLES))
    tail = (1 - confidence) / 2
    low = ratios[int(tail * RESAMPLES)]
    high = ratios[min(RESAMPLES - 1, int((1 - tail) * RESAMPLES))]
    ratio = _mean(better) / _mean(worse)
    floor = 1 - max_drop_percent / 100
    passed = low >= floor
    word = "at least" if passed else "below"
    detail = (f"{metric}: after/before {ratio:.3f} ({confidence:.0%} interval {low:.3f}-{high:.3f}); the lower end "
              f"is {word} {floor:.3f} (a drop of at most {max_drop_percent:g}%); {shown}")
    return GateResult(passed, ratio, low, high, confidence, floor, detail)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values)


def _fmt(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:g}" for v in values) + "]"
