"""`agent chat` driven for real: the command in a pseudo-terminal (or a pipe), a scripted
OpenAI-compatible server on 127.0.0.1, and local or simulated hosts."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import pytest

from agent.record.transcript import verify

from fake_openai import FakeOpenAI, Reply
from helpers import events, flat
from sshd import kill_pids, pids_matching, unique_marker

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parents[2]
ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|\x1b[=>]|[\r\x07]")
WAIT_S = 30.0  # generous: a loaded machine may be slow to start Python and draw


def chat_env(tmp_path: Path) -> dict:
    env = dict(os.environ, OPENAI_API_KEY="sk-test-key-000000000000", XDG_DATA_HOME=str(tmp_path / "data"),
               TMPDIR=str(tmp_path), TERM="xterm-256color", PYTHONPATH=str(ROOT))
    for name in ("OPENAI_BASE_URL", "NO_COLOR", "COLUMNS", "LINES", "SSH_AUTH_SOCK"):
        env.pop(name, None)
    return env


def chat_argv(srv: FakeOpenAI, transcript: Path, *hosts: str) -> list[str]:
    argv = [sys.executable, "-m", "app.cli", "chat", "--base-url", srv.base_url, "--model", "test-model",
            "--transcript", str(transcript)]
    for h in hosts:
        argv += ["--host", h]
    return argv


class Terminal:
    """A program in a pseudo-terminal of a given size; `expect` waits for text it draws."""

    def __init__(self, argv: list[str], env: dict, cols: int = 40, rows: int = 30):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: size its terminal before anything reads it
            fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            # Ctrl-C as at a terminal, even when the tests were started in the background (where
            # the shell leaves SIGINT ignored, and an ignored signal stays ignored across exec).
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGQUIT, signal.SIG_DFL)
            os.chdir(ROOT)
            os.execvpe(argv[0], argv, env)
        self.raw = b""
        self.seen = 0  # `expect` searches the screen text after this offset
        self.exit_code: int | None = None
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                ready, _, _ = select.select([self.fd], [], [], 0.1)
                if ready:
                    chunk = os.read(self.fd, 65536)
                    if not chunk:
                        return
                    with self._lock:
                        self.raw += chunk
            except OSError:  # the child closed its end
                return

    @property
    def text(self) -> str:
        with self._lock:
            raw = self.raw
        return ANSI.sub("", raw.decode("utf-8", "replace"))

    def expect(self, needle: str, timeout: float = WAIT_S) -> str:
        """Wait until `needle` appears after what earlier expects matched; returns the text up to it."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text
            at = text.find(needle, self.seen)
            if at >= 0:
                before, self.seen = text[self.seen:at], at + len(needle)
                return before
            if time.monotonic() > deadline:
                raise AssertionError(f"{needle!r} did not appear within {timeout}s; the screen after the last "
                                     f"match:\n{text[self.seen:][-3000:]}")
            time.sleep(0.05)

    def type(self, text: str) -> None:
        os.write(self.fd, text.encode())

    def line(self, text: str) -> None:
        self.type(text + "\r")

    def wait(self, timeout: float = WAIT_S) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.exit_code = os.waitstatus_to_exitcode(status)
                self._reader.join(timeout=5)
                return self.exit_code
            time.sleep(0.05)
        raise AssertionError(f"agent chat did not exit within {timeout}s:\n{self.text[-3000:]}")

    def close(self) -> None:
        if self.exit_code is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        os.close(self.fd)


@pytest.fixture
def terminal(tmp_path):
    """Start `agent chat` in a terminal; killed at the end if a test left it running."""
    started: list[Terminal] = []

    def start(srv: FakeOpenAI, *hosts: str, cols: int = 40, env: dict | None = None) -> Terminal:
        term = Terminal(chat_argv(srv, tmp_path / "chat.jsonl", *hosts), env or chat_env(tmp_path), cols=cols)
        started.append(term)
        term.expect("❯ ")  # the prompt: the chat is ready
        return term

    yield start
    for term in started:
        term.close()


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


# --------------------------------------------------------------------------- tests
# Each test is one chat session (starting Python with the SDK costs seconds), walked through
# several steps an operator would take in a row.


def test_read_only_call_slash_commands_and_dry_run_in_a_narrow_terminal_then_ctrl_d(terminal, tmp_path):
    script = [Reply(text="Looking at the host.",
                    calls=[("ssh_exec", {"host": "local", "command": "printf '%s\\n' alpha-line beta-line"})]),
              Reply(text="The host printed **two lines**:\n\n- `alpha-line`\n- `beta-line`"),
              Reply(calls=[("ssh_exec", {"host": "local", "command": "pip install requests"})]),
              Reply(text="In a dry run nothing was installed.")]
    with FakeOpenAI(script) as srv:
        term = terminal(srv, "local")  # 40 columns
        term.line("what does the host print?")
        panel = term.expect("read-only · runs")
        assert "ssh_exec · local" in panel and "$ printf" in panel
        result = term.expect("beta-line")
        if "exit 0" not in result:  # on a loaded machine the end line can come in a later screen update
            result += term.expect("exit 0") + "exit 0"  # expect returns the text before what it waited for
        assert "exit 0" in result and "alpha-line" in result
        before_summary = term.expect("turn 1: 1 call: 1 ok")
        answer = before_summary + term.expect("❯ ")
        # The answer is rendered as Markdown: emphasis and list markers become formatting. (While it
        # streams, a loaded machine may also draw frames of the raw text, before or after the turn's
        # summary line; the rendered form must be there, with no asterisks in its sentence.)
        assert "The host printed two lines:" in answer and "• alpha-line" in answer

        term.line("/help")
        shown = term.expect("❯ ")
        for command in ("/tools", "/hosts", "/host add", "/backups", "/plan", "/transcript", "/quit"):
            assert command in shown, f"{command} missing from /help"
        term.line("/tools")
        assert "ssh_exec" in term.expect("❯ ")
        term.line("/hosts")
        hosts = term.expect("❯ ")
        assert "local" in hosts and "transport: local" in hosts
        term.line("/backups")
        assert "no verified backup" in term.expect("❯ ")
        term.line("/transcript")
        assert "chat.jsonl" in flat(term.expect("❯ "))

        term.line("/plan")
        term.expect("dry run on")
        term.expect("plan ❯ ")
        term.line("install requests")
        # No backup is taken or planned: a real chat would refuse it, and the panel says so (it said "would run").
        panel = term.expect("would be refused (dry")  # the subtitle, cut by the 40 columns
        assert "pip install requests" in panel and "mutating" in term.text[term.seen - 200:]
        term.expect("nothing was installed")
        term.expect("plan ❯ ")
        term.line("/plan")
        term.expect("dry run off")
        term.expect("❯ ")
        term.type("\x04")  # Ctrl-D at the prompt
        assert term.wait() == 0
    path = tmp_path / "chat.jsonl"
    report = verify(path)
    assert report.ok and report.status == "done", report.problems
    assert events(path)[-1]["type"] == "session_end"
    assert [r["status"] for r in events(path, "tool_result")] == ["ok", "skipped"]
    assert [d["rule"] for d in events(path, "decision")] == ["read-only", "plan"]
    assert [n["plan"] for n in events(path, "note") if n.get("kind") == "plan"] == [True, False]


def test_approval_prompt_declined_then_ctrl_c_at_the_next_one_means_no(terminal, tmp_path):
    install = "python3 -m pip install --upgrade sglang"
    script = [Reply(calls=[("pip_freeze_backup", {"host": "sim"})]),
              Reply(text="Now the upgrade.", calls=[("ssh_exec", {"host": "sim", "command": install})]),
              Reply(text="Understood, I left sglang as it is."),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": "pip install requests"}),
                           ("ssh_exec", {"host": "sim", "command": "pip install numpy"})])]
    with FakeOpenAI(script) as srv:
        term = terminal(srv, "sim")
        term.line("upgrade sglang on sim")
        term.expect("backup sim-")  # the backup verified and registered
        card = term.expect("approve? [y/n/s]")
        for shown in ("approval needed: mutating step on sim", install, "class", "pip:install", "backup sim-",
                      "s = yes to this exact command on this host for this session"):
            assert flat(shown) in flat(card), f"{shown!r} not in the approval card:\n{card}"
        term.line("n")
        term.expect("refused: declined")
        term.expect("left sglang as it is")
        term.expect("❯ ")
        refusal = tool_messages(srv.requests[2])[-1]
        assert "declined" in refusal and "refused by the safety layer" in refusal

        term.line("install two packages")
        term.expect("approve? [y/n/s]")
        term.type("\x03")  # Ctrl-C at the prompt of the first of two steps
        term.expect("back at the prompt")
        term.expect("❯ ")
        assert term.text.count("approve? [y/n/s]") == 2  # one card per request: the second step was not asked
        assert len(srv.requests) == 4  # and the model was not asked again
        term.type("\x04")
        assert term.wait() == 0
    path = tmp_path / "chat.jsonl"
    approvals = events(path, "approval")
    assert approvals[0] == {**approvals[0], "host": "sim", "tool": "ssh_exec", "subject": install, "answer": "no",
                            "by": "operator"}
    assert [a["answer"] for a in approvals] == ["no", "no", "no"]
    assert [d["rule"] for d in events(path, "decision")][-2:] == ["declined", "declined"]
    assert verify(path).ok


def test_ctrl_c_cancels_a_running_command_kills_it_then_ctrl_c_at_the_prompt_leaves(terminal, tmp_path):
    marker = unique_marker()
    script = [Reply(calls=[("ssh_exec", {"host": "local", "command": f"echo started; sleep 30 {marker}"})]),
              Reply(text="Still here.")]
    with FakeOpenAI(script) as srv:
        term = terminal(srv, "local")
        try:
            term.line("wait a while")
            deadline = time.monotonic() + WAIT_S
            while not pids_matching(f"sleep 30 {marker}"):
                assert time.monotonic() < deadline, "the command never started"
                time.sleep(0.05)
            term.type("\x03")
            shown = term.expect("back at the prompt", timeout=10)
            assert flat("ssh_exec · local · cancelled, process killed") in flat(shown)
            term.expect("❯ ", timeout=10)
            deadline = time.monotonic() + 5
            while pids_matching(f"sleep 30 {marker}"):
                assert time.monotonic() < deadline, "the command still runs after Ctrl-C"
                time.sleep(0.05)
            assert len(srv.requests) == 1  # the model was not asked again after the cancel
            # The session goes on: the next request works.
            term.line("are you there?")
            term.expect("Still here.")
            term.expect("❯ ")
            term.type("\x03")  # Ctrl-C at the prompt leaves
            assert term.wait() == 0
        finally:
            kill_pids(pids_matching(f"sleep 30 {marker}"))
        # The model's next request carries the cancelled result, then the new question.
        assert "cancelled by the operator" in tool_messages(srv.requests[1])[-1]
    path = tmp_path / "chat.jsonl"
    (result,) = events(path, "tool_result")
    assert result["data"]["cancelled"] is True and result["data"]["stdout"] == "started\n"
    report = verify(path)
    assert report.ok and report.status == "interrupted"


def test_host_added_in_chat_with_an_accepted_key_is_in_scope_and_on_the_record(terminal, tmp_path, sshd,
                                                                                  client_key):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {client_key}\n  IdentitiesOnly yes\n")
    (home / ".ssh" / "known_hosts").write_text("")
    env = {**chat_env(tmp_path), "HOME": str(home)}
    script = [Reply(calls=[("ssh_exec", {"host": "box", "command": "echo over-ssh"})]), Reply(text="It answered.")]
    with FakeOpenAI(script) as srv:
        term = terminal(srv, "local", env=env)
        term.line("/host add box")
        card = term.expect("trust this key? [y/N]")
        assert "unknown host key for box" in card
        term.line("y")
        term.expect("box: connected")
        term.expect("❯ ")
        term.line("/hosts")
        assert "box" in term.expect("❯ ")
        term.line("run something on box")
        term.expect("over-ssh")
        term.expect("It answered.")
        term.expect("❯ ")
        term.line("/quit")
        assert term.wait() == 0
        first_user_message = [m for m in srv.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert "added host 'box'" in first_user_message
    path = tmp_path / "chat.jsonl"
    (trusted,) = events(path, "host_key_trusted")
    assert trusted["fingerprint"] in flat(card)  # the key the operator was shown is the one trusted
    (added,) = [n for n in events(path, "note") if n.get("kind") == "host_added"]
    assert added["host"] == "box" and added["by"] == "operator"
    assert [d["verdict"] for d in events(path, "decision")] == ["allow"]
    assert verify(path).ok


def test_a_host_added_in_chat_as_star_is_refused_and_scope_stays_as_it_was(terminal, tmp_path):
    """`*` in scope would make a rule for `*` mean one more host; the operator is told why, nothing is added."""
    with FakeOpenAI([Reply(text="unused")]) as srv:
        term = terminal(srv, "local", env=chat_env(tmp_path))
        term.line("/host add *")
        assert "ahostcannotbenamed`*`" in flat(term.expect("❯ "))
        term.line("/quit")
        assert term.wait() == 0
    assert not [n for n in events(tmp_path / "chat.jsonl", "note") if n.get("kind") == "host_added"]


def test_output_to_a_pipe_is_plain_lines_without_escape_codes(tmp_path):
    script = [Reply(calls=[("ssh_exec", {"host": "local", "command": "echo piped-output"})]),
              Reply(text="Done: it printed **piped-output**.")]
    with FakeOpenAI(script) as srv:
        proc = subprocess.run(chat_argv(srv, tmp_path / "chat.jsonl", "local"), env=chat_env(tmp_path), cwd=ROOT,
                              input="print something\n/help\n/plan\n", capture_output=True, text=True,
                              timeout=WAIT_S * 2)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout + proc.stderr
    assert "\x1b" not in out
    assert "ssh_exec on local: echo piped-output [read-only; allow: read-only]" in out
    assert "| piped-output" in out and "= ssh_exec ok" in out
    assert "model: Done: it printed **piped-output**." in out
    assert "/backups" in out and "dry run on" in out
    report = verify(tmp_path / "chat.jsonl")
    assert report.ok and report.status == "done"


def test_the_ctrl_c_handler_takes_no_lock_and_cancels_only_its_own_request():
    """The handler runs between two bytecodes of the main thread, which may be holding the very
    lock an Event.set() would take: it must return at once, and the cancel arrives by relay."""
    from agent.budget import Budget
    from agent.loop import Session
    from agent.model import ScriptedModel
    from agent.record.transcript import TranscriptWriter
    from agent.safety.policy import SafetyPolicy
    from app.chat import CtrlC
    from tools.base import Registry

    session = Session(model=ScriptedModel([]), registry=Registry([]), gate=SafetyPolicy(scope=set()),
                      transcript=TranscriptWriter(None), budget=Budget())
    ctrl_c = CtrlC(session)
    first = session.batches.flags
    with ctrl_c.armed():
        done = threading.Event()

        def press_while_the_lock_is_held():
            with first.operator._cond:  # as if the main thread were inside first.operator.set()
                ctrl_c.handle()
            done.set()

        worker = threading.Thread(target=press_while_the_lock_is_held, daemon=True)
        worker.start()
        assert done.wait(5), "the handler blocked on a lock"
        assert ctrl_c.requested
        assert first.operator.wait(5) and first.reads.is_set()  # the relay cancelled this request
        session.batches.rearm_cancel()
        assert not session.batches.flags.operator.is_set()  # the next request starts clean
    assert not ctrl_c.requested
