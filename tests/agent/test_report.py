"""Reports from real sessions: a scripted model drives the real tools on the simulated GPU host,
and the Markdown and HTML reports are checked against what the transcript recorded. The HTML
page is rendered by a real headless Chromium and the screenshot is read back pixel by pixel."""

from __future__ import annotations

import json
import re
import shutil
import statistics
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest

from agent.budget import Budget
from agent.loop import Session
from agent.model import ScriptedModel, turn
from agent.record.transcript import TranscriptWriter
from agent.report import CHART_COLOURS, build_report, render_html, render_markdown, report_path, write_report
from agent.safety.policy import ApprovalAnswer, Authorization, SafetyPolicy
from tools.base import ArtifactStore, Registry, ToolContext
from tools.hosts import HostPool
from tools.inspect_host import InspectHost
from tools.install_runfile import InstallRunfile
from tools.pip_freeze_backup import PipFreezeBackup, parse_freeze
from tools.restore_backup import RestoreBackup, restore_plan
from tools.run_bench import RunBench
from tools.sim import build_sim
from tools.ssh_exec import SSHExec

from browser import chromium_screenshot, pixels_of, read_png
from helpers import events

PLANTED = "<script>alert(1)</script>"
PLANTED_DETAIL = 'stdout: <img src=x onerror="alert(2)"> | ok'
FINAL_ANSWER = ("CUDA 13.0 sits beside 12.8 and torch moved to cu130; the `rm -rf` of 12.8 was refused. "
                "Output seen: " + PLANTED)


def registry() -> Registry:
    return Registry([SSHExec(), InspectHost(), PipFreezeBackup(), RestoreBackup(), InstallRunfile(), RunBench()])


@dataclass
class Upgrade:
    path: Path
    sim: object
    bench: str
    install: str
    markdown: str


@pytest.fixture(scope="module")
def upgrade(tmp_path_factory) -> Upgrade:
    """The story's upgrade as a scripted run: inspect, a refused install, backup, benchmark, toolkit, torch
    cu130, a refused `rm -rf`, benchmark again; then the end-of-run events `agent run` writes."""
    tmp = tmp_path_factory.mktemp("upgrade")
    sim = build_sim(tmp / "gpu")
    pool = HostPool([sim.host_spec()])
    bench = f"{sim.python} -m sglang.bench_serving --backend sglang --num-prompts 10"
    install = (f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} "
               f"torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130")
    runfile = {"host": "sim", "runfile": sim.runfiles["13.0"].url, "checksum": sim.runfiles["13.0"].md5,
               "version": "13.0"}
    bench_args = {"host": "sim", "command": bench, "parser": "sglang_bench_serving", "runs": 3, "warmup": 0}
    model = ScriptedModel([
        turn("Checking the host first.", calls=[("inspect_host", {"host": "sim"}),
                                                ("ssh_exec", {"host": "sim", "command": f"echo '{PLANTED}'"})]),
        turn(calls=[("install_runfile", runfile)]),  # refused: no backup yet
        turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
        turn(calls=[("run_bench", {**bench_args, "label": "before"})]),
        turn(calls=[("install_runfile", runfile)]),
        turn(calls=[("ssh_exec", {"host": "sim", "command": install}),
                    ("ssh_exec", {"host": "sim", "command": "rm -rf /usr/local/cuda-12.8"})]),
        turn(calls=[("run_bench", {**bench_args, "label": "after", "compare_to": "before",
                                   "env": {"CUDA_HOME": "/usr/local/cuda-13.0"}})]),
        turn(FINAL_ANSWER),
    ])
    # The benchmark runs the venv's python at the path a real host has it (/opt/venv/bin/python), which
    # the classifier takes for a benchmark workload: it is read-only and needs no authorization.
    gate = SafetyPolicy(scope={"sim"}, authorizations=[
        Authorization(host="sim", tool="install_runfile", args={"version": "13.0", "runfile": "file://*"}),
        Authorization(host="sim", command=install),
    ])
    path = tmp / "upgrade.jsonl"
    session = Session(model=model, registry=registry(), gate=gate, transcript=TranscriptWriter(path), hosts=pool,
                      budget=Budget(turns=12),
                      start_info={"goal": "Upgrade the CUDA toolkit to 13.0 beside 12.8 and move torch to cu130.",
                                  "goal_file": "goal.yaml", "command": "run"})
    outcome = session.send("Upgrade the CUDA toolkit to 13.0 beside 12.8 and move torch to cu130.")
    assert outcome.status == "done", outcome

    # What `agent run` records after the conversation: the final state and the goal's checks.
    ctx = ToolContext(hosts=pool, artifacts=ArtifactStore(None), store={})
    final = InspectHost().run(ctx, InspectHost().parse_args({"host": "sim"}))
    freeze = pool.get("sim").run(f"{sim.python} -m pip freeze --all")
    assert freeze.ok, freeze.stderr
    session.emit("final_state", host="sim", python=sim.python, freeze=freeze.stdout,
                 inspect=final.model_dump(mode="json"), error=None)
    session.emit("check", index=0, kind="toolkit", spec={"host": "sim", "path": "/usr/local/cuda-13.0",
                                                         "version": "13.0"}, ok=True, detail="nvcc reports 13.0")
    session.emit("check", index=1, kind="command", spec={"run": "nvidia-smi"}, ok=False, detail=PLANTED_DETAIL)
    session.emit("goal_result", met=False, exit_code=1, reason="1 of 2 checks failed")
    session.close(outcome.status, outcome.reason)
    return Upgrade(path=path, sim=sim, bench=bench, install=install, markdown=render_markdown(build_report(path)))


def section(markdown: str, heading: str) -> str:
    """The text under a `## heading` of the report, up to the next one."""
    return markdown.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(markdown: str, first_cell: str) -> list[list[str]]:
    """Cells of the Markdown table rows whose first cell is `first_cell`."""
    rows = []
    for line in markdown.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if line.startswith("|") and cells[0] == first_cell:
            rows.append(cells)
    return rows


# --------------------------------------------------------------------------- Markdown


def test_benchmark_figures_are_the_recorded_ones(upgrade):
    results = {e["data"]["label"]: e["data"] for e in events(upgrade.path, "tool_result") if e["tool"] == "run_bench"
               and e["ok"]}
    before, after = results["before"]["values"], results["after"]["values"]
    assert len(before) == len(after) == 3
    ratio = statistics.median(after) / statistics.median(before)
    assert ratio > 1.03, "the sim's cu130 stack is faster; the scenario did not upgrade"
    benchmarks = section(upgrade.markdown, "Benchmarks")
    [row] = table_rows(benchmarks, "output\\_throughput (tok/s)")
    assert row[1] == f"before: {statistics.median(before):.6g}"
    assert row[2] == f"after: {statistics.median(after):.6g}"
    assert row[3] == f"{ratio:.4f}" and row[4] == f"{(ratio - 1) * 100:+.2f}%"
    spread_before = max(before) - min(before)
    assert row[5].startswith(f"{spread_before:.6g} ("), row[5]
    assert row[6].startswith(f"{max(after) - min(after):.6g} ("), row[6]
    assert row[7] == ("**yes**" if min(after) > max(before) else "no")
    assert row[9] == "turn 4, call 1 / turn 7, call 1"
    [measured] = table_rows(benchmarks, "`before`")
    assert measured[4] == ", ".join(f"{v:.6g}" for v in before) and measured[9] == "turn 4, call 1"


def test_packages_before_and_after_come_from_the_backup_and_the_final_state(upgrade):
    md = upgrade.markdown
    assert table_rows(md, "`torch`") == [["`torch`", "`2.10.0+cu128`", "`2.10.0+cu130`", "changed"]]
    assert table_rows(md, "`sgl-kernel`") == [["`sgl-kernel`", "`0.3.21+cu128`", "`0.3.21+cu130`", "changed"]]
    assert not table_rows(md, "`sglang`"), "unchanged packages are not listed"
    backup = events(upgrade.path, "backup")[0]
    assert f"Before: backup `{backup['backup_id']}` (turn 3, call 1)" in md


def test_toolkit_added_beside_the_old_one_and_the_symlink_unchanged(upgrade):
    md = upgrade.markdown
    new, old = "/usr/local/cuda-13.0", "/usr/local/cuda-12.8"
    assert table_rows(md, f"`{new}`") == [[f"`{new}`", "`13.0`", "no", "yes", "added"]]
    assert table_rows(md, f"`{old}`") == [[f"`{old}`", "`12.8`", "yes", "yes", "unchanged"]]
    assert f"`cuda` symlink: `{old}` before, `{old}` after (unchanged)." in md


def test_approvals_name_who_gave_them_and_refusals_are_listed(upgrade):
    approvals, refusals = section(upgrade.markdown, "Approvals"), section(upgrade.markdown, "Refused steps")
    approved = {row[0]: row for step in ("turn 4, call 1", "turn 5, call 1", "turn 6, call 1", "turn 7, call 1")
                for row in table_rows(approvals, step)}
    assert set(approved) == {"turn 5, call 1", "turn 6, call 1"}  # the benchmarks are read-only
    assert approved["turn 5, call 1"][5] == "`goal:authorizations[0]`"
    assert approved["turn 6, call 1"][5] == "`goal:authorizations[1]`"
    assert approved["turn 6, call 1"][4] == f"`{upgrade.install}`"
    backup_id = events(upgrade.path, "backup")[0]["backup_id"]
    assert all(row[6] == f"`{backup_id}`" for row in approved.values())

    refused = {row[0]: row for step in ("turn 2, call 1", "turn 6, call 2") for row in table_rows(refusals, step)}
    assert len(refused) == 2 and len(table_rows(refusals, "turn 6, call 1")) == 0
    assert refused["turn 2, call 1"][1] == "`install_runfile`" and refused["turn 2, call 1"][5] == "`no-backup`"
    rm = refused["turn 6, call 2"]
    assert rm[3] == "destructive" and rm[5] == "`not-authorized`"
    assert rm[4] == "`rm -rf /usr/local/cuda-12.8`"


def test_rollback_commands_name_the_real_backup_and_paths(upgrade):
    md, sim = upgrade.markdown, upgrade.sim
    backup = events(upgrade.path, "backup")[0]
    assert f'restore_backup {{"host": "sim", "backup_id": "{backup["backup_id"]}"}}' in md
    assert f"`{backup['remote_dir']}`" in md
    assert (f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu128']} "
            f"sgl-kernel==0.3.21+cu128 torch==2.10.0+cu128") in md.splitlines()
    assert "rm -rf /usr/local/cuda-13.0" in md.splitlines()
    assert "ln -sfn" not in md, "the symlink never moved, so there is nothing to point back"
    # The commands do what they say: run on the host, the freeze is the backup's again.
    host = HostPool([sim.host_spec()]).get("sim")
    commands = section(md, "Rollback").split("```sh\n", 1)[1].split("\n```", 1)[0]
    for command in commands.splitlines():
        assert host.run(command).ok, command
    after = host.run(f"{sim.python} -m pip freeze --all").stdout
    assert after == (sim.sys_path(backup["remote_dir"]) / "freeze.txt").read_text()
    # Put the upgrade back for the other tests of this module.
    assert host.run(upgrade.install).ok


def test_summary_outcome_and_final_answer(upgrade):
    md = upgrade.markdown
    end = events(upgrade.path, "session_end")[0]
    assert md.startswith("# Session report: Upgrade the CUDA toolkit to 13.0 beside 12.8 and move torch to cu130.")
    assert f"| **Transcript** | `{upgrade.path}` |" in md
    # Written here, so sealed by this machine's key, and the report says so (the chain alone proves less).
    assert (f"| **Integrity** | **hash chain verified**, {end['seq'] + 1} events; **sealed by this machine's key: "
            "intact** |") in md
    assert "| **Status** | **done**: final answer |" in md
    assert (f"| **Totals** | {end['turns']} turns, {end['calls']} calls proposed ({end['tool_calls']} run, 2 refused, "
            f"0 malformed, 0 failed), {end['tokens']} tokens, ") in md
    assert "| **Goal** | **NOT met** |" in md and "**Goal NOT met** (exit code 1): 1 of 2 checks failed" in md
    assert table_rows(section(md, "Goal"), "1")[0][3] == "**FAILED**"
    assert "```text\n" + FINAL_ANSWER + "\n```" in md and "Turn 8:" in md


def test_markdown_holds_no_html(upgrade):
    """Transcript text stays inert: inside code, or with every `<` escaped."""
    outside = []
    in_fence = False
    for line in upgrade.markdown.splitlines():
        if line.startswith("```"):
            in_fence = not in_fence
            continue
        if not in_fence:
            outside.append(re.sub(r"(`+)(.+?)\1", "", line))
    text = "\n".join(outside)
    assert "\\<img src=x onerror=\"alert(2)\"\\> \\| ok" in text  # the planted check detail, escaped
    assert not re.search(r"(?<!\\)<", text), [ln for ln in outside if re.search(r"(?<!\\)<", ln)]


def test_write_report_puts_it_beside_the_transcript(upgrade, tmp_path):
    copy = tmp_path / "t.jsonl"
    shutil.copy(upgrade.path, copy)
    written = write_report(copy)
    assert written == report_path(copy) == tmp_path / "t.report.md"
    assert written.read_text() == render_markdown(build_report(copy))


def test_a_changed_transcript_is_reported_as_damaged(upgrade, tmp_path):
    lines = upgrade.path.read_bytes().splitlines(keepends=True)
    n = next(i for i, line in enumerate(lines) if b'"type":"backup"' in line)
    copy = tmp_path / "t.jsonl"
    copy.write_bytes(b"".join(lines[:n] + [lines[n].replace(b'"verified":true', b'"verified":false')] + lines[n + 1:]))
    md = render_markdown(build_report(copy))
    assert f"| **Integrity** | **DAMAGED** ({len(lines)} events): line {n + 1} was changed or removed" in md


# --------------------------------------------------------------------------- the operator


class ScriptedOperator:
    """Answers the gate the way the operator at a terminal would, recording each answer as `chat` does."""

    def __init__(self, answers: dict[str, ApprovalAnswer]):
        self.answers = answers  # a word of the subject -> the answer
        self.session: Session | None = None

    def ask(self, request):
        answer = next(a for word, a in self.answers.items() if word in request.subject)
        self.session.emit("approval", host=request.host, tool=request.tool, subject=request.subject,
                          answer=answer.value, by="operator")
        return answer


@pytest.fixture(scope="module")
def chat(tmp_path_factory) -> Upgrade:
    """An interactive session: the operator approves torch cu130 and a toolkit that takes over the `cuda`
    link, and declines deleting the old toolkit. No final state is recorded (a chat has no end checks)."""
    tmp = tmp_path_factory.mktemp("chat")
    sim = build_sim(tmp / "gpu")
    install = (f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu130']} "
               f"torch==2.10.0+cu130 sgl-kernel==0.3.21+cu130")
    model = ScriptedModel([
        turn(calls=[("pip_freeze_backup", {"host": "sim"})]),
        turn(calls=[("ssh_exec", {"host": "sim", "command": install}),
                    ("ssh_exec", {"host": "sim", "command": "rm -rf /usr/local/cuda-12.8"})]),
        turn(calls=[("install_runfile", {"host": "sim", "runfile": sim.runfiles["13.0"].url, "version": "13.0",
                                         "checksum": sim.runfiles["13.0"].md5, "move_symlink": True})]),
        turn("torch is on cu130 and cuda points at 13.0; the old toolkit stays, as you asked."),
    ])
    operator = ScriptedOperator({"pip install": ApprovalAnswer.YES_SESSION, "rm -rf": ApprovalAnswer.NO,
                                 "install_runfile": ApprovalAnswer.YES_ONCE})
    gate = SafetyPolicy(scope={"sim"}, mode="interactive", approver=operator)
    path = tmp / "chat.jsonl"
    session = Session(model=model, registry=registry(), gate=gate, transcript=TranscriptWriter(path),
                      hosts=HostPool([sim.host_spec()]), start_info={"command": "chat"})
    operator.session = session
    assert session.send("move torch to cu130").status == "done"
    session.close("done", "operator left")
    return Upgrade(path=path, sim=sim, bench="", install=install, markdown=render_markdown(build_report(path)))


def test_operator_approvals_and_refusals(chat):
    md = chat.markdown
    [approved] = table_rows(section(md, "Approvals"), "turn 2, call 1")
    assert approved[5] == "`operator (session)`; operator answered 'session'"
    [toolkit] = table_rows(section(md, "Approvals"), "turn 3, call 1")
    assert toolkit[3] == "destructive" and toolkit[5] == "`operator`; operator answered 'yes'"
    [declined] = table_rows(section(md, "Refused steps"), "turn 2, call 2")
    assert declined[5] == "`declined`" and declined[6].endswith("(operator answered 'no')")
    assert "# Session report: move torch to cu130" in md  # a chat has no goal file: its first request


def test_without_a_final_state_the_rollback_reinstalls_the_whole_freeze_and_moves_the_link_back(chat):
    md, sim = chat.markdown, chat.sim
    backup = events(chat.path, "backup")[0]
    old, new, link = "/usr/local/cuda-12.8", "/usr/local/cuda-13.0", "/usr/local/cuda"
    assert "**The after state is unknown**" in md
    assert f"`cuda` symlink: `{old}` before, `{new}` after (moved)." in md
    packages, toolkits = (block.split("\n```", 1)[0].splitlines()
                          for block in section(md, "Rollback").split("```sh\n")[1:])
    assert packages == [
        f"{sim.python} -m pip install --no-deps --index-url {sim.index_urls['cu128']} "
        f"sgl-kernel==0.3.21+cu128 torch==2.10.0+cu128",
        f"{sim.python} -m pip install --no-deps -r {backup['remote_dir']}/freeze.txt",
    ]
    assert toolkits == [f"ln -sfn {old} {link}", f"rm -rf {new}"]
    host = HostPool([sim.host_spec()]).get("sim")
    for command in packages + toolkits:
        assert host.run(command).ok, command
    assert host.run(f"{sim.python} -m pip freeze --all").stdout == (sim.sys_path(backup["remote_dir"]) / "freeze.txt").read_text()
    assert host.run(f"readlink {link}").stdout.strip() == old and not host.run(f"test -e {new}").ok
    assert not sim.sys_path(new).exists(), "the rollback ran in the sim"


@pytest.mark.parametrize("session", ["upgrade", "chat"])
def test_the_printed_package_rollback_is_restore_backups_own_plan(session, request):
    """The rollback by hand is what restore_backup would run, read from the backup as the tool reads it:
    against the recorded final freeze (the upgrade) or, with none recorded, for an unknown state (the chat)."""
    run: Upgrade = request.getfixturevalue(session)
    backup = events(run.path, "backup")[0]
    remote = run.sim.sys_path(backup["remote_dir"])
    manifest = json.loads((remote / "manifest.json").read_text())
    indexes = json.loads((remote / "indexes.json").read_text())
    want = parse_freeze((remote / "freeze.txt").read_text())
    finals = events(run.path, "final_state")
    have = parse_freeze(finals[0]["freeze"]) if finals else None
    plan = restore_plan(manifest["python"], want, indexes, backup["remote_dir"], have)
    assert plan.commands, "the session changed the packages: there is something to roll back"
    printed = section(run.markdown, "Rollback").split("```sh\n", 1)[1].split("\n```", 1)[0].splitlines()
    assert printed == plan.lines


def test_the_backup_copy_is_found_beside_a_moved_transcript_and_missing_is_said(chat, tmp_path):
    backup = events(chat.path, "backup")[0]
    artifacts = chat.path.with_name("chat.artifacts")
    moved = tmp_path / "moved"
    moved.mkdir()
    shutil.copy(chat.path, moved / "chat.jsonl")
    shutil.copytree(artifacts, moved / "chat.artifacts")
    hidden = artifacts.with_name("chat.artifacts.hidden")
    artifacts.rename(hidden)
    try:
        report = build_report(moved / "chat.jsonl")
        assert report.backups[0].local_dir == moved / "chat.artifacts" / f"backup-{backup['backup_id']}"
        missing = render_markdown(build_report(chat.path))
        assert "**The before state is missing**: no copy of the backup was found beside the transcript" in missing
        assert f"it is on sim at {backup['remote_dir']}" in missing.replace("\\", "")
    finally:
        hidden.rename(artifacts)


# --------------------------------------------------------------------------- HTML


class PageParser(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def parse_page(text: str) -> PageParser:
    p = PageParser()
    p.feed(text)
    p.close()
    return p


def test_html_is_one_self_contained_page_with_the_transcript_escaped(upgrade, tmp_path):
    out = tmp_path / "page.html"
    text = render_html(build_report(upgrade.path), out)
    assert out.read_text() == text
    page = parse_page(text)
    names = [t for t, _ in page.tags]
    assert "script" not in names and "link" not in names and "img" not in names and "iframe" not in names
    assert not [a for _, attrs in page.tags for k, a in attrs.items() if k in ("src", "href") or k.startswith("on")]
    csp = [a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert csp and "default-src 'none'" in csp[0]["content"]
    assert any(a.get("name") == "viewport" for t, a in page.tags if t == "meta")
    data = "".join(page.text)
    assert PLANTED in data and PLANTED_DETAIL in data, "planted markup must arrive as text"
    assert text.count("<script") == 0

    # The chart: one bar per measured run in the label's colour, heights proportional to the values.
    bars = [a for t, a in page.tags if t == "rect" and a.get("fill") in CHART_COLOURS]
    results = {e["data"]["label"]: e["data"]["values"] for e in events(upgrade.path, "tool_result")
               if e["tool"] == "run_bench" and e["ok"]}
    assert [b["fill"] for b in bars] == [CHART_COLOURS[0]] * 3 + [CHART_COLOURS[1]] * 3
    heights = [float(b["height"]) for b in bars]
    for h, v in zip(heights, results["before"] + results["after"]):
        assert h / heights[0] == pytest.approx(v / results["before"][0], abs=0.002)
    # Outputs are folded: every call's arguments, every result with content, and the final state.
    calls = len(events(upgrade.path, "tool_call"))
    outputs = sum(1 for e in events(upgrade.path, "tool_result") if e["content"])
    assert names.count("details") == calls + outputs + len(events(upgrade.path, "final_state"))
    assert names.index("svg") < names.index("ol"), "the chart comes before the timeline"


def test_a_real_browser_draws_the_chart(upgrade, tmp_path):
    page = tmp_path / "page.html"
    render_html(build_report(upgrade.path), page)
    results = {e["data"]["label"]: e["data"]["values"] for e in events(upgrade.path, "tool_result")
               if e["tool"] == "run_bench" and e["ok"]}

    png = tmp_path / "wide.png"
    chromium_screenshot(page, png, 1200, 1600, tmp_path)
    width, height, rows = read_png(png)
    assert (width, height) == (1200, 1600)
    before, after = pixels_of(rows, CHART_COLOURS[0]), pixels_of(rows, CHART_COLOURS[1])
    assert len(before) > 3000 and len(after) > 3000, "the bars are not on the first screen"

    def box(points):
        xs, ys = [x for x, _ in points], [y for _, y in points]
        return min(xs), max(xs), min(ys), max(ys)

    bx0, bx1, by0, by1 = box(before)
    ax0, ax1, ay0, ay1 = box(after)
    assert bx1 < ax0, "the after bars stand right of the before bars"
    assert abs(by1 - ay1) <= 1, "all bars stand on the same axis"
    # Bars start at zero: the tallest bar of each label is as tall as its largest value says.
    drawn = (ay1 - ay0 + 1) / (by1 - by0 + 1)
    assert drawn == pytest.approx(max(results["after"]) / max(results["before"]), abs=0.02)

    narrow = tmp_path / "narrow.png"
    chromium_screenshot(page, narrow, 400, 1600, tmp_path)
    width, _, rows = read_png(narrow)
    assert width == 400
    narrow_before, narrow_after = pixels_of(rows, CHART_COLOURS[0]), pixels_of(rows, CHART_COLOURS[1])
    assert narrow_before and narrow_after, "on a narrow screen the chart shrinks but stays"
    assert max(x for x, _ in narrow_after) < 400


def test_a_session_that_ran_out_of_turns_says_what_it_lacks(tmp_path):
    sim = build_sim(tmp_path / "gpu")
    model = ScriptedModel([turn("Looking at the host before anything else.",
                                calls=[("inspect_host", {"host": "sim"})])])
    path = tmp_path / "short.jsonl"
    session = Session(model=model, registry=registry(), gate=SafetyPolicy(scope={"sim"}),
                      transcript=TranscriptWriter(path), hosts=HostPool([sim.host_spec()]), budget=Budget(turns=1))
    outcome = session.send("upgrade CUDA")
    assert outcome.status == "budget"
    session.close(outcome.status, outcome.reason)
    md = render_markdown(build_report(path))
    assert "| **Status** | **budget**: turn budget of 1 reached |" in md
    assert "No benchmark finished in this session." in md
    assert "No step that changes a host ran." in md
    assert "no backup was taken and no toolkit was installed" in md
    assert ("The model never gave one; the last thing it said (turn 1):\n\n```text\n"
            "Looking at the host before anything else.\n```") in md


def test_the_markdown_report_runs_no_control_sequence_of_a_host_or_a_model(tmp_path):
    """`cat T.report.md` in a terminal: what the model said and the hosts printed is written out (`^[`)."""
    model = ScriptedModel([turn("\x1b[2K\x1b[1A\x1b[32mGOAL MET - exit code 0\x1b[0m\x1b]0;pwned\x07 the host is fine")])
    path = tmp_path / "hostile.jsonl"
    session = Session(model=model, registry=registry(), gate=SafetyPolicy(scope={"sim"}),
                      transcript=TranscriptWriter(path), budget=Budget(turns=2))
    outcome = session.send("say something")
    session.close(outcome.status, outcome.reason)
    text = write_report(path, build_report(path)).read_text()
    assert "\x1b" not in text and "\x07" not in text, repr(text[:400])
    assert "^[[32mGOAL MET" in text


def test_the_html_report_shows_hidden_characters_written_out():
    """A browser reads a right-to-left override as a terminal does: the page shows it written out."""
    from agent.report.chart import esc

    assert esc("echo safe \u202e/ fr- mr\u202c <b>\x1b[2J") == "echo safe &lt;U+202E&gt;/ fr- mr&lt;U+202C&gt; &lt;b&gt;^[[2J"
