"""The transcript's seal: an edit with the hashes recomputed is caught, and what --verify says is honest.

Real `agent show --verify`, `agent recipe`, `agent run` and `agent resume` processes, the real writer and
a real record key file under a data dir of the test's own. The forger is what anyone could write: edit a
line, then recompute every hash after it with hashlib.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.record.redact import REDACTED, Redactor
from agent.record.seal import KEY_ENV, key_file
from agent.record.transcript import (BROKEN, NO_KEY, OTHER_KEY, SEALED, UNSEALED, TranscriptWriter, iter_events,
                                     verify)

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
CANARY = ROOT / "transcripts" / "cuda13-upgrade.jsonl"  # a committed canary record whose goal was met
PIN = "torch==2.10.0+cu130"
FORGED = "torch==2.9.1+cu130"


@pytest.fixture
def data_home(tmp_path, monkeypatch) -> Path:
    """This test's own data dir, so the record key is made there (never the user's), and no shared key."""
    home = tmp_path / "data"
    monkeypatch.setenv("XDG_DATA_HOME", str(home))
    monkeypatch.delenv(KEY_ENV, raising=False)
    return home


def env_for(tmp_path: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH", KEY_ENV))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "OPENAI_API_KEY": "x", "TMPDIR": str(tmp_path), **extra})
    return env


def agent(tmp_path: Path, *args: str, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env_for(tmp_path, **extra), timeout=240)


def sealed_canary(path: Path) -> Path:
    """The committed canary's events written again by the real writer under this machine's key: the
    record a canary run on this machine leaves. Its install is taken as one that left no requirement
    unmet (the committed run's no_deps warnings dropped), so that a recipe is read from it."""
    writer = TranscriptWriter(path, Redactor(environ={}))
    for ev in iter_events(CANARY):
        fields = {k: v for k, v in ev.items() if k not in ("v", "seq", "t", "type", "prev")}
        if ev["type"] == "tool_result" and ev.get("tool") == "pip_install" and isinstance(ev.get("data"), dict):
            fields["data"] = {**ev["data"], "dependency_warnings": [], "unmet_requirements": []}
        writer.write(ev["type"], **fields)
    return path


def forge(source: Path, target: Path, old: str, new: str, strip_seal: bool = False) -> int:
    """Edit the first line holding `old`, recompute the hash chain after it (and drop the seal when
    asked, as one would to pass the file as an older, unsealed record); the line number edited."""
    lines = source.read_bytes().decode().splitlines()
    edited = next(n for n, line in enumerate(lines, 1) if old in line)
    out, prev = [], ""
    for n, line in enumerate(lines, 1):
        ev = json.loads(line.replace(old, new) if n == edited else line)
        ev["prev"] = prev
        if strip_seal:
            ev.pop("mac", None)
            ev.pop("seal", None)
        text = json.dumps(ev, ensure_ascii=False, separators=(",", ":"))
        prev = hashlib.sha256(text.encode()).hexdigest()
        out.append(text + "\n")
    target.write_text("".join(out))
    return edited


def test_an_untouched_sealed_record_verifies_as_sealed_and_a_recipe_is_read_from_it(data_home, tmp_path):
    canary = sealed_canary(tmp_path / "canary.jsonl")
    key = key_file()
    assert key.is_file() and key.stat().st_mode & 0o777 == 0o600
    check = verify(canary)
    assert check.ok and check.seal == SEALED and check.sealed, check.problems
    shown = agent(tmp_path, "show", "--verify", str(canary))
    assert shown.returncode == 0 and "sealed by this machine's key: intact" in shown.stdout, shown.stdout
    made = agent(tmp_path, "recipe", str(canary), "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 0, made.stderr
    assert PIN in (tmp_path / "r.yaml").read_text() and "warning" not in made.stderr


def test_a_forged_pin_with_recomputed_hashes_fails_verify_and_agent_recipe_refuses_it(data_home, tmp_path):
    canary = sealed_canary(tmp_path / "canary.jsonl")
    forged = tmp_path / "forged.jsonl"
    line = forge(canary, forged, PIN, FORGED)
    check = verify(forged)
    assert not check.ok and check.seal == BROKEN and check.seal_line == line, check
    shown = agent(tmp_path, "show", "--verify", str(forged))
    assert shown.returncode == 1 and f"seal broken at line {line}" in shown.stdout, shown.stdout
    as_json = json.loads(agent(tmp_path, "show", "--verify", "--json", str(forged)).stdout)
    assert as_json["ok"] is False and as_json["seal"]["state"] == BROKEN and as_json["seal"]["line"] == line
    made = agent(tmp_path, "recipe", str(forged), "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 2 and made.stderr.count("\n") == 1 and "seal broken" in made.stderr, made.stderr
    assert not (tmp_path / "r.yaml").exists()
    # --accept-unsealed is for records nobody sealed, never for a broken seal.
    made = agent(tmp_path, "recipe", str(forged), "--accept-unsealed", "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 2 and not (tmp_path / "r.yaml").exists(), made.stderr


def test_a_forged_pin_with_its_seal_stripped_reads_as_unsealed_and_is_refused_without_the_flag(data_home, tmp_path):
    canary = sealed_canary(tmp_path / "canary.jsonl")
    forged = tmp_path / "forged.jsonl"
    forge(canary, forged, PIN, FORGED, strip_seal=True)
    check = verify(forged)
    assert check.ok and check.seal == UNSEALED  # the chain holds: only the seal's absence tells
    shown = agent(tmp_path, "show", "--verify", str(forged))
    assert shown.returncode == 0 and "hash chain intact but NOT sealed" in shown.stdout
    assert "an edit with recomputed hashes would not be detected" in shown.stdout
    made = agent(tmp_path, "recipe", str(forged), "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 2 and made.stderr.count("\n") == 1 and "--accept-unsealed" in made.stderr, made.stderr
    made = agent(tmp_path, "recipe", str(forged), "--accept-unsealed", "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 0 and "NOT sealed" in made.stderr and FORGED in (tmp_path / "r.yaml").read_text()


def test_removing_only_the_seal_header_breaks_the_seal_at_line_1(data_home, tmp_path):
    canary = sealed_canary(tmp_path / "canary.jsonl")
    lines = canary.read_text().splitlines(keepends=True)
    first = json.loads(lines[0])
    del first["seal"]
    forged = tmp_path / "forged.jsonl"
    forged.write_text(json.dumps(first, ensure_ascii=False, separators=(",", ":")) + "\n" + "".join(lines[1:]))
    check = verify(forged)
    assert check.seal == BROKEN and check.seal_line == 1 and not check.ok


def test_a_record_sealed_by_another_key_is_intact_but_not_taken_as_sealed(data_home, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k" * 40)
    canary = sealed_canary(tmp_path / "canary.jsonl")
    assert verify(canary).seal == SEALED
    monkeypatch.delenv(KEY_ENV)
    check = verify(canary)
    assert check.ok and check.seal == NO_KEY and check.key_id  # no key file made by reading
    assert not key_file().exists()
    TranscriptWriter(tmp_path / "other.jsonl").write("session_start", command="run")  # this machine's own key now
    check = verify(canary)
    assert check.ok and check.seal == OTHER_KEY and "sealed by another key" in check.seal_summary()
    made = agent(tmp_path, "recipe", str(canary), "-o", str(tmp_path / "r.yaml"))
    assert made.returncode == 2 and "--accept-unsealed" in made.stderr and KEY_ENV in made.stderr, made.stderr
    made = agent(tmp_path, "recipe", str(canary), "-o", str(tmp_path / "r.yaml"), **{KEY_ENV: "k" * 40})
    assert made.returncode == 0, made.stderr  # the fleet's shared key checks it


def test_a_record_cut_mid_line_by_a_kill_is_sealed_up_to_its_last_whole_line(data_home, tmp_path):
    canary = sealed_canary(tmp_path / "canary.jsonl")
    data = canary.read_bytes()
    lines = data.splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:20]) + lines[20][:37])
    check = verify(cut)
    assert check.seal == SEALED and check.cut_line and check.events == 20
    assert check.problems == ["no session_end event: the session did not close its transcript"], check.problems
    shown = agent(tmp_path, "show", "--verify", str(cut))
    assert "sealed by this machine's key: intact up to its last whole line" in shown.stdout, shown.stdout
    assert "cut short" in shown.stdout
    # ...and an edit before the cut is still caught.
    forged = tmp_path / "forged-cut.jsonl"
    forge(canary, forged, PIN, FORGED)
    forged.write_bytes(b"".join(forged.read_bytes().splitlines(keepends=True)[:-3]) + b'{"v":1,"se')
    assert verify(forged).seal == BROKEN


def test_the_committed_unsealed_records_verify_as_chain_intact_and_unsealed(data_home, tmp_path):
    for path in sorted((ROOT / "transcripts").glob("*.jsonl")):
        check = verify(path)
        assert check.ok and check.seal == UNSEALED, (path.name, check.problems)
    shown = agent(tmp_path, "show", "--verify", str(CANARY))
    assert shown.returncode == 0 and "chain intact" in shown.stdout and "NOT sealed" in shown.stdout


def test_the_key_is_redacted_from_what_the_writer_records(data_home, tmp_path):
    writer = TranscriptWriter(tmp_path / "t.jsonl")
    key_text = key_file().read_text().strip()
    written = writer.write("tool_result", content=f"the key is {key_text}\n")
    assert key_text not in json.dumps(written) and REDACTED in written["content"]
    assert key_text not in (tmp_path / "t.jsonl").read_text()


GOAL = "goal: look\nhosts: [{name: local, transport: local}]\nbudget: {turns: 4}\n"


def test_a_run_that_reads_the_key_file_keeps_it_out_of_its_transcript_artifacts_and_report(tmp_path):
    goal = tmp_path / "goal.yaml"
    goal.write_text(GOAL)
    transcript = tmp_path / "run.jsonl"
    key = tmp_path / "data" / "upgrade-agent" / "record.key"
    filler = tmp_path / "filler.txt"
    filler.write_text("".join(f"line {n}\n" for n in range(20_000)))  # long enough to be kept as an artifact
    script = [Reply(calls=[("ssh_exec", {"host": "local", "command": f"cat {filler} {key} {filler}"})]),
              Reply(text="done")]
    with FakeOpenAI(script) as srv:
        r = agent(tmp_path, "run", str(goal), "--base-url", srv.base_url, "--transcript", str(transcript), "--json")
    assert transcript.is_file(), r.stderr
    key_text = key.read_text().strip()
    assert len(key_text) == 64
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p not in (key, goal, filler)]
    assert any(".artifacts" in str(p) for p in written), "the long output was kept as an artifact"
    for p in written:
        assert key_text not in p.read_text(errors="replace"), p
    assert any(REDACTED in p.read_text(errors="replace") for p in written if ".artifacts" in str(p))
    shown = agent(tmp_path, "show", "--verify", str(transcript))
    assert shown.returncode == 0 and "sealed by this machine's key: intact" in shown.stdout, shown.stdout


def stopped_local_run(tmp_path: Path) -> Path:
    """A real `agent run` on this machine stopped by SIGTERM while a read-only command runs."""
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: wait\nhosts: [{name: local, transport: local}]\nbudget: {turns: 4}\n")
    transcript = tmp_path / "t.jsonl"
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": "sleep 30"})])]) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                 "--transcript", str(transcript), "--json"], cwd=ROOT, env=env_for(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (transcript.exists()
                                                   and '"type":"tool_start"' in transcript.read_text()):
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    assert proc.returncode == 143
    return transcript


def test_agent_resume_refuses_a_forged_part_and_an_unsealed_one_without_the_flag(tmp_path):
    first = stopped_local_run(tmp_path)
    shown = agent(tmp_path, "show", "--verify", str(first))
    assert "sealed by this machine's key: intact" in shown.stdout, shown.stdout
    forged = tmp_path / "forged.jsonl"
    forge(first, forged, "sleep 30", "sleep 31")
    r = agent(tmp_path, "resume", str(forged), "--accept-unsealed")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "seal broken" in r.stderr, r.stderr
    stripped = tmp_path / "stripped.jsonl"
    forge(first, stripped, "sleep 30", "sleep 31", strip_seal=True)
    r = agent(tmp_path, "resume", str(stripped))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--accept-unsealed" in r.stderr, r.stderr
    assert "NOT sealed" in r.stderr


def test_replay_re_drives_a_sealed_record_and_stops_at_a_forged_one(data_home, tmp_path):
    from agent.record.replay import replay
    from tools import default_tools
    from tools.base import Registry

    canary = sealed_canary(tmp_path / "canary.jsonl")
    assert replay(canary, Registry(default_tools())).ok
    forged = tmp_path / "forged.jsonl"
    line = forge(canary, forged, PIN, FORGED)
    report = replay(forged, Registry(default_tools()))
    assert not report.ok and f"line {line}: seal broken" in report.message, report.message
