"""check_outputs against the simulated host's sglang server, through the read sandbox as a session runs it.

The sim serves sglang on 127.0.0.1:30000 for a command that names the port, with the venv's own stack: a
machine told `numerics: drift` answers differently once torch is built for CUDA 13. The tool's outputs and
score before and after the cu130 wheels tell the two machines apart; the goal's outputs check judges them.
"""

from __future__ import annotations

import json

import pytest

from agent.checks import _outputs_check
from agent.goal import Goal, OutputsCheck
from agent.safety.authorizations import Authorization
from agent.safety.policy import SafetyPolicy, Verdict
from tools.base import ArtifactStore, ToolContext, ToolError
from tools.check_outputs import ANSWERS, PROMPTS, CheckOutputs
from tools.hosts import HostPool
from tools.pip_install import PipInstall
from tools.sandbox import SandboxedHosts
from tools.sim import build_sim

ENDPOINT = "http://127.0.0.1:30000"
CU130 = ["torch==2.10.0+cu130", "sgl-kernel==0.3.21+cu130", "nvidia-nccl-cu13==2.28.9", "nvidia-cuda-runtime==13.0.96"]


def call(tool, ctx, **args):
    return tool.run(ctx, tool.parse_args(args))


def _cu130(pool) -> None:
    r = pool.get("gpu").run("/opt/venv/bin/pip install -q --index-url file:///srv/pypi/simple-cu130 " + " ".join(
        f"'{p}'" for p in CU130), timeout=300)
    assert r.exit_code == 0, r.stderr[-2000:]


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Two hosts with the 13.0 toolkit on the cuda link: one whose answers drift on the cu130 build."""
    made = {}
    for numerics in ("stable", "drift"):
        sim = build_sim(tmp_path_factory.mktemp(numerics) / "gpu", toolkits=("13.0", "12.8"))
        sim.set_numerics(numerics)
        made[numerics] = sim
    return made


def _ctx(sim, store):
    pool = HostPool([sim.host_spec(name="gpu")])
    return pool, ToolContext(hosts=SandboxedHosts(pool, [30000]), artifacts=ArtifactStore(None), store=store)


@pytest.mark.parametrize("numerics", ["stable", "drift"])
def test_outputs_before_and_after_the_cu130_build_tell_a_drifting_build_apart(machines, numerics):
    sim, store = machines[numerics], {}
    pool, ctx = _ctx(sim, store)
    try:
        before = call(CheckOutputs(), ctx, host="gpu", endpoint=ENDPOINT, label="before")
        assert before.prompts == len(PROMPTS) and before.model == "moonshotai/Kimi-K2.5"
        assert before.correct == before.questions == len(ANSWERS) and before.accuracy == 1.0
        again = call(CheckOutputs(), ctx, host="gpu", endpoint=ENDPOINT, label="again", compare_to="before")
        assert again.comparison.same_outputs and again.digest == before.digest  # greedy: the same stack, the same text
        _cu130(pool)
        after = call(CheckOutputs(), ctx, host="gpu", endpoint=ENDPOINT, label="after", compare_to="before")
    finally:
        pool.close()
    if numerics == "stable":
        assert after.comparison.same_outputs and after.accuracy == 1.0, after.comparison
        assert _outputs_check(OutputsCheck(same=True), store["check_outputs"]).ok
    else:
        c = after.comparison
        assert not c.same_outputs and c.differing and c.accuracy_change < 0, c
        assert "the answers got worse" in c.verdict
        free_text = [i for i in c.differing if i >= len(ANSWERS)]
        assert free_text, "greedy text diverges once a logit moves"
        verdict = _outputs_check(OutputsCheck(), store["check_outputs"])
        assert not verdict.ok and "the score dropped by" in verdict.detail, verdict
        assert not _outputs_check(OutputsCheck(same=True, max_accuracy_drop=1.0), store["check_outputs"]).ok
        assert _outputs_check(OutputsCheck(max_accuracy_drop=1.0), store["check_outputs"]).ok


def test_a_server_that_does_not_serve_is_said_so(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    pool, ctx = _ctx(sim, {})
    try:
        with pytest.raises(ToolError, match=r"the server at http://127.0.0.1:30001 on gpu did not answer: .*"
                                            r"is it serving"):
            call(CheckOutputs(), ctx, host="gpu", endpoint="http://127.0.0.1:30001", label="before")
        with pytest.raises(ToolError, match="no outputs labelled 'before'"):
            call(CheckOutputs(), ctx, host="gpu", endpoint=ENDPOINT, label="after", compare_to="before")
    finally:
        pool.close()


def test_the_endpoint_must_be_loopback():
    with pytest.raises(Exception, match="endpoint"):
        CheckOutputs.parse_args({"host": "gpu", "endpoint": "http://10.0.0.1:30000", "label": "before"})


def test_a_goals_outputs_check_needs_its_baseline_before_the_first_change_and_refuses_it_after():
    goal = Goal.model_validate({"goal": "g", "hosts": ["sim"], "success": [
        {"outputs": {"max_accuracy_drop": 0.05}}, {"throughput": {}}]})
    assert goal.baselines() == ["before", "outputs:before"]
    rule = Authorization(host="sim", tool="pip_install", args={"packages": ["six==1.17.0"],
                                                               "index_url": "file:///srv/pypi/simple"})
    gate = SafetyPolicy(scope={"sim"}, mode="scripted", authorizations=[rule], baselines=goal.baselines())
    tool = PipInstall()
    step = tool.action(tool.parse_args({"host": "sim", "packages": ["six==1.17.0"], "index_url": "file:///srv/pypi/simple"}))
    gate.measured.measured("sim", "before")
    refused = gate.decide("pip_install", step)
    assert refused.verdict is Verdict.DENY
    assert "the goal's outputs check compares with 'before', and no check_outputs result" in refused.reason
    assert "throughput check" not in refused.reason  # its baseline was measured
    check = CheckOutputs()
    asked = check.action(check.parse_args({"host": "sim", "endpoint": ENDPOINT, "label": "before"}))
    allowed = gate.decide("check_outputs", asked)
    assert allowed.verdict is Verdict.ALLOW
    gate.observe("check_outputs", allowed, True, "ok", {"label": "before"})
    assert "no check_outputs result" not in (gate.decide("pip_install", step).reason or "")
    gate.measured.changed("sim")
    late = gate.decide("check_outputs", asked)
    assert late.verdict is Verdict.DENY and late.rule == "baseline-after-change"
    assert "what the served model answers now is not its state before the change" in late.reason
    after = check.action(check.parse_args({"host": "sim", "endpoint": ENDPOINT, "label": "after",
                                           "compare_to": "before"}))
    assert gate.decide("check_outputs", after).verdict is Verdict.ALLOW


DRIFT_GOAL = """\
goal: Move torch and sgl-kernel to their cu130 builds on gpu, and prove the server is faster and still right.
hosts:
  - name: gpu
    transport: sim
    sim: {toolkits: ["13.0", "12.8"], numerics: drift}
authorizations:
  - host: gpu
    tool: pip_install
    args: {index_url: "file:///srv/pypi/simple-cu130", packages: %s}
budget: {turns: 8}
success:
  - throughput: {label: after, compare_to: before, min_ratio: 1.0}
  - outputs: {label: after, compare_to: before, max_accuracy_drop: 0.0}
""" % json.dumps(CU130)


@pytest.mark.parametrize("checked", [True, False], ids=["outputs-checked", "throughput-only"])
def test_a_build_that_is_faster_but_answers_worse_fails_the_goal_or_says_so(tmp_path, checked):
    """`agent run` on a sim told `numerics: drift`, the model through the real openai SDK on loopback: the
    benchmark after the cu130 wheels is faster and its throughput check passes, the outputs check fails, and
    the run exits 1 naming it. A goal that checks throughput alone is met, and its verdict says what
    check_outputs measured."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from fake_openai import FakeOpenAI, Reply

    root = Path(__file__).resolve().parents[2]
    goal = tmp_path / "goal.yaml"
    goal.write_text(DRIFT_GOAL if checked else DRIFT_GOAL.split("  - outputs:")[0])
    bench = "python -m sglang.bench_serving --backend sglang --dataset-name random --num-prompts 50"

    def run_bench(label, cuda):
        return ("run_bench", {"host": "gpu", "command": bench, "parser": "sglang_bench_serving", "label": label,
                              "runs": 2, "warmup": 0, "env": {"CUDA_HOME": f"/usr/local/cuda-{cuda}"},
                              **({"compare_to": "before"} if label == "after" else {})})

    outputs = {"host": "gpu", "endpoint": ENDPOINT}
    replies = [Reply(calls=[("inspect_host", {"host": "gpu"}), ("check_outputs", {**outputs, "label": "before"}),
                            run_bench("before", "12.8")]),
               Reply(calls=[("pip_freeze_backup", {"host": "gpu"})]),
               Reply(calls=[("pip_install", {"host": "gpu", "index_url": "file:///srv/pypi/simple-cu130",
                                             "packages": CU130})]),
               Reply(calls=[("check_outputs", {**outputs, "label": "after", "compare_to": "before"}),
                            run_bench("after", "13.0")]),
               Reply(text="Upgraded: faster.")]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "EXA_", "UPGRADE_AGENT"))}
    with FakeOpenAI(replies) as srv:
        env.update(PYTHONPATH=str(root), HOME=str(tmp_path), OPENAI_API_KEY="x", OPENAI_BASE_URL=srv.base_url)
        r = subprocess.run([sys.executable, "-m", "app.cli", "run", str(goal), "--transcript",
                            str(tmp_path / "t.jsonl")], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    out = r.stdout + r.stderr
    events = [json.loads(line) for line in (tmp_path / "t.jsonl").read_text().splitlines()]
    failed = [e for e in events if e["type"] == "tool_result" and not e["ok"]]
    assert not failed, [e.get("content", "")[:400] for e in failed]
    checks = {e["kind"]: e for e in events if e["type"] == "check"}
    assert checks["throughput"]["ok"], checks["throughput"]
    end = next(e for e in events if e["type"] == "goal_result")
    if checked:
        assert not checks["outputs"]["ok"] and "the score dropped by" in checks["outputs"]["detail"], checks
        assert end["met"] is False and end["exit_code"] == 1 and r.returncode == 1, (end, out[-3000:])
        assert "outputs check 2" in end["reason"], end
    else:
        assert end["met"] is True and r.returncode == 0, (end, out[-3000:])
        assert "but check_outputs found the served model answering worse on gpu: after " in end["reason"], end
        assert "add an `outputs` check" in end["reason"], end
        # Its recipe asks each host as the canary asked its server, and holds each to no lower a score than its own
        # before (the canary's answers changed, so not to the same outputs).
        from agent.fleet.recipe import recipe_from_transcript

        recipe = recipe_from_transcript(tmp_path / "t.jsonl")
        assert recipe.outputs is not None and recipe.outputs.endpoint == ENDPOINT, recipe.outputs
        (judged,) = [c.outputs for c in recipe.checks if c.outputs is not None]
        assert (judged.label, judged.compare_to, judged.same, judged.max_accuracy_drop) == ("after", "before", False,
                                                                                           0.0)


def _dripping_server():
    """A server on a free loopback port that answers /v1/models at once and drips each completion a byte a second."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Drip(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            body = b'{"data": [{"id": "m"}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            import time

            self.rfile.read(int(self.headers["Content-Length"]))
            body = b'{"choices": [{"text": " 42"}]}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Drip)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_a_server_that_drips_is_stopped_at_the_checks_own_timeout_for_every_prompt_together():
    import time

    from tools.hosts import HostSpec

    server = _dripping_server()
    pool = HostPool([HostSpec(name="here", transport="local")])
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
    began = time.monotonic()
    try:
        with pytest.raises(ToolError, match=r"no whole answer within the check's timeout \(3 s for all 16 prompts\)"):
            call(CheckOutputs(), ctx, host="here", endpoint=f"http://127.0.0.1:{server.server_port}", label="before",
                 timeout=3)
    finally:
        pool.close()
        server.shutdown()
    assert time.monotonic() - began < 10  # a socket timeout per read alone would wait a second per byte, forever


def test_the_sandbox_relays_the_endpoints_port_only_and_labels_are_plain_words():
    from agent.batch import read_ports

    tool = CheckOutputs()
    args = tool.parse_args({"host": "gpu", "endpoint": "http://[::1]:8000/", "label": "before", "model": "m"})
    assert read_ports(tool, args, '{"model": "see http://127.0.0.1:6379"}') == [8000]
    assert read_ports(tool, tool.parse_args({"host": "gpu", "endpoint": "http://127.0.0.1:99999", "label": "b"}),
                      "") == []  # no such port: the client says it could not connect
    for label in ("\u202eerofeb", "b\u0435fore", "after\nok", "../x", "a" * 65, ""):
        with pytest.raises(Exception, match="label"):
            tool.parse_args({"host": "gpu", "endpoint": ENDPOINT, "label": label})
    with pytest.raises(Exception, match="model"):
        tool.parse_args({"host": "gpu", "endpoint": ENDPOINT, "label": "before", "model": "m" * 257})


def test_outputs_asked_of_another_model_or_length_are_not_compared():
    before = {"model": "a", "max_tokens": 24, "outputs": ["1"], "digest": "d", "accuracy": 1.0, "correct": 12,
              "questions": 12}
    verdict = _outputs_check(OutputsCheck(), {"before": before, "after": {**before, "model": "b"}})
    assert not verdict.ok and "not asked alike (before was asked of model 'a', not 'b')" in verdict.detail
    assert _outputs_check(OutputsCheck(same=True), {"before": before, "after": dict(before)}).ok
