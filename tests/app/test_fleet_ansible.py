"""`agent recipe RECIPE --ansible`: the exported playbook, run by the real ansible-playbook on sandboxed sims,
ends each host as `agent fleet` ends it.

The recipe is read from the committed canary run (transcripts/cuda13-upgrade.jsonl, the seed's CUDA 12.8 ->
13.0 upgrade). Both engines get the same five machines: two plain ones, one without a compiler (its step fails,
it is restored from its backup), one whose driver differs (held, unchanged), one without a route to PyPI (its
backup's rehearsal finds that a restore could not fetch its pins: held, nothing changed).
Ansible reaches its sims through the upgrade_agent_sim connection (the same bubblewrap sandbox).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from ansible_sims import ansible_env, ansible_playbook, recap, sims_for_ansible, tree

from agent.fleet.ansible import ExportError, _quoted, playbook
from agent.fleet.recipe import dump_recipe, load_recipe, recipe_from_transcript
from tools.hosts.sim import SimHost

ROOT = Path(__file__).resolve().parents[2]
CANARY = ROOT / "transcripts" / "cuda13-upgrade.jsonl"
MACHINES = {"gpu01": {}, "gpu02": {}, "gpu03": {"gcc": None}, "gpu04": {"driver": "580.95.05"},
            "gpu05": {"pypi_reachable": False}}
WANT = {"gpu01": "changed", "gpu02": "changed", "gpu03": "failed", "gpu04": "held", "gpu05": "held"}


def agent(*args: str, home: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app.cli", *args], capture_output=True, text=True,
                          env=ansible_env(home), timeout=timeout, cwd=ROOT, check=False)


def agent_inventory(path: Path, machines: dict[str, dict]) -> Path:
    lines = ["[gpu]"] + [name + (f" agent_sim='{json.dumps(m)}'" if m else "") for name, m in machines.items()]
    path.write_text("\n".join(lines + ["", "[gpu:vars]", "agent_transport=sim"]) + "\n")
    return path


def status_from_recap(counts: dict[str, int]) -> str:
    if counts.get("failed") or counts.get("unreachable"):
        return "failed"
    return "changed" if counts.get("changed") else "held"


def end_state(root: Path, name: str) -> dict:
    """What an upgrade changes, read on the sim itself: the venv's packages, the toolkits, the cuda link."""
    from tools.sim import Sim

    host = SimHost(Sim.open(root).host_spec(name))
    freeze = host.run("python -m pip freeze --all", timeout=120)
    assert freeze.ok, freeze.stderr
    kits = host.run("ls -d /usr/local/cuda-*; readlink /usr/local/cuda", timeout=60)
    return {"freeze": sorted(freeze.stdout.split()), "toolkits": kits.stdout.split()}


@pytest.fixture(scope="module")
def recipe_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("recipe") / "cuda13.recipe.yaml"
    path.write_text(dump_recipe(recipe_from_transcript(CANARY)))
    return path


def test_the_playbook_runs_the_recipe_on_sims_and_ends_each_host_as_agent_fleet_does(recipe_file, tmp_path):
    book = tmp_path / "cuda13.yml"
    made = agent("recipe", str(recipe_file), "--ansible", "--canary", "1", "--batch", "3", "--max-fail", "50",
                 "-o", str(book), home=tmp_path)
    assert made.returncode == 0 and "playbook:" in made.stderr, made.stderr

    inventory, roots = sims_for_ansible(tmp_path / "ansible", MACHINES)
    played = ansible_playbook(inventory, book, tmp_path)
    counts = recap(played.stdout)
    assert set(counts) == set(MACHINES), played.stdout[-3000:]
    assert {h: status_from_recap(c) for h, c in counts.items()} == WANT, played.stdout[-4000:]
    assert played.returncode == 2  # ansible-playbook's "a host failed"
    assert counts["gpu03"]["rescued"] == 1 and "rolled back: step 1 of 2: install_runfile failed: no gcc on PATH" \
        in played.stdout
    assert "held: driver is '580.95.05', the recipe was proven on '590.48.01'" in played.stdout
    assert "held: its backup's rehearsal found pins a restore could not fetch again" in played.stdout

    out = tmp_path / "rollout"
    fleet = agent("fleet", str(recipe_file), "-i", str(agent_inventory(tmp_path / "hosts.ini", MACHINES)),
                  "--canary", "1", "--batch", "3", "--max-fail", "50", "--dir", str(out), home=tmp_path)
    assert fleet.returncode == 1, fleet.stderr[-3000:]
    hosts = {e["host"]: e["status"] for e in map(json.loads, (out / "fleet.jsonl").read_text().splitlines())
             if e["type"] == "fleet_host"}
    assert hosts == WANT
    reasons = {e["host"]: e["reason"] for e in map(json.loads, (out / "fleet.jsonl").read_text().splitlines())
               if e["type"] == "fleet_host"}
    assert "its backup's rehearsal found pins a restore could not fetch again" in reasons["gpu05"]

    # The same machines end the same way: the upgraded ones on cu130 with CUDA 13.0 beside 12.8, the failed one
    # back on its backup (the toolkit the installer began removed), the held one untouched.
    for name in MACHINES:
        by_ansible, by_agent = end_state(roots[name], name), end_state(out / "sims" / name, name)
        assert by_ansible == by_agent, name
        upgraded = WANT[name] == "changed"
        assert ("torch==2.10.0+cu130" in by_ansible["freeze"]) is upgraded, name
        assert ("/usr/local/cuda-13.0" in by_ansible["toolkits"]) is upgraded, name
        assert "/usr/local/cuda-12.8" in by_ansible["toolkits"]
    # Byte for byte: every file, link and folder of each machine, but what differs by nature between two runs
    # (the backups' own folders, byte code's times, scratch space, logs).
    for name in MACHINES:
        by_ansible, by_agent = tree(roots[name]), tree(out / "sims" / name)
        differ = sorted(p for p in set(by_ansible) | set(by_agent) if by_ansible.get(p) != by_agent.get(p))
        assert not differ, (name, [(p, by_ansible.get(p), by_agent.get(p)) for p in differ[:20]])
        for root in (roots[name], out / "sims" / name):  # the runfile is removed after its install, by both
            assert not [p for p in (root / "tmp").rglob("*") if p.name.endswith(".run")], (name, root)


def test_a_held_canary_hands_the_role_on_and_check_changes_nothing(recipe_file, tmp_path):
    """gpu01's driver differs: held in the canary play, it proves nothing, so gpu02 is the canary, alone; once it
    changed and passed, gpu03 and gpu04 go together in the batches play. Before that, --check on the same machines
    runs only the preflight (and --diff with it shows nothing to change): gpu01 shown held, nothing changed anywhere."""
    book = tmp_path / "cuda13.yml"
    assert agent("recipe", str(recipe_file), "--ansible", "--batch", "4", "-o", str(book),
                 home=tmp_path).returncode == 0
    machines = {"gpu01": {"driver": "580.95.05"}, "gpu02": {}, "gpu03": {}, "gpu04": {}}
    inventory, roots = sims_for_ansible(tmp_path / "ansible", machines)
    before = {name: end_state(roots[name], name) for name in machines}
    checked = ansible_playbook(inventory, book, tmp_path, extra=["--check", "--diff"])
    assert checked.returncode == 0, checked.stdout[-3000:]
    assert "held: driver is '580.95.05'" in checked.stdout
    assert all(c.get("changed") == 0 and c.get("failed") == 0 for c in recap(checked.stdout).values()), checked.stdout
    assert {name: end_state(roots[name], name) for name in machines} == before

    played = ansible_playbook(inventory, book, tmp_path)
    assert played.returncode == 0, played.stdout[-3000:]
    counts = recap(played.stdout)
    assert {h: status_from_recap(c) for h, c in counts.items()} == {"gpu01": "held", "gpu02": "changed",
                                                                    "gpu03": "changed", "gpu04": "changed"}
    # gpu02 alone in the canary play's second batch, the others in the batches play's one batch of 4
    plays = played.stdout.split("PLAY [")
    canary_play, batches_play = [p for p in plays if "(canary)]" in p], [p for p in plays if "(batches)]" in p]
    assert len(canary_play) == 4 and len(batches_play) == 1, [p[:120] for p in plays]
    assert "step 1 of 2: install_runfile" in canary_play[1] and "changed: [gpu02]" in canary_play[1]
    assert all("install_runfile" not in p for p in canary_play[2:])  # proven: gpu03, gpu04 wait for the batches
    assert "changed: [gpu03]" in batches_play[0] and "changed: [gpu04]" in batches_play[0]


def test_a_failed_canary_stops_the_play_before_any_other_host(recipe_file, tmp_path):
    book = tmp_path / "cuda13.yml"
    assert agent("recipe", str(recipe_file), "--ansible", "--batch", "2", "--max-fail", "50", "-o", str(book),
                 home=tmp_path).returncode == 0
    machines = {"gpu01": {"gcc": None}, "gpu02": {}, "gpu03": {}}
    inventory, roots = sims_for_ansible(tmp_path / "ansible", machines)
    played = ansible_playbook(inventory, book, tmp_path)
    assert set(recap(played.stdout)) == {"gpu01"}, played.stdout[-3000:]  # the others never started
    assert end_state(roots["gpu02"], "gpu02")["toolkits"] == ["/usr/local/cuda-12.8", "/usr/local/cuda-12.8"]


# --------------------------------------------------------------------------- what is written


class _Tagged(str):
    pass


def _load(text: str):
    """The playbook as a YAML 1.1 loader reads it, with `!unsafe` strings told apart."""
    loader = type("L", (yaml.SafeLoader,), {})
    loader.add_constructor("!unsafe", lambda ld, node: _Tagged(ld.construct_scalar(node)))
    return yaml.load(text, Loader=loader)


def _strings(node, out):
    if isinstance(node, dict):
        for k, v in node.items():
            out.append(("key", k))
            _strings(v, out)
    elif isinstance(node, list):
        for v in node:
            _strings(v, out)
    elif isinstance(node, str):
        out.append(("unsafe" if isinstance(node, _Tagged) else "plain", str(node)))
    return out


def test_every_value_from_the_recipe_is_unsafe_and_the_playbook_has_the_tasks_of_the_recipe(recipe_file):
    text = playbook(load_recipe(recipe_file), source=str(recipe_file), canary=1, batch=8, max_fail=10)
    first, play = _load(text)
    assert first["serial"] == 1 and first["max_fail_percentage"] == 0  # a failed canary stops the playbook
    assert first["tasks"][2:-1] == play["tasks"][1:]  # the same host tasks in both plays
    assert play["serial"] == 8 and play["max_fail_percentage"] == 10 and play["gather_facts"] is False
    assert "-f 8 playbook.yml" in text  # forks to run a batch of 8 at once
    names = [t["name"] for t in play["tasks"][1:]]
    assert names[:6] == ["preflight: read the facts the recipe's preconditions name",
                         "preflight: a host whose facts differ is held, and nothing on it is changed",
                         "preflight: end a held host here",
                         "backup: the Python environment and the CUDA system state, verified by sha256, its restore "
                         "rehearsed",
                         "backup: a host whose restore could not fetch every pin again is held, nothing changed",
                         "backup: end a held host here"]
    block = next(t for t in play["tasks"] if "block" in t)
    assert [t["name"] for t in block["block"]] == [
        "benchmark before", "step 1 of 2: install_runfile", "step 2 of 2: pip_install", "check 1 of 2: toolkit",
        "check 2 of 2: command", "benchmark after", "benchmark gate: after >= before - 2% at 95% (a bootstrap interval)"]
    assert block["rescue"][0]["name"] == "rollback: restore the host from its backup"
    # A template is only ever our own: every string that holds a recipe value is !unsafe.
    for kind, s in _strings(play, []):
        if kind == "plain" and "{{" in s:
            assert "/srv/" not in s and "torch" not in s, s
    assert "# approved by the recipe's authorizations[2] (destructive)" in text
    assert all(ord(c) < 128 for c in text)


def test_a_task_whose_values_hold_a_credential_is_no_log(recipe_file):
    recipe = load_recipe(recipe_file)
    step = next(s for s in recipe.steps if s.tool == "pip_install")
    step.args["index_url"] = "https://deploy:s3cr3t-t0ken-value@pypi.internal.example/simple"
    for rule in recipe.authorizations:
        if rule.tool == "pip_install":
            rule.args["index_url"] = step.args["index_url"]
    _, play = _load(playbook(recipe, source=str(recipe_file), canary=1, batch=4, max_fail=0))
    block = next(t for t in play["tasks"] if "block" in t)["block"]
    logged = {t["name"]: t.get("no_log", False) for t in block}
    assert logged["step 2 of 2: pip_install"] is True
    assert not any(v for name, v in logged.items() if name != "step 2 of 2: pip_install"), logged


@pytest.mark.parametrize("text", ["plain", 'a "quote" and \\ back', "line\nbreak\r\x85\u2028\u2029 end", "\x00\x1b\x7f",
                                  "\ufeffbom", "\U0001f600 astral", "{{ lookup('pipe', 'id') }} # not a comment",
                                  "'single' : colon - dash", "\t tab"])
def test_a_quoted_scalar_reads_back_as_the_same_string(text):
    assert yaml.safe_load("k: " + _quoted(text)) == {"k": text}


def test_a_step_no_rule_allows_is_not_exported(recipe_file, tmp_path):
    r = load_recipe(recipe_file)
    r.authorizations = [a for a in r.authorizations if a.tool != "pip_install"]
    edited = tmp_path / "r.yaml"
    edited.write_text(dump_recipe(r))
    res = agent("recipe", str(edited), "--ansible", "-o", str(tmp_path / "p.yml"), home=tmp_path)
    assert res.returncode == 2 and not (tmp_path / "p.yml").exists()
    assert res.stderr.count("\n") == 1 and "step 2 (pip_install) is a change" in res.stderr, res.stderr
    with pytest.raises(ExportError, match="none of the recipe's authorizations"):
        playbook(r, source=str(edited), canary=1, batch=4, max_fail=0)


def test_a_playbook_that_drains_puts_back_only_the_nodes_it_drained_as_agent_fleet_does(recipe_file, tmp_path):
    """Slurm nodes: gpu01 runs a job (the drain waits for it), gpu02 was drained by an operator (left drained),
    gpu03's /tmp is too small (restored, then put back). Both engines leave the schedulers in the same state."""
    from agent.fleet.recipe import Drain
    from tools.sim import Sim

    r = load_recipe(recipe_file)
    r.drain = Drain(scheduler="slurm", reason="cuda 13.0 upgrade", timeout=120)
    r.authorizations += r.drain.rules()
    edited = tmp_path / "recipe.yaml"
    edited.write_text(dump_recipe(r))
    machines = {"gpu01": {"slurm": {"jobs": [0.5]}}, "gpu02": {"slurm": {"drained_by": "hw: fan 3 failed"}},
                "gpu03": {"slurm": {}, "gcc": None}}
    book = tmp_path / "drain.yml"
    assert agent("recipe", str(edited), "--ansible", "--canary", "0", "--batch", "3", "--max-fail", "50",
                 "-o", str(book), home=tmp_path).returncode == 0
    text = book.read_text()
    assert "# approved by the recipe's authorizations[3]: " in text and "name: !unsafe \"drain: take the node" in text

    inventory, roots = sims_for_ansible(tmp_path / "ansible", machines)
    played = ansible_playbook(inventory, book, tmp_path)
    assert {h: status_from_recap(c) for h, c in recap(played.stdout).items()} == {
        "gpu01": "changed", "gpu02": "changed", "gpu03": "failed"}, played.stdout[-4000:]

    out = tmp_path / "rollout"
    fleet = agent("fleet", str(edited), "-i", str(agent_inventory(tmp_path / "hosts.ini", machines)), "--canary", "0",
                  "--batch", "3", "--max-fail", "50", "--dir", str(out), home=tmp_path)
    assert fleet.returncode == 1, fleet.stderr[-3000:]

    def scheduler(root: Path) -> dict:
        node = Sim.open(root).scheduler_state()["slurm"]
        return {"drained": node["drained"], "reason": node.get("reason"), "by": node.get("by")}

    for name in machines:
        assert scheduler(roots[name]) == scheduler(out / "sims" / name), name
    assert not scheduler(roots["gpu01"])["drained"] and not scheduler(roots["gpu03"])["drained"]  # both back in
    assert scheduler(roots["gpu02"]) == {"drained": True, "reason": "hw: fan 3 failed", "by": "admin"}  # left as it was


def test_the_helper_keeps_the_tools_constants():
    """The host script cannot import the tools (they need pydantic): what it copies must stay theirs."""
    from agent.fleet import playbook_helper as helper
    from tools import drain_node, install_runfile, restore_plan

    assert helper.KEEP == restore_plan.KEEP and helper.MIN_DRIVER == install_runfile.MIN_DRIVER
    assert helper.RUNFILE_NAME.pattern == install_runfile.RUNFILE_NAME.pattern
    assert (helper.OUR_PREFIX, helper.ANNOTATION) == (drain_node.OUR_PREFIX, drain_node.ANNOTATION)


def test_what_the_helper_says_of_a_failed_command_masks_a_token_in_an_index_url():
    """The restore reinstalls from the indexes the backup recorded, which the host's own pip configuration may
    name with a token the recipe never held: a failure's words (Ansible prints them) show it masked."""
    from agent.fleet import playbook_helper as helper

    with pytest.raises(helper.Failed) as e:
        helper.must(["false", "--index-url", "https://deploy:s3cr3t-t0ken@pypi.internal.example/simple"],
                    "reinstalling 2 pinned packages from https://deploy:s3cr3t-t0ken@pypi.internal.example/simple")
    assert "s3cr3t-t0ken" not in str(e.value) and "https://deploy:****@pypi.internal.example/simple" in str(e.value)


def test_a_playbook_that_asks_the_served_model_restores_the_host_whose_answers_drift(recipe_file, tmp_path):
    """The recipe's `outputs:` and `outputs` check in the playbook: the answers before, after, and the check, as
    agent fleet asks and judges them; the host whose answers drift on the CUDA 13 build is rescued."""
    edited = tmp_path / "answers.recipe.yaml"
    edited.write_text(recipe_file.read_text().replace("\nchecks:\n", "\nchecks:\n- outputs:\n    same: true\n", 1)
                      + "outputs:\n  endpoint: http://127.0.0.1:30000\n")
    book = tmp_path / "answers.yml"
    made = agent("recipe", str(edited), "--ansible", "--canary", "1", "--max-fail", "100", "-o", str(book),
                 home=tmp_path)
    assert made.returncode == 0, made.stderr
    text = book.read_text()
    assert "the served model's answers before" in text and "answers check: the same outputs as before" in text
    machines = {"gpu01": {}, "gpu02": {"numerics": "drift"}}
    inventory, roots = sims_for_ansible(tmp_path / "ansible", machines)
    played = ansible_playbook(inventory, book, tmp_path)
    counts = recap(played.stdout)
    assert {h: status_from_recap(c) for h, c in counts.items()} == {"gpu01": "changed", "gpu02": "failed"}, \
        played.stdout[-4000:]
    assert counts["gpu02"]["rescued"] == 1 and "the answers check failed: after: " in played.stdout
    assert "outputs differ (prompts" in played.stdout
    assert "torch==2.10.0+cu130" in end_state(roots["gpu01"], "gpu01")["freeze"]
    assert "torch==2.10.0+cu128" in end_state(roots["gpu02"], "gpu02")["freeze"]  # restored from its backup
