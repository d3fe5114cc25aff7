"""Goal files: validation errors name the file, the line and the key."""

from __future__ import annotations

import pytest

from agent.goal import GoalError, load_goal


def write(tmp_path, text):
    p = tmp_path / "goal.yaml"
    p.write_text(text)
    return p


def test_a_minimal_goal_loads(tmp_path):
    g = load_goal(write(tmp_path, "goal: check the box\nhosts: [gpu1, {name: sim, transport: sim}]\n"))
    assert g.host_names() == ["gpu1", "sim"] and g.hosts[1].transport == "sim"
    assert g.budget.turns == 40


def test_unknown_key_is_reported_with_file_line_and_key(tmp_path):
    p = write(tmp_path, "goal: g\nhosts:\n  - name: a\n    targt: root@127.0.0.1\n")
    with pytest.raises(GoalError) as e:
        load_goal(p)
    assert str(e.value) == f"{p}:4: hosts[0].targt: unknown key"


def test_type_errors_and_missing_keys(tmp_path):
    p = write(tmp_path, "goal: g\nhosts: [a]\nbudget:\n  turns: many\n")
    with pytest.raises(GoalError, match=r"goal.yaml:4: budget.turns: Input should be a valid integer"):
        load_goal(p)
    p = write(tmp_path, "hosts: [a]\n")
    with pytest.raises(GoalError, match=r"goal.yaml:1: goal: required key is missing"):
        load_goal(p)


def test_authorization_for_a_host_not_in_scope_is_an_error(tmp_path):
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: b, command: ls}\n")
    with pytest.raises(GoalError, match="names host 'b', which is not in hosts"):
        load_goal(p)


def test_an_authorization_needs_exactly_one_kind(tmp_path):
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, command: ls, tool: x}\n")
    with pytest.raises(GoalError, match=r":4: authorizations\[0\]: an authorization needs exactly one of"):
        load_goal(p)


def test_bad_yaml_names_the_line(tmp_path):
    p = write(tmp_path, "goal: g\nhosts: [a\n  b: c\n")
    with pytest.raises(GoalError, match=r"goal.yaml:\d+: not valid YAML"):
        load_goal(p)


def test_authorizations_that_could_never_match_are_errors(tmp_path):
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, command: ls}\n"
                        "  - {host: a, tool: install_runfile, args: {version: 13.0}}\n")
    with pytest.raises(GoalError, match=r"goal.yaml:5: authorizations\[1\]: args.version must be a string"):
        load_goal(p)
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, tool: install_runfle}\n")
    with pytest.raises(GoalError, match=r":4: authorizations\[0\]: tool 'install_runfle' is not a tool"):
        load_goal(p)
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, tool: install_runfile, "
                        "args: {toolkit-only: true}}\n")
    with pytest.raises(GoalError, match=r"args.toolkit-only is not an argument of install_runfile"):
        load_goal(p)


def test_local_and_sim_mean_what_they_mean_on_the_command_line(tmp_path):
    g = load_goal(write(tmp_path, "goal: g\nhosts: [local, sim, gpu1]\n"))
    assert [h.transport for h in g.hosts] == ["local", "sim", "ssh"]


def test_every_shipped_goal_file_loads():
    """The goal files in goals/ are examples people copy: each must be valid as shipped."""
    from pathlib import Path

    shipped = sorted((Path(__file__).resolve().parents[2] / "goals").glob("*.yaml"))
    assert len(shipped) >= 4
    for path in shipped:
        goal = load_goal(path)
        assert goal.hosts and goal.goal.strip(), path
    rehearsal = load_goal(Path(__file__).resolve().parents[2] / "goals" / "driver-too-old.yaml")
    assert rehearsal.hosts[0].sim is not None and rehearsal.hosts[0].sim.driver == "550.144.03"


@pytest.mark.parametrize("name, said", [
    ('"*"', "a host cannot be named `*`"),
    ('"gpu1\\ngpu2"', "a host name is letters, digits"),
    ('"gpu1\\u001b[2J"', "a host name is letters, digits"),
    ('"-oProxyCommand=touch /tmp/x"', "a host name is letters, digits"),
    ('"../../etc"', "a host name is letters, digits"),
])
def test_a_host_name_that_would_mean_every_host_or_print_as_something_else_is_refused(tmp_path, name, said):
    """`*` was accepted and a rule for it covered every host; a newline printed as a line of its own."""
    p = write(tmp_path, f"goal: g\nhosts: [{name}]\n")
    with pytest.raises(GoalError, match=r"goal.yaml:\d+: hosts.*" + said.replace("`", ".").replace("*", r"\*")):
        load_goal(p)


def test_names_an_operator_gives_today_still_load(tmp_path):
    g = load_goal(write(tmp_path, "goal: g\nhosts: [gpu-01.lab, root@10.0.0.5, h100_2, 'fd00::5']\n"))
    assert g.host_names() == ["gpu-01.lab", "root@10.0.0.5", "h100_2", "fd00::5"]


@pytest.mark.parametrize("value", [".inf", ".nan", "-.inf"])
def test_a_time_budget_is_a_finite_number_of_minutes(tmp_path, value):
    p = write(tmp_path, f"goal: g\nhosts: [a]\nbudget: {{minutes: {value}}}\n")
    with pytest.raises(GoalError, match=r"goal.yaml:3: budget.minutes"):
        load_goal(p)


def test_a_restore_backup_rule_that_could_never_match_is_reported(tmp_path):
    """Every restore_backup step is destructive, and backup ids have one form: a rule that misses either was
    accepted silently and then refused every restore."""
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, tool: restore_backup, "
                        "args: {backup_id: '*'}}\n")
    with pytest.raises(GoalError, match=r":4: authorizations\[0\].*would never match: every restore_backup step is "
                                        r"destructive; add `destructive: true`"):
        load_goal(p)
    p = write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, tool: restore_backup, "
                        "destructive: true, args: {backup_id: latest}}\n")
    with pytest.raises(GoalError, match=r"backup_id 'latest' is not an id pip_freeze_backup gives"):
        load_goal(p)
    g = load_goal(write(tmp_path, "goal: g\nhosts: [a]\nauthorizations:\n  - {host: a, tool: restore_backup, "
                                  "destructive: true, args: {backup_id: [a-20261205-181200-3fa2, 'a-*']}}\n"))
    assert g.authorizations[0].args["backup_id"] == ["a-20261205-181200-3fa2", "a-*"]
