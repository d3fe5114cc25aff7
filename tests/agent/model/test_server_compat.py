"""The model client against servers that behave as llama.cpp's do, through the real `openai` SDK and the
real Session: each test replays one way such a server differs from OpenAI (see llamacpp_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

from agent.budget import Budget
from agent.loop import Session, run_session
from agent.outcome import GO_ON, MAX_CUT_OFF_TURNS
from agent.model.openai_client import OpenAIModel
from agent.record.transcript import TranscriptWriter, verify
from agent.safety.policy import SafetyPolicy
from app.ui.common import session_summary
from tools.base import Registry

from fake_openai import FakeOpenAI, Reply
from fake_tools import all_fake_tools
from helpers import events
from llamacpp_server import LlamaCppServer, Said

ECHO = ("echo", {"text": "hello", "host": "h1"})


def session(path: Path, model, budget: Budget | None = None, system_prompt: str = "You are a test.") -> Session:
    return Session(model=model, registry=Registry(all_fake_tools()), gate=SafetyPolicy(scope={"h1", "h2"}),
                   transcript=TranscriptWriter(path), system_prompt=system_prompt, budget=budget or Budget(turns=10))


def client(srv, **kw) -> OpenAIModel:
    return OpenAIModel("local-model", base_url=srv.base_url, api_key="sk-test-key-000000000000",
                       backoff_initial_s=0.01, backoff_max_s=0.02, **kw)


def one_line(text: str) -> bool:
    return "\n" not in text and len(text) < 600


# --------------------------------------------------------------------------- what goes out


def test_tools_go_with_tool_choice_auto_so_the_server_puts_them_in_the_prompt(tmp_path):
    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said(calls=[ECHO]), Said("done")]) as srv:
        out = run_session(session(path, client(srv)), "say hello")
    assert srv.requests[0]["tool_choice"] == "auto" and srv.requests[0]["parallel_tool_calls"] is True
    assert out.status == "done" and out.final_text == "done"
    assert [r["status"] for r in events(path, "tool_result")] == ["ok"]


def test_a_function_name_repeated_in_every_streamed_chunk_is_taken_once(tmp_path):
    # llama-cpp-python's server names the function again in each chunk of a streamed call.
    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said(calls=[ECHO]), Said("done")], repeats_tool_name=True) as srv:
        out = run_session(session(path, client(srv)), "say hello")
    assert [c["name"] for c in events(path, "model_response")[0]["tool_calls"]] == ["echo"]
    assert out.status == "done" and [r["status"] for r in events(path, "tool_result")] == ["ok"]


def test_a_server_that_cannot_stream_tool_calls_is_asked_without_streaming_for_the_rest_of_the_session(tmp_path):
    path = tmp_path / "t.jsonl"
    script = [Said(calls=[ECHO]), Said(calls=[("echo", {"text": "again", "host": None})]), Said("all done")]
    with LlamaCppServer(script, streams_tool_calls=False) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done" and out.final_text == "all done"
    # One streamed try, refused; every request after it, this turn's and later ones', unstreamed.
    assert [bool(r.get("stream")) for r in srv.requests] == [True, False, False, False]
    assert srv.answered == [500, 200, 200, 200]
    assert [r["status"] for r in events(path, "tool_result")] == ["ok", "ok"]
    notes = [e["text"] for e in events(path, "note") if e["kind"] == "model_server"]
    assert any("cannot stream tool calls (Automatic streaming tool choice is not supported)" in n for n in notes)
    assert events(path, "model_response")[0]["attempts"] == 1


def test_an_assistant_turn_without_text_goes_with_empty_string_content(tmp_path):
    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said(calls=[ECHO]), Said("finished")], needs_tool_choice=False) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done" and srv.answered == [200, 200]
    assistant = [m for m in srv.requests[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == "" and assistant[0]["tool_calls"][0]["function"]["name"] == "echo"


def test_a_server_like_openai_gets_the_same_request_shape(tmp_path):
    """Content "" and tool_choice "auto" are what OpenAI itself takes: the OpenAI-like server is
    sent the same and still answers."""
    path = tmp_path / "t.jsonl"
    with FakeOpenAI([Reply(calls=[ECHO]), Reply(text="ok")]) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done"
    assert srv.requests[0]["tool_choice"] == "auto" and srv.requests[0]["stream"] is True
    assert [m for m in srv.requests[1]["messages"] if m["role"] == "assistant"][0]["content"] == ""
    assert "estimated" not in events(path, "model_response")[0]["usage"]  # the server reported it


# --------------------------------------------------------------------------- tokens


def test_without_reported_usage_tokens_are_estimated_and_the_token_budget_fires(tmp_path):
    path = tmp_path / "t.jsonl"
    forever = LlamaCppServer(lambda messages: Said(calls=[("echo", {"text": "x" * 400, "host": None})]),
                             reports_usage=False, needs_tool_choice=False, rejects_null_content=False)
    with forever as srv:
        out = run_session(session(path, client(srv), budget=Budget(turns=8, tokens=1500)), "go")
    assert out.status == "budget", out
    assert "token budget of 1500 reached" in out.reason and "estimated" in out.reason
    usage = events(path, "model_response")[0]["usage"]
    assert usage["estimated"] is True and usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
    end = events(path)[-1]
    assert end["tokens"] >= 1500 and end["tokens_estimated"] is True and end["turns"] < 8
    assert any("reports no token usage" in e["text"] for e in events(path, "note") if e["kind"] == "model_server")


# --------------------------------------------------------------------------- malformed and cut-off calls


def test_a_malformed_call_goes_back_as_valid_json_and_the_model_is_told_what_was_wrong(tmp_path):
    path = tmp_path / "t.jsonl"
    broken = '{"text": "unterminated'
    with LlamaCppServer([Said(calls=[("echo", broken)]), Said("recovered")], needs_tool_choice=False,
                        rejects_null_content=False) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done" and srv.answered == [200, 200], srv.answered
    sent = srv.requests[1]["messages"]
    call = [m for m in sent if m["role"] == "assistant"][0]["tool_calls"][0]
    assert call["function"]["arguments"] == "{}"
    result = [m for m in sent if m["role"] == "tool"][0]["content"]
    assert "not valid JSON" in result and "shows them as {}" in result and json.dumps(broken) in result
    # The record keeps what the model really sent.
    assert events(path, "model_response")[0]["tool_calls"][0]["arguments"] == broken
    assert events(path, "tool_call")[0]["arguments"] == broken


def test_a_reply_cut_off_at_the_token_limit_is_not_a_final_answer_the_model_goes_on(tmp_path):
    path = tmp_path / "t.jsonl"
    script = [Said("Plan: first wipe", finish="length"), Said(" the caches, then stop.")]
    with LlamaCppServer(script) as srv:
        out = run_session(session(path, client(srv)), "plan it")
    assert len(srv.requests) == 2
    assert srv.requests[1]["messages"][-1] == {"role": "user", "content": GO_ON}
    assert out.status == "done" and out.final_text == "Plan: first wipe the caches, then stop."


def test_a_reply_that_is_cut_off_every_time_ends_the_run_as_cut_off(tmp_path):
    path = tmp_path / "t.jsonl"
    with LlamaCppServer(lambda messages: Said("Wiping the disks is step one, th", finish="length")) as srv:
        out = run_session(session(path, client(srv)), "wipe the disks")
    assert out.status == "cut_off" and f"{MAX_CUT_OFF_TURNS} times in a row" in out.reason
    assert len(srv.requests) == MAX_CUT_OFF_TURNS
    assert events(path)[-1]["status"] == "cut_off" and verify(path).ok


def test_calls_of_a_cut_off_reply_do_not_run_go_back_parseable_and_are_counted(tmp_path):
    path = tmp_path / "t.jsonl"
    cut = [("echo", {"text": "first", "host": "h1"}), ("sleep", '{"host": "h1", "seconds": 0.')]
    with LlamaCppServer([Said(calls=cut, finish="length"), Said("stopped")], needs_tool_choice=False,
                        rejects_null_content=False) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done" and srv.answered == [200, 200], srv.answered  # no 500 over the cut arguments
    assert not events(path, "tool_start")
    results = events(path, "tool_result")
    assert [r["status"] for r in results] == ["malformed", "malformed"]
    assert all("cut off by the model server's limit" in r["content"] for r in results)
    sent = [m for m in srv.requests[1]["messages"] if m["role"] == "assistant"][0]["tool_calls"]
    assert [c["function"]["arguments"] for c in sent] == ['{"text": "first", "host": "h1"}', "{}"]
    end = events(path)[-1]
    assert end["calls"] == 2 and end["malformed"] == 2 and end["tool_calls"] == 0
    assert ", 2 calls (0 run, 0 refused, 2 malformed)" in session_summary(end)


def test_a_call_to_a_foreign_host_is_refused_as_out_of_scope_before_its_arguments_are_judged(tmp_path):
    path = tmp_path / "t.jsonl"
    calls = [("sleep", {"host": "db.prod", "seconds": "soon"}),  # invalid arguments
             ("echo", '{"host": "db.prod", "text": "cut sho')]  # arguments that do not parse
    with LlamaCppServer([Said(calls=calls), Said("ok")], needs_tool_choice=False, rejects_null_content=False,
                        parses_arguments=False) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "done"
    decisions = events(path, "decision")
    assert [(d["verdict"], d["rule"], d["host"]) for d in decisions] == [("deny", "out-of-scope", "db.prod")] * 2
    assert [r["status"] for r in events(path, "tool_result")] == ["refused", "refused"]
    assert not [c for c in events(path, "tool_call") if c.get("error")]
    end = events(path)[-1]
    assert end["refused"] == 2 and end["malformed"] == 0


# --------------------------------------------------------------------------- errors


def test_an_over_long_request_fails_in_one_line_before_it_is_sent_where_the_server_says_its_context(tmp_path):
    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said("never")], n_ctx=500) as srv:
        out = run_session(session(path, client(srv), system_prompt="Read this. " * 400), "go")
    assert srv.requests == [] and srv.gets == ["/props"]  # refused here, not sent
    assert out.status == "model_error" and one_line(out.reason)
    assert "500 tokens, its n_ctx" in out.reason and "--ctx-size" in out.reason and out.kind == "context"


def test_a_server_that_only_says_its_context_in_its_error_is_answered_in_one_line_without_retries(tmp_path):
    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said("never")], n_ctx=500, props=False) as srv:
        out = run_session(session(path, client(srv), system_prompt="Read this. " * 150), "go")
    assert out.status == "model_error" and one_line(out.reason) and srv.answered == [400]
    assert "longer than its context" in out.reason and "its context holds 500" in out.reason
    assert out.kind == "context"


def test_a_server_error_is_one_line_its_whole_body_is_in_the_transcript_and_a_repeat_is_not_retried(tmp_path):
    from llamacpp_server import NULL_CONTENT_DUMP

    path = tmp_path / "t.jsonl"
    with LlamaCppServer([Said("never")], fails_with=(500, NULL_CONTENT_DUMP)) as srv:
        out = run_session(session(path, client(srv, max_attempts=5)), "go")
    assert out.status == "model_error" and one_line(out.reason)
    assert "500" in out.reason and NULL_CONTENT_DUMP.splitlines()[0] in out.reason
    assert srv.answered == [500, 500]  # the same answer twice: not tried five times
    error = events(path, "model_error")[0]
    assert error["error"] == out.reason and "TypeError: can only concatenate str" in error["body"]


def test_a_validation_error_list_is_shown_by_its_first_item(tmp_path):
    path = tmp_path / "t.jsonl"
    detail = [{"type": "string_type", "loc": ["body", "messages", 1, "content"],
               "msg": "Input should be a valid string", "input": None}] * 3
    with LlamaCppServer([], fails_with_body=(422, {"detail": detail})) as srv:
        out = run_session(session(path, client(srv)), "go")
    assert out.status == "model_error" and one_line(out.reason)
    assert "(422): body.messages.1.content: Input should be a valid string (and 2 more)" in out.reason
    assert out.kind == "rejected"


def test_a_server_that_dies_mid_run_ends_the_session_saying_it_stopped(tmp_path):
    path = tmp_path / "t.jsonl"

    def then_die(messages):
        if sum(m["role"] == "assistant" for m in messages) == 0:
            return Said(calls=[ECHO])
        srv.die()  # the process is killed while it should be answering turn 2
        return Said("never")

    srv = LlamaCppServer(then_die, needs_tool_choice=False, rejects_null_content=False)  # only this difference
    with srv:
        out = run_session(session(path, client(srv, max_attempts=3)), "go")
    assert out.status == "model_error" and one_line(out.reason)
    assert "stopped answering" in out.reason and "after answering earlier in this session" in out.reason
    assert out.kind == "stopped" and events(path, "model_error")[0]["kind"] == "stopped"
    assert events(path)[-1]["status"] == "model_error" and verify(path).ok



def test_a_reply_kept_open_with_keep_alives_ends_at_the_model_timeout(tmp_path):
    # sse-starlette servers (llama-cpp-python) send ": ping" comments while they generate: each one
    # resets the SDK's read timeout, so only a deadline for the whole reply ends a reply that never does.
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Pinging(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("content-length", 0)))
            posts.append(1)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(600):
                    data = b": ping\r\n\r\n"
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass

    posts: list[int] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), Pinging)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = OpenAIModel("local-model", base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                            api_key="sk-test-key-000000000000", timeout_s=1.0, backoff_initial_s=0.01,
                            backoff_max_s=0.02)
        path = tmp_path / "t.jsonl"
        out = run_session(session(path, model), "say hello")
    finally:
        server.shutdown()
    assert out.status == "model_error" and out.kind == "server" and "kept its reply open" in out.reason
    assert one_line(out.reason)
    assert len(posts) == 1  # the deadline ends it: a stream held open is not asked again
    assert verify(path).ok
