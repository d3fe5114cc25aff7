"""Compaction: a long conversation is folded into a summary before it outgrows the model's context.

The loop, the gate and the transcript are real; the model is scripted (its summaries are built
from the record) or the real openai SDK against a loopback server (it writes them).
"""

from __future__ import annotations

import json

from agent import compaction
from agent.budget import Budget
from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.model.openai_client import OpenAIModel, estimate_prompt_tokens
from agent.record.replay import replay
from agent.record.transcript import TranscriptWriter, verify
from agent.safety.policy import Authorization, SafetyPolicy
from tools.base import Registry

from fake_openai import FakeOpenAI, Reply, Status
from fake_tools import all_fake_tools
from helpers import events

LIMIT = 32_000


def session_for(path, model, turns: int, context_tokens: int | None = LIMIT) -> Session:
    gate = SafetyPolicy(scope={"h1"}, mode="scripted", authorizations=[Authorization(tool="change", host="h1", args={"what": "install *"})])
    return Session(model=model, registry=Registry(all_fake_tools()), gate=gate, transcript=TranscriptWriter(path),
                   system_prompt="You are a test.", budget=Budget(turns=turns), context_tokens=context_tokens)


def test_a_2000_turn_session_stays_within_a_32k_context_and_replays_identically(tmp_path):
    path = tmp_path / "long.jsonl"
    sizes: list[int] = []
    tools = Registry(all_fake_tools()).schemas()
    steps = 2000

    def play(messages):
        sizes.append(estimate_prompt_tokens(messages, tools))  # the prompt as a server would get it
        n = len(sizes)
        if n == 1:
            return turn("backing up first", calls=[("fake_backup", {"host": "h1"})])
        if n < steps:
            return turn(f"step {n}", calls=[("echo", {"host": "h1", "text": f"reading {n}: " + "x" * 120})])
        if n == steps:
            return turn("now the change", calls=[("change", {"host": "h1", "what": "install the thing"})])
        return turn("done")

    session = session_for(path, ScriptedModel(play), turns=steps + 5)
    out = run_session(session, "keep reading the host, then make the change")
    assert out.status == "done", out
    assert len(sizes) == steps + 1
    # Without compaction the last request would be several times the context.
    assert max(sizes) < LIMIT, max(sizes)
    folds = events(path, "compaction")
    assert len(folds) >= 5 and all(f["method"] == "built" and f["limit"] == LIMIT for f in folds)
    # The change at the end was allowed by the backup of turn 1, long folded away: the ledger keeps it.
    decision = [d for d in events(path, "decision") if d["tool"] == "change"][-1]
    assert decision["verdict"] == "allow" and decision["backup_id"] == "bk-h1"
    # What the model still reads of the folded part: the count, the latest facts, the backup.
    first = session.messages[1]["content"]
    assert first.startswith("keep reading the host") and compaction.SUMMARY_HEADER in first
    assert "Calls folded so far: " in first and "[backup bk-h1]" in first
    assert f"reading {steps - 1}:" not in first  # the latest turns are kept as they are, not summarised
    assert verify(path).ok

    report = replay(path, Registry(all_fake_tools()))
    assert report.ok, report.message
    assert report.turns == steps + 1


def test_a_replay_notices_a_summary_that_was_changed(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("echo", {"text": "y" * 3000})]) for _ in range(20)] + [turn("done")])
    out = run_session(session_for(path, model, turns=40, context_tokens=8_000), "read")
    assert out.status == "done" and events(path, "compaction")
    lines = path.read_text().splitlines()
    i = next(n for n, line in enumerate(lines) if '"type":"compaction"' in line)
    ev = json.loads(lines[i])
    ev["summary"] = ev["summary"].replace("Calls folded", "Nothing folded")
    lines[i] = json.dumps(ev, separators=(",", ":"))
    edited = tmp_path / "edited.jsonl"
    edited.write_text("\n".join(lines) + "\n")
    report = replay(edited, Registry(all_fake_tools()), verify_chain=False)
    assert not report.ok and "conversation sent to the model differs" in report.message


def test_a_live_model_writes_the_summary_in_a_request_without_tools(tmp_path):
    path = tmp_path / "t.jsonl"
    big = "z" * 2500
    # Three turns of 2,500 bytes each reach three quarters of a 5,000-token context (with the tools' schemas).
    script = [Reply(calls=[("echo", {"text": big})]) for _ in range(3)]
    script += [Reply(text="Summary: read the host six times; nothing changed.")]
    script += [Reply(calls=[("echo", {"text": "after"})]), Reply(text="done")]
    with FakeOpenAI(script) as srv:
        model = OpenAIModel("local-model", base_url=srv.base_url, api_key="sk-test-key-000000000000",
                            backoff_initial_s=0.01, backoff_max_s=0.05)
        out = run_session(session_for(path, model, turns=20, context_tokens=5_000), "read")
        requests = srv.requests
    assert out.status == "done", out
    summary_requests = [r for r in requests if not r.get("tools")]
    assert len(summary_requests) == 1
    assert "summarising the earlier part" in summary_requests[0]["messages"][0]["content"]
    fold = events(path, "compaction")[0]
    assert fold["method"] == "model" and fold["summary"].startswith("Summary: read the host six times")
    # The next real request carries the model's summary in place of the folded turns.
    after = requests[requests.index(summary_requests[0]) + 1]
    assert "read the host six times" in after["messages"][1]["content"]
    assert len(after["messages"]) < len(requests[requests.index(summary_requests[0]) - 1]["messages"])
    report = replay(path, Registry(all_fake_tools()))
    assert report.ok, report.message


def test_a_failed_summary_request_falls_back_to_the_built_summary(tmp_path):
    path = tmp_path / "t.jsonl"
    script = [Reply(calls=[("echo", {"text": "z" * 2500})]) for _ in range(3)]
    script += [Status(400, "summaries are not served here")]
    script += [Reply(text="done")]
    with FakeOpenAI(script) as srv:
        model = OpenAIModel("local-model", base_url=srv.base_url, api_key="sk-test-key-000000000000",
                            backoff_initial_s=0.01, backoff_max_s=0.05)
        out = run_session(session_for(path, model, turns=20, context_tokens=5_000), "read")
    assert out.status == "done", out
    fold = events(path, "compaction")[0]
    assert fold["method"] == "built" and "the model's summary failed" in fold["note"]
    assert "Calls folded so far" in fold["summary"]


def test_the_context_limit_comes_from_the_flag_the_server_or_the_model_family():
    class Named:
        def __init__(self, name, context_size=None):
            self.name, self.context_size = name, context_size

    assert compaction.context_limit(Named("gpt-4o-mini")) == (128_000, "default for gpt-4o-mini")
    assert compaction.context_limit(Named("qwen3-32b"))[0] == 32_000
    assert compaction.context_limit(Named("qwen3-32b", context_size=65_536)) == (65_536, "model server")
    assert compaction.context_limit(Named("gpt-4o"), given=10_000) == (10_000, "given")
