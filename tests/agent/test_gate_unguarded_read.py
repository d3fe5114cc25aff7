"""A read run outside the read sandbox (ssh_exec outside_sandbox: true, a command the classifier judges
read-only) needs an approval and nothing else: no backup, which would undo nothing such a read could do,
and no baseline; and it is no change of its host, so a "before" measured after it is still a baseline.
A command that is not a read stays a change, outside the sandbox or in it. The real gate, fed results as
the loop feeds it (found by a played model, which had to back up and benchmark a production box before
it could read the kernel log it was asked to read first)."""

from __future__ import annotations

from agent.goal import Goal
from agent.safety.authorizations import Authorization
from agent.safety.policy import ApprovalAnswer, SafetyPolicy
from tools import default_tools
from tools.base import BackupRecord, Registry

REGISTRY = Registry(default_tools())
BENCH = {"command": "python -m sglang.bench_serving --backend sglang --num-prompts 10",
         "parser": "sglang_bench_serving"}
DMESG = "dmesg --level=err,warn"


def decide(gate: SafetyPolicy, tool: str, args: dict):
    t = REGISTRY.get(tool)
    return gate.decide(tool, t.action(t.parse_args({"host": "gpu1", **args})))


def scripted(*commands: str) -> SafetyPolicy:
    goal = Goal(goal="upgrade", hosts=[{"name": "gpu1", "transport": "sim"}],
                success=[{"throughput": {"label": "after", "compare_to": "before"}}])
    return SafetyPolicy(scope={"gpu1"}, mode="scripted", baselines=goal.baselines(),
                        authorizations=[Authorization(host="gpu1", command=c) for c in commands])


def test_an_authorized_read_outside_the_sandbox_needs_no_backup_and_no_baseline():
    gate = scripted(DMESG)
    d = decide(gate, "ssh_exec", {"command": DMESG, "outside_sandbox": True})
    assert d.allowed and d.rule == "authorized" and d.risk.rule == "outside-sandbox", d
    gate.observe("ssh_exec", d, True, "ok", {})
    assert decide(gate, "run_bench", {**BENCH, "label": "before"}).allowed, "the host is not changed by a read"


def test_it_still_needs_its_approval_and_a_change_outside_the_sandbox_still_needs_its_backup():
    gate = scripted(DMESG, "touch /etc/marker")
    unruled = decide(gate, "ssh_exec", {"command": "dmesg -T", "outside_sandbox": True})
    assert not unruled.allowed and unruled.rule != "no-backup", unruled
    change = decide(gate, "ssh_exec", {"command": "touch /etc/marker", "outside_sandbox": True})
    assert not change.allowed and change.rule in ("no-backup", "no-baseline"), change
    gate.ledger.register(BackupRecord(backup_id="bk-1", host="gpu1", kind="pip-freeze", target="python3",
                                      created_at=0.0, remote_dir="/b", files={"system.txt": "1"}, verified=True))
    bench = decide(gate, "run_bench", {**BENCH, "label": "before"})
    gate.observe("run_bench", bench, True, "ok", {"host": "gpu1", "label": "before"})
    change = decide(gate, "ssh_exec", {"command": "touch /etc/marker", "outside_sandbox": True})
    assert change.allowed and change.risk.rule != "outside-sandbox"
    gate.observe("ssh_exec", change, True, "ok", {})
    assert decide(gate, "run_bench", {**BENCH, "label": "before"}).rule == "baseline-after-change"


class _Operator:
    def __init__(self):
        self.asked = []

    def ask(self, request):
        self.asked.append(request)
        return ApprovalAnswer.YES_ONCE


def test_in_a_chat_the_operator_is_asked_without_a_backup_first():
    operator = _Operator()
    gate = SafetyPolicy(scope={"gpu1"}, mode="interactive", approver=operator)
    d = decide(gate, "ssh_exec", {"command": DMESG, "outside_sandbox": True})
    assert d.allowed and d.approved_by == "operator" and len(operator.asked) == 1, d
