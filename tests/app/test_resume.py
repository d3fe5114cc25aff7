"""`agent resume`: a run stopped in the middle of an upgrade is finished by a new process.

Real `agent run` and `agent resume` processes, the simulated GPU host, and the real openai SDK
against a loopback server that scripts the model. The run is stopped by a signal while its
pip_install runs; the resume inspects the host again, tells the model the install's outcome is
unknown, and goes on to the end.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
BENCH = {"host": "sim", "command": "python -m sglang.bench_serving --backend sglang --dataset-name random "
                                   "--num-prompts 32 --max-concurrency 1", "parser": "sglang_bench_serving",
         "runs": 3, "warmup": 1}
RUNFILE = {"host": "sim", "runfile": "file:///srv/nvidia/compute/cuda/13.0.1/local_installers/"
                                     "cuda_13.0.1_580.82.07_linux.run",
           "checksum": "b17527a3800a58441fccd5606c97a594", "version": "13.0"}
PIP = {"host": "sim", "index_url": "file:///srv/pypi/simple-cu130", "no_deps": True,  # with what torch declares
       "packages": ["torch==2.10.0+cu130", "sgl-kernel==0.3.21+cu130", "nvidia-nccl-cu13==2.28.9",
                    "nvidia-cuda-runtime==13.0.96"]}
LOOK = ("ssh_exec", {"host": "sim", "command": "python -m pip list"})


def env_for(tmp_path: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "SSH_AUTH"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
                "OPENAI_API_KEY": "x", "TMPDIR": str(tmp_path)})
    return env


def agent(*args: str, tmp_path: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          env=env_for(tmp_path), timeout=timeout, cwd=ROOT)


def events(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def stop_during_pip_install(tmp_path: Path, sig: signal.Signals) -> tuple[Path, Path]:
    """`agent run` of the demo goal, stopped by `sig` while its pip_install runs; (goal file, transcript)."""
    goal = tmp_path / "demo.yaml"
    shutil.copy(ROOT / "goals" / "demo.yaml", goal)
    transcript = tmp_path / "first.jsonl"
    script = [Reply(calls=[("pip_freeze_backup", {"host": "sim"}), ("run_bench", {**BENCH, "label": "before"})]),
              Reply(calls=[("install_runfile", RUNFILE)]), Reply(calls=[("pip_install", PIP)]),
              Reply(text="not reached")]
    with FakeOpenAI(script) as srv:
        proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                 "--transcript", str(transcript), "--json"], cwd=ROOT, env=env_for(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and not (
                transcript.exists() and '"type":"intent"' in transcript.read_text()
                and '"tool":"pip_install"' in transcript.read_text().rpartition('"type":"intent"')[2]):
            time.sleep(0.05)
        time.sleep(0.4)  # into the install
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGKILL: -9}[sig], err
    return goal, transcript


def changes(path: Path) -> list[tuple[str, str]]:
    """(tool, status) of every change that ran, from its intent and its result."""
    evs = events(path)
    results = {(e["turn"], e["call_id"]): e["status"] for e in evs if e["type"] == "tool_result"}
    return [(e["tool"], results.get((e["turn"], e["call_id"]), "no result")) for e in evs if e["type"] == "intent"]


def check_resumed(tmp_path: Path, first: Path, second: Path, srv: FakeOpenAI, r, stopped: str = "cancelled"
                  ) -> None:
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    # The model was told the interrupted install's outcome is unknown, in a tool message for that call.
    pip_call = [e for e in events(first) if e["type"] == "intent" and e["tool"] == "pip_install"][0]["call_id"]
    told = srv.requests[0]["messages"]
    notice = [m for m in told if m["role"] == "tool" and m["tool_call_id"] == pip_call]
    assert len(notice) == 1 and notice[0]["content"].startswith("outcome unknown: check first")
    resumed_note = told[-1]["content"]
    assert told[-1]["role"] == "user" and "inspected again" in resumed_note and "outcome is unknown" in resumed_note
    # The new transcript links to the old one, and both verify.
    start = events(second)[0]
    assert start["resumes"]["path"] == str(first.absolute()) and start["resumes"]["seq"] == events(first)[-1]["seq"]
    for path in (first, second) if stopped == "cancelled" else (second,):  # a killed process closes nothing
        assert verify(path).ok, verify(path).problems
    shown = agent("show", "--verify", str(second), tmp_path=tmp_path)
    assert shown.returncode == 0 and "links to" in shown.stdout and "intact" in shown.stdout, shown.stdout
    assert any(e["type"] == "host_state" and e["inspect"] for e in events(second))
    # No change ran twice: the ones that ended ran once; the unknown one again only after a look at the host.
    done = changes(first) + changes(second)
    assert [t for t, s in done if s == "ok"].count("install_runfile") == 1
    assert [t for t, s in done if s == "ok"].count("pip_freeze_backup") == 1
    assert [t for t, s in done if s == "ok"].count("pip_install") == 1
    assert ("pip_install", stopped) in changes(first)
    result = [e for e in events(second) if e["type"] == "goal_result"][0]
    assert result["verdict"] == "met", result
    replayed = agent("replay", str(second), tmp_path=tmp_path)
    assert replayed.returncode == 0, replayed.stdout


def test_a_run_stopped_by_ctrl_c_during_pip_install_is_finished_by_resume(tmp_path):
    _, first = stop_during_pip_install(tmp_path, signal.SIGINT)
    second = tmp_path / "second.jsonl"
    script = [Reply(calls=[LOOK]), Reply(calls=[("pip_install", PIP)]),
              Reply(calls=[("run_bench", {**BENCH, "label": "after", "compare_to": "before",
                                          "env": {"CUDA_HOME": "/usr/local/cuda-13.0"}})]),
              Reply(text="Done: CUDA 13.0 beside 12.8, torch on cu130.")]
    with FakeOpenAI(script) as srv:
        r = agent("resume", str(first), "--base-url", srv.base_url, "--transcript", str(second), tmp_path=tmp_path)
        check_resumed(tmp_path, first, second, srv, r)


def test_a_run_killed_during_pip_install_is_finished_by_resume(tmp_path):
    """SIGKILL: no handler runs, so no result and no session_end; the install's intent is all there is."""
    _, first = stop_during_pip_install(tmp_path, signal.SIGKILL)
    assert '"type":"session_end"' not in first.read_text()
    second = tmp_path / "second.jsonl"
    script = [Reply(calls=[LOOK]), Reply(calls=[("pip_install", PIP)]),
              Reply(calls=[("run_bench", {**BENCH, "label": "after", "compare_to": "before",
                                          "env": {"CUDA_HOME": "/usr/local/cuda-13.0"}})]),
              Reply(text="Done.")]
    with FakeOpenAI(script) as srv:
        r = agent("resume", str(first), "--base-url", srv.base_url, "--transcript", str(second), tmp_path=tmp_path)
        check_resumed(tmp_path, first, second, srv, r, stopped="no result")


def test_a_run_stopped_by_sigterm_is_finished_by_resume_and_a_blind_repeat_is_sent_back(tmp_path):
    _, first = stop_during_pip_install(tmp_path, signal.SIGTERM)
    second = tmp_path / "second.jsonl"
    script = [Reply(calls=[("pip_install", PIP)]),  # blind: sent back, check first
              Reply(calls=[LOOK]), Reply(calls=[("pip_install", PIP)]),
              Reply(calls=[("run_bench", {**BENCH, "label": "after", "compare_to": "before",
                                          "env": {"CUDA_HOME": "/usr/local/cuda-13.0"}})]),
              Reply(text="Done.")]
    with FakeOpenAI(script) as srv:
        r = agent("resume", str(first), "--base-url", srv.base_url, "--transcript", str(second), tmp_path=tmp_path)
        check_resumed(tmp_path, first, second, srv, r)
        told = json.dumps(srv.requests[1]["messages"][-1])
    assert "outcome-unknown" in told and "check the state of sim" in told
    blind = [e for e in events(second) if e["type"] == "decision" and e["tool"] == "pip_install"]
    assert [d["rule"] for d in blind] == ["outcome-unknown", "authorized"]


def stopped_local_run(tmp_path: Path) -> tuple[Path, Path]:
    """A cheap run on this machine stopped by SIGTERM while a read-only command runs."""
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
    return goal, transcript


def test_a_goal_file_that_changed_or_is_gone_stops_the_resume_in_one_line(tmp_path):
    goal, first = stopped_local_run(tmp_path)
    goal.write_text(goal.read_text() + "authorizations:\n  - {host: local, command: 'rm -rf /tmp/x'}\n")
    r = agent("resume", str(first), tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "changed since the run began (its authorizations)" in r.stderr
    goal.unlink()
    r = agent("resume", str(first), tmp_path=tmp_path)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "is gone" in r.stderr, r.stderr


def test_sessions_lists_the_stopped_run_with_its_resume_command_and_finished_ones_without(tmp_path):
    goal, first = stopped_local_run(tmp_path)
    data = tmp_path / "data" / "upgrade-agent" / "transcripts"
    data.mkdir(parents=True)
    shutil.copy(first, data / "run-1.jsonl")
    shutil.copy(ROOT / "transcripts" / "cuda13-upgrade.jsonl", data / "run-0.jsonl")
    os.utime(data / "run-0.jsonl", (1, 1))  # older
    os.utime(first, (0, 0))  # older still: the run written with --transcript, listed through the session index
    r = agent("sessions", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    listed = json.loads(r.stdout)
    assert [(s["status"], s["path"]) for s in listed] == [("interrupted", str(data / "run-1.jsonl")),
                                                          ("finished", str(data / "run-0.jsonl")),
                                                          ("interrupted", str(first))]
    assert listed[0]["resume"] == f"agent resume {data / 'run-1.jsonl'}" and listed[0]["hosts"] == ["local"]
    assert "resume" not in listed[1] and listed[1]["goal"].startswith("Upgrade host sim")
    shown = agent("sessions", tmp_path=tmp_path)
    assert f"resume: agent resume {data / 'run-1.jsonl'}" in shown.stdout


def test_sessions_lists_a_demo_written_elsewhere_and_prune_removes_only_sims_no_session_needs(tmp_path):
    """`agent demo --dir D` is listed; --prune --dry-run says what it would free and removes nothing; --prune removes
    the finished demo's sim (its transcript and report stay) and keeps the sim of a run that can still be resumed,
    until it is older than --older-than."""
    demo = tmp_path / "demo"
    env = {k: v for k, v in env_for(tmp_path).items() if not k.startswith("OPENAI_")}  # the recorded model turns
    r = subprocess.run([sys.executable, "-m", "app.cli", "demo", "--dir", str(demo)], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=240, check=False)
    assert r.returncode == 0, r.stderr[-2000:]
    # A stopped run on a sim of its own: its record has no end, so it can be resumed, and its sim is kept.
    kept = tmp_path / "stopped-sim"
    (kept / ".sim").mkdir(parents=True)
    (kept / ".sim" / "state.json").write_text("{}")
    (kept / "big").write_bytes(b"x" * 100_000)
    stopped = tmp_path / "stopped.jsonl"
    stopped.write_text(json.dumps({"type": "session_start", "t": time.time(), "command": "run", "goal": "stopped",
                                   "goal_file": str(tmp_path / "g.yaml"), "hosts": ["box"],
                                   "sim_roots": {"box": str(kept)}}) + "\n")
    index = tmp_path / "data" / "upgrade-agent" / "sessions.index"
    index.write_text(index.read_text() + f"{stopped}\n")
    listed = json.loads(agent("sessions", "--json", tmp_path=tmp_path).stdout)
    assert str(demo / "demo.jsonl") in [s["path"] for s in listed] and str(stopped) in [s["path"] for s in listed]

    r = agent("sessions", "--prune", "--dry-run", "--json", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    said = json.loads(r.stdout)
    assert [x["sim"] for x in said["removed"]] == [str(demo / "sim")] and said["freed_bytes"] > 10 * 2**20
    assert (demo / "sim").is_dir()
    r = agent("sessions", "--prune", tmp_path=tmp_path)
    assert r.returncode == 0 and f"removed {demo / 'sim'}" in r.stdout and "1 kept" in r.stdout, r.stdout
    assert not (demo / "sim").exists() and (demo / "demo.jsonl").is_file() and kept.is_dir()
    assert list(demo.glob("*.md")), "the report stays"
    r = agent("sessions", "--prune", "--older-than", "0", tmp_path=tmp_path)
    assert r.returncode == 0 and not kept.exists() and stopped.is_file(), r.stdout


def test_a_rollouts_sims_are_its_sims_folder_and_nothing_that_is_not_a_sim(tmp_path):
    from app.sessions import sim_roots

    sims = tmp_path / "rollout" / "sims"
    for name in ("gpu01", "gpu02"):
        (sims / name / ".sim").mkdir(parents=True)
        (sims / name / ".sim" / "state.json").write_text("{}")
    (sims / "notes").mkdir()  # not a sim: never removed
    (sims / "link").symlink_to(sims / "gpu01")
    record = tmp_path / "rollout" / "fleet.jsonl"
    record.write_text(json.dumps({"type": "session_start", "command": "fleet", "plan": {"sims": str(sims)}}) + "\n")
    assert sim_roots(record) == {sims / "gpu01", sims / "gpu02"}
