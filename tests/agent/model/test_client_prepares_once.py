"""The client prepares each message once, and sends what the SDK's own create() would send.

A session's message list only grows, so a request should cost the client the same at turn 5 and at
turn 500: each message is put in its wire form when it is first sent, and never read again. What
goes out is compared with what the old way sends, the real SDK's `chat.completions.create` given
the whole conversation, through the same kind of loopback server.
"""

from __future__ import annotations

import json

import openai

from agent.model.openai_client import OpenAIModel, estimate_prompt_tokens, wire_messages
from tools import default_tools
from tools.base import Registry

from llamacpp_server import LlamaCppServer, Said

TOOLS = Registry(default_tools()).schemas()


class Watched(dict):
    """A message that counts the reads of its keys and values: a client that prepares each message
    once reads it during one request, and never again."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reads = 0

    def get(self, *args):
        self.reads += 1
        return super().get(*args)

    def __getitem__(self, key):
        self.reads += 1
        return super().__getitem__(key)

    def items(self):
        self.reads += 1
        return super().items()

    def keys(self):
        self.reads += 1
        return super().keys()

    def values(self):
        self.reads += 1
        return super().values()


def turn(n: int, make=dict) -> list[dict]:
    """One turn as the loop appends it: the model's calls (one of them malformed, one given as an
    object, as a session built in code does) and their results, a few KB each."""
    calls = [
        {"id": f"c{n}a", "type": "function",
         "function": {"name": "ssh_exec", "arguments": json.dumps({"host": "gpu1", "command": f"nvidia-smi -i {n}"})}},
        {"id": f"c{n}b", "type": "function", "function": {"name": "inspect_host", "arguments": '{"host": "gpu1"'}},
        {"id": f"c{n}c", "type": "function", "function": {"name": "check_compat", "arguments": {"target": f"13.{n}"}}},
    ]
    out = [make({"role": "assistant", "content": None if n % 2 else f"turn {n}: looking", "tool_calls": calls})]
    out += [make({"role": "tool", "tool_call_id": c["id"], "content": f"result {n} ü\n" + "x" * 3000}) for c in calls]
    return out


def conversation(turns: int, make=dict) -> list[dict]:
    messages = [make({"role": "system", "content": "You upgrade GPU hosts."}),
                make({"role": "user", "content": "Move gpu1 to CUDA 13."})]
    for n in range(turns):
        messages += turn(n, make)
    return messages


def client(srv) -> OpenAIModel:
    return OpenAIModel("local-model", base_url=srv.base_url, api_key="sk-test-key-000000000000",
                       backoff_initial_s=0.01, backoff_max_s=0.02)


def old_way(srv, messages: list[dict], stream: bool) -> None:
    """The request as the client made it before: the SDK's create() with the whole conversation."""
    sdk = openai.OpenAI(api_key="sk-test-key-000000000000", base_url=srv.base_url, max_retries=0)
    extra = {"stream_options": {"include_usage": True}} if stream else {}
    try:
        response = sdk.chat.completions.create(model="local-model", messages=wire_messages(messages), tools=TOOLS,
                                               tool_choice="auto", parallel_tool_calls=True, stream=stream, **extra)
        if stream:
            for _ in response:
                pass
    except openai.APIStatusError:
        pass  # a refusal the new way met too: the body was received all the same


def same_json(new: dict, old: dict) -> bool:
    """Equal values, and the keys in the same order at every level."""
    return json.dumps(new, ensure_ascii=False) == json.dumps(old, ensure_ascii=False)


def server(**kw) -> LlamaCppServer:
    return LlamaCppServer(lambda messages: Said("ok"), reports_usage=True, **kw)


def test_each_message_is_read_during_the_request_that_first_sends_it_and_never_again():
    messages = conversation(0, Watched)
    reads_after_first_send: dict[int, int] = {}
    with server() as srv:
        model = client(srv)
        for n in range(8):
            messages += turn(n, Watched)
            model.complete(messages, TOOLS)
            for i, message in enumerate(messages):
                reads_after_first_send.setdefault(i, message.reads)
    assert len(srv.requests) == 8 and len(srv.requests[-1]["messages"]) == len(messages) == 2 + 8 * 4
    assert all(message.reads > 0 for message in messages)
    again = {i: (reads_after_first_send[i], m.reads) for i, m in enumerate(messages) if m.reads != reads_after_first_send[i]}
    assert again == {}, f"messages read again by later requests (index: reads after first send, at the end): {again}"
    assert model.history.converted == len(messages)


def test_the_streamed_body_is_the_one_the_sdk_create_sends_key_for_key():
    messages = conversation(0)
    with server() as new_srv, server() as old_srv:
        model = client(new_srv)
        for n in range(4):
            messages += turn(n)
            model.complete(messages, TOOLS)
            old_way(old_srv, messages, stream=True)
    assert len(new_srv.requests) == len(old_srv.requests) == 4
    for new, old in zip(new_srv.requests, old_srv.requests):
        assert same_json(new, old)
    last = new_srv.requests[-1]
    assert list(last) == ["model", "stream", "messages", "parallel_tool_calls", "stream_options", "tool_choice",
                          "tools"]
    # The wire form's own work is in it: "" for no text, {} and a note for a malformed call.
    second = last["messages"][6]  # turn 1's: no text
    assert second["content"] == "" and second["tool_calls"][1]["function"]["arguments"] == "{}"
    assert "do not parse as a JSON object" in last["messages"][8]["content"]


def test_the_unstreamed_fallback_sends_the_body_the_sdk_create_sends():
    messages = conversation(2)
    with server(streams_tool_calls=False) as new_srv, server(streams_tool_calls=False) as old_srv:
        model = client(new_srv)
        first = model.complete(messages, TOOLS)
        messages += turn(2)
        model.complete(messages, TOOLS)
        old_way(old_srv, conversation(2), stream=True)
        old_way(old_srv, conversation(2), stream=False)
        old_way(old_srv, messages, stream=False)
    assert new_srv.answered == old_srv.answered == [500, 200, 200]
    assert [r["stream"] for r in new_srv.requests] == [True, False, False]
    for new, old in zip(new_srv.requests, old_srv.requests):
        assert same_json(new, old)
    assert first.text == "ok" and any("cannot stream tool calls" in note for note in first.notes)


def test_a_rewritten_history_is_prepared_again_from_the_first_message_that_differs():
    messages = conversation(3)
    with server() as new_srv, server() as old_srv:
        model = client(new_srv)
        model.complete(messages, TOOLS)
        converted = model.history.converted
        # A compaction: the first turn (with a malformed call whose results carry a note) becomes a summary,
        # in a new list; the turns after it are the same messages.
        compacted = messages[:2] + [{"role": "user", "content": "(summary of turn 0)"}] + messages[6:]
        model.complete(compacted, TOOLS)
        old_way(old_srv, messages, stream=True)
        old_way(old_srv, compacted, stream=True)
        # The same list object, an older message replaced in place by a rewritten one.
        compacted[3] = {**compacted[3], "content": "rewritten"}
        model.complete(compacted, TOOLS)
        old_way(old_srv, compacted, stream=True)
    assert model.history.converted == converted + (len(compacted) - 2) + (len(compacted) - 3)
    for new, old in zip(new_srv.requests, old_srv.requests, strict=True):
        assert same_json(new, old)
    assert new_srv.requests[2]["messages"][3]["content"] == "rewritten"


def test_the_prompt_estimate_kept_between_requests_is_the_one_counted_from_scratch():
    messages = conversation(1)
    with server(n_ctx=10**6) as srv:
        model = client(srv)
        for n in range(1, 4):
            messages += turn(n)
            model.complete(messages, TOOLS)
            assert model.history.tokens == estimate_prompt_tokens(wire_messages(messages), None)
        shorter = messages[:5]
        model.complete(shorter, TOOLS)
        assert model.history.tokens == estimate_prompt_tokens(wire_messages(shorter), None)
