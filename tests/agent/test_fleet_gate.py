"""The rollout's benchmark gate and its batches: what passes, what stops, from figures alone."""

from __future__ import annotations

import pytest

from agent.fleet.rollout import HostOutcome, over_threshold, plan_batches
from agent.fleet.stats import bootstrap_gate

BEFORE = [89.5, 89.7, 89.3, 89.6, 89.4]


def test_a_real_gain_passes_a_real_drop_fails_and_noise_is_not_a_drop():
    assert bootstrap_gate(BEFORE, [96.1, 96.3, 95.9, 96.0, 96.2], 0, 0.95).passed
    assert not bootstrap_gate(BEFORE, [85.1, 85.3, 84.9, 85.0, 85.2], 2, 0.95).passed  # 5% slower
    same = [89.4, 89.6, 89.2, 89.5, 89.3]
    assert bootstrap_gate(BEFORE, same, 2, 0.95).passed  # within 2%
    assert not bootstrap_gate(BEFORE, same, 0, 0.95).passed  # "no drop at all" cannot be shown


def test_one_lucky_run_does_not_pass_a_slower_host():
    slower = [86.0, 86.2, 85.9, 86.1, 99.0]  # one outlier drags the median nowhere, the mean up
    assert not bootstrap_gate(BEFORE, slower, 2, 0.95).passed


def test_for_a_latency_lower_is_better():
    assert bootstrap_gate([20.0, 20.2, 19.9], [18.0, 18.1, 17.9], 0, 0.95, higher_is_better=False).passed
    assert not bootstrap_gate([20.0, 20.2, 19.9], [22.0, 22.1, 21.9], 2, 0.95, higher_is_better=False).passed


def test_the_same_figures_give_the_same_interval_every_time():
    a = bootstrap_gate(BEFORE, [90.1, 89.0, 91.2, 88.7, 90.0], 1, 0.95)
    b = bootstrap_gate(list(reversed(BEFORE)), [90.0, 88.7, 91.2, 89.0, 90.1], 1, 0.95)  # runs in another order
    assert (a.low, a.high, a.ratio, a.passed) == (b.low, b.high, b.ratio, b.passed)
    assert a == bootstrap_gate(BEFORE, [90.1, 89.0, 91.2, 88.7, 90.0], 1, 0.95)


def test_too_few_runs_are_refused():
    with pytest.raises(ValueError, match="at least 2 runs"):
        bootstrap_gate([1.0], [1.0, 2.0], 2, 0.95)


def test_batches_put_the_canary_alone_first():
    hosts = [f"h{i:02}" for i in range(1, 33)]
    batches = plan_batches(hosts, 1, 8)
    assert [len(b) for b in batches] == [1, 8, 8, 8, 7] and batches[0] == ["h01"]
    assert plan_batches(hosts[:3], 0, 2) == [["h01", "h02"], ["h03"]]


def outcomes(*statuses: str) -> list[HostOutcome]:
    return [HostOutcome(host=f"h{i}", status=s, reason="", batch=0) for i, s in enumerate(statuses)]


def test_the_threshold_counts_failures_of_the_hosts_attempted_and_not_the_held_ones():
    assert over_threshold(outcomes("changed", "failed", "held", "held"), 50) is None  # 1 of 2: 50%, not over
    assert "2 of 3 hosts attempted failed (67%)" in over_threshold(outcomes("changed", "failed", "unreachable"), 50)
    assert over_threshold(outcomes("changed", "changed"), 0) is None
    assert over_threshold(outcomes("changed", "failed"), 0) is not None


def test_a_canary_that_asked_for_no_loss_gives_the_fleet_a_gate_that_lets_noise_pass():
    """A goal's `min_ratio: 1.0` (the canary's own check) became a 0% margin, which no host whose throughput
    did not move can pass: the recipe's gate allows the default 2% then, and a goal's larger allowance
    stays its own."""
    from agent.fleet.recipe import DEFAULT_MAX_DROP_PERCENT, _benchmark

    calls = {1: {"tool": "run_bench", "arguments": {"command": "bench", "parser": "p", "label": "before"}},
             2: {"tool": "run_bench", "arguments": {"command": "bench", "parser": "p", "label": "after",
                                                     "compare_to": "before"}}}
    assert _benchmark(calls, {}, [1, 2], 1.0).gate.max_drop_percent == DEFAULT_MAX_DROP_PERCENT == 2.0
    assert _benchmark(calls, {}, [1, 2], None).gate.max_drop_percent == 2.0
    assert _benchmark(calls, {}, [1, 2], 0.9).gate.max_drop_percent == 10.0
    unmoved = [89.45, 89.62, 89.31, 89.58, 89.40]  # after/before 0.999: what a harmless upgrade measures
    assert bootstrap_gate(BEFORE, unmoved, DEFAULT_MAX_DROP_PERCENT, 0.95).passed


def test_a_host_stopped_before_its_first_step_ends_unchanged_and_says_a_drain_it_kept():
    """It used to end 'interrupted: look at it', though no step had begun; one our drain still holds says so."""
    from agent.fleet.host import INTERRUPTED, HostOutcome

    stopped = HostOutcome(host="gpu01", status=INTERRUPTED, reason="the rollout was interrupted", batch=0,
                          steps_begun=0)
    assert stopped.ended() == "unchanged: interrupted before its first step"
    assert stopped.as_dict()["steps_begun"] == 0
    drained = HostOutcome(host="gpu01", status=INTERRUPTED, reason="", batch=0, steps_begun=0, drained="ours",
                          undrained=False)
    assert drained.ended() == "unchanged: interrupted before its first step, LEFT DRAINED (undrain it by hand)"
    from_a_record = HostOutcome(host="gpu01", status=INTERRUPTED, reason="", batch=-1)  # how far it got: unknown
    assert from_a_record.ended() == "interrupted: look at it"
