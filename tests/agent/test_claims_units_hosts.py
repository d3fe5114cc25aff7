"""Claims are checked by unit and by host: real sessions on simulated hosts, driven by scripted models, whose
recorded Reports are read with answers that state their figures the ways a model writes them."""

from __future__ import annotations

import dataclasses
import statistics

import pytest

from agent.budget import Budget
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter
from agent.report import build_report, check_report
from agent.report.data import Report
from agent.safety.policy import SafetyPolicy
from tools import default_tools
from tools.base import Registry
from tools.hosts import HostPool
from tools.sim import build_sim

BENCH = "/opt/venv/bin/python -m sglang.bench_serving --backend sglang --num-prompts 10"


def bench(host: str, label: str, **extra) -> tuple[str, dict]:
    return ("run_bench", {"host": host, "command": BENCH, "parser": "sglang_bench_serving", "runs": 3, "warmup": 0,
                          "label": label, **extra})


def record(path, sims: dict, turns: list) -> Report:
    """A real session on the sims (name -> Sim), closed as `agent chat` closes one, read back as a Report."""
    s = Session(model=ScriptedModel(turns + [turn("Done.")]), registry=Registry(default_tools()),
                gate=SafetyPolicy(scope=set(sims)), transcript=TranscriptWriter(path),
                hosts=HostPool([sim.host_spec(name) for name, sim in sims.items()]), budget=Budget(turns=12),
                start_info={"command": "chat"})
    outcome = s.send("Benchmark the hosts and report.")
    s.close(outcome.status, outcome.reason)
    return build_report(path)


def medians(report: Report) -> dict[tuple[str, str], float]:
    """(host, label) -> the median the record holds."""
    return {(s.host, s.data["label"]): statistics.median(s.data["values"]) for s in report.benchmarks}


def answered(report: Report, answer: str):
    return check_report(dataclasses.replace(report, final_answer=answer))


def texts(findings) -> list[str]:
    return [f.text for f in findings]


# --------------------------------------------------------------------------- units


@pytest.fixture(scope="module")
def one_host(tmp_path_factory) -> Report:
    """One host measured for throughput (tok/s) and for time to first token (ms), each before and after."""
    root = tmp_path_factory.mktemp("units")
    ttft = {"metric": "mean_ttft_ms"}
    return record(root / "t.jsonl", {"sim": build_sim(root / "sim")}, [
        turn(calls=[bench("sim", "ttft-before", **ttft), bench("sim", "before")]),
        turn(calls=[bench("sim", "ttft-after", compare_to="ttft-before", **ttft),
                    bench("sim", "after", compare_to="before")])])


@pytest.fixture(scope="module")
def throughput_only(tmp_path_factory) -> Report:
    root = tmp_path_factory.mktemp("throughput")
    return record(root / "t.jsonl", {"sim": build_sim(root / "sim")},
                  [turn(calls=[bench("sim", "before")]), turn(calls=[bench("sim", "after", compare_to="before")])])


def test_a_latency_pair_is_compared_with_the_latency_comparison_never_the_throughput_one(one_host):
    m = medians(one_host)
    ttft_before, ttft_after = m[("sim", "ttft-before")], m[("sim", "ttft-after")]
    [finding] = answered(one_host, f"TTFT went from {ttft_before + 40:.2f} to {ttft_after + 40:.2f} ms.").findings
    assert not finding.agrees
    assert finding.record.startswith(f"measured {ttft_before:.6g} -> {ttft_after:.6g} (ttft-before -> ttft-after, ")
    [finding] = answered(one_host, f"TTFT went from {ttft_before:.2f} to {ttft_after:.2f} ms.").findings
    assert finding.agrees, finding.text


def test_a_latency_pair_is_not_set_against_a_throughput_when_no_latency_was_measured(throughput_only):
    check = answered(throughput_only, "Mean TTFT went from 160.5 to 170.25 ms.")
    assert check.findings == [], texts(check.findings)


def test_a_change_of_latency_is_checked_against_the_latency_comparison(one_host):
    m = medians(one_host)
    change = (m[("sim", "ttft-after")] / m[("sim", "ttft-before")] - 1) * 100
    [finding] = answered(one_host, "The latency (TTFT) is 30% lower after the upgrade.").findings
    assert not finding.agrees
    assert finding.record.endswith(f"measured {change:+.2f}% (ttft-after {m[('sim', 'ttft-after')]:.6g} vs ttft-before "
                                   f"{m[('sim', 'ttft-before')]:.6g} ms, turn 2, call 1)"), finding.text


def test_a_figure_in_ms_under_a_throughput_label_is_left_alone(one_host):
    """'after 12 ms' is not the tok/s figure the label 'after' measured; the tok/s one beside it is checked (a guard:
    the check already skipped it)."""
    m = medians(one_host)
    check = answered(one_host, f"Throughput after {m[('sim', 'after')]:.2f} tok/s; after 12 ms to first token.")
    assert texts(check.findings) == [f"the model says {m[('sim', 'after')]:.2f} tok/s after; measured "
                                     f"{m[('sim', 'after')]:.6g} (median of 3 runs, turn 2, call 2)"]


# --------------------------------------------------------------------------- hosts


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory) -> Report:
    """Two hosts each measured before and after under the labels the system prompt asks for, one host at a
    time; gpu2 runs another driver."""
    root = tmp_path_factory.mktemp("hosts")
    sims = {"gpu1": build_sim(root / "g1"), "gpu2": build_sim(root / "g2", driver_version="580.95.05")}
    return record(root / "t.jsonl", sims, [
        turn(calls=[("inspect_host", {"host": "gpu1"}), ("inspect_host", {"host": "gpu2"})]),
        turn(calls=[bench("gpu1", "before")]), turn(calls=[bench("gpu2", "before")]),
        turn(calls=[bench("gpu1", "after", compare_to="before")]),
        turn(calls=[bench("gpu2", "after", compare_to="before")])])


def test_a_sentence_about_one_host_is_never_matched_against_the_other_hosts_record(two_hosts):
    m = medians(two_hosts)
    gpu2_before = f"{m[('gpu2', 'before')]:.2f}"
    check = answered(two_hosts, f"gpu1: before {gpu2_before} tok/s.")
    assert texts(check.findings) == [f"the model says {gpu2_before} tok/s for gpu1's before; measured "
                                     f"{m[('gpu1', 'before')]:.6g} tok/s on gpu1 (median of 3 runs, turn 2, call 1)"]
    assert check.differences == check.findings
    # The same figure for gpu2 is gpu2's.
    assert [f.agrees for f in answered(two_hosts, f"On gpu2 it was {gpu2_before} tok/s before.").findings] == [True]


def test_a_version_said_of_one_host_is_checked_against_that_hosts_inspection(two_hosts):
    check = answered(two_hosts, "gpu2 runs driver 590.48.01.")
    [finding] = check.findings
    assert not finding.agrees
    assert finding.text == "the model says driver 590.48.01 on gpu2; the record shows 580.95.05 (inspect_host, turn 1, call 2)"
    assert [f.agrees for f in answered(two_hosts, "gpu1 runs driver 590.48.01.").findings] == [True]


def test_every_figure_of_a_two_host_answer_is_checked(two_hosts):
    """The ways a model reports two hosts: a label heading its hosts' figures, figures before their labels,
    before/after pairs, and tables by host or with the hosts as columns. Every figure gives a finding."""
    m = {k: f"{v:.2f}" for k, v in medians(two_hosts).items()}
    g1b, g1a, g2b, g2a = m[("gpu1", "before")], m[("gpu1", "after")], m[("gpu2", "before")], m[("gpu2", "after")]
    answer = "\n".join([
        f"Before: gpu1 {g1b} tok/s, gpu2 {g2b} tok/s. After: gpu1 {g1a} tok/s, gpu2 {g2a} tok/s.",
        f"gpu1 went from {g1b} tok/s before to {g1a} tok/s after.",
        f"gpu2 before/after: {g2b}/{g2a} tok/s.",
        "",
        "| host | before (tok/s) | after (tok/s) |",
        "|---|---|---|",
        f"| gpu1 | {g1b} | {g1a} |",
        f"| gpu2 | {g2b} | {g2a} |",
        "",
        "| | gpu1 | gpu2 |",
        "|---|---|---|",
        f"| before (tok/s) | {g1b} | {g2b} |",
    ])
    check = answered(two_hosts, answer)
    assert check.differences == [], texts(check.differences)
    # Duplicates are kept once: each (host, label) is confirmed, against its own host's record.
    assert sorted(texts(check.confirmed)) == sorted(
        f"the model says {m[(host, label)]} tok/s for {host}'s {label}; measured {medians(two_hosts)[(host, label)]:.6g}"
        f" tok/s on {host} (median of 3 runs, turn {turn_}, call 1)"
        for (host, label), turn_ in {("gpu1", "before"): 2, ("gpu2", "before"): 3, ("gpu1", "after"): 4,
                                     ("gpu2", "after"): 5}.items())


def test_a_wrong_figure_in_a_two_host_table_says_what_it_was_compared_with(two_hosts):
    m = medians(two_hosts)
    answer = ("| host | before (tok/s) | after (tok/s) |\n|---|---|---|\n"
              f"| gpu1 | {m[('gpu1', 'before')]:.2f} | {m[('gpu1', 'after')]:.2f} |\n"
              f"| gpu2 | {m[('gpu2', 'before')]:.2f} | 1,250 |")
    check = answered(two_hosts, answer)
    assert texts(check.differences) == [f"the model says 1,250 tok/s for gpu2's after; measured "
                                        f"{m[('gpu2', 'after')]:.6g} tok/s on gpu2 (median of 3 runs, turn 5, call 1)"]
    assert len(check.confirmed) == 3


def test_a_figure_naming_no_host_may_be_either_hosts_and_a_wrong_one_lists_both(two_hosts):
    m = medians(two_hosts)
    assert [f.agrees for f in answered(two_hosts, f"Throughput before {m[('gpu2', 'before')]:.2f} tok/s.").findings] \
        == [True]
    [finding] = answered(two_hosts, "Throughput before 1,250 tok/s.").findings
    assert finding.text == (f"the model says 1,250 tok/s before; measured {m[('gpu1', 'before')]:.6g} tok/s on gpu1 "
                            f"(median of 3 runs, turn 2, call 1), {m[('gpu2', 'before')]:.6g} tok/s on gpu2 (median of "
                            f"3 runs, turn 3, call 1)")


def test_a_change_said_of_one_host_is_that_hosts_comparison(two_hosts):
    m = medians(two_hosts)
    change = {h: (m[(h, "after")] / m[(h, "before")] - 1) * 100 for h in ("gpu1", "gpu2")}
    check = answered(two_hosts, f"Throughput on gpu1 changed by {change['gpu2']:+.2f}%; on gpu2 by "
                                f"{change['gpu2']:+.2f}%.")
    by_host = {("gpu1" if "on gpu1" in f.says else "gpu2"): f for f in check.findings}
    assert by_host["gpu2"].agrees, by_host["gpu2"].text
    if round(change["gpu1"], 1) != round(change["gpu2"], 1):
        assert not by_host["gpu1"].agrees
        assert f"on gpu1, turn 4, call 1)" in by_host["gpu1"].record, by_host["gpu1"].text
