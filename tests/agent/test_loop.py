"""The planner loop through the real openai SDK to a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.errors import RecordWriteError
from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.model.openai_client import OpenAIModel
from agent.record.transcript import TranscriptWriter, iter_events, verify
from agent.safety.policy import Authorization, SafetyPolicy
from tools.base import Registry

from fake_openai import Drop, FakeOpenAI, Reply, Status
from fake_tools import all_fake_tools
from helpers import events


def make_session(path: Path, model, scope=("h1", "h2"), budget: Budget | None = None, **policy) -> Session:
    gate = SafetyPolicy(scope=set(scope), **policy)
    return Session(model=model, registry=Registry(all_fake_tools()), gate=gate, transcript=TranscriptWriter(path),
                   system_prompt="You are a test.", budget=budget or Budget(turns=10))


def openai_model(srv: FakeOpenAI, **kw) -> OpenAIModel:
    return OpenAIModel("test-model", base_url=srv.base_url, api_key="sk-test-key-000000000000",
                       backoff_initial_s=0.01, backoff_max_s=0.05, **kw)


def test_plain_answer_ends_session_with_done(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Reply(text="All checked, nothing to do.")]) as srv:
        s = make_session(path, openai_model(srv))
        out = run_session(s, "check the host")
    assert out.status == "done" and out.final_text == "All checked, nothing to do."
    assert verify(path).ok
    end = events(path)[-1]
    assert end["type"] == "session_end" and end["status"] == "done" and end["tokens"] == 15
    # The SDK sent the tool schemas, strict, with parallel calls on.
    body = srv.requests[0]
    assert body["parallel_tool_calls"] is True
    assert {t["function"]["name"] for t in body["tools"]} == {"echo", "sleep", "crash", "fake_backup", "change"}
    assert all(t["function"]["strict"] for t in body["tools"])


def test_parallel_calls_run_concurrently_and_results_keep_call_order(tmp_path):
    path = tmp_path / "t.jsonl"
    calls = [("sleep", {"host": "h1", "seconds": 0.4}) for _ in range(4)] + [("echo", {"text": "last"})]
    with FakeOpenAI([Reply(calls=calls), Reply(text="done")]) as srv:
        out = run_session(make_session(path, openai_model(srv)), "go")
        second = srv.requests[1]["messages"]
    assert out.status == "done"
    starts = {e["call_id"]: e["t"] for e in events(path, "tool_start")}
    results = events(path, "tool_result")
    assert [r["index"] for r in results] == [0, 1, 2, 3, 4]
    sleeps = [r for r in results if r["tool"] == "sleep"]
    # Overlapping intervals: every sleep started before any other sleep ended.
    latest_start = max(r["started"] for r in sleeps)
    earliest_end = min(r["ended"] for r in sleeps)
    assert latest_start < earliest_end, "read-only calls of one batch did not overlap"
    assert len(starts) == 5
    # Results go back to the model in call order, one tool message per call id.
    tool_msgs = [m for m in second if m["role"] == "tool"]
    assistant = [m for m in second if m["role"] == "assistant"][0]
    assert [m["tool_call_id"] for m in tool_msgs] == [c["id"] for c in assistant["tool_calls"]]


def test_mutating_calls_run_alone_in_call_order_and_other_hosts_do_not_wait(tmp_path):
    path = tmp_path / "t.jsonl"
    auth = [Authorization(tool="sleep")]
    script = ScriptedModel([
        turn(calls=[("fake_backup", {"host": "h1"}), ("fake_backup", {"host": "h2"})]),
        turn(calls=[
            ("sleep", {"host": "h1", "seconds": 0.3}),                   # 0 read
            ("sleep", {"host": "h1", "seconds": 0.3, "change": True}),   # 1 write: waits for 0
            ("sleep", {"host": "h1", "seconds": 0.3}),                   # 2 read: waits for 1
            ("sleep", {"host": "h2", "seconds": 0.3, "change": True}),   # 3 other host: no wait
        ]),
        turn("done"),
    ])
    out = run_session(make_session(path, script, authorizations=auth), "go")
    assert out.status == "done"
    r = {e["index"]: e for e in events(path, "tool_result") if e["turn"] == 2}
    assert all(x["status"] == "ok" for x in r.values()), r
    assert r[1]["started"] >= r[0]["ended"], "a mutating call started before the earlier read finished"
    assert r[2]["started"] >= r[1]["ended"], "a read overtook the earlier mutating call"
    assert r[3]["started"] < r[0]["ended"], "a call on another host waited for this host's calls"


def test_malformed_calls_become_error_results_and_the_loop_goes_on(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([
        Reply(calls=[("echo", '{"text": "unterminated'), ("nope", {}), ("echo", {"txt": "typo"}),
                     ("echo", {"text": "fine"})]),
        Reply(text="recovered"),
    ]) as srv:
        out = run_session(make_session(path, openai_model(srv)), "go")
        msgs = srv.requests[1]["messages"]
    assert out.status == "done"
    tool_msgs = [m["content"] for m in msgs if m["role"] == "tool"]
    assert "not valid JSON" in tool_msgs[0]
    assert "unknown tool 'nope'" in tool_msgs[1] and "echo" in tool_msgs[1]
    assert "text: Field required" in tool_msgs[2] and "txt: Extra inputs are not permitted" in tool_msgs[2]
    assert tool_msgs[3] == "fine"
    calls = events(path, "tool_call")
    assert [bool(c.get("error")) for c in calls] == [True, True, True, False]


def test_three_malformed_turns_in_a_row_end_the_session(tmp_path):
    path = tmp_path / "t.jsonl"
    bad = Reply(calls=[("echo", "{not json")])
    with FakeOpenAI([bad, bad, bad, Reply(text="never reached")]) as srv:
        out = run_session(make_session(path, openai_model(srv)), "go")
    assert out.status == "malformed" and "3 turns" in out.reason
    assert len(srv.requests) == 3
    assert events(path)[-1]["status"] == "malformed"


def test_rate_limit_is_retried_honouring_retry_after(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Status(429, "slow down", retry_after=0.3), Reply(text="ok")]) as srv:
        t0 = time.monotonic()
        out = run_session(make_session(path, openai_model(srv)), "go")
        waited = time.monotonic() - t0
    assert out.status == "done" and len(srv.requests) == 2
    assert waited >= 0.3, "Retry-After was not honoured"
    resp = events(path, "model_response")[0]
    assert resp["attempts"] == 2
    # The SDK's own retries are off: exactly one request per tenacity attempt.
    assert srv.headers[0].get("x-stainless-retry-count") in (None, "0")


def test_server_error_forever_fails_clearly(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Status(503, "kaput")], repeat_last=True) as srv:
        out = run_session(make_session(path, openai_model(srv, max_attempts=3)), "go")
    assert out.status == "model_error"
    assert "kept failing (503: kaput) after 3 attempts" in out.reason
    assert len(srv.requests) == 3
    assert events(path)[-1]["status"] == "model_error" and verify(path).ok


def test_a_500_that_repeats_word_for_word_is_not_retried_again(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Status(500, "kaput")], repeat_last=True) as srv:
        out = run_session(make_session(path, openai_model(srv, max_attempts=5)), "go")
    assert out.status == "model_error" and len(srv.requests) == 2
    assert "answered 500 twice with the same error" in out.reason and "kaput" in out.reason


def test_other_client_errors_fail_at_once_with_the_server_message(tmp_path):
    with FakeOpenAI([Status(400, "this model does not support tools")]) as srv:
        out = run_session(make_session(tmp_path / "t.jsonl", openai_model(srv)), "go")
    assert out.status == "model_error" and len(srv.requests) == 1
    assert "rejected the request (400): this model does not support tools" in out.reason


def test_a_dropped_stream_is_retried(tmp_path):
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Drop("partial ans"), Reply(text="whole answer")]) as srv:
        out = run_session(make_session(path, openai_model(srv)), "go")
    assert out.status == "done" and out.final_text == "whole answer" and len(srv.requests) == 2


def test_unreachable_server_is_one_line_naming_the_setting(tmp_path):
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # a closed port on loopback
    model = OpenAIModel("m", base_url=f"http://127.0.0.1:{port}/v1", api_key="x", max_attempts=2,
                        backoff_initial_s=0.01, backoff_max_s=0.02)
    out = run_session(make_session(tmp_path / "t.jsonl", model), "go")
    assert out.status == "model_error"
    assert "cannot reach model server" in out.reason and "OPENAI_BASE_URL" in out.reason
    assert "\n" not in out.reason


def test_missing_key_and_url_is_a_clear_error(monkeypatch):
    from agent.model import ModelError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ModelError, match="set OPENAI_API_KEY .* or OPENAI_BASE_URL"):
        OpenAIModel("m")


def test_budgets_stop_the_session(tmp_path):
    loop_forever = ScriptedModel(lambda msgs: turn(calls=[("echo", {"text": "again"})], usage=(100, 50)))
    out = run_session(make_session(tmp_path / "a.jsonl", loop_forever, budget=Budget(turns=3)), "go")
    assert out.status == "budget" and "turn budget of 3" in out.reason
    out = run_session(make_session(tmp_path / "b.jsonl", loop_forever, budget=Budget(turns=100, tokens=400)),
                      "go")
    assert out.status == "budget" and "token budget" in out.reason
    assert events(tmp_path / "b.jsonl")[-1]["tokens"] == 450


def test_a_crash_inside_a_tool_is_an_error_result_and_the_session_continues(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("crash", {}), ("echo", {"text": "x"})]), turn("ok")])
    out = run_session(make_session(path, model), "go")
    assert out.status == "done"
    res = events(path, "tool_result")
    assert res[0]["status"] == "crashed" and "boom inside the tool" in res[0]["content"]
    assert res[1]["status"] == "ok"
    rep = verify(path)
    assert rep.ok and rep.status == "done"


def test_a_crash_in_the_loop_still_closes_the_transcript(tmp_path):
    path = tmp_path / "t.jsonl"

    class Exploding:
        name = "exploding"

        def complete(self, messages, tools, on_text=None):
            raise ValueError("model adapter bug")

    with pytest.raises(ValueError):
        run_session(make_session(path, Exploding()), "go")
    rep = verify(path)
    assert rep.ok and rep.status == "crashed"
    assert "model adapter bug" in events(path)[-1]["reason"]


def test_keyboard_interrupt_mid_batch_cancels_and_closes_the_transcript(tmp_path, sigint_raises):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("sleep", {"host": "h1", "seconds": 20}),
                                       ("sleep", {"host": "h2", "seconds": 20})]), turn("never")])
    session = make_session(path, model)
    # Deliver a real SIGINT to this process while the batch runs.
    timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    out = run_session(session, "go")
    assert out.status == "interrupted"
    assert time.monotonic() - t0 < 10, "cancel did not stop the running calls"
    rep = verify(path)
    assert rep.ok and rep.status == "interrupted", rep.problems
    results = events(path, "tool_result")
    assert len(results) == 2 and all(r["status"] in ("cancelled", "ok") for r in results)
    for line in path.read_text().splitlines():
        json.loads(line)


def test_without_a_safety_policy_anything_not_read_only_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("change", {"host": "h1", "what": "pip install x"})]), turn("ok")])
    out = run_session(make_session(path, model), "go")
    assert out.status == "done"
    d = events(path, "decision")[0]
    assert d["verdict"] == "deny" and d["risk"] == "mutating"
    content = events(path, "tool_result")[0]["content"]
    assert "no rule of the goal file's authorizations covers it" in content
    assert "there is no verified backup of h1 from this session: take one with pip_freeze_backup" in content


def test_redaction_keeps_planted_secrets_out_of_the_transcript(tmp_path, monkeypatch):
    path = tmp_path / "t.jsonl"
    env_secret = "exa-planted-env-secret-1234567890"
    monkeypatch.setenv("EXA_API_KEY", env_secret)
    cmd_secret = "hunter2-command-secret-value"
    out_secret = "sk-plantedOutputKey000000000000000000"
    model = ScriptedModel([
        turn(calls=[("echo", {"text": f"export HF_TOKEN={cmd_secret}"}),
                    ("echo", {"text": f"config: Authorization: Bearer {out_secret}"}),
                    ("echo", {"text": f"the key is {env_secret}"})]),
        turn(f"done; api key was {out_secret}"),
    ])
    run_session(make_session(path, model), "go")
    text = path.read_text()
    for secret in (env_secret, cmd_secret, out_secret):
        assert secret not in text
    assert text.count("[REDACTED]") >= 4
    assert verify(path).ok


def test_strict_schema_makes_every_field_required_and_nullable():
    from fake_tools import Echo, Sleep

    params = Echo.schema()["function"]["parameters"]
    assert params["additionalProperties"] is False
    assert set(params["required"]) == {"text", "host"}
    assert params["properties"]["host"]["anyOf"][-1] == {"type": "null"} or "null" in params["properties"]["host"]["type"]
    # null means "use the default"
    args = Sleep.parse_args({"host": "h1", "seconds": 1, "change": None})
    assert args.change is False


def test_truncation_keeps_head_and_tail_with_counts():
    from tools.base import truncate_for_model

    text = "".join(f"line {i}\n" for i in range(100_000))
    out = truncate_for_model(text, limit=2000, artifact="t.artifacts/00001-stdout")
    assert out.startswith("line 0\n") and out.rstrip().endswith("line 99999")
    assert "100000 lines" in out and f"of {len(text.encode())} bytes" in out and "t.artifacts/00001-stdout" in out
    assert len(out.encode()) < 2300


def test_redaction_leaves_version_pins_alone():
    from agent.record.transcript import Redactor

    r = Redactor(environ={})
    freeze = "tiktoken==0.14.0\ntokenizers==0.23.2\nkeyring==25.0\n"
    assert r.text(freeze) == freeze
    assert r.text("MY_SECRET_VALUE=abcdef") == "MY_SECRET_VALUE=[REDACTED]"


def test_redaction_of_json_forms():
    from agent.record.transcript import Redactor

    r = Redactor(environ={})
    assert r.text('{"env": [{"name": "NGC_API_KEY", "value": "nvapi-s3cr3t"}]}') == \
        '{"env": [{"name": "NGC_API_KEY", "value": "[REDACTED]"}]}'
    assert r.text('{"token": "abcdef123456", "author": "NVIDIA"}') == '{"token": "[REDACTED]", "author": "NVIDIA"}'
    assert r.text("key" * 30000) == "key" * 30000  # a long run of name-like text (bounded patterns: linear time)


def test_text_that_is_not_valid_unicode_is_a_malformed_call_not_a_crash(tmp_path):
    path = tmp_path / "t.jsonl"
    model = ScriptedModel([turn(calls=[("echo", '{"text": "bad \\ud83d"}')]), turn("ok")])
    out = run_session(make_session(path, model), "go")
    assert out.status == "done"
    call = events(path, "tool_call")[0]
    assert "not valid Unicode" in call["error"]
    assert verify(path).ok


def test_huge_outputs_are_bounded_in_the_transcript_and_kept_whole_as_artifacts(tmp_path):
    """A command printing megabytes makes a small transcript line; the artifact holds every byte."""
    from tools.base import RECORD_FIELD_LIMIT
    from tools.hosts import HostPool, HostSpec
    from tools.ssh_exec import SSHExec

    numbers = tmp_path / "numbers.txt"
    numbers.write_text("".join(f"{i}\n" for i in range(1, 400_001)))  # about 2.7 MB
    big = f"cat {numbers}"
    model = ScriptedModel([
        turn(calls=[("ssh_exec", {"host": "box", "command": big}),
                    ("echo", {"text": "x" * 200_000 + "END", "host": "box"})]),
        turn("done"),
    ])
    path = tmp_path / "t.jsonl"
    pool = HostPool([HostSpec(name="box", transport="local")])
    session = Session(model=model, registry=Registry([SSHExec(), *all_fake_tools()]),
                      gate=SafetyPolicy(scope={"box"}), transcript=TranscriptWriter(path), hosts=pool,
                      budget=Budget(turns=4))
    assert run_session(session, "print a lot").status == "done"
    assert max(len(line) for line in path.read_bytes().splitlines()) < 4 * RECORD_FIELD_LIMIT
    exec_result, echo_result = events(path, "tool_result")
    stdout = exec_result["data"]["stdout"]
    artifact = exec_result["data"]["stdout_artifact"]
    assert stdout.startswith("1\n2\n") and stdout.rstrip().endswith("400000") and f"whole output in {artifact}" in stdout
    whole = (tmp_path / artifact).read_text()
    assert whole == numbers.read_text()
    # The tool already kept stdout: no second copy. The echo text had no artifact: one is written.
    kept = sorted(p.name for p in (tmp_path / "t.artifacts").iterdir())
    assert [n for n in kept if "stdout" in n] == [artifact.rsplit("/", 1)[1]]
    echo_artifact = next(n for n in kept if n.endswith("call_1-text.txt"))
    assert (tmp_path / "t.artifacts" / echo_artifact).read_text() == "x" * 200_000 + "END"
    assert echo_result["data"]["text"].endswith("END") and "bytes omitted" in echo_result["data"]["text"]
    assert verify(path).ok


def budget_session(path, turns, max_wall_s=1.5, **policy) -> Session:
    from tools.hosts import HostPool, HostSpec
    from tools.ssh_exec import SSHExec

    pool = HostPool([HostSpec(name="h1", transport="local"), HostSpec(name="h2", transport="local")])
    return Session(model=ScriptedModel(turns), registry=Registry([SSHExec(), *all_fake_tools()]),
                   gate=SafetyPolicy(scope={"h1", "h2"}, **policy), transcript=TranscriptWriter(path), hosts=pool,
                   budget=Budget(turns=10, minutes=max_wall_s / 60))


def test_the_time_budget_cancels_a_long_read_only_step_in_the_middle_of_a_batch(tmp_path):
    """A step that would run past the session's time budget is stopped when the budget runs out,
    not when the step ends, and the model, the transcript and the outcome say why."""
    for name, first_turn in (
        ("one", turn(calls=[("ssh_exec", {"host": "h1", "command": "sleep 30"})])),  # a single call
        ("batch", turn(calls=[("ssh_exec", {"host": "h1", "command": "sleep 30"}),  # calls run concurrently
                              ("sleep", {"host": "h2", "seconds": 30})])),
    ):
        path = tmp_path / f"{name}.jsonl"
        t0 = time.monotonic()
        out = run_session(budget_session(path, [first_turn, turn("never reached")]), "wait")
        assert time.monotonic() - t0 < 15, name  # not the 30 s the steps asked for
        assert out.status == "budget" and "time budget of 1.5 s reached" in out.reason
        result = events(path, "tool_result")[0]
        assert result["data"]["cancelled"] and result["data"]["exit_code"] is None
        assert "cancelled because the session's time budget of 1.5 s ran out" in result["content"]
        assert [e["text"] for e in events(path, "note") if e["kind"] == "budget"] == [
            "time budget of 1.5 s reached: read-only calls cancelled, nothing new starts"]
        assert len(events(path, "model_request")) == 1 and verify(path).ok


def test_a_change_running_when_the_time_budget_ends_is_left_to_finish_and_nothing_new_starts(tmp_path):
    """Killing an installer halfway leaves the host half-changed: changes finish, reads stop."""
    path = tmp_path / "t.jsonl"
    turns = [
        turn(calls=[("fake_backup", {"host": "h2"})]),
        turn(calls=[("ssh_exec", {"host": "h1", "command": "sleep 30"}),  # read-only: cancelled
                    ("sleep", {"host": "h2", "seconds": 4.5, "change": True}),  # a change: finishes
                    ("sleep", {"host": "h2", "seconds": 1})]),  # waits for the change: never starts
        turn("never reached"),
    ]
    # 3 s: room for turn 1 on a slow machine, and the budget still ends inside the 4.5 s change
    out = run_session(budget_session(path, turns, max_wall_s=3, authorizations=[Authorization(tool="sleep")]),
                      "go")
    assert out.status == "budget"
    read, change, later = (e for e in events(path, "tool_result") if e["turn"] == 2)
    assert read["data"]["cancelled"] and "cancelled because the session's time budget" in read["content"]
    assert change["status"] == "ok" and change["duration_s"] >= 4.4  # ran its whole course
    assert later["status"] == "cancelled" and later["content"] == \
        "not started: the session's time budget of 3 s ran out"
    notes = [e["text"] for e in events(path, "note") if e["kind"] == "budget"]
    assert notes == ["time budget of 3 s reached: read-only calls cancelled, nothing new starts; "
                     "1 running change(s) left to finish within their own timeouts"]
    assert verify(path).ok


def test_a_batch_that_ends_within_the_time_budget_leaves_no_trace_of_it(tmp_path):
    path = tmp_path / "t.jsonl"
    session = budget_session(path, [turn(calls=[("sleep", {"host": "h1", "seconds": 0.1})]), turn("done")],
                             max_wall_s=30)
    assert run_session(session, "go").status == "done"
    assert not session.batches.flags.operator.is_set() and not session.batches.flags.reads.is_set() and not session.batches.time_up
    assert not session.batches.changes_running
    assert not [e for e in events(path, "note") if e["kind"] == "budget"]
    assert not [t for t in threading.enumerate() if isinstance(t, threading.Timer)]  # no timer left behind


def test_ctrl_c_storms_never_break_the_hash_chain(tmp_path):
    """SIGINT lands between bytecodes; one landing after a line's write and before the chain's
    update would leave the next line pointing at the wrong hash."""
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)
    stop = threading.Event()
    writing = [False]  # interrupts land only inside the write below, never in the test's own lines

    def interrupt(signum, frame):
        if writing[0]:
            writing[0] = False  # one interrupt per write: a second cannot land in the except below
            raise KeyboardInterrupt

    def storm():
        while not stop.is_set():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.0002)

    interrupted = written = 0
    previous = signal.signal(signal.SIGINT, interrupt)
    sender = threading.Thread(target=storm)
    try:
        sender.start()
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline:
            try:
                writing[0] = True
                writer.write("note", kind="test", text="x" * 200)
                writing[0] = False
                written += 1
            except KeyboardInterrupt:
                interrupted += 1
    finally:
        stop.set()
        sender.join()
        signal.signal(signal.SIGINT, previous)
    writer.write("session_end", status="done")
    assert interrupted > 50 and written > 50, (interrupted, written)  # the storm really hit the writes
    assert verify(path).ok, verify(path)


class _FailingFile:
    """Wraps the transcript's file: the next write does `how` instead."""

    def __init__(self, real, how: str):
        self.real, self.how = real, how

    def write(self, data: bytes) -> int:
        how, self.how = self.how, "normal"
        if how == "interrupted-after":  # the line is written, then Ctrl-C surfaces
            self.real.write(data)
            raise KeyboardInterrupt
        if how == "interrupted-before":
            raise KeyboardInterrupt
        if how == "disk-full-partial":  # part of the line reaches the disk
            self.real.write(data[: len(data) // 2])
            raise OSError(28, "No space left on device")
        return self.real.write(data)

    def __getattr__(self, name):
        return getattr(self.real, name)


@pytest.mark.parametrize("how", ["interrupted-after", "interrupted-before", "disk-full-partial"])
def test_a_write_cut_short_leaves_a_valid_chain(tmp_path, how):
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)
    writer.write("note", kind="test", text="y" * 200_000)
    writer._file = _FailingFile(writer._file, how)
    with pytest.raises((KeyboardInterrupt, RecordWriteError)):
        writer.write("note", kind="test", text="cut short")
    if how == "disk-full-partial":  # the record cannot be kept: nothing but its end is written after this
        with pytest.raises(RecordWriteError):
            writer.write("note", kind="test", text="after")
    else:
        writer.write("note", kind="test", text="after")
    writer.write("session_end", status="done")
    report = verify(path)
    assert report.ok and report.ended, report
    texts = [e.get("text") for e in iter_events(path)]
    assert ("cut short" in texts) == (how == "interrupted-after")  # written whole, or not at all


def test_a_session_end_written_just_before_an_interrupt_closes_the_transcript(tmp_path):
    path = tmp_path / "t.jsonl"
    writer = TranscriptWriter(path)
    writer._file = _FailingFile(writer._file, "interrupted-after")
    with pytest.raises(KeyboardInterrupt):
        writer.write("session_end", status="done")
    assert writer.closed
    with pytest.raises(RuntimeError, match="closed"):
        writer.write("note", kind="test", text="too late")
    assert verify(path).ok and len(path.read_bytes().splitlines()) == 1


def test_a_tool_without_its_own_render_is_cut_for_the_model_too():
    from pydantic import BaseModel

    from tools.base import MODEL_OUTPUT_LIMIT, Tool

    class Big(Tool):
        """A tool with a large structured result."""

        name = "big"

        class Result(BaseModel):
            packages: list[str]

    text = Big().render(Big.Result(packages=[f"package-{i}==1.0" for i in range(5000)]))
    assert len(text.encode()) < MODEL_OUTPUT_LIMIT + 300
    assert text.startswith('{"packages":["package-0==1.0"') and "package-4999==1.0" in text and "bytes omitted" in text


@pytest.mark.parametrize("how", ["interrupted-before", "interrupted-after"])
def test_a_ctrl_c_while_the_session_closes_still_leaves_a_closed_transcript(tmp_path, how):
    path = tmp_path / "t.jsonl"
    session = make_session(path, ScriptedModel([turn("done")]))
    session.send("go")
    session.transcript._file = _FailingFile(session.transcript._file, how)  # the session_end's write
    with pytest.raises(KeyboardInterrupt):
        session.close("interrupted", "Ctrl-C")
    report = verify(path)
    assert report.ok and report.ended and report.status == "interrupted", report
    assert [e["type"] for e in iter_events(path)].count("session_end") == 1


def test_a_call_of_a_cancelled_request_still_waiting_does_not_start_in_the_next_one(tmp_path):
    """Chat gives each request new cancel flags: a call queued behind a command that would not
    die keeps its own request's cancel, whatever the next request does."""
    import concurrent.futures as cf

    from agent.model import ToolCall

    session = make_session(tmp_path / "t.jsonl", ScriptedModel([]), authorizations=[Authorization(tool="sleep")])
    p = session._prepare(1, 0, ToolCall(id="call_0", name="sleep", arguments={"host": "h1", "seconds": 0}))
    stuck = cf.Future()  # the earlier call on the host it waits for
    flags = session.batches.flags
    with cf.ThreadPoolExecutor(1) as pool:
        late = pool.submit(session.batches.execute, 1, p, [stuck], flags)
        session.batches.request_cancel()
        session.batches.rearm_cancel()  # chat goes back to the prompt; a new request may start
        assert not session.batches.cancel.is_set()
        stuck.set_result(None)
        result = late.result(timeout=10)
    assert result.status == "cancelled" and result.content == "cancelled by the operator before it started"


def test_the_time_budget_keeps_the_operators_reason_when_the_operator_cancelled_first(tmp_path):
    from agent.batch import CancelFlags

    path = tmp_path / "t.jsonl"
    session = make_session(path, ScriptedModel([]), budget=Budget(minutes=0.01 / 60))
    flags = CancelFlags()
    flags.by_operator()
    with session.batches.time_budget_watch(0.01, flags):
        time.sleep(0.3)
    assert session.batches.time_up  # the timer fired
    assert flags.reads_reason == "by the operator"
    session.close("interrupted")
    assert not [e for e in events(path, "note") if e.get("kind") == "budget"]


def test_the_redactor_never_touches_benchmark_figures_and_still_takes_secrets():
    """The samples of real SGLang and vLLM benchmark output (tests/data/bench) pass through unchanged:
    "Total input tokens: 204800", "#tokens: 425176", "tokenizer=None" are figures and settings."""
    from agent.record.transcript import Redactor

    redactor = Redactor(environ={})
    samples = sorted((Path(__file__).resolve().parents[1] / "data" / "bench").glob("*.txt"))
    assert len(samples) >= 4
    for sample in samples:
        text = sample.read_text()
        assert redactor.text(text) == text, sample.name
    assert redactor.value({"tokenizer": "meta-llama/Llama-3.1-8B", "total_input_tokens": "204800"}) == \
        {"tokenizer": "meta-llama/Llama-3.1-8B", "total_input_tokens": "204800"}
    for secret in ("API_KEY=abcd1234efgh", "DB_PASSWORD=12345678", "HF_TOKEN: hf_abcdefghijklmnopqrstu",
                   '{"access_token": "abcdefgh123"}', "GITHUB_TOKEN=gh1234567890"):
        assert "[REDACTED]" in redactor.text(secret), secret
    assert redactor.value({"api_key": "zzzzzzzz"}) == {"api_key": "[REDACTED]"}
