"""No secret reaches anything a person or a file sees.

Each kind of secret (private keys of every common format, cloud keys, tokens, passwords in URLs)
is planted three ways: in the environment of the real `agent` process under a secret-looking
name, in the output of a command on the `local` host, and in the pages of a web search (the
loopback Exa stub). The run then goes through the real CLI with a scripted model over HTTP, and
every output is searched: the terminal (stdout and stderr, as plain lines and as the rich view on
a pseudo-terminal), the transcript, the report (markdown and HTML) and every artifact file.
"""

from __future__ import annotations

import base64
import html
import json
import os
import pty
import random
import re
import secrets
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa

from agent.record.redact import REDACTED, Redactor, StreamRedactor
from agent.record.transcript import iter_events, verify
from agent.report import build_report, render_html
from app.ui import LiveOutput, PlainPrinter, TerminalView

from fake_exa import FakeExa, Results
from fake_openai import FakeOpenAI, Reply
from helpers import flat

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "data" / "redaction" / "redteam-2026-12"
pytestmark = pytest.mark.timeout(300)

# --------------------------------------------------------------------------- the secrets


@dataclass
class Secret:
    kind: str
    text: str  # as it is printed or written
    pieces: list[str]  # what must not be seen anywhere: the secret itself, or each line of a key's body


def _pem(key, fmt, encryption=None) -> str:
    return key.private_bytes(ser.Encoding.PEM, fmt, encryption or ser.NoEncryption()).decode()


def _body(block: str) -> list[str]:
    return [line for line in block.splitlines() if len(line) >= 16 and "-----" not in line
            and not line.startswith(("Proc-Type", "DEK-Info", "PuTTY", "Encryption", "Comment", "Public-", "Private-"))]


def _putty_key() -> str:
    def lines(n: int) -> list[str]:
        data = base64.b64encode(os.urandom(n)).decode()
        return [data[i:i + 64] for i in range(0, len(data), 64)]

    public, private = lines(150), lines(300)
    return "\n".join(["PuTTY-User-Key-File-3: ssh-rsa", "Encryption: none", "Comment: rsa-key-20250101",
                      f"Public-Lines: {len(public)}", *public, f"Private-Lines: {len(private)}", *private,
                      f"Private-MAC: {secrets.token_hex(32)}"]) + "\n"


def _token(alphabet: str, n: int) -> str:
    return "".join(random.SystemRandom().choice(alphabet) for _ in range(n))


ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


def _jwt() -> str:
    def part(obj: dict) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    return (f"{part({'alg': 'RS256', 'typ': 'JWT'})}.{part({'sub': secrets.token_hex(8), 'exp': 1789886403})}."
            f"{base64.urlsafe_b64encode(os.urandom(64)).decode().rstrip('=')}")


def planted_secrets() -> list[Secret]:
    """One fresh secret of every kind; each call makes new ones, so the three routes never share one."""
    rsa_key = rsa.generate_private_key(65537, 2048)
    keys = {
        "RSA PEM": _pem(rsa_key, ser.PrivateFormat.TraditionalOpenSSL),
        "encrypted RSA PEM": _pem(rsa_key, ser.PrivateFormat.TraditionalOpenSSL, ser.BestAvailableEncryption(b"pw")),
        "EC PEM": _pem(ec.generate_private_key(ec.SECP256R1()), ser.PrivateFormat.TraditionalOpenSSL),
        "DSA PEM": _pem(dsa.generate_private_key(2048), ser.PrivateFormat.TraditionalOpenSSL),
        "PKCS#8": _pem(rsa_key, ser.PrivateFormat.PKCS8),
        "encrypted PKCS#8": _pem(rsa_key, ser.PrivateFormat.PKCS8, ser.BestAvailableEncryption(b"pw")),
        "OpenSSH": _pem(ed25519.Ed25519PrivateKey.generate(), ser.PrivateFormat.OpenSSH),
        "PuTTY": _putty_key(),
    }
    out = [Secret(kind, block, _body(block)) for kind, block in keys.items()]
    cut = keys["OpenSSH"].splitlines()
    out.append(Secret("OpenSSH cut off before its END", "\n".join(cut[:3]) + "\n", _body("\n".join(cut[:3]))))
    gcp_key = _pem(rsa.generate_private_key(65537, 2048), ser.PrivateFormat.PKCS8)
    gcp = json.dumps({"type": "service_account", "project_id": "gpu-fleet", "private_key": gcp_key,
                      "client_email": "upgrader@gpu-fleet.iam.gserviceaccount.com"}, indent=2)
    out.append(Secret("GCP service-account JSON", gcp, _body(gcp_key)))
    aws_id, aws_secret = "AKIA" + _token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), _token(ALNUM + "/+", 40)
    sts_id = "ASIA" + _token("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16)
    azure = base64.b64encode(os.urandom(64)).decode()
    url_password = _token(ALNUM, 18)
    out += [
        Secret("AWS access key", f"[default]\naws_access_key_id = {aws_id}\naws_secret_access_key = {aws_secret}\n",
               [aws_id, aws_secret]),
        Secret("AWS session key id", f"the session used {sts_id} until noon", [sts_id]),
        Secret("Azure connection string", f"DefaultEndpointsProtocol=https;AccountName=gpuckpts;AccountKey={azure};"
                                          "EndpointSuffix=core.windows.net", [azure]),
        Secret("URL password", f"git clone https://deploy:{url_password}@git.example.com/infra.git", [url_password]),
    ]
    tokens = {
        "GitHub ghp_": "ghp_" + _token(ALNUM, 36), "GitHub gho_": "gho_" + _token(ALNUM, 36),
        "GitHub ghs_": "ghs_" + _token(ALNUM, 36), "GitHub ghu_": "ghu_" + _token(ALNUM, 36),
        "GitHub github_pat_": "github_pat_11" + _token(ALNUM, 20) + "_" + _token(ALNUM, 59),
        "GitLab glpat-": "glpat-" + _token(ALNUM, 20), "Slack xoxb-": f"xoxb-{_token('0123456789', 12)}-"
        f"{_token('0123456789', 13)}-{_token(ALNUM, 24)}", "OpenAI sk-": "sk-proj-" + _token(ALNUM, 48),
        "Hugging Face hf_": "hf_" + _token(ALNUM, 34), "JWT": _jwt(),
    }
    out += [Secret(kind, f"{kind.split()[0].lower()} credential in use: {value}", [value])
            for kind, value in tokens.items()]
    bearer = _token(ALNUM + "-._", 40)
    out.append(Secret("Bearer header", f"> Authorization: Bearer {bearer}\n", [bearer]))
    return out


def env_secrets(planted: list[Secret]) -> dict[str, str]:
    """Every secret as the value of a variable whose name says secret (the product redacts those values)."""
    names = {}
    for i, s in enumerate(planted):
        names[f"UPGRADE_TEST_{re.sub(r'[^A-Z0-9]+', '_', s.kind.upper()).strip('_')}_{i}_SECRET"] = s.text.strip()
    return names


def unshaped_password() -> Secret:
    """A password with no shape any rule knows: only its value, from the environment, can hide it."""
    value = _token(ALNUM + "!%*+,.~", 22)
    return Secret("password known from the environment", value, [value])


# --------------------------------------------------------------------------- the run


def agent_env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "UPGRADE_TEST_"))}
    env.update({"PYTHONPATH": str(ROOT), "COLUMNS": "200", "LINES": "50", **extra})
    return env


def goal_file(tmp_path: Path) -> Path:
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: look at what this machine prints\nhosts: [{name: local, transport: local}]\n"
                    "budget: {turns: 4}\n")
    return goal


def run_plain(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    r = subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True, env=env,
                       timeout=240, cwd=ROOT)
    return r.returncode, r.stdout + "\n" + r.stderr


def run_on_a_terminal(args: list[str], env: dict[str, str]) -> tuple[int, str]:
    """The command with a pseudo-terminal for its stdout and stderr: the rich view, live region included."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "app.cli", *args], stdin=subprocess.DEVNULL, stdout=follower,
                            stderr=follower, env={**env, "TERM": "xterm-256color"}, cwd=ROOT)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the other end closed: the process is gone
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    code = proc.wait(timeout=30)
    return code, b"".join(chunks).decode("utf-8", "replace")


_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|\x1b[=>]|\r")


def leaks(planted: list[Secret], outputs: dict[str, str]) -> list[str]:
    """Every (kind, output) where a piece of a planted secret is found, also across folded lines."""
    found = []
    for where, text in outputs.items():
        plain = _ANSI.sub("", text)
        views = (plain, flat(plain), html.unescape(plain))
        for s in planted:
            for piece in s.pieces:
                for part in {piece, piece[:24], piece[-24:]}:
                    if any(part in v for v in views):
                        found.append(f"{s.kind} in {where}: {part[:30]}...")
    return found


def artifact_files(transcript: Path) -> dict[str, str]:
    folder = transcript.with_name(transcript.stem + ".artifacts")
    return {str(p.relative_to(folder)): p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("terminal", ["plain lines", "rich view on a terminal"])
def test_no_planted_secret_reaches_the_terminal_the_transcript_the_report_or_an_artifact(tmp_path, terminal):
    from_env, from_output, from_web = [*planted_secrets(), unshaped_password()], planted_secrets(), planted_secrets()
    # Tool output: a file on the local host; long enough that its whole output is kept as an artifact.
    printed = tmp_path / "printed.txt"
    filler = "".join(f"filler line {i}: nothing secret here\n" for i in range(700))
    printed.write_text("CANARY-VISIBLE-LINE\n" + "\n".join(s.text for s in from_output) + "\n" + filler)
    # The environment's secrets, met again on the host: bare, with no name beside them.
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("CANARY-ELSEWHERE\n" + "\n".join(s.text for s in from_env) + "\n")
    # Web results: the stub's pages carry the third set (each within the excerpt the tool keeps).
    pages = [{"id": f"https://forum.example.org/t/{i}", "url": f"https://forum.example.org/t/{i}",
              "title": f"post {i}: {s.kind}", "publishedDate": None, "author": "anon", "text": s.text}
             for i, s in enumerate(from_web)]
    # The model repeats some of what it read, in its streamed text.
    said = {s.kind: s for s in from_output}
    final = (f"Done. I saw {said['JWT'].pieces[0]} and this key:\n\n{said['OpenSSH'].text}\n"
             f"and {said['GitHub ghp_'].pieces[0]}; the password was {from_env[-1].text}.")
    searches = [("web_search", {"query": f"cuda 13 upgrade notes, part {i}", "num_results": 10}) for i in range(3)]
    script = [Reply(text="Looking around.", calls=[
        ("ssh_exec", {"host": "local", "command": f"cat {printed}"}),
        ("ssh_exec", {"host": "local", "command": f"cat {elsewhere}"}),
        *searches,
    ]), Reply(text=final)]
    transcript = tmp_path / "run.jsonl"
    exa_key = "exa-" + secrets.token_hex(16)
    with FakeExa([Results(pages[:10]), Results(pages[10:20]), Results(pages[20:])]) as exa, \
            FakeOpenAI(script) as model:
        env = agent_env({**env_secrets(from_env), "EXA_API_KEY": exa_key, "EXA_BASE_URL": exa.base_url})
        args = ["run", str(goal_file(tmp_path)), "--base-url", model.base_url, "--transcript", str(transcript)]
        run = run_on_a_terminal if terminal.startswith("rich") else run_plain
        code, screen = run(args, env)
        asked = len(model.requests)
    assert asked == 2 and transcript.exists(), (code, screen[-3000:])
    assert verify(transcript).ok
    report_md = transcript.with_name(transcript.stem + ".report.md")
    report_html = tmp_path / "run.html"
    render_html(build_report(transcript), report_html)
    outputs = {"the terminal": screen, "the transcript": transcript.read_text(), "the report": report_md.read_text(),
               "the HTML report": report_html.read_text(),
               **{f"artifact {name}": text for name, text in artifact_files(transcript).items()}}
    assert any(name.startswith("artifact ") for name in outputs), "the long output was kept as an artifact"

    planted = [*from_env, *from_output, *from_web]
    planted.append(Secret("the Exa API key", exa_key, [exa_key]))
    assert leaks(planted, outputs) == []
    # What is no secret still shows, everywhere, so the searches above looked at real output.
    for shown in ("CANARY-VISIBLE-LINE", "CANARY-ELSEWHERE", "filler line 699", REDACTED, "Looking around."):
        assert shown in outputs["the transcript"], shown
    # The rich view leaves only the last lines of each call on the screen; the plain lines show them all.
    for shown in ("filler line 699", REDACTED, "Done. I saw") + (() if terminal.startswith("rich") else (
            "CANARY-VISIBLE-LINE", "CANARY-ELSEWHERE")):
        assert shown in _ANSI.sub("", screen), shown
    results = [e for e in iter_events(transcript) if e["type"] == "tool_result"]
    assert [r["tool"] for r in results] == ["ssh_exec"] * 2 + ["web_search"] * 3 and all(r["ok"] for r in results)
    assert all(f"post {i}: " in outputs["the transcript"] for i in range(len(pages)))


# --------------------------------------------------------------------------- live output, split anywhere


def _chunks(text: str, rng: random.Random) -> list[str]:
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 40)
        out.append(text[i:i + n])
        i += n
    return out


def test_live_output_split_anywhere_shows_no_secret_in_any_view_at_any_moment():
    """Output arrives in chunks cut anywhere, also inside a secret; every view redacts whole lines, and
    the line still arriving (the terminal's live region) shows nothing of a secret half received."""
    import io

    from rich.console import Console

    planted = planted_secrets()
    text = "start\n" + "\n".join(s.text for s in planted) + "\nend of output without a newline"
    redactor = Redactor(environ={})
    rng = random.Random(7)
    for attempt in range(3):
        console = Console(width=200, record=True, force_terminal=True, file=io.StringIO())
        view = TerminalView(console, redactor=redactor)
        printer_out, exec_out, exec_err = io.StringIO(), io.StringIO(), io.StringIO()
        printer = PlainPrinter(out=printer_out, live=True, redactor=redactor)
        live = LiveOutput(exec_out, exec_err, redactor=redactor)
        seen: list[str] = []
        view({"type": "decision", "call_id": "c1", "tool": "ssh_exec", "host": "h", "subject": "cat x",
              "verdict": "allow", "rule": "read-only", "risk": "read-only"})
        view({"type": "tool_start", "call_id": "c1", "tool": "ssh_exec", "host": "h"})
        for chunk in _chunks(text, rng):
            ev = {"type": "output", "call_id": "c1", "tool": "ssh_exec", "stream": "stdout", "text": chunk}
            view(ev)
            printer(ev)
            live("output", ev)
            with console.capture() as region:  # what the live region would draw right now
                console.print(view.live_region())
            seen.append(region.get())
        finished = {"type": "tool_result", "call_id": "c1", "tool": "ssh_exec", "status": "ok", "turn": 1,
                    "duration_s": 0.1, "data": {"exit_code": 0}}
        view(finished)
        printer(finished)
        live.close()
        outputs = {"live region": "\n".join(seen), "terminal view": console.export_text(),
                   "plain lines": printer_out.getvalue(), "agent exec": exec_out.getvalue() + exec_err.getvalue()}
        assert leaks(planted, outputs) == [], attempt
        for where in ("terminal view", "plain lines", "agent exec"):
            assert "end of output without a newline" in outputs[where], where  # the last line, once it ended


def test_the_model_text_streamed_to_the_terminal_is_redacted_while_it_arrives():
    import io

    from rich.console import Console

    planted = planted_secrets()
    text = "I found these:\n" + "\n".join(s.text for s in planted) + "\nthat is all"
    console = Console(width=200, record=True, force_terminal=True, file=io.StringIO())
    view = TerminalView(console, redactor=Redactor(environ={}))
    view({"type": "model_request", "turn": 1})
    drawn = []
    for chunk in _chunks(text, random.Random(3)):
        view({"type": "text", "turn": 1, "text": chunk})
        with console.capture() as region:
            console.print(view.live_region())
        drawn.append(region.get())
    assert leaks(planted, {"live region": "\n".join(drawn)}) == []
    assert "I found these:" in "".join(drawn)


def test_a_stream_holds_back_a_keys_tail_until_its_end_line_and_releases_other_base64():
    key = _pem(ed25519.Ed25519PrivateKey.generate(), ser.PrivateFormat.OpenSSH).splitlines()
    stream = StreamRedactor(Redactor(environ={}))
    shown = stream.feed("\n".join(key[2:]) + "\n")  # the tail of `cat key` cut by `tail -n +3`: no BEGIN line
    assert shown == [REDACTED]
    digest = secrets.token_hex(32)  # 64 characters that could be base64: held back, then shown whole
    assert stream.feed(digest + "\n") == [] and stream.feed("sums checked\n") == [digest, "sums checked"]


def test_the_chat_views_redact_what_they_are_given_directly():
    """Cards, notes and tables come from the chat, not from the record: an approval's command can hold a token."""
    import io

    from rich.console import Console

    from app.ui import PlainView

    token = "ghp_" + _token(ALNUM, 36)
    console = Console(width=120, record=True, force_terminal=True, file=io.StringIO())
    plain_out = io.StringIO()
    for view in (TerminalView(console, redactor=Redactor(environ={})), PlainView(out=plain_out,
                                                                                 redactor=Redactor(environ={}))):
        view.card("approval needed", [("command", f"git clone https://x:{token}@github.com/a/b")])
        view.info(f"token {token}")
        view.warn(f"token {token}")
        view.table("hosts", ["host", "target"], [["h", f"https://{token}@example.com"]])
    for shown in (console.export_text(), plain_out.getvalue()):
        assert token not in shown and shown.count(REDACTED) >= 4


# --------------------------------------------------------------------------- the red-team corpus


def _corpus(name: str) -> list[dict]:
    return [json.loads(line) for line in (CORPUS / name).read_text().splitlines() if line.strip()]


# The corpus's cases still leaking, and why: a bare value that no name, key word or shape gives away.
# Any other case that leaks fails the test below.
STILL_LEAKING = {
    "azure-storage-key-cli": "an account key alone on the line after `az storage account keys list -o tsv`",
    "key-middle-only": "lines from the middle of a private key (`sed -n 10,14p id_rsa`): no BEGIN or END line",
    "key-raw-ed25519-seed": "an ed25519 seed after `seed (base64):`, a label of no common format",
    "json-credentials-nested": 'a value two objects below "credentials", under the neutral name "value"',
}


def _streamed(redactor: Redactor, text: str, rng: random.Random, previews: bool = True) -> str:
    """What a stream of `text` split anywhere shows: its lines and, with `previews`, each line still arriving."""
    stream = StreamRedactor(redactor)
    shown = [line for chunk in _chunks(text + "\n", rng)
             for line in (*stream.feed(chunk), *([stream.preview()] if previews else []))]
    return "\n".join([*shown, *stream.finish()])


def test_the_red_team_corpus_secrets_are_hidden_whole_in_text_and_in_streams_but_for_the_bare_values_listed():
    meta = json.loads((CORPUS / "secrets_meta.json").read_text())
    redactor = Redactor(environ={})
    leaked, streamed = [], []
    rng = random.Random(11)
    for case in _corpus("secrets.jsonl"):
        pieces = [f["value"] for f in meta.get(case["id"], [])]
        text_out = redactor.text(case["text"])
        stream_out = _streamed(redactor, case["text"], rng)
        if any(p in text_out for p in pieces):
            leaked.append(case["id"])
        elif any(p in stream_out for p in pieces):
            streamed.append(case["id"])
    assert not streamed  # a stream never shows what the same text, whole, would hide
    assert sorted(leaked) == sorted(STILL_LEAKING)


def test_the_red_team_look_alikes_and_benchmark_output_pass_unchanged():
    redactor = Redactor(environ={})
    keep = _corpus("keep.jsonl")
    changed = [c["id"] for c in keep if redactor.text(c["text"]) != c["text"]]
    assert changed == []
    rng = random.Random(5)
    streamed = [c["id"] for c in keep if _streamed(redactor, c["text"], rng, previews=False) != c["text"]]
    assert streamed == []
    for sample in sorted((ROOT / "tests" / "data" / "bench").glob("*")):
        text = sample.read_text()
        assert redactor.text(text) == text, sample.name
    for text in ("Total input tokens: 204800", "tokenizer=None", "max_total_num_tokens=425176, api_key=None,",
                 "export HF_TOKEN=$HF_TOKEN", "KEY_FILE=/etc/ssl/private/server.key", "Enter password: \nWelcome",
                 "The file should begin with -----BEGIN OPENSSH PRIVATE KEY----- when it is an OpenSSH key."):
        assert redactor.text(text) == text, text


# --------------------------------------------------------------------------- command lines, config files, wraps


def _password() -> str:
    """A password of no shape: letters, digits and the punctuation people put in them."""
    return _token(ALNUM, 4) + _token(ALNUM + "!%+.~^_#=", 12)


def _base64_json(obj: dict) -> str:
    return base64.b64encode(json.dumps(obj).encode()).decode()


_MAKE = {
    "pw": _password,
    "alnum": lambda: _token(ALNUM, 32),
    "hex40": lambda: secrets.token_hex(20),
    "ngrok": lambda: f"{_token(ALNUM, 27)}_{_token(ALNUM, 21)}",
    "cloudflared": lambda: _base64_json({"a": secrets.token_hex(16), "t": "bf714794-694e-44d4-a2d0-b31c02b5da68",
                                         "s": base64.b64encode(os.urandom(32)).decode()}),
    "ecr": lambda: _base64_json({"payload": base64.b64encode(os.urandom(300)).decode(),
                                 "datakey": base64.b64encode(os.urandom(150)).decode(), "version": "2",
                                 "type": "DATA_KEY", "expiration": 1735689600}),
    "sha512crypt": lambda: f"$6${_token(ALNUM + './', 16)}${_token(ALNUM + './', 86)}",
    "bcrypt": lambda: f"$2y$05${_token(ALNUM + './', 53)}",
    "mailgun": lambda: "key-" + secrets.token_hex(16),
}

# Each form: where a password or token goes on a command line or in a config file. {kind} is a fresh value.
NEW_FORMS = [
    ("mysql -pPASSWORD", "$ mysql -u root -p{pw} -h 10.0.0.3 metrics"),
    ("mysql -p'PASSWORD'", "mysql -u root -p'{pw}' metrics"),
    ("mysqldump in ps", "root      4412  0.0  0.1  /usr/bin/mysqldump -uroot -p{pw} --all-databases"),
    ("mysql in history", "  502  mysql -uroot -p{pw}\n  503  history | tail -3"),
    ("sshpass -p", "sshpass -p '{pw}' ssh -o StrictHostKeyChecking=no ubuntu@10.0.0.21 nvidia-smi"),
    ("curl -u user:password", "curl -u admin:{pw} http://10.0.0.21/redfish/v1/Systems"),
    ("curl --user 'user:password'", "curl --user 'admin:{pw}' -k https://bmc-07/redfish/v1/UpdateService"),
    ("redis-cli -a", "redis-cli -h 10.0.0.4 -a {pw} INFO"),
    ("ipmitool -P", "ipmitool -I lanplus -H 10.10.0.21 -U ADMIN -P {pw} chassis power status"),
    ("racadm -p", "racadm -r 10.10.0.22 -u root -p {pw} getsysinfo"),
    ("docker login -p", "$ docker login -u gpuops -p {pw} nvcr.io\nLogin Succeeded"),
    ('docker login -p="..."', 'docker login -u="corp+robot" -p="{alnum}" quay.io'),
    ("twine -p", "twine upload -u ci -p {pw} --repository-url https://pypi.corp/ dist/*"),
    ("az login -p", "az login --service-principal -u 3fbfb8e0-b08d-4e30 -p {pw} --tenant 56ff2c0f"),
    ("sqlcmd -P", "sqlcmd -S db.corp -U sa -P {pw} -Q 'SELECT 1'"),
    ("mongosh -p", "mongosh --host mongo.corp -u admin -p {pw} --authenticationDatabase admin"),
    ("ldapsearch -w", "ldapsearch -x -H ldap://ldap.corp -D cn=admin,dc=corp -w {pw} uid=ops"),
    ("smbclient -U user%password", "smbclient //nas/ckpts -U ops%{pw}"),
    ("keytool -storepass", "keytool -importkeystore -srckeystore a.jks -srcstorepass {pw} -deststorepass {pw}"),
    ("nmcli password", "nmcli dev wifi connect lab-net password {pw}"),
    ("openssl -passin pass:", "openssl rsa -in key.pem -passin pass:{pw} -out key.dec.pem"),
    ("openssl passwd", 'sudo useradd -m -p "$(openssl passwd -6 {pw})" gpuops'),
    ("gpg --passphrase", "gpg --batch --passphrase {pw} -d secrets.tar.gpg"),
    ("htpasswd -b", "htpasswd -b /etc/nginx/.htpasswd admin {pw}"),
    ("htpasswd -nb", "htpasswd -nbB admin {pw}"),
    ("echo | sudo -S", "echo '{pw}' | sudo -S apt-get install -y cuda-drivers-550"),
    ("echo | chpasswd", "echo 'ubuntu:{pw}' | sudo chpasswd"),
    ("echo | docker login --password-stdin", "echo {pw} | docker login -u ci --password-stdin nvcr.io"),
    ("poetry http-basic", "$ poetry config http-basic.corp ci {pw}"),
    ("wandb login KEY", "$ wandb login {hex40}\nwandb: Appending key for api.wandb.ai to your netrc file"),
    ("wandb login --host URL KEY", "wandb login --relogin --host https://api.wandb.ai {hex40}"),
    ("ngrok add-authtoken", "$ ngrok config add-authtoken {ngrok}"),
    ("cloudflared service install", "cloudflared service install {cloudflared}"),
    ("SSHPASS=", "SSHPASS={pw}"),
    (".netrc on one line", "machine ftp.corp.example login deploy password {pw}"),
    (".netrc default", "default login anonymous password {pw}"),
    (".netrc over lines", "$ cat ~/.netrc\nmachine api.wandb.ai\n  login user\n  password {hex40}"),
    (".pgpass", "$ cat ~/.pgpass\ndb.corp:5432:metrics:gpuapp:{pw}"),
    (".my.cnf password==", "[client]\nuser=root\npassword=={pw}"),
    ("pass:", "pass: {pw}"),
    ("'password' => ...", "'password' => '{pw}',"),
    (".npmrc _auth", "_auth={alnum}\nalways-auth=true"),
    ("?auth= in a URL", "https://grafana.corp/render?auth={alnum}"),
    ("Cookie: with several", "> Cookie: sessionid={alnum}; csrftoken={alnum}"),
    ("Set-Cookie:", "< Set-Cookie: session={alnum}; Path=/; HttpOnly; Secure; SameSite=Lax"),
    ("curl -b", "curl -b 'session={alnum}; theme=dark' https://wandb.ai/api"),
    ("Mailgun key-", "api: {mailgun}"),
    ("/etc/shadow", "root:{sha512crypt}:19800:0:99999:7:::\ndaemon:*:19800:0:99999:7:::"),
    (".htpasswd bcrypt", "admin:{bcrypt}"),
    ("aws ecr get-login-password", "$ aws ecr get-login-password --region us-east-1\n{ecr}"),
]


def _planted(template: str) -> tuple[str, list[str]]:
    values: list[str] = []

    def fresh(m: re.Match) -> str:
        values.append(_MAKE[m.group(1)]())
        return values[-1]

    return re.sub(r"\{(\w+)\}", fresh, template), values


@pytest.mark.parametrize("kind,template", NEW_FORMS, ids=[kind for kind, _ in NEW_FORMS])
def test_passwords_on_command_lines_and_in_config_files_are_hidden_in_text_and_in_streams(kind, template):
    text, values = _planted(template)
    redactor = Redactor(environ={})
    hidden = redactor.text(text)
    assert REDACTED in hidden and not [v for v in values if v in hidden], hidden
    for seed in range(3):
        shown = _streamed(redactor, text, random.Random(seed))
        assert not [v for v in values if v in shown], shown


def test_the_passwords_sshpass_redis_cli_and_mysql_take_from_the_environment_are_known_values():
    values = {name: _password() for name in ("SSHPASS", "REDISCLI_AUTH", "MYSQL_PWD", "BORG_PASSPHRASE")}
    redactor = Redactor(environ={**values, "PWD": "/root/work", "OLDPWD": "/root"})
    shown = redactor.text(" ".join(f"seen {value} bare;" for value in values.values()) + " in /root/work")
    assert not [v for v in values.values() if v in shown] and shown.endswith("in /root/work"), shown


# Look-alikes of those forms that hold no secret.
NEW_FORMS_LOOK_ALIKES = [
    "$ mysql -u root -p\nEnter password: ",
    "mysql -u root -p metrics",
    "docker run --gpus all -p 30000:30000 lmsysorg/sglang:latest",
    'echo "$DOCKER_PASSWORD" | docker login -u gpuops --password-stdin nvcr.io',
    "curl -u admin https://10.0.0.21/redfish/v1",
    "curl -b cookies.txt -c cookies.txt https://example.com/login",
    "curl --user-agent 'Mozilla/5.0 (X11; Linux x86_64)' https://example.com",
    "redis-cli -h 10.0.0.4 -p 6379 INFO",
    "echo 'deb https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /' | sudo tee /etc/apt/x.list",
    "htpasswd -c /etc/nginx/.htpasswd admin",
    "openssl rsa -in key.pem -passin env:KEY_PASS -out key.dec.pem",
    "openssl passwd -6 -stdin",
    "wandb: Currently logged in as: gpu-ops (corp-ml). Use `wandb login --relogin` to force relogin",
    "passwd: password updated successfully\npassword required for user root",
    "pass: 120/120\nfail: 0",
    "daemon:*:19800:0:99999:7:::",
    "00:11:22:33:44:55\n10:00:00:0000:ffff",
    "gpu-node-07:12345:12345 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.7<0>",
    "Set-Cookie: lang=en; Path=/",
    "always-auth=true",
    "the comment rsa-key-20250101 of a PuTTY key",
    "awk '{print $1$2}' results.txt",
    "keyring==25.0.0\nsecretstorage==3.3.3",
    # A host key's fingerprint is published to be compared, under a name that says key (the advice for an
    # unknown host key names it three times; hidden there, the operator could not act on it)
    'trust_host_key: "SHA256:2AzCH3Yp+w+L+cbu9ZgAZH8dRLSW38xP3s0hiSg+BBY"',
    "host_key=MD5:5e:9a:4d:61:3c:0b:7e:12:aa:90:1f:c4:d2:88:6e:03",
]


def test_look_alikes_of_command_line_and_config_file_forms_pass_unchanged():
    redactor = Redactor(environ={})
    for text in NEW_FORMS_LOOK_ALIKES:
        assert redactor.text(text) == text, text
        assert _streamed(redactor, text, random.Random(3), previews=False) == text, text
    # and a fingerprint after a name that says key is not learned as a secret, to be hidden everywhere after
    fingerprint = "SHA256:2AzCH3Yp+w+L+cbu9ZgAZH8dRLSW38xP3s0hiSg+BBY"
    assert redactor.value({"trust_host_key": fingerprint}) == {"trust_host_key": fingerprint}
    assert redactor.text(f"run again with --trust-host-key {fingerprint}").endswith(fingerprint)


def test_a_token_a_terminal_wrapped_is_hidden_on_both_lines_and_the_line_after_a_whole_one_stays():
    redactor = Redactor(environ={})
    hf = "hf_" + _token(ALNUM, 34)
    jwt = _jwt()
    wrapped_jwt = "\n".join(jwt[i:i + 80] for i in range(0, len(jwt), 80))
    cases = [
        (f"HF_TOKEN={hf[:20]}\n{hf[20:]}", [hf[:20], hf[20:]]),  # cut where the pane ended
        (f"$ cat token\n{wrapped_jwt}\n$ ", [jwt[i:i + 80] for i in range(0, len(jwt), 80)]),
    ]
    for text, pieces in cases:
        hidden = redactor.text(text)
        assert not [p for p in pieces if p in hidden], hidden
        for seed in range(3):
            shown = _streamed(redactor, text, random.Random(seed))
            assert not [p for p in pieces if p in shown], shown
    # A token that is whole at the end of its line does not take the next line with it.
    assert redactor.text(f"HF_TOKEN={hf}\nDone") == f"HF_TOKEN={REDACTED}\nDone"
    assert redactor.text(f"{jwt}\nDone") == f"{REDACTED}\nDone"


# --------------------------------------------------------------------------- cuts of long output


def _pad(n: int) -> str:
    """Exactly n characters of lines that hold nothing secret, ending with a line break."""
    whole, rest = divmod(n, 40)
    return ("x" * (rest - 1) + "\n" if rest else "") + ("filler line, nothing secret here ......\n" * whole)


def _pieces_shown(secret: str, text: str) -> list[str]:
    return [secret[i:i + 8] for i in range(len(secret) - 7) if secret[i:i + 8] in text]


def test_the_cuts_of_a_long_output_move_off_a_secret_so_redacting_what_is_left_hides_it_whole():
    from tools.base import truncate_for_model

    redactor = Redactor(environ={})
    limit = 3000  # head 2000 bytes, tail 1000
    token, password = "ghp_" + _token(ALNUM, 36), _password()
    token_line, password_line = f"credential in use: {token}\n", f"  502  mysql -uroot -p{password}\n"
    for into in range(1, len(password_line) - 1, 3):  # places in the two lines for the cuts to fall at
        text = (_pad(2000 - into) + token_line + _pad(2000) + password_line
                + _pad(1000 - len(password_line) + into))
        cut = truncate_for_model(text, limit)
        assert "bytes omitted" in cut and len(cut.encode()) < limit + 200
        shown = redactor.text(cut)  # as the transcript records what the model was shown
        assert _pieces_shown(token, shown) == [] and _pieces_shown(password, shown) == [], (into, shown)


def test_a_long_field_is_redacted_before_it_is_cut_for_the_record(tmp_path):
    from tools.base import RECORD_FIELD_LIMIT, ArtifactStore, ToolContext, bound_for_record

    redactor = Redactor(environ={})
    ctx = ToolContext(hosts=None, artifacts=ArtifactStore(tmp_path), call_id="c1", redact=redactor.text)
    head = (RECORD_FIELD_LIMIT - 400) * 2 // 3  # where the head is cut: no line break or space near it
    token = "ghp_" + _token(ALNUM, 36)
    for into in (6, 12, 18, 30):
        data = {"text": "x" * (head - into) + ":" + token + ":" + "y" * RECORD_FIELD_LIMIT}
        bounded = bound_for_record(data, ctx)
        recorded = redactor.text(bounded["text"])
        assert "bytes omitted" in recorded and _pieces_shown(token, recorded) == [], into
    assert all(token not in p.read_text() for p in tmp_path.rglob("*") if p.is_file())


def test_a_secret_a_rule_found_once_is_hidden_wherever_the_model_repeats_it(tmp_path):
    """A password found in a command's output by its shape (in a URL) is then known by its value: the model's
    words, a later command, and a web search's query (which leaves for Exa) carry it no more (issue 30)."""
    password = "Zq9mP" + secrets.token_hex(8)
    printed = tmp_path / "pip.conf"
    printed.write_text(f"[global]\nindex-url = https://deploy:{password}@registry.example.org/simple\n")
    script = [Reply(text="Reading the pip configuration.", calls=[
        ("ssh_exec", {"host": "local", "command": f"cat {printed}"})]),
        Reply(text=f"The registry's password is {password}; checking it.", calls=[
            ("ssh_exec", {"host": "local", "command": f"echo {password} | wc -c"}),
            ("web_search", {"query": f"registry password {password} rotation", "num_results": 3})]),
        Reply(text=f"Done: the password {password} works.")]
    transcript = tmp_path / "run.jsonl"
    with FakeExa([Results([])]) as exa, FakeOpenAI(script) as model:
        env = agent_env({"EXA_API_KEY": "exa-" + secrets.token_hex(16), "EXA_BASE_URL": exa.base_url})
        code, screen = run_plain(["run", str(goal_file(tmp_path)), "--base-url", model.base_url,
                                  "--transcript", str(transcript)], env)
        sent = json.dumps(exa.requests)
    assert len(exa.requests) == 1 and REDACTED in sent and password not in sent, sent
    report = transcript.with_name(transcript.stem + ".report.md").read_text()
    for name, text in {"the terminal": screen, "the transcript": transcript.read_text(), "the report": report}.items():
        assert password not in text, name
    assert "The registry's password is [REDACTED]" in transcript.read_text()
