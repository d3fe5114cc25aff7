"""Signals at any moment: SIGTERM, SIGHUP and SIGINT end `agent run` honestly.

Each try starts `agent run` on a goal whose model asks for `sleep 30` on the local host, sends
one signal after a random delay (from before Python has started to well into the running
command), and checks what a user would: the process ends within seconds with the signal's exit
code, the transcript is either not there (the signal came before it was opened) or verifies
with its end event naming the signal, and the `sleep` is not left behind.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).resolve().parents[2]
TRIES = int(os.environ.get("SIGNAL_TRIES", "36"))  # more with SIGNAL_TRIES=300
EXIT = {signal.SIGTERM: 143, signal.SIGHUP: 129, signal.SIGINT: 130}
NAME = {signal.SIGTERM: "SIGTERM", signal.SIGHUP: "SIGHUP", signal.SIGINT: "interrupted by the operator"}


def leftovers(marker: str) -> list[str]:
    found = subprocess.run(["pgrep", "-af", marker], capture_output=True, text=True).stdout.splitlines()
    return [line for line in found if "pgrep" not in line]


def test_a_signal_at_any_moment_closes_the_transcript_and_leaves_no_process(tmp_path):
    marker = f"signal-test-{uuid.uuid4().hex[:8]}"
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: wait\nhosts: [{name: local, transport: local}]\nbudget: {turns: 4}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_"))}
    env.update({"PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
    rng = random.Random(20261201)
    seen = {"no transcript": 0, "closed": 0}
    with FakeOpenAI([Reply(calls=[("ssh_exec", {"host": "local", "command": f"sleep 30; : {marker}"})])],
                    repeat_last=True) as srv:
        for attempt in range(TRIES):
            sig = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)[attempt % 3]
            delay = rng.uniform(0.0, 4.0)
            transcript = tmp_path / f"t{attempt}.jsonl"
            proc = subprocess.Popen([sys.executable, "-m", "app.cli", "run", str(goal), "--base-url", srv.base_url,
                                     "--transcript", str(transcript), "--json"], cwd=ROOT, env=env,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
            time.sleep(delay)
            proc.send_signal(sig)
            try:
                _, err = proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                raise AssertionError(f"try {attempt}: {sig.name} after {delay:.2f}s: still running 20 s later")
            where = f"try {attempt}: {sig.name} after {delay:.2f}s"
            time.sleep(0.3)  # a killed process group needs a moment to be reaped
            assert not leftovers(marker), f"{where}: left behind {leftovers(marker)}"
            if not transcript.exists() or transcript.stat().st_size == 0:
                # Before the transcript was opened, the signal's default action (or our handler) ends it at
                # once; a Ctrl-C while Python itself starts up (site's .pth files, before app/cli.py runs)
                # is Python's KeyboardInterrupt, exit 1.
                python_startup = sig == signal.SIGINT and b"KeyboardInterrupt" in err and b"app/cli.py" not in err
                assert proc.returncode in (EXIT[sig], -sig) or python_startup, \
                    f"{where}: exit {proc.returncode}\n{err.decode()[-800:]}"
                seen["no transcript"] += 1
                continue
            report = verify(transcript)
            assert report.ok and report.ended, f"{where}: transcript {report}\n{err.decode()[-800:]}"
            end = json.loads(transcript.read_text().splitlines()[-1])
            assert end["type"] == "session_end" and end["status"] == "interrupted", f"{where}: {end}"
            assert NAME[sig] in end["reason"], f"{where}: {end['reason']}"
            assert proc.returncode == EXIT[sig], f"{where}: exit {proc.returncode}\n{err.decode()[-800:]}"
            seen["closed"] += 1
    # The delays reach both sides of the moment the transcript is opened.
    assert seen["closed"] >= TRIES // 3, seen
