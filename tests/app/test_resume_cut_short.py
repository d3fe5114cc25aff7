"""A process killed between any two events of a turn leaves a part that `agent resume` can rebuild.

SIGKILL, an OOM kill or a power cut stops the writer wherever it is: after a model_response and
before its first tool_call, between the tool_call events of one batch, between a decision and its
result. Every such cut of the committed transcripts is rebuilt here, and the model's messages must
answer every call of the cut turn: "outcome unknown" for a change that had started (its intent is
written), "not finished" for a call that had not, and the recorded result for one that ended.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.journal import OUTCOME_UNKNOWN
from agent.record.transcript import read_part
from app.resume import NOT_FINISHED, rebuild

TRANSCRIPTS = sorted((Path(__file__).resolve().parents[2] / "transcripts").glob("*.jsonl"))


def cuts(path: Path) -> list[int]:
    """Line counts at which a kill leaves the record inside a turn (after a model_response, before the
    turn's last result)."""
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    inside, out = False, []
    for n, ev in enumerate(lines, start=1):
        if ev["type"] == "model_response" and ev.get("tool_calls"):
            inside = True
        elif ev["type"] in ("model_request", "session_end", "goal_result", "host_state"):
            inside = False
        if inside:
            out.append(n)
    return out


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=lambda p: p.stem)
def test_every_cut_inside_a_turn_rebuilds_and_answers_each_call_of_that_turn(path, tmp_path):
    lines = path.read_text().splitlines(keepends=True)
    points = cuts(path)
    assert points, f"{path.name}: no turn with calls to cut"
    for n in points:
        part_path = tmp_path / f"{path.stem}-{n}.jsonl"
        part_path.write_text("".join(lines[:n]))
        kept = [json.loads(line) for line in lines[:n]]
        last_response = [e for e in kept if e["type"] == "model_response"][-1]
        results = {e["call_id"] for e in kept if e["type"] == "tool_result" and e["turn"] == last_response["turn"]}
        started = {e["call_id"] for e in kept if e["type"] == "intent" and e["turn"] == last_response["turn"]}
        rebuilt = rebuild(read_part(part_path))
        answers = {m["tool_call_id"]: m["content"] for m in rebuilt.messages if m.get("role") == "tool"}
        for call in last_response["tool_calls"]:
            said = answers.get(call["id"])
            assert said is not None, f"{part_path.name}: no answer for {call['name']}"
            if call["id"] in results:
                assert not said.startswith((OUTCOME_UNKNOWN[:20], NOT_FINISHED[:20])), part_path.name
            elif call["id"] in started:
                assert said == OUTCOME_UNKNOWN, part_path.name
            else:
                assert said == NOT_FINISHED or not said.startswith(OUTCOME_UNKNOWN[:20]), (part_path.name, said)
        assert {i.call_id for i in rebuilt.unknown if i.turn == last_response["turn"]} == started - results


def test_a_change_not_started_when_the_process_was_killed_is_not_finished_and_not_unknown(tmp_path):
    """The cut right after the model asked for pip_install: the change never began."""
    path = Path(__file__).resolve().parents[2] / "transcripts" / "cuda13-upgrade.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines, start=1)
              if '"type":"model_response"' in line and '"pip_install"' in line)
    part_path = tmp_path / "killed.jsonl"
    part_path.write_text("".join(lines[:at]))
    rebuilt = rebuild(read_part(part_path))
    assert rebuilt.unknown == []
    assert rebuilt.messages[-1]["role"] == "tool" and rebuilt.messages[-1]["content"] == NOT_FINISHED
