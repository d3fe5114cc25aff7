"""The `agent` command as users run it: real subprocesses, real exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]


def agent(*args: str, input: str | None = None, env: dict | None = None, timeout: float = 120):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    full_env.update({"PYTHONPATH": str(ROOT), **(env or {})})
    return subprocess.run([sys.executable, "-m", "app.cli", *args], input=input, capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=ROOT)


def test_help_teaches_the_commands_and_exit_codes():
    r = agent("--help")
    assert r.returncode == 0
    for word in ("run", "chat", "replay", "show", "tools", "classify", "exec", "demo", "exit codes", "130", "143 "):
        assert word in r.stdout
    r = agent("run", "--help")
    assert "--plan" in r.stdout and "3    a needed step was refused" in r.stdout


def test_tools_json_prints_strict_schemas_of_every_tool():
    r = agent("tools", "--json")
    schemas = json.loads(r.stdout)
    names = [s["function"]["name"] for s in schemas]
    assert names == ["inspect_host", "check_compat", "ssh_exec", "web_search", "pip_freeze_backup", "pip_install", "restore_backup",
                     "install_runfile", "run_bench", "check_outputs", "drain_node", "undrain_node"]
    for s in schemas:
        params = s["function"]["parameters"]
        assert s["function"]["strict"] and params["additionalProperties"] is False
        assert set(params["required"]) == set(params["properties"])
    assert "inspect_host" in agent("tools").stdout


def test_classify_one_command_and_a_stream_of_commands():
    r = agent("classify", "--json", "--", "rm", "-rf", "/")
    assert json.loads(r.stdout)["risk"] == "forbidden"
    r = agent("classify", input="nvidia-smi -L\npip uninstall -y torch\nls $(rm -rf /usr/local/cuda)\n")
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [row["risk"] for row in rows] == ["read-only", "destructive", "destructive"]
    assert all(set(row) >= {"command", "risk", "reason"} for row in rows)
    assert rows[2]["decoded"] == "rm -rf /usr/local/cuda"


def test_exec_runs_read_only_commands_and_refuses_the_rest():
    r = agent("exec", "local", "--", "echo", "hello from exec")
    assert r.returncode == 0 and "hello from exec" in r.stdout
    r = agent("exec", "local", "--", "touch", "/tmp/should-not-exist-upgrade-agent")
    assert r.returncode == 3 and "`agent exec` runs only commands that read" in r.stderr, r.stderr
    assert "agent chat --host local" in r.stderr and r.stderr.count("\n") == 1
    # Words for the operator, not the model's: no goal file is involved, and a person can be asked.
    assert "goal file" not in r.stderr and "never asks" not in r.stderr
    assert not Path("/tmp/should-not-exist-upgrade-agent").exists()
    r = agent("exec", "local", "--", "sh", "-c", "exit 7")
    assert r.returncode == 3  # sh -c is a wrapper: never read-only


def test_exec_on_a_sim_leaves_no_simulated_host_behind(tmp_path):
    r = agent("exec", "sim", "nvidia-smi", "-L", env={"TMPDIR": str(tmp_path)})
    assert r.returncode == 0 and "GPU 0:" in r.stdout, r.stderr
    assert list(tmp_path.iterdir()) == []  # it was some 27 MB a call, which nothing listed or removed


def test_exec_prints_the_whole_output_however_long(tmp_path):
    """No transcript here: nothing is cut for a record, the caller gets every byte."""
    numbers = tmp_path / "numbers.txt"
    numbers.write_text("".join(f"{i}\n" for i in range(100_000)))  # 589 kB, past the transcript's field limit
    r = agent("exec", "local", "--", "cat", str(numbers))
    assert r.returncode == 0 and r.stdout == numbers.read_text()
    r = agent("exec", "local", "--json", "--", "cat", str(numbers))
    assert r.returncode == 0 and json.loads(r.stdout)["stdout"] == numbers.read_text()


def test_exec_to_an_unreachable_host_is_a_clear_error():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = agent("exec", f"nobody@127.0.0.1:{port}", "--timeout", "5", "--", "nvidia-smi", "-L", timeout=60)
    assert r.returncode == 1
    assert "127.0.0.1" in r.stderr and "Traceback" not in r.stderr


def _goal(tmp_path: Path, extra: str = "") -> Path:
    p = tmp_path / "goal.yaml"
    p.write_text("goal: say what runs on this machine\nhosts: [{name: local, transport: local}]\n"
                 "budget: {turns: 4}\n" + extra)
    return p


def test_run_exit_codes(tmp_path):
    # 0: done, and its success check passes.
    goal = _goal(tmp_path, "success:\n  - command: {host: local, run: 'uname -s', expect_output: Linux}\n")
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "uname -s"})]),
                     Reply(text="It is Linux.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "a.jsonl"))
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in (tmp_path / "a.jsonl").read_text().splitlines()]
    assert [e for e in events if e["type"] == "check"][0]["ok"] is True
    assert [e for e in events if e["type"] == "goal_result"][0]["met"] is True

    # 3: a needed step was refused (nothing is authorized) and the model gives up.
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "touch /tmp/x-upgrade-agent"})]),
                     Reply(text="I could not do it.")]) as srv:
        r = agent("run", str(_goal(tmp_path, "success:\n  - command: {host: local, run: 'ls /tmp/x-upgrade-agent'}\n")),
                  "--base-url", srv.base_url, "--transcript", str(tmp_path / "b.jsonl"))
    assert r.returncode == 3, r.stderr

    # 4: budget exhausted.
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "true"})])], repeat_last=True) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "c.jsonl"))
    assert r.returncode == 4, r.stderr

    # 1: done, but the success check fails.
    bad = _goal(tmp_path, "success:\n  - command: {host: local, run: 'uname -s', expect_output: Windows}\n")
    with FakeOpenAI([Reply(text="Done.")]) as srv:
        r = agent("run", str(bad), "--base-url", srv.base_url, "--transcript", str(tmp_path / "d.jsonl"))
    assert r.returncode == 1, r.stderr

    # 2: configuration: a bad goal file, no endpoint.
    broken = tmp_path / "broken.yaml"
    broken.write_text("goal: x\nhosts: [a]\nbudgett: {}\n")
    r = agent("run", str(broken))
    assert r.returncode == 2 and "broken.yaml:3: budgett: unknown key" in r.stderr
    r = agent("run", str(goal))
    assert r.returncode == 2 and "OPENAI_API_KEY" in r.stderr and "Traceback" not in r.stderr


def test_run_json_prints_one_event_per_line(tmp_path):
    with FakeOpenAI([Reply(text="Nothing to do.")]) as srv:
        r = agent("run", str(_goal(tmp_path)), "--json", "--base-url", srv.base_url,
                  "--transcript", str(tmp_path / "j.jsonl"))
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0]["type"] == "session_start" and lines[-1]["type"] == "session_end"
    assert any(e["type"] == "goal_result" for e in lines)


def test_show_and_verify_and_replay_of_a_run(tmp_path):
    path = tmp_path / "s.jsonl"
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "uname -s"}),
                                  ("ssh_exec", {"host": "local", "command": "rm -rf /tmp/nothing-here"})]),
                     Reply(text="ok")]) as srv:
        agent("run", str(_goal(tmp_path)), "--base-url", srv.base_url, "--transcript", str(path))
    steps = [json.loads(line) for line in agent("show", str(path), "--json").stdout.splitlines()]
    assert [(s["tool"], s["decision"], s["risk"]) for s in steps] == [
        ("ssh_exec", "allow", "read-only"), ("ssh_exec", "deny", "destructive")]
    assert steps[0]["exit_code"] == 0 and steps[0]["arguments"]["command"] == "uname -s"
    assert set(steps[0]) >= {"turn", "tool", "arguments", "risk", "decision", "approved_by", "exit_code", "duration_s"}
    assert agent("show", str(path), "--verify").returncode == 0
    assert agent("replay", str(path)).returncode == 0
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace('"turn":1', '"turn":1 ')
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    assert agent("show", str(tmp_path / "bad.jsonl"), "--verify").returncode == 1
    r = agent("replay", str(tmp_path / "bad.jsonl"))
    assert r.returncode == 1 and "was changed" in r.stdout
