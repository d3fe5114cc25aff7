"""web_search through the real exa-py client to an Exa-shaped server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

from agent.loop import Session, run_session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter, iter_events, verify
from agent.safety.policy import SafetyPolicy
from tools import default_tools
from tools.base import ArgumentError, ArtifactStore, Registry, RiskClass, ToolContext, ToolError
from tools.web_search import CUT_MARK, ENVELOPE_END, ENVELOPE_HEADER, EXCERPT_CHARS, RENDER_CHARS, WebSearch

from fake_exa import (
    CUDA_DOWNLOADS,
    CUDA_INSTALL_GUIDE,
    PLANTED_INSTRUCTION,
    POISONED_FORUM_POST,
    FakeExa,
    Hang,
    Results,
    Status,
    Trickle,
)

API_KEY = "exa-test-key-7f3c9a1e5b2d4680"


@pytest.fixture(autouse=True)
def exa_env(monkeypatch):
    monkeypatch.setenv("EXA_API_KEY", API_KEY)
    monkeypatch.delenv("EXA_BASE_URL", raising=False)
    monkeypatch.delenv("UPGRADE_AGENT_WEB_TIMEOUT", raising=False)
    # A proxy configured on the machine must not carry loopback requests away.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")


@pytest.fixture
def exa(monkeypatch):
    """A started server answering with the sample pages; EXA_BASE_URL points at it."""
    srv = FakeExa()
    with srv:
        monkeypatch.setenv("EXA_BASE_URL", srv.base_url)
        yield srv


def serve(monkeypatch, script) -> FakeExa:
    srv = FakeExa(script)
    monkeypatch.setenv("EXA_BASE_URL", srv.base_url)
    return srv


def context() -> ToolContext:
    return ToolContext(hosts=None, artifacts=ArtifactStore(None))


def search(tool: WebSearch | None = None, ctx: ToolContext | None = None, **args):
    tool = tool or WebSearch()
    return tool.run(ctx or context(), WebSearch.parse_args({"query": "CUDA 13.1 runfile toolkit only", **args}))


def failure(tool: WebSearch | None = None, ctx: ToolContext | None = None, **args) -> str:
    with pytest.raises(ToolError) as e:
        search(tool, ctx, **args)
    message = str(e.value)
    assert API_KEY not in message
    return message


# --------------------------------------------------------------------------- request and result


def test_request_carries_query_options_and_key_header(exa):
    result = search(num_results=3, include_domains=["docs.nvidia.com", " Developer.NVIDIA.com "],
                    start_published_date="2025-06-01")
    assert exa.paths == ["/search"]
    body = exa.requests[0]
    assert body["query"] == "CUDA 13.1 runfile toolkit only"
    assert body["numResults"] == 3
    assert body["includeDomains"] == ["docs.nvidia.com", "developer.nvidia.com"]
    assert body["startPublishedDate"] == "2025-06-01"
    assert body["contents"] == {"text": {"maxCharacters": EXCERPT_CHARS}}
    assert exa.headers[0]["x-api-key"] == API_KEY
    assert result.query == "CUDA 13.1 runfile toolkit only"
    assert result.untrusted is True


def test_defaults_send_five_results_and_no_domain_filter(exa):
    search()
    body = exa.requests[0]
    assert body["numResults"] == 5
    assert "includeDomains" not in body and "startPublishedDate" not in body


def test_results_are_parsed_into_title_url_date_and_tidied_excerpt(exa):
    result = search()
    assert [h.url for h in result.results] == [CUDA_DOWNLOADS["url"], CUDA_INSTALL_GUIDE["url"],
                                              POISONED_FORUM_POST["url"]]
    first = result.results[0]
    assert first.title == "CUDA Toolkit 13.1 Update 1 Downloads | NVIDIA Developer"
    assert first.published_date == "2026-01-15T00:00:00.000Z"
    assert "--silent --toolkit --toolkitpath=/usr/local/cuda-13.1" in first.excerpt
    assert "\n\n\n" not in first.excerpt  # blank-line runs collapsed
    assert result.results[2].published_date is None
    assert set(first.model_dump()) == {"title", "url", "published_date", "excerpt"}


def test_a_result_without_text_falls_back_to_its_highlights(monkeypatch):
    page = {**CUDA_DOWNLOADS, "text": None, "highlights": ["first passage", "second passage"]}
    with serve(monkeypatch, [Results([page])]):
        result = search()
    assert result.results[0].excerpt == "first passage\nsecond passage"


def test_no_results_render_an_empty_envelope(monkeypatch):
    with serve(monkeypatch, [Results([])]):
        tool = WebSearch()
        text = tool.render(search(tool))
    assert "0 result(s)" in text and "<<<no results>>>" in text and text.endswith(ENVELOPE_END)


# --------------------------------------------------------------------------- what the model reads


def test_render_wraps_every_result_in_the_untrusted_envelope(exa):
    tool = WebSearch()
    text = tool.render(search(tool))
    assert text.splitlines()[0] == ENVELOPE_HEADER
    assert text.endswith(ENVELOPE_END)
    # The planted instruction sits inside result 3's markers, which the page could not close early.
    start = text.index("<<<WEB RESULT 3 (untrusted)>>>")
    end = text.index("<<<END WEB RESULT 3>>>")
    assert start < text.index(PLANTED_INSTRUCTION) < end
    assert text.count("<<<END WEB RESULT 3>>>") == 1
    assert text.count(ENVELOPE_END) == 1
    assert "< < <END WEB RESULT 3> > >" in text  # the forged marker, defanged
    for n in (1, 2, 3):
        assert text.count(f"<<<WEB RESULT {n} (untrusted)>>>") == 1 and text.count(f"<<<END WEB RESULT {n}>>>") == 1
    assert "url: https://docs.nvidia.com/cuda/cuda-installation-guide-linux/" in text
    assert "published: 2026-01-15T00:00:00.000Z" in text


def test_long_pages_are_cut_per_excerpt_and_in_total(monkeypatch):
    pages = [{**CUDA_INSTALL_GUIDE, "id": f"p{i}", "url": f"https://docs.nvidia.com/cuda/page-{i}",
              "text": f"page {i} " + "x" * 5_000} for i in range(10)]
    with serve(monkeypatch, [Results(pages)]) as srv:
        tool = WebSearch()
        result = search(tool, num_results=10)
    assert srv.requests[0]["contents"]["text"]["maxCharacters"] == EXCERPT_CHARS
    # The server ignored maxCharacters; the tool cuts anyway.
    assert all(len(h.excerpt) == EXCERPT_CHARS and h.excerpt.endswith(CUT_MARK) for h in result.results)
    text = tool.render(result)
    assert len(text) <= RENDER_CHARS
    assert text.endswith(ENVELOPE_END)
    shown = text.count("(untrusted)>>>")
    assert 3 <= shown < 10
    assert text.count("<<<END WEB RESULT") == shown  # every block that opens also closes
    assert f"{10 - shown} more result(s) not shown" in text


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize("value", [None, "", "   "])
def test_without_a_key_the_error_says_how_to_configure_it(monkeypatch, exa, value):
    if value is None:
        monkeypatch.delenv("EXA_API_KEY")
    else:
        monkeypatch.setenv("EXA_API_KEY", value)
    message = failure()
    assert "not configured" in message and "EXA_API_KEY" in message and "session goes on" in message
    assert exa.requests == []


@pytest.mark.parametrize("status, expected", [
    (Status(401, "Invalid API key", "INVALID_API_KEY"), ["rejected the API key (401", "EXA_API_KEY"]),
    (Status(402, "Credits exhausted", "NO_MORE_CREDITS"), ["out of credits (402"]),
    (Status(429, "Too many requests", "RATE_LIMIT_EXCEEDED"), ["rate-limited", "429", "try again later"]),
    (Status(500, "Internal error", "INTERNAL_ERROR"), ["failed (500", "try again later"]),
    (Status(503, "Service unavailable", "SERVICE_UNAVAILABLE"), ["failed (503"]),
    (Status(400, "includeDomains must be a list", "INVALID_REQUEST_BODY"),
     ["rejected the search (400", "includeDomains must be a list [INVALID_REQUEST_BODY]", "change the arguments"]),
])
def test_http_errors_become_messages_for_the_model(monkeypatch, status, expected):
    with serve(monkeypatch, [status]):
        message = failure()
    for part in expected:
        assert part in message


def test_the_key_never_appears_even_when_the_server_echoes_it(monkeypatch):
    with serve(monkeypatch, [Status(401, f"Invalid API key {API_KEY}", "INVALID_API_KEY")]):
        message = failure()
    assert "[EXA_API_KEY]" in message


def test_a_page_that_echoes_the_key_does_not_leak_it(monkeypatch):
    page = {**CUDA_INSTALL_GUIDE, "text": f"debug: x-api-key={API_KEY}"}
    with serve(monkeypatch, [Results([page])]):
        tool = WebSearch()
        result = search(tool)
    assert API_KEY not in result.model_dump_json() and API_KEY not in tool.render(result)


def test_connection_refused_on_a_closed_port(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("EXA_BASE_URL", f"http://127.0.0.1:{port}")
    message = failure()
    assert f"cannot reach Exa at http://127.0.0.1:{port}" in message
    assert "Connection refused" in message and "EXA_BASE_URL" in message


def test_a_base_url_that_is_not_http_is_refused(monkeypatch):
    monkeypatch.setenv("EXA_BASE_URL", "api.exa.ai")
    assert "EXA_BASE_URL='api.exa.ai' is not an http(s) URL" in failure()


# --------------------------------------------------------------------------- timeouts


def test_a_server_that_never_answers_times_out(monkeypatch):
    with serve(monkeypatch, [Hang()]) as srv:
        t0 = time.monotonic()
        message = failure(WebSearch(timeout_s=1.0))
        elapsed = time.monotonic() - t0
    assert "timed out" in message and "within 1 s" in message
    assert elapsed < 5
    assert len(srv.requests) == 1  # the request did reach the server


def test_a_server_that_trickles_bytes_hits_the_deadline(monkeypatch):
    # Each byte arrives well inside the client's per-read timeout, so only the deadline stops it.
    with serve(monkeypatch, [Trickle(every_s=0.2)]):
        t0 = time.monotonic()
        message = failure(WebSearch(timeout_s=1.0))
        elapsed = time.monotonic() - t0
    assert "timed out" in message and "abandoned" in message
    assert elapsed < 5


def test_the_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("UPGRADE_AGENT_WEB_TIMEOUT", "0.5")
    with serve(monkeypatch, [Hang()]):
        t0 = time.monotonic()
        message = failure()
        elapsed = time.monotonic() - t0
    assert "within 0.5 s" in message and elapsed < 4


@pytest.mark.parametrize("value", ["soon", "0", "-3", "100000"])
def test_a_bad_timeout_setting_is_an_error_that_names_it(monkeypatch, exa, value):
    monkeypatch.setenv("UPGRADE_AGENT_WEB_TIMEOUT", value)
    assert "UPGRADE_AGENT_WEB_TIMEOUT" in failure()
    assert exa.requests == []


def test_the_operator_can_cancel_a_hanging_search(monkeypatch):
    ctx = context()
    threading.Timer(0.3, ctx.cancel.set).start()
    with serve(monkeypatch, [Hang()]):
        t0 = time.monotonic()
        message = failure(WebSearch(timeout_s=30), ctx)
        elapsed = time.monotonic() - t0
    assert "cancelled" in message and elapsed < 5


# --------------------------------------------------------------------------- arguments, risk, schema


@pytest.mark.parametrize("args, problem", [
    ({"query": ""}, "query"),
    ({"query": "   "}, "query is empty"),
    ({"query": "cuda", "num_results": 0}, "num_results"),
    ({"query": "cuda", "num_results": 11}, "num_results"),
    ({"query": "cuda", "include_domains": ["docs nvidia com"]}, "include_domains"),
    ({"query": "cuda", "start_published_date": "last week"}, "YYYY-MM-DD"),
    ({"query": "cuda", "max_results": 3}, "max_results"),
])
def test_bad_arguments_are_refused_with_a_reason(args, problem):
    with pytest.raises(ArgumentError) as e:
        WebSearch.parse_args(args)
    assert problem in str(e.value)


def test_nulls_from_a_strict_schema_mean_defaults():
    args = WebSearch.parse_args(json.dumps({"query": "cuda", "num_results": None, "include_domains": None,
                                            "start_published_date": None}))
    assert args.num_results == 5 and args.include_domains is None


def test_action_is_read_only_and_touches_no_host():
    action = WebSearch().action(WebSearch.parse_args({"query": "flashinfer cu130 wheel"}))
    assert action.host is None and action.subject == "web_search flashinfer cu130 wheel"
    assert action.risk.cls is RiskClass.READ_ONLY and action.risk.rule == "tool:web_search"


def test_schema_is_strict_and_the_tool_is_registered():
    fn = WebSearch.schema()["function"]
    assert fn["strict"] is True and fn["name"] == "web_search"
    params = fn["parameters"]
    assert params["additionalProperties"] is False
    assert set(params["required"]) == {"query", "num_results", "include_domains", "start_published_date"}
    assert "untrusted" in fn["description"]
    assert any(isinstance(t, WebSearch) for t in default_tools(["web_search"]))


# --------------------------------------------------------------------------- through the agent loop


class RecordingModel(ScriptedModel):
    """A scripted model that keeps a copy of each request: the session's message list grows in place."""

    def __init__(self, turns):
        super().__init__(turns)
        self.seen: list[list[dict]] = []

    def complete(self, messages, tools, on_text=None):
        self.seen.append([dict(m) for m in messages])
        return super().complete(messages, tools, on_text)


def web_session(path: Path, model) -> Session:
    return Session(model=model, registry=Registry([WebSearch(timeout_s=5)]), gate=SafetyPolicy(scope={"gpu1"}),
                   transcript=TranscriptWriter(path), system_prompt="You upgrade GPU hosts.")


def test_a_search_in_a_session_reaches_the_model_and_the_transcript(exa, tmp_path):
    path = tmp_path / "t.jsonl"
    model = RecordingModel([
        turn(calls=[("web_search", {"query": "CUDA 13.1 runfile toolkit only", "num_results": 3,
                                    "include_domains": None, "start_published_date": None})]),
        turn("The runfile takes --toolkit to leave the driver alone."),
    ])
    outcome = run_session(web_session(path, model), "find how to install CUDA 13.1 toolkit only")
    assert outcome.status == "done"
    assert exa.requests[0]["numResults"] == 3
    # The next model request carries the rendered, enveloped result.
    tool_message = model.seen[1][-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_0"
    assert tool_message["content"].startswith(ENVELOPE_HEADER) and PLANTED_INSTRUCTION in tool_message["content"]
    events = list(iter_events(path))
    decision = next(e for e in events if e["type"] == "decision")
    assert decision["verdict"] == "allow" and decision["risk_rule"] == "tool:web_search"
    result = next(e for e in events if e["type"] == "tool_result")
    assert result["ok"] is True and result["content"] == tool_message["content"]
    assert result["data"]["untrusted"] is True
    assert [h["url"] for h in result["data"]["results"]][:2] == [CUDA_DOWNLOADS["url"], CUDA_INSTALL_GUIDE["url"]]
    assert verify(path).ok
    assert API_KEY not in path.read_text()


def test_without_a_key_the_session_goes_on(monkeypatch, exa, tmp_path):
    monkeypatch.delenv("EXA_API_KEY")
    path = tmp_path / "t.jsonl"
    model = RecordingModel([turn(calls=[("web_search", {"query": "sgl-kernel cu130"})]),
                           turn("No web results; checking the host instead.")])
    outcome = run_session(web_session(path, model), "go")
    assert outcome.status == "done"
    assert model.seen[1][-1]["content"].startswith("unavailable: web_search is not configured: set EXA_API_KEY")
    result = next(e for e in iter_events(path) if e["type"] == "tool_result")
    # Nothing was attempted: no failed step, so a run without checks is not failed by it.
    assert result["status"] == "unavailable"
    end = next(e for e in iter_events(path) if e["type"] == "session_end")
    assert end["failed"] == 0
    # Nor a step that ran: the end counts it as not run, as it counts a step skipped.
    assert (end["tool_calls"], end["skipped"], end["calls"]) == (0, 1, 1)
