"""`agent fleet --ask`: a held host handed to the model, in a session of its own, with the operator's approval.

Real `agent demo`, `agent recipe` and `agent fleet` processes, real sims, and the real openai SDK against
a loopback server whose answers are scripted: the held host's model. The operator's answers come on
stdin: the hand-over question first, then each change's approval.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.fleet.recipe import load_recipe
from agent.record.transcript import verify
from fake_openai import FakeOpenAI, Reply
from fleet_runs import agent, canary_recipe, events

HELD_DRIVER = "580.95.05"  # a CUDA 13 driver, not the canary's 590.48.01: the host is held


@pytest.fixture(scope="module")
def recipe(tmp_path_factory) -> Path:
    return canary_recipe(tmp_path_factory.mktemp("canary"))


def inventory(path: Path) -> Path:
    path.write_text(f"[gpu]\ngpu01\ngpu02 agent_sim='{{driver: {HELD_DRIVER}}}'\n\n[gpu:vars]\nagent_transport=sim\n")
    return path


def the_recipes_calls(recipe: Path, host: str) -> list[tuple[str, dict]]:
    """What a model that adapts nothing would do on the held host: the recipe's own calls, in its order."""
    r = load_recipe(recipe)
    return ([("inspect_host", {"host": host}), ("pip_freeze_backup", {"host": host, **r.backup}),
             ("run_bench", r.benchmark.call(host, "before"))]
            + [(s.tool, {"host": host, **s.args}) for s in r.steps]
            + [("run_bench", r.benchmark.call(host, "after"))])


def fleet_hosts(out: Path) -> dict[str, dict]:
    fleet = out / "fleet.jsonl"
    assert verify(fleet).ok, verify(fleet).problems
    return {e["host"]: e for e in events(fleet) if e["type"] == "fleet_host"}  # the last word on each host


def test_a_held_host_handed_to_the_model_is_upgraded_with_each_change_approved(recipe, tmp_path):
    calls = the_recipes_calls(recipe, "gpu02")
    script = [Reply(calls=[c]) for c in calls] + [Reply(text="gpu02 upgraded: toolkit 13.0 beside 12.8, cu130 wheels.")]
    out = tmp_path / "rollout"
    with FakeOpenAI(script) as srv:
        # y: hand gpu02 over; y, y: the runfile and the wheels, each asked.
        r = agent("fleet", str(recipe), "-i", str(inventory(tmp_path / "hosts.ini")), "--dir", str(out), "--ask",
                  "--model", "scripted", "--base-url", srv.base_url, home=tmp_path, stdin="y\ny\ny\n")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    hosts = fleet_hosts(out)
    assert hosts["gpu01"]["status"] == "changed" and not hosts["gpu01"].get("handed_over")
    held = hosts["gpu02"]
    assert held["status"] == "changed" and held["handed_over"] is True, held
    assert held["reason"].startswith("handed to the model: its changes passed the checks, gate:"), held["reason"]
    ask = Path(held["transcript"])
    assert ask == out / "ask" / "gpu02.jsonl" and verify(ask).ok
    evs = events(ask)
    assert evs[0]["policy"]["mode"] == "interactive"
    assert evs[0]["policy"]["authorizations"] == []  # none of the recipe's rules applies on a host that differs
    asked = [(e["tool"], e["answer"], e["by"]) for e in evs if e["type"] == "approval"]
    assert asked == [("install_runfile", "yes", "operator"), ("pip_install", "yes", "operator")], asked
    # The model read why the host was held and the canary's steps, as a reference.
    first = srv.requests[0]["messages"]
    request = next(m["content"] for m in first if m["role"] == "user")
    assert f"driver is '{HELD_DRIVER}', the recipe was proven on '590.48.01'" in request
    assert "1. install_runfile" in request and "2. pip_install" in request
    result = next(e for e in evs if e["type"] == "goal_result")
    assert result["fleet_status"] == "changed" and result["checks_ok"] is True and result["gate"]["passed"]
    fleet = events(out / "fleet.jsonl")
    assert [e for e in fleet if e["type"] == "fleet_handoff"] == [
        {**next(e for e in fleet if e["type"] == "fleet_handoff"), "host": "gpu02", "handed_over": True}]
    end = next(e for e in fleet if e["type"] == "fleet_result")
    assert end["counts"] == {"changed": 2} and end["held"] == []
    assert "gpu02           : ok=0  changed=1  failed=0  held=0  [upgraded] handed_over=1" in r.stderr


def test_a_handed_over_host_that_fails_its_checks_is_offered_its_rollback(recipe, tmp_path):
    """The model installs only the wheels: the toolkit check fails and no benchmark was run; the operator approves
    the rollback, which the fleet makes (restore_backup of the session's first backup)."""
    calls = the_recipes_calls(recipe, "gpu02")
    wheels_only = [c for c in calls if c[0] not in ("install_runfile", "run_bench")]
    script = [Reply(calls=[c]) for c in wheels_only] + [Reply(text="done")]
    out = tmp_path / "rollout"
    with FakeOpenAI(script) as srv:
        # y: hand over; y: the wheels; y: the rollback (destructive, asked on its own).
        r = agent("fleet", str(recipe), "-i", str(inventory(tmp_path / "hosts.ini")), "--dir", str(out), "--ask",
                  "--model", "scripted", "--base-url", srv.base_url, home=tmp_path, stdin="y\ny\ny\n")
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]  # a host failed
    held = fleet_hosts(out)["gpu02"]
    assert held["status"] == "failed" and held["rolled_back"] is True, held
    assert "a success check failed" in held["reason"] and "the benchmark gate could not be computed" in held["reason"]
    evs = events(Path(held["transcript"]))
    asked = [(e["tool"], e["answer"]) for e in evs if e["type"] == "approval"]
    assert asked == [("pip_install", "yes"), ("restore_backup", "yes")], asked
    restore = next(e for e in evs if e["type"] == "tool_call" and e["tool"] == "restore_backup")
    first_backup = next(e for e in evs if e["type"] == "tool_result" and e["tool"] == "pip_freeze_backup")
    assert restore["arguments"]["backup_id"] == first_backup["data"]["backup_id"]
    assert len(srv.requests) == len(wheels_only) + 1  # the rollback asked the model nothing


def test_a_no_leaves_the_host_held_and_asks_the_model_nothing(recipe, tmp_path):
    out = tmp_path / "rollout"
    with FakeOpenAI([]) as srv:
        r = agent("fleet", str(recipe), "-i", str(inventory(tmp_path / "hosts.ini")), "--dir", str(out), "--ask",
                  "--model", "scripted", "--base-url", srv.base_url, home=tmp_path, stdin="n\n")
    assert r.returncode == 0, r.stderr[-3000:]
    assert fleet_hosts(out)["gpu02"]["status"] == "held" and srv.requests == []
    assert not (out / "ask").exists() or not any((out / "ask").iterdir())
    assert "gpu02 stays held" in r.stdout + r.stderr


def test_ask_and_json_together_is_one_line_and_nothing_runs(tmp_path):
    r = agent("fleet", str(tmp_path / "any.recipe.yaml"), "-i", str(inventory(tmp_path / "hosts.ini")), "--dir", str(tmp_path / "o"),
              "--ask", "--json", home=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--ask" in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_a_host_the_model_leaves_unchanged_stays_held_and_says_so(recipe, tmp_path):
    """The right answer on some held hosts is to change nothing: the host stays held, its checks are not run, and
    the verdict says held (not a failure, not a success)."""
    out = tmp_path / "rollout"
    with FakeOpenAI([Reply(calls=[("inspect_host", {"host": "gpu02"})]),
                     Reply(text="This host differs; I changed nothing.")]) as srv:
        r = agent("fleet", str(recipe), "-i", str(inventory(tmp_path / "hosts.ini")), "--dir", str(out), "--ask",
                  "--model", "scripted", "--base-url", srv.base_url, home=tmp_path, stdin="y\n")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    held = fleet_hosts(out)["gpu02"]
    assert held["status"] == "held" and held["handed_over"] is True
    assert held["reason"].endswith("handed to the model, which changed nothing"), held["reason"]
    evs = events(Path(held["transcript"]))
    result = next(e for e in evs if e["type"] == "goal_result")
    assert result["verdict"] == "held" and result["checks_ok"] is None
    assert not [e for e in evs if e["type"] == "check"]
    assert "HOST HELD: " in r.stdout and "nothing was changed: the host stays held" in r.stdout
    assert "it then stays held, and the checks are not run" in srv.requests[0]["messages"][1]["content"]
