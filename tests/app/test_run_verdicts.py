"""`agent run` ends honestly: its exit code and verdict follow what the record shows.

Real `agent` processes, a real sshd on 127.0.0.1 and the real openai SDK against a loopback server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from fake_openai import FakeOpenAI, Reply, Status
from sshd import closed_port

ROOT = Path(__file__).resolve().parents[2]


def agent(*args: str, home: Path, timeout: float = 120, env: dict | None = None) -> subprocess.CompletedProcess:
    extra = env or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH", "UPGRADE_AGENT"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"),
                "OPENAI_API_KEY": "x", **extra})
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, cwd=ROOT)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def only(evs: list[dict], type_: str) -> dict:
    found = [e for e in evs if e["type"] == type_]
    assert len(found) == 1, [e["type"] for e in evs]
    return found[0]


def ssh_home(tmp_path: Path, server, key: Path, *, known: bool) -> Path:
    """A HOME whose ~/.ssh/config names `box` for the server, with its key known or not."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "config").write_text(f"Host box\n  HostName 127.0.0.1\n  Port {server.port}\n  User {server.user}\n"
                                         f"  IdentityFile {key}\n  IdentitiesOnly yes\n")
    (home / ".ssh" / "known_hosts").write_text(server.known_hosts_line() if known else "")
    return home


def goal_file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "goal.yaml"
    path.write_text(body)
    return path


def test_an_unknown_host_key_is_refused_before_the_first_turn_with_its_whole_fingerprint(tmp_path, sshd, client_key):
    home = ssh_home(tmp_path, sshd, client_key, known=False)
    goal = goal_file(tmp_path, "goal: look\nhosts: [box]\nbudget: {turns: 3}\n")
    fingerprint = sshd.host_key_fingerprint()
    with FakeOpenAI([Reply(calls=[("inspect_host", {"host": "box"})]), Reply(text="Done.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "a.jsonl"), home=home)
        assert srv.requests == []  # the model was never asked
    assert r.returncode == 2, r.stderr
    line = [x for x in r.stderr.splitlines() if x.startswith("agent: box: unknown host key")]
    assert len(line) == 1 and "Traceback" not in r.stderr
    assert f"--trust-host-key {fingerprint}" in line[0] and f'trust_host_key: "{fingerprint}"' in line[0]
    evs = events(tmp_path / "a.jsonl")
    assert only(evs, "preflight")["host"] == "box"
    assert only(evs, "goal_result")["verdict"] == "not started"
    assert evs[-1]["type"] == "session_end"
    assert agent("show", "--verify", str(tmp_path / "a.jsonl"), home=home).returncode == 0

    # `agent exec` says the same line with the same exit code.
    r = agent("exec", "box", "uname", "-s", home=home)
    assert r.returncode == 2 and f"--trust-host-key {fingerprint}" in r.stderr and r.stdout == "", r.stderr

    # Trusted with the flag, the run goes on, and the key is on the record.
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "box", "command": "uname -s"})]), Reply(text="Done.")]) as srv:
        r = agent("run", str(goal), "--trust-host-key", fingerprint, "--base-url", srv.base_url,
                  "--transcript", str(tmp_path / "b.jsonl"), home=home)
    assert r.returncode == 0, r.stderr
    evs = events(tmp_path / "b.jsonl")
    assert only(evs, "host_key_trusted")["fingerprint"] == fingerprint
    result = only(evs, "goal_result")
    assert result["verdict"] == "unverified" and not result["met"] and "nothing proved the goal" in result["reason"]


def test_trust_host_key_in_the_goal_file_is_the_same_as_the_flag(tmp_path, sshd_factory, client_key):
    server = sshd_factory("own")
    home = ssh_home(tmp_path, server, client_key, known=False)
    goal = goal_file(tmp_path, "goal: look\nhosts:\n  - {name: box, target: box, trust_host_key: "
                               f"\"{server.host_key_fingerprint()}\"}}\nbudget: {{turns: 3}}\n")
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "box", "command": "uname -s"})]), Reply(text="Done.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "t.jsonl"), home=home)
    assert r.returncode == 0, r.stderr


def test_an_unreachable_host_ends_the_run_before_the_model_is_asked(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    goal = goal_file(tmp_path, f"goal: look\nhosts:\n  - {{name: box, target: 'root@127.0.0.1:{closed_port()}'}}\n")
    with FakeOpenAI([Reply(text="Done.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "t.jsonl"), home=home)
        assert srv.requests == []
    assert r.returncode == 2
    assert [x for x in r.stderr.splitlines() if x.startswith("agent: cannot reach box:")], r.stderr
    # The cause in the verdict's own line too, the second the run prints (it was only in the fourth of eight).
    verdict = r.stdout.splitlines()[1]
    assert verdict.startswith("NOT STARTED: not started: cannot reach box: ") and "refused" in verdict, r.stdout
    assert "cannot reach box: box:" not in r.stderr and "Checked against the record" not in r.stderr
    assert "Traceback" not in r.stderr


def test_a_step_that_failed_when_sshd_died_is_not_a_success_without_checks(tmp_path, sshd_factory, client_key):
    server = sshd_factory("dies")
    home = ssh_home(tmp_path, server, client_key, known=True)
    goal = goal_file(tmp_path, "goal: look\nhosts: [box]\nbudget: {turns: 4}\n")
    transcript = tmp_path / "t.jsonl"

    def kill_sshd_once_the_command_runs():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if transcript.exists() and '"type":"decision"' in transcript.read_text():
                time.sleep(0.5)
                server.kill()
                return
            time.sleep(0.05)

    killer = threading.Thread(target=kill_sshd_once_the_command_runs, daemon=True)
    killer.start()
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "box", "command": "sleep 5"})]),
                     Reply(text="All done, the goal is met.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(transcript), home=home)
    killer.join()
    evs = events(transcript)
    assert only(evs, "session_end")["failed"] >= 1
    assert r.returncode == 1, r.stdout + r.stderr
    result = only(evs, "goal_result")
    assert result["verdict"] == "not met" and "failed" in result["reason"]


def test_a_model_that_only_writes_text_has_not_met_a_goal_without_checks(tmp_path):
    goal = goal_file(tmp_path, "goal: wipe nothing, just say hello\nhosts: [local]\nbudget: {turns: 3}\n")
    with FakeOpenAI([Reply(text="Blorp. The upgrade is complete and everything is 50% faster.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "t.jsonl"),
                  home=tmp_path)
    assert r.returncode == 1
    result = only(events(tmp_path / "t.jsonl"), "goal_result")
    assert result["verdict"] == "not met" and "nothing ran" in result["reason"]


def test_a_run_ends_with_its_tokens_and_their_cost_as_the_server_reported_them(tmp_path):
    goal = goal_file(tmp_path, "goal: say hello\nhosts: [local]\nbudget: {turns: 3}\n")
    with FakeOpenAI([Reply(calls=[("inspect_host", {"host": "local"})], usage=(900, 20)),
                     Reply(text="Hello.", usage=(1100, 10))]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "t.jsonl"),
                  home=tmp_path, env={"UPGRADE_AGENT_PRICE": "2.00/8.00"})
    assert "tokens: 2,000 prompt + 30 completion = 2,030 over 2 turns (as the server reported them)" in r.stderr
    assert "cost: $0.0042" in r.stderr, r.stderr  # 2,000 x $2 + 30 x $8 per million
    with FakeOpenAI([Status(400, message="no such model")]) as srv:  # it answers, and never with a reply
        without = agent("run", str(goal), "--base-url", srv.base_url, "--model", "test-model",
                        "--transcript", str(tmp_path / "u.jsonl"), home=tmp_path, timeout=120)
    assert "tokens: none (no request reached the model)" in without.stderr, without.stderr
    # The model never answered and nothing ran: no check is run to say the hosts are as they were.
    assert not [e for e in events(tmp_path / "u.jsonl") if e["type"] == "check"]


def test_a_model_server_nobody_listens_on_is_said_at_once_before_any_host_is_touched(tmp_path):
    """It took 27 s (the sim built, five tries, the checks run on an untouched host); it is one line now, exit 5,
    with no sim built and no transcript (nothing started)."""
    goal = goal_file(tmp_path, "goal: look\nhosts: [sim]\nbudget: {turns: 3}\n")
    r = agent("run", str(goal), "--base-url", f"http://127.0.0.1:{closed_port()}/v1", "--transcript",
              str(tmp_path / "t.jsonl"), home=tmp_path, timeout=120)
    assert r.returncode == 5 and r.stderr.count("\n") == 1, r.stderr
    assert "cannot reach model server" in r.stderr and "Connection refused" in r.stderr
    assert not (tmp_path / "t.jsonl").exists() and not list(tmp_path.glob("**/upgrade-agent-sim-*"))


def test_a_command_too_large_for_the_system_is_answered_to_the_model_in_one_line(tmp_path):
    goal = goal_file(tmp_path, "goal: look\nhosts: [local]\nbudget: {turns: 3}\n")
    huge = "echo " + "a" * 5_000_000
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": huge})]), Reply(text="I give up.")]) as srv:
        r = agent("run", str(goal), "--base-url", srv.base_url, "--transcript", str(tmp_path / "t.jsonl"),
                  home=tmp_path)
        told = json.dumps(srv.requests[-1]["messages"][-1])
    assert "Argument list too long" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert "5,000,005 bytes" in told and "split it" in told
    assert r.returncode == 1


def test_goal_files_too_large_or_expanding_through_aliases_are_refused_in_one_line(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_text("goal: x\nhosts: [local]\n# " + "a" * 30_000_000 + "\n")
    r = agent("run", str(big), home=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "larger than a goal file can be" in r.stderr
    anchors = "a0: &a0 [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 9))
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("goal: x\nhosts: [local]\n" + anchors)
    r = agent("run", str(bomb), home=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "YAML aliases" in r.stderr


def test_a_sigterm_gives_the_same_exit_code_in_the_verdict_as_the_process(tmp_path):
    import signal

    goal = goal_file(tmp_path, "goal: look\nhosts: [local]\nbudget: {turns: 3}\n")
    transcript = tmp_path / "t.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "OPENAI_API_KEY": "x"})
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "sleep 30"})]), Reply(text="x")]) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                 "--transcript", str(transcript)], cwd=ROOT, env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (transcript.exists() and '"type":"tool_start"' in transcript.read_text()):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    result = only(events(transcript), "goal_result")
    assert result["exit_code"] == 143 and result["reason"].startswith("stopped by SIGTERM")
    assert "(exit code 143: stopped by SIGTERM)" in out
    assert f"go on:      agent resume {transcript}" in err  # the command that goes on, as agent fleet prints it


def test_a_device_a_fifo_or_a_directory_given_as_a_goal_file_is_refused_at_once(tmp_path):
    """/dev/zero says it has 0 bytes and never ends (3 GB were read, then a MemoryError); a FIFO blocks until
    someone writes. Neither is read: one line, exit 2, at once (issue 30)."""
    import os
    import time

    fifo = tmp_path / "goal.fifo"
    os.mkfifo(fifo)
    for given, said in (("/dev/zero", "a device, a FIFO or a socket, not a file"),
                        (str(fifo), "a device, a FIFO or a socket, not a file"),
                        (str(tmp_path), "a directory, not a file")):
        started = time.monotonic()
        r = agent("run", given, home=tmp_path)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and said in r.stderr, (given, r.stderr)
        assert time.monotonic() - started < 20, given
    for args in (("recipe", str(fifo), "--ansible", "-o", str(tmp_path / "x.yml")),
                 ("fleet", "/dev/zero", "-i", str(fifo))):
        r = agent(*args, home=tmp_path)
        assert r.returncode == 2 and "not a file" in r.stderr, (args, r.stderr)


def test_an_interrupt_while_the_session_is_built_leaves_no_empty_transcript_and_says_so(tmp_path):
    """A SIGINT about 2 s in once left an empty transcript (`--verify` failed on it) and printed nothing: the
    file was opened before the session that writes its first event existed. The interrupt is made to land
    exactly there: just after the transcript is opened, before the session starts."""
    goal = goal_file(tmp_path, "goal: look\nhosts: [local]\nbudget: {turns: 3}\n")
    transcript = tmp_path / "t.jsonl"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "OPENAI_API_KEY": "x"})
    with FakeOpenAI([]) as srv:  # listening, never asked
        code = ("import sys, agent.session_builder as sb\n"
                "def interrupted(*a, **k):\n    raise KeyboardInterrupt\n"
                "sb.HostPool = interrupted\n"
                "from app.cli import main\n"
                f"sys.exit(main(['run', {str(goal)!r}, '--base-url', {srv.base_url!r}, '--transcript', "
                f"{str(transcript)!r}]))\n")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=120)
    assert r.returncode == 130, r.stderr
    assert not transcript.exists()
    assert r.stderr.strip().splitlines()[-1] == (f"agent: interrupted by the operator before the session started: "
                                                 f"nothing ran on any host (its empty transcript {transcript} was "
                                                 "removed)")


def test_an_interrupt_before_the_command_starts_says_so(tmp_path):
    """A Ctrl-C 0.1 s in once exited 130 and printed nothing: it landed while the command line or the
    configuration was read, before any command was running. Made to land exactly there, in a process of its own
    (one with no session ever opened in it)."""
    goal = goal_file(tmp_path, "goal: look\nhosts: [local]\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    code = ("import sys, app.config\n"
            "def interrupted(*a, **k):\n    raise KeyboardInterrupt\n"
            "app.config.load_config = interrupted\n"
            "from app.cli import main\n"
            f"sys.exit(main(['run', {str(goal)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 130, r.stderr
    assert r.stderr.strip().splitlines()[-1] == (
        "agent: interrupted by the operator before the command started: nothing ran on any host")


def test_a_sigint_anywhere_in_the_first_seconds_ends_with_a_word_and_a_record_that_verifies_or_none(tmp_path):
    """Real Ctrl-Cs at 14 moments from the start to the first command: each run says something, exits 130, and
    leaves either no transcript or one that verifies."""
    import signal

    from agent.record.transcript import verify

    goal = goal_file(tmp_path, "goal: look\nhosts: [local]\nbudget: {turns: 3}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "OPENAI_API_KEY": "x"})
    seen = {"none": 0, "verified": 0}
    for i in range(14):
        transcript = tmp_path / f"t{i}.jsonl"
        with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "sleep 30"})]),
                         Reply(text="x")]) as srv:
            proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                     "--transcript", str(transcript)], cwd=ROOT, env=env, text=True,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(0.1 + 0.15 * i)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, (i, err[-2000:])
        assert (out + err).strip(), i
        if transcript.exists():
            report = verify(transcript)
            assert report.ok and report.status == "interrupted", (i, report)
            seen["verified"] += 1
        else:
            seen["none"] += 1
    assert seen["none"] and seen["verified"], seen  # the moments span the start: before and after it
