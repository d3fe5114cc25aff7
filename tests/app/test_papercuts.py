"""What a newcomer from other command-line tools trips on first: the `agent` command as they type it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from test_cli import ROOT, agent

from app.cli import build_parser, package_version
from app.completion import commands
from app.exec import PipeStatus


def _home(tmp_path: Path, config: str = "") -> dict:
    """An environment whose ~/.ssh is the test's own (never the user's), with no ssh-agent."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    (home / ".ssh" / "config").write_text(config)
    (home / ".ssh" / "known_hosts").touch()
    return {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share"), "SSH_AUTH_SOCK": ""}


# --------------------------------------------------------------------------- exec: the command after HOST


def test_exec_takes_everything_after_the_host_as_the_command():
    r = agent("exec", "local", "ls", "-la", str(ROOT))
    assert r.returncode == 0, r.stderr
    assert "pyproject.toml" in r.stdout and r.stdout.startswith("total ")
    # exec's own options before the command, and the command's own dashes after it, as with ssh.
    r = agent("exec", "--json", "local", "--timeout", "30", "echo", "--json", "-n")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["stdout"] == "--json -n\n"
    # `--` still ends exec's options.
    r = agent("exec", "local", "--timeout", "30", "--", "ls", "-d", str(ROOT))
    assert r.returncode == 0 and r.stdout == f"{ROOT}\n"


def test_exec_without_a_command_says_how_to_give_one():
    r = agent("exec", "local")
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "agent exec HOST COMMAND" in r.stderr


# --------------------------------------------------------------------------- exec: pipelines


def test_a_failing_pipeline_stage_fails_exec_and_is_named():
    r = agent("exec", "local", "ls /nonexistent-upgrade-agent | cat")
    assert r.returncode == 2  # ls's own status, not cat's 0
    assert "agent: pipeline stage 1 of 2 (`ls`) exited 2" in r.stderr
    assert "\x1f" not in r.stdout + r.stderr and "agent-exec-" not in r.stderr
    r = agent("exec", "local", "ls /nonexistent-upgrade-agent | cat  # a trailing comment ends no report")
    assert r.returncode == 2 and "stage 1 of 2" in r.stderr
    r = agent("exec", "--json", "local", "ls /nonexistent-upgrade-agent 2>&1 | grep -c cannot")
    data = json.loads(r.stdout)
    assert r.returncode == 2 and data["exit_code"] == 2 and data["pipeline_status"] == [2, 0]
    assert data["stdout"] == "1\n" and data["stderr"] == ""


def test_a_stage_that_a_later_one_stopped_reading_is_no_failure(tmp_path):
    big = tmp_path / "big.log"
    big.write_text("line\n" * 400_000)  # 2 MB: far past a pipe's buffer, so `cat` dies of SIGPIPE
    r = agent("exec", "--json", "local", f"cat {big} | head -2")
    data = json.loads(r.stdout)
    assert data["pipeline_status"][0] == 141  # the first stage was indeed killed by SIGPIPE
    assert r.returncode == 0 and data["exit_code"] == 0 and data["stdout"] == "line\nline\n"
    r = agent("exec", "local", f"cat {big} | head -2")
    assert r.returncode == 0 and "stage" not in r.stderr


def test_the_status_report_is_hidden_even_after_output_without_a_newline():
    r = agent("exec", "local", "ls /nonexistent-upgrade-agent 2>/dev/null | printf tail >&2")
    assert r.returncode == 2
    assert r.stderr == "tail\nagent: pipeline stage 1 of 2 (`ls`) exited 2\n"


def test_the_status_report_is_hidden_when_it_arrives_a_character_at_a_time():
    status = PipeStatus("ls /x | cat")
    seen: list[str] = []
    hide = status.hide_report(lambda kind, data: seen.append(data["text"]))
    stream = f"one\ntwo \x1fnot ours\n{status.marker}2 0 2\n"
    for ch in stream:
        hide("output", {"stream": "stderr", "text": ch})
    hide.close()
    assert "".join(seen) == "one\ntwo \x1fnot ours\n"
    assert status.take_report(stream) == ("one\ntwo \x1fnot ours\n", [2, 0])


def test_a_failing_pipeline_stage_is_named_over_ssh(tmp_path, sshd, client_key):
    env = _home(tmp_path, f"Host box\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.user}\n"
                          f"  IdentityFile {client_key}\n  IdentitiesOnly yes\n")
    Path(env["HOME"], ".ssh", "known_hosts").write_text(sshd.known_hosts_line())
    r = agent("exec", "box", "ls /nonexistent-upgrade-agent | cat", env=env, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "agent: pipeline stage 1 of 2 (`ls`) exited 2" in r.stderr and "\x1f" not in r.stderr
    r = agent("exec", "box", "echo", "over", "ssh", env=env, timeout=60)
    assert r.returncode == 0 and r.stdout == "over ssh\n" and r.stderr == ""


# --------------------------------------------------------------------------- exec: unknown hosts


def test_an_unknown_host_is_a_usage_error_naming_the_known_hosts(tmp_path):
    env = _home(tmp_path, "Host gpu1 box2\n  HostName 127.0.0.1\n  Port 2222\n\nHost *\n  ServerAliveInterval 5\n")
    # In a network namespace of its own, the name's lookup reaches no resolver outside this machine.
    cmd = ["unshare", "-rn", sys.executable, "-m", "app.cli", "exec", "nosuchhost", "--", "true"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT), **env})
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    line = r.stderr
    assert "unknown host 'nosuchhost'" in line
    assert re.search(r"known hosts: local, sim, box2, gpu1\b", line) and "*" not in line
    assert "~/.ssh/config" in line and "user@address[:port]" in line


# --------------------------------------------------------------------------- classify


def test_classify_answers_with_its_exit_status():
    cases = {("nvidia-smi", "-L"): 0, ("pip", "install", "torch"): 1, ("rm", "-rf", "/tmp/x"): 1,
             ("rm", "-rf", "/"): 3}
    for words, code in cases.items():
        r = agent("classify", *words)  # no `--` needed either
        assert r.returncode == code, (words, r.stdout, r.stderr)
    assert agent("classify", "--json", "--", "rm", "-rf", "/tmp/x").returncode == 1
    # A stream answers with its riskiest command.
    assert agent("classify", input="ls\nnvidia-smi -L\n").returncode == 0
    assert agent("classify", input="ls\nrm -rf /\nmkdir /tmp/x\n").returncode == 3
    assert agent("classify", input="ls\nmkdir /tmp/x\n").returncode == 1


def test_classify_with_nothing_to_read_says_what_to_give():
    import pty

    leader, follower = pty.openpty()
    try:
        r = subprocess.run([sys.executable, "-m", "app.cli", "classify"], stdin=follower, capture_output=True,
                           text=True, cwd=ROOT, timeout=60, env={**os.environ, "PYTHONPATH": str(ROOT)})
    finally:
        os.close(follower)
        os.close(leader)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "agent classify COMMAND" in r.stderr and r.stdout == ""


def test_classify_help_has_its_own_examples_and_its_exit_codes():
    out = agent("classify", "--help").stdout
    assert "agent exec" not in out
    assert re.search(r"^  agent classify nvidia-smi -L$", out, re.M)
    for code, word in (("0", "read-only"), ("1", "mutating"), ("2", "usage"), ("3", "forbidden")):
        assert re.search(rf"^  {code} +{word}", out, re.M), code


def test_chat_help_gives_a_chats_own_exit_codes_and_the_top_help_names_the_settings_without_a_source_path():
    """chat --help listed run's codes ("goal met"), which a chat never has; --config said "see app/config.py"."""
    out = agent("chat", "--help").stdout
    assert "goal met" not in out and re.search(r"^  0 +the operator left", out, re.M)
    assert re.search(r"^  130 +interrupted \(Ctrl-C\) before the session started", out, re.M)
    top = " ".join(agent("--help").stdout.split())
    assert "app/config.py" not in top and "[price] table" in top


# --------------------------------------------------------------------------- goal files


def test_an_unquoted_version_in_a_goal_file_says_to_quote_it(tmp_path):
    goal = tmp_path / "goal.yaml"
    goal.write_text("goal: g\nhosts: [local]\nsuccess:\n"
                    "  - {toolkit: {path: /usr/local/cuda-13.10, version: 13.10}}\n")
    r = agent("run", str(goal))
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"{goal}:4: success[0].toolkit.version" in r.stderr
    assert 'write it in quotes: version: "13.10"' in r.stderr and "as the number 13.1;" in r.stderr


# --------------------------------------------------------------------------- help, version, completion


def _description(help_text: str) -> str:
    """The paragraph after the usage lines, unless the argument lists come straight after them."""
    paragraph = help_text.split("\n\n")[1]
    return "" if paragraph.startswith(("positional arguments:", "options:")) else paragraph


def test_demo_replay_and_show_help_describe_and_teach():
    for name in ("demo", "replay", "show", "exec", "classify", "completion"):
        out = agent(name, "--help").stdout
        assert len(_description(out).split()) >= 12, name
        examples = out.split("examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert examples and all(line.startswith((f"  agent {name}", "  source"))
                                for line in examples), (name, examples)


def test_version_prints_the_package_version():
    r = agent("--version")
    from importlib import metadata

    assert r.returncode == 0 and r.stdout == f"agent {metadata.version('upgrade-agent')}\n"
    assert package_version() == metadata.version("upgrade-agent")


def test_version_from_a_checkout_that_was_never_installed(tmp_path):
    """No package metadata anywhere on the path (-S: no site-packages; a copy without the egg-info):
    pyproject.toml beside the code says the version."""
    for part in ("app", "agent"):
        shutil.copytree(ROOT / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    text = (ROOT / "pyproject.toml").read_text()
    (tmp_path / "pyproject.toml").write_text(re.sub(r'(?m)^version = ".*"$', 'version = "7.6.5"', text, count=1))
    r = subprocess.run([sys.executable, "-S", "-m", "app.cli", "--version"], capture_output=True, text=True,
                       cwd=tmp_path, timeout=60, env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path)})
    assert r.returncode == 0 and r.stdout == "agent 7.6.5\n", r.stderr


def _bash_complete(script: Path, *words: str) -> list[str]:
    """What `agent WORDS<TAB>` offers, through the real function the script defines."""
    line = " ".join(f"'{w}'" for w in words)
    program = (f'source "$1"; COMP_WORDS=(agent {line}); COMP_CWORD={len(words)}; _agent; '
               'printf "%s\\n" "${COMPREPLY[@]}"; complete -p agent')
    r = subprocess.run(["bash", "--norc", "--noprofile", "-c", program, "bash", str(script)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    *offered, registered = r.stdout.splitlines()
    assert registered == "complete -o default -F _agent agent"
    return [w for w in offered if w]


def test_bash_completion_offers_what_the_parser_defines(tmp_path):
    r = agent("completion", "bash")
    assert r.returncode == 0
    script = tmp_path / "agent.bash"
    script.write_text(r.stdout)
    assert _bash_complete(script, "ru") == ["run"]
    assert _bash_complete(script, "run", "--pl") == ["--plan"]
    assert _bash_complete(script, "--v") == ["--version"]
    assert _bash_complete(script, "completion", "") == ["bash", "zsh"]
    assert _bash_complete(script, "run", "--transcript", "") == []  # a file name: bash's own completion
    assert _bash_complete(script, "exec", "local", "--", "ls", "-") == []  # the host's command, not our flags
    _, subs = commands(build_parser())
    assert sorted(_bash_complete(script, "")) == sorted(c.name for c in subs)
    for c in subs:
        flags = {f for o in c.options for f in o.flags}
        assert set(_bash_complete(script, c.name, "-")) == flags, c.name
    # The parser's own view, not the helper's: every option string of every subcommand.
    sub = next(a for a in build_parser()._actions if a.__class__.__name__ == "_SubParsersAction")
    for name, p in sub.choices.items():
        assert {o for a in p._actions for o in a.option_strings} == {f for c in subs if c.name == name
                                                                     for o in c.options for f in o.flags}


def test_zsh_completion_names_every_subcommand_and_option():
    r = agent("completion", "zsh")
    assert r.returncode == 0 and r.stdout.startswith("#compdef agent\n")
    assert "compdef _agent agent" in r.stdout
    _, subs = commands(build_parser())
    for c in subs:
        assert f"        '{c.name}:" in r.stdout and f"            {c.name})\n" in r.stdout
        for o in c.options:
            assert all(f in r.stdout for f in o.flags), (c.name, o.flags)
    assert agent("completion", "fish").returncode == 2


def test_every_sim_field_is_named_in_run_help_and_in_the_readme():
    from agent.goal import SimMachine
    from app.cli import SIM_FIELDS_HELP

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    for field in SimMachine.model_fields:
        assert field in SIM_FIELDS_HELP, field
        assert f"`{field}`" in readme, field
    shown = subprocess.run([sys.executable, "-m", "app.cli", "run", "--help"], capture_output=True, text=True,
                           cwd=ROOT, check=True).stdout
    assert "takes these under sim:" in shown and "free_space_mb" in shown
