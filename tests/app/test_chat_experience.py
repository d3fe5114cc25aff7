"""`agent chat` as someone used to other coding agents' terminals meets it: a host key asked about
before the first prompt, a "no" that says why, panels intact after Ctrl-C, a report and token totals
on leaving, progress while a simulated host is built, readable tool results, retries shown as they
happen, and /model. The real command in a pseudo-terminal (or a pipe), the real `openai` SDK against
a scripted server on 127.0.0.1, a real sshd and real simulated hosts."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pyte
import pytest
from test_chat import ROOT, WAIT_S, Terminal, chat_argv, chat_env, tool_messages

from agent.record.transcript import verify
from agent.safety.policy import ApprovalAnswer
from app.chat import Declined, read_approval, sim_building
from app.ui.results import result_rows
from app.ui.usage import Price, UsageTotals, configured_price, list_price

from fake_openai import FakeOpenAI, Reply, Status
from helpers import events, flat

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def started(tmp_path):
    """Terminals started by a test; each killed at the end if the test left it running."""
    terms: list[Terminal] = []

    def start(srv: FakeOpenAI, *hosts: str, cols: int = 60, env: dict | None = None) -> Terminal:
        term = Terminal(chat_argv(srv, tmp_path / "chat.jsonl", *hosts), env or chat_env(tmp_path), cols=cols)
        terms.append(term)
        return term

    yield start
    for term in terms:
        term.close()


def screen_of(term: Terminal, cols: int, rows: int = 30) -> list[str]:
    """What the terminal shows now: the program's output through a VT100 emulator of its size."""
    screen = pyte.Screen(cols, rows)
    pyte.Stream(screen).feed(term.raw.decode("utf-8", "replace"))
    return [line.rstrip() for line in screen.display]


# --------------------------------------------------------------------------- through the real command


def test_an_unknown_host_key_is_asked_about_before_the_first_prompt(started, tmp_path, sshd, client_key):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "config").write_text(
        f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
        f"  IdentityFile {client_key}\n  IdentitiesOnly yes\n")
    (home / ".ssh" / "known_hosts").write_text("")
    env = {**chat_env(tmp_path), "HOME": str(home)}
    fingerprint = sshd.host_key_fingerprint()
    script = [Reply(calls=[("ssh_exec", {"host": "box", "command": "echo over-ssh"})]), Reply(text="It answered.")]
    with FakeOpenAI(script) as srv:
        term = started(srv, "box", env=env)
        card = term.expect("trust this key? [y/N]")
        assert "❯" not in card  # asked before anything else: no call is made on an undecided key
        assert "unknown host key for box" in card and "ssh-ed25519" in card
        assert fingerprint in flat(card)  # the whole SHA256 fingerprint, however the card folds it
        term.line("n")
        said = term.expect("❯ ")
        assert "not trusted" in said and flat("/host trust box") in flat(said) and fingerprint in flat(said)

        term.line("/host trust box")  # later, the operator checked it with the host's owner
        term.expect("trust this key? [y/N]")
        term.line("y")
        term.expect("box: connected")
        term.expect("❯ ")
        term.line("run something on box")
        term.expect("over-ssh")
        term.expect("It answered.")
        term.expect("❯ ")
        term.line("/quit")
        assert term.wait() == 0
    path = tmp_path / "chat.jsonl"
    (trusted,) = events(path, "host_key_trusted")
    assert trusted["fingerprint"] == fingerprint and trusted["key_type"] == "ssh-ed25519"
    assert "ssh-ed25519" in (tmp_path / "data" / "upgrade-agent" / "known_hosts").read_text()
    assert [r["status"] for r in events(path, "tool_result")] == ["ok"]
    assert verify(path).ok


def test_no_with_a_reason_gives_the_model_the_reason_with_the_refusal(started, tmp_path):
    install = "python3 -m pip install --upgrade sglang"
    reason = "vllm here pins sglang 0.4; leave it and note the pin in the report instead"
    script = [Reply(calls=[("pip_freeze_backup", {"host": "sim"})]),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": install})]),
              Reply(text="Understood: sglang stays."),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": "pip install requests"})]),
              Reply(text="Not installed.")]
    with FakeOpenAI(script) as srv:
        term = started(srv, "sim")
        term.expect("❯ ")
        term.line("upgrade sglang on sim")
        card = term.expect("approve? [y/n/s]")
        assert flat('"n: ..." tells the model why') in flat(card)
        term.line(f"n: {reason}")
        term.expect("sglang stays.")
        term.expect("❯ ")
        refusal = tool_messages(srv.requests[2])[-1]
        assert "declined" in refusal and reason in refusal

        term.line("install requests")  # a plain no is still a no, without words
        term.expect("approve? [y/n/s]")
        term.line("no")
        term.expect("Not installed.")
        term.expect("❯ ")
        plain = tool_messages(srv.requests[4])[-1]
        assert "declined" in plain and "vllm" not in plain
        term.type("\x04")
        assert term.wait() == 0
    path = tmp_path / "chat.jsonl"
    first, second = events(path, "approval")
    assert first["answer"] == "no" and first["reason"] == reason and first["by"] == "operator"
    assert second["answer"] == "no" and "reason" not in second
    assert verify(path).ok
    # The record replays as it happened: the words are part of the decision the model read.
    replayed = subprocess.run([sys.executable, "-m", "app.cli", "replay", str(path)], cwd=ROOT, capture_output=True,
                              text=True, env=chat_env(tmp_path), timeout=WAIT_S * 2)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr


def test_sim_build_shows_progress_results_read_well_and_panels_survive_ctrl_c(started, tmp_path):
    cols = 60
    script = [Reply(calls=[("inspect_host", {"host": "sim"})]), Reply(text="Looked."),
              Reply(calls=[("pip_freeze_backup", {"host": "sim"})]),
              Reply(calls=[("ssh_exec", {"host": "sim", "command": "pip install requests"})])]
    with FakeOpenAI(script) as srv:
        term = started(srv, "sim", cols=cols)
        before_prompt = term.expect("❯ ")
        assert "building simulated host sim" in before_prompt
        assert flat("for next time") in flat(before_prompt) or flat("from its cache in") in flat(before_prompt)
        assert re.search(r"simulated host sim ready \(\d+(\.\d)?s\)", before_prompt), before_prompt

        term.line("what is on sim?")
        shown = term.expect("Looked.")
        # inspect_host as rows an operator reads, not its JSON cut off at the edge.
        assert '{"host"' not in shown
        for fact in ("8 × NVIDIA RTX PRO 6000", "590.48.01", "upto13.1", "12.8", "2.10.0+cu128", "CUDA12.8"):
            assert flat(fact) in flat(shown), f"{fact!r} not in:\n{shown}"
        term.expect("❯ ")

        term.line("install requests")
        card = flat(term.expect("approve? [y/n/s]"))
        # The panel names the backup that undoes the step, and how far it can be trusted to.
        assert flat("restore_backup sim-") in card and flat("if that is the `pip` this command finds first") in card
        term.type("half an answ")  # typed, not sent: then Ctrl-C, once it is on the screen, as a person would.
        # Not in the same instant: the kernel drops unread typing at a Ctrl-C, and readline, told a key was
        # there, then waits inside its own read, where Python cannot run the Ctrl-C's handler until a key.
        term.expect("half an answ")
        term.type("\x03")
        term.expect("back at the prompt")
        term.expect("❯ ")
        screen = screen_of(term, cols)
        tops = [line for line in screen if "ssh_exec · sim" in line]
        assert tops, "\n".join(screen)
        top = tops[-1]  # the refused step's panel, drawn after the Ctrl-C
        assert top.startswith("╭─ ssh_exec · sim") and top.endswith("╮") and len(top) == cols, "\n".join(screen)
        bottom = next(line for line in screen[screen.index(top):] if line.startswith("╰"))
        assert bottom.endswith("╯") and len(bottom) == cols, "\n".join(screen)
        term.type("\x04")
        assert term.wait() == 0
    path = tmp_path / "chat.jsonl"
    (approval,) = events(path, "approval")
    assert approval["undone_by"].startswith("sim-") and approval["undo"].startswith("restore_backup sim-")
    (inspected,) = [r for r in events(path, "tool_result") if r["tool"] == "inspect_host"]
    assert json.loads(inspected["content"])["gpu_count"] == 8  # the model read the whole result, as before


def test_retries_are_shown_with_their_reason_and_wait_and_ctrl_c_leaves_with_the_totals(started, tmp_path):
    script = [Status(429, "slow down", retry_after=0.3), Status(503, "warming up", retry_after=0.2),
              Reply(text="Here now.", usage=(1200, 30))]
    with FakeOpenAI(script) as srv:
        term = started(srv, "local", cols=120)
        term.expect("❯ ")
        term.line("are you there?")
        first = term.expect("trying again in 0.3s")
        assert "model server answered 429 (rate limit: slow down)" in first
        second = term.expect("trying again in 0.2s")
        assert "model server answered 503 (unavailable: warming up)" in second
        term.expect("Here now.")
        # What the request cost is on screen as it ends, before the next prompt.
        assert "tokens: 1,200 prompt + 30 completion for this request; 1,230 in the session" in \
            " ".join(term.expect("❯ ").split())
        term.type("\x03")  # Ctrl-C at the prompt leaves
        assert term.wait() == 0
        leaving = term.text[term.seen:]
    assert len(srv.requests) == 3
    path = tmp_path / "chat.jsonl"
    notes = [n for n in events(path, "note") if n.get("kind") == "model_retry"]
    assert [(n["attempt"], n["wait_s"]) for n in notes] == [(1, 0.3), (2, 0.2)]
    report = tmp_path / "chat.report.md"
    assert report.is_file() and str(report) in flat(leaving)
    assert "tokens: 1,200 prompt + 30 completion = 1,230 over 1 turn (as the server reported them)" in leaving
    assert "cost: no price known for test-model" in leaving and "UPGRADE_AGENT_PRICE" in leaving
    assert verify(path).ok


def test_model_switch_and_exit_with_the_report_tokens_and_a_configured_price(tmp_path):
    script = [Reply(text="First answer.", usage=(1000, 200)), Reply(text="Second answer.", usage=(3000, 400))]
    env = {**chat_env(tmp_path), "UPGRADE_AGENT_PRICE": "2.00,8.00"}
    with FakeOpenAI(script) as srv:
        proc = subprocess.run(chat_argv(srv, tmp_path / "chat.jsonl", "local") + ["--plain"], env=env, cwd=ROOT,
                              input="/model\nhello\n/model gpt-4.1-mini\nagain\n/model\n/exit\n",
                              capture_output=True, text=True, timeout=WAIT_S * 2)
        models = [r["model"] for r in srv.requests]
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert models == ["test-model", "gpt-4.1-mini"]
    shown = [line for line in out.splitlines() if re.match(r"model: (test-model|gpt-4\.1-mini)\b", line)]
    assert shown[0].startswith(f"model: test-model at {srv.base_url}")
    assert shown[1].startswith("model: gpt-4.1-mini") and "was test-model" in shown[1]
    assert shown[2].startswith("model: gpt-4.1-mini at")
    report = tmp_path / "chat.report.md"
    assert f"report:     {report}" in out and report.is_file()
    assert "tokens: 4,000 prompt + 600 completion = 4,600 over 2 turns (as the server reported them)" in out
    # (1000 + 3000) x $2 + (200 + 400) x $8 per million tokens
    assert "cost: $0.0128 (test-model at $2.00 / $8.00" in out and "gpt-4.1-mini at $2.00 / $8.00" in out
    path = tmp_path / "chat.jsonl"
    (switched,) = [n for n in events(path, "note") if n.get("kind") == "model"]
    assert switched == {**switched, "model": "gpt-4.1-mini", "previous": "test-model", "by": "operator"}


def test_a_price_that_cannot_be_read_is_one_line_and_exit_2(tmp_path):
    env = {**chat_env(tmp_path), "UPGRADE_AGENT_PRICE": "cheap"}
    proc = subprocess.run([sys.executable, "-m", "app.cli", "chat", "--base-url", "http://127.0.0.1:9/v1",
                           "--host", "local"], env=env, cwd=ROOT, capture_output=True, text=True, input="",
                          timeout=WAIT_S)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0
    assert "UPGRADE_AGENT_PRICE='cheap' is not a price" in proc.stderr
    assert "UPGRADE_AGENT_PRICE=2.00,8.00" in proc.stderr  # and what to write instead


# --------------------------------------------------------------------------- the pieces


@pytest.mark.parametrize("line,mutating,expected", [
    ("y", True, ApprovalAnswer.YES_ONCE), ("YES", False, ApprovalAnswer.YES_ONCE),
    ("", True, ApprovalAnswer.NO), ("n", True, ApprovalAnswer.NO), ("No.", False, ApprovalAnswer.NO),
    ("s", True, ApprovalAnswer.YES_SESSION), ("s", False, None),  # destructive steps are asked one by one
    ("no, because it breaks vllm", True, Declined("because it breaks vllm")),
    ("n: pin   2.9 instead", True, Declined("pin 2.9 instead")),
    ("No - wrong host", False, Declined("wrong host")),
    ("n do it on the other host", True, Declined("do it on the other host")),
    ("nope", True, None), ("never", True, None), ("maybe", True, None),
])
def test_approval_answers(line, mutating, expected):
    assert read_approval(line, mutating) == expected


def test_the_rows_of_recorded_results_name_the_facts_that_matter():
    recorded: dict[str, dict] = {}  # each tool's first result in the shipped session: before the upgrade
    for ev in events(ROOT / "transcripts" / "cuda13-upgrade.jsonl", "tool_result"):
        if ev["status"] == "ok":
            recorded.setdefault(ev["tool"], ev)
    inspect = dict(result_rows("inspect_host", recorded["inspect_host"]["data"]))
    assert inspect["GPU"] == "8 × NVIDIA RTX PRO 6000 Blackwell Workstation Edition (compute 12.0, 96 GiB)"
    assert inspect["driver"] == "590.48.01" and inspect["driver CUDA"] == "up to 13.1"
    assert inspect["toolkits"].startswith("12.8") and inspect["torch"].startswith("2.10.0+cu128 (CUDA 12.8")
    pip = dict(result_rows("pip_install", recorded["pip_install"]["data"]))
    assert "torch 2.10.0+cu128 → 2.10.0+cu130" in pip["changed"]
    runfile = dict(result_rows("install_runfile", recorded["install_runfile"]["data"]))
    assert runfile["toolkit"] == "CUDA 13.0 at /usr/local/cuda-13.0 (nvcc 13.0)"
    assert runfile["cuda link"] == "unchanged (/usr/local/cuda-12.8)"
    assert result_rows("ssh_exec", recorded["ssh_exec"]["data"]) is None  # its live output says it already
    assert result_rows("inspect_host", {"gpus": "not a list"}) is None  # another shape: shown the plain way
    hostile = result_rows("web_search", {"query": "q", "results": [{"title": "a\x1b[2Jb\nc", "url": "u"}]})
    assert all("\x1b" not in value and "\n" not in value for _, value in hostile)


def test_a_cold_sim_cache_is_announced_as_built_once_and_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    what, done = sim_building(["sim"])
    assert "first its package wheels, indexes and a Python venv" in what
    assert f"cached in {tmp_path / 'empty-cache' / 'upgrade-agent'}" in what and "for next time" in what
    assert done == "simulated host sim ready"


def test_token_totals_and_prices():
    totals = UsageTotals()
    totals.add("gpt-4.1", {"prompt_tokens": 10_000, "completion_tokens": 1_000})
    totals.add("gpt-4.1", {"prompt_tokens": 500, "completion_tokens": 20, "estimated": True})
    tokens, cost = totals.lines(lambda m: list_price(m, None))
    assert tokens == ("tokens: 10,500 prompt + 1,020 completion = 11,520 over 2 turns (estimated from the text's "
                      "size: the server reported no usage for 1 of them)")
    assert cost.startswith("cost: about $0.0292 (gpt-4.1 at $2.00 / $8.00") and "OpenAI's list price" in cost
    assert list_price("gpt-4.1-2025-04-14", "https://api.openai.com/v1/") == Price(2.0, 8.0, "OpenAI's list price")
    assert list_price("gpt-4.1", "http://127.0.0.1:8000/v1") is None  # another server's price is its own
    assert configured_price({"UPGRADE_AGENT_PRICE": "$0.5 / $1.5"}) == Price(0.5, 1.5, "UPGRADE_AGENT_PRICE")
    assert configured_price({}) is None
    for bad in ("1", "1,2,3", "-1,2", "a,b"):
        with pytest.raises(ValueError, match="is not a price"):
            configured_price({"UPGRADE_AGENT_PRICE": bad})
    assert UsageTotals().lines(lambda m: None) == ["tokens: none (no request reached the model)"]
