"""ssh_exec end to end, over the local transport and over SSH to a real sshd."""

from __future__ import annotations

import threading

import pytest

from agent.safety.classifier import classify
from tools.base import MODEL_OUTPUT_LIMIT, ArgumentError, ArtifactStore, RiskClass, ToolContext, ToolError
from tools.hosts import HostPool, HostSpec
from tools.ssh_exec import SSHExec

from sshd import closed_port, unique_marker

pytestmark = pytest.mark.timeout(90)


@pytest.fixture(params=["local", "ssh"])
def pool(request, tmp_path) -> HostPool:
    """A pool with one host named `box`, reached through the transport under test."""
    if request.param == "local":
        p = HostPool([HostSpec(name="box", transport="local")])
        yield p
        p.close()
    else:
        world = request.getfixturevalue("ssh_world")
        world.add_host_alias("box", request.getfixturevalue("sshd"))
        yield world.pool(HostSpec(name="box"))


@pytest.fixture
def run_tool(pool, tmp_path):
    """Call ssh_exec as the loop does: parse the model's arguments, run, render."""
    events: list[tuple[str, dict]] = []
    artifacts = ArtifactStore(tmp_path / "artifacts")

    def call(raw: dict, cancel: threading.Event | None = None):
        tool = SSHExec()
        args = tool.parse_args(raw)
        ctx = ToolContext(hosts=pool, artifacts=artifacts, call_id="call_1", cancel=cancel or threading.Event(),
                          emit=lambda kind, data: events.append((kind, data)))
        result = tool.run(ctx, args)
        return result, tool.render(result)

    call.events = events
    call.artifacts = artifacts
    return call


def test_runs_and_renders(run_tool):
    result, text = run_tool({"host": "box", "command": "echo hello; echo oops >&2; exit 4"})
    assert (result.exit_code, result.stdout, result.stderr) == (4, "hello\n", "oops\n")
    assert text.startswith("exit code 4 (host box, ")
    assert "--- stdout ---\nhello\n" in text and "--- stderr ---\noops\n" in text
    assert result.stdout_artifact is None and result.stderr_artifact is None


def test_live_output_goes_to_listeners(run_tool):
    run_tool({"host": "box", "command": "printf 'caf\\303'; sleep 0.1; printf '\\251\\n'; echo e >&2"})
    outputs = [d for kind, d in run_tool.events if kind == "output"]
    assert "".join(d["text"] for d in outputs if d["stream"] == "stdout") == "café\n"
    assert [d["text"] for d in outputs if d["stream"] == "stderr"] == ["e\n"]


def test_env_cwd_and_timeout_arguments(run_tool, tmp_path):
    result, _ = run_tool({"host": "box", "command": 'echo "$GREETING"; pwd', "env": {"GREETING": "hi there"},
                          "cwd": str(tmp_path), "timeout": 30})
    assert result.stdout == f"hi there\n{tmp_path}\n"


def test_large_output_is_truncated_for_the_model_and_kept_whole(run_tool):
    result, text = run_tool({"host": "box", "command": "seq 1 200000; seq 1 50000 >&2"})
    assert result.stdout.count("\n") == 200000  # the Result keeps the whole text
    whole = run_tool.artifacts.root / result.stdout_artifact.split("/", 1)[1]
    assert whole.read_text() == result.stdout
    stdout_bytes = len(result.stdout.encode())
    assert f"bytes omitted of {stdout_bytes} bytes, 200000 lines in all; whole output in {result.stdout_artifact}" in text
    assert result.stderr_artifact and f"50000 lines in all; whole output in {result.stderr_artifact}" in text
    assert len(text) < 3 * MODEL_OUTPUT_LIMIT
    assert "\n1\n2\n3\n" in text and "199999\n200000" in text  # head and tail


def test_timeout_is_reported_and_the_process_is_gone(run_tool, behaviour):
    marker = unique_marker()
    result, text = run_tool({"host": "box", "command": f"sleep 1000 {marker}", "timeout": 1})
    assert result.timed_out and result.exit_code is None
    assert text.startswith("timed out; the command and its children were killed")
    behaviour.assert_gone(marker)


def test_operator_cancel(run_tool, behaviour):
    marker = unique_marker()
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    result, text = run_tool({"host": "box", "command": f"sleep 1000 {marker}"}, cancel=cancel)
    assert result.cancelled and text.startswith("cancelled by the operator")
    behaviour.assert_gone(marker)


def test_host_outside_the_session_is_a_tool_error(run_tool):
    with pytest.raises(ToolError, match="not in this session's hosts"):
        run_tool({"host": "elsewhere", "command": "true"})


def test_unreachable_host_is_a_tool_error(ssh_world):
    pool = ssh_world.pool(HostSpec(name="gone", target=f"127.0.0.1:{closed_port()}"))
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None))
    tool = SSHExec()
    with pytest.raises(ToolError, match="refused"):
        tool.run(ctx, tool.parse_args({"host": "gone", "command": "true"}))


def test_action_binds_env_and_cwd_into_the_subject():
    tool = SSHExec()
    plain = tool.action(tool.parse_args({"host": "gpu1", "command": "nvidia-smi"}))
    assert (plain.host, plain.subject, plain.risk) == ("gpu1", "nvidia-smi", None)
    args = tool.parse_args({"host": "gpu1", "command": "pip install torch", "env": {"PIP_INDEX_URL": "https://x y"},
                            "cwd": "/opt/app"})
    assert tool.action(args).subject == "cd /opt/app && PIP_INDEX_URL='https://x y' pip install torch"


def test_a_command_of_several_parts_gets_the_exact_env_and_cwd_forms():
    """env K with `a; b` sets K for both, and a failed cd runs neither: the subject must say so,
    so it never equals what the model could write itself with a different meaning."""
    tool = SSHExec()

    def subject(**raw):
        return tool.action(tool.parse_args({"host": "gpu1", **raw})).subject

    with_env = subject(command="apt-get update; apt-get install -y foo", env={"LD_PRELOAD": "/x.so"})
    assert with_env == "export LD_PRELOAD=/x.so; apt-get update; apt-get install -y foo"
    assert with_env != subject(command="LD_PRELOAD=/x.so apt-get update; apt-get install -y foo")
    with_cwd = subject(command="make; make install", cwd="/opt/src")
    assert with_cwd == "cd -- /opt/src || exit\nmake; make install"
    assert with_cwd != subject(command="cd /opt/src && make; make install")
    assert subject(command="nvidia-smi -L", env={"CUDA_VISIBLE_DEVICES": "0"}, cwd="/tmp") == \
        "cd /tmp && CUDA_VISIBLE_DEVICES=0 nvidia-smi -L"
    # The exact forms still classify like what runs.
    assert classify(subject(command="nvidia-smi -L; ls", cwd="/opt")).cls is RiskClass.READ_ONLY
    assert classify(with_env).cls is not RiskClass.READ_ONLY


def test_the_exact_forms_run_as_the_subject_says(run_tool, tmp_path):
    (tmp_path / "d").mkdir()
    result, _ = run_tool({"host": "box", "command": 'echo "$K"; pwd; echo "$K"', "env": {"K": "v"},
                          "cwd": str(tmp_path / "d")})
    assert result.stdout == f"v\n{tmp_path / 'd'}\nv\n"
    result, _ = run_tool({"host": "box", "command": "echo first; echo second", "cwd": str(tmp_path / "missing")})
    assert result.exit_code != 0 and result.stdout == ""  # a failed cd runs no part of the command


def test_arguments_are_strict():
    tool = SSHExec()
    with pytest.raises(ArgumentError, match="sudo: Extra inputs"):
        tool.parse_args({"host": "h", "command": "ls", "sudo": True})
    with pytest.raises(ArgumentError, match="environment variable name"):
        tool.parse_args({"host": "h", "command": "ls", "env": {"A B": "1"}})
    with pytest.raises(ArgumentError, match="timeout"):
        tool.parse_args({"host": "h", "command": "ls", "timeout": 0})
    args = tool.parse_args('{"host": "h", "command": "ls", "timeout": null, "cwd": null, "env": null}')
    assert args.timeout == 600
    # The strict schema shows env as a list of name/value pairs; they arrive as a mapping.
    pairs = tool.parse_args({"host": "h", "command": "ls", "env": [{"name": "A", "value": "1"}]})
    assert pairs.env == {"A": "1"}
    schema = tool.schema()["function"]
    assert schema["name"] == "ssh_exec" and schema["strict"] is True
    assert set(schema["parameters"]["required"]) == {"host", "command", "timeout", "cwd", "env", "outside_sandbox"}
    assert "connection_lost" in schema["description"]


def test_a_call_cancelled_before_it_starts_runs_nothing(run_tool, tmp_path):
    cancel = threading.Event()
    cancel.set()
    result, text = run_tool({"host": "box", "command": f"touch {tmp_path}/ran"}, cancel=cancel)
    assert result.cancelled and result.exit_code is None
    assert not (tmp_path / "ran").exists()
