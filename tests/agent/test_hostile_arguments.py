"""Raw tool-call arguments a red team wrote against the gate's intake (none of them runs anything)."""

from __future__ import annotations

import json

import pytest

from agent.loop import Session
from agent.model import ScriptedModel, ToolCall
from agent.record.transcript import TranscriptWriter
from agent.safety.policy import SafetyPolicy
from tools import default_tools
from tools.base import Registry


@pytest.fixture
def prepare(tmp_path):
    session = Session(model=ScriptedModel([]), registry=Registry(default_tools()),
                      gate=SafetyPolicy(scope={"gpu1"}, mode="scripted"), transcript=TranscriptWriter(tmp_path / "t.jsonl"))
    return lambda raw: session._prepare(1, 0, ToolCall(id="c0", name="ssh_exec", arguments=raw))


def test_a_key_given_twice_is_malformed_and_a_foreign_host_among_them_is_out_of_scope(prepare):
    same = prepare('{"host": "gpu1", "command": "rm -rf /tmp/x", "command": "uname -a"}')
    assert same.error is not None and "'command' twice" in same.error
    foreign = prepare('{"host": "evil", "host": "gpu1", "command": "uname -a"}')
    assert foreign.decision is not None and not foreign.decision.allowed and "out-of-scope" in foreign.decision.rule


@pytest.mark.parametrize("raw", [
    '{"host": "gpu1", "command": "ls", "timeout": ' + "9" * 5000 + "}",  # past Python's int-digit limit
    '{"host": "gpu1", "command": "ls", "env": ' + "[" * 100_000 + "]" * 100_000 + "}",  # past the recursion limit
])
def test_arguments_that_cannot_be_read_are_a_malformed_call_not_a_crash(prepare, raw):
    p = prepare(raw)
    assert p.error is not None and "cannot be read" in p.error and p.decision is None


def test_an_unreadable_call_to_a_foreign_host_is_out_of_scope(prepare):
    p = prepare('{"host": "evil", "command": "ls", "env": ' + "[" * 100_000 + "]" * 100_000 + "}")
    assert p.decision is not None and "out-of-scope" in p.decision.rule
    json.dumps(p.decision.as_event())  # the refusal can be recorded
