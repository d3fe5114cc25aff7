"""Goal files: an unquoted version is a YAML number (13.10 even becomes 13.1); the error says to quote it,
as the operator wrote it."""

from __future__ import annotations

import pytest

from agent.goal import GoalError, load_goal


def _error(tmp_path, text: str) -> str:
    p = tmp_path / "goal.yaml"
    p.write_text(text)
    with pytest.raises(GoalError) as e:
        load_goal(p)
    return str(e.value)


def test_a_success_check_version_says_to_quote_it(tmp_path):
    msg = _error(tmp_path, "goal: g\nhosts: [local]\nsuccess:\n"
                           "  - toolkit:\n      path: /usr/local/cuda-13.0\n      version: 13.0\n")
    assert msg.endswith(':6: success[0].toolkit.version: Input should be a valid string; '
                        'YAML reads the unquoted 13.0 as a number; write it in quotes: version: "13.0"')


def test_the_hint_shows_the_number_as_written_not_as_read(tmp_path):
    msg = _error(tmp_path, "goal: g\nhosts: [local]\nauthorizations:\n"
                           "  - {host: local, tool: install_runfile, args: {version: 13.10, toolkit_only: true}}\n")
    assert 'YAML reads the unquoted 13.10 as the number 13.1; write it in quotes: version: "13.10"' in msg
    assert msg.count("\n") == 0 and ":4: authorizations[0]: args.version must be a string" in msg


def test_a_list_of_unquoted_versions_is_an_error_too(tmp_path):
    """Each alternative of a rule is text; numbers there would never match a call."""
    msg = _error(tmp_path, "goal: g\nhosts: [local]\nauthorizations:\n"
                           "  - {host: local, tool: install_runfile, args: {version: [13.0, 13.10], "
                           "runfile: /tmp/cuda.run, toolkit_only: true}}\n")
    assert 'write it in quotes: version: ["13.0", "13.10"]' in msg


def test_simulated_host_versions_say_to_quote_them(tmp_path):
    msg = _error(tmp_path, "goal: g\nhosts:\n  - name: sim\n    transport: sim\n"
                           "    sim: {driver: 590.48, toolkits: [12.8]}\n")
    lines = msg.splitlines()
    assert any(line.endswith('hosts[0].sim.driver: Input should be a valid string; YAML reads the unquoted '
                             '590.48 as a number; write it in quotes: driver: "590.48"') for line in lines)
    assert any('hosts[0].sim.toolkits[0]' in line and line.endswith('write it in quotes: toolkits: ["12.8"]')
               for line in lines)


def test_quoted_versions_load_as_written(tmp_path):
    p = tmp_path / "goal.yaml"
    p.write_text('goal: g\nhosts: [local]\nauthorizations:\n'
                 '  - {host: local, tool: install_runfile, args: {version: "13.10", runfile: /tmp/cuda.run}}\n'
                 'success:\n  - {toolkit: {path: /usr/local/cuda-13.10, version: "13.10"}}\n')
    g = load_goal(p)
    assert g.success[0].toolkit.version == "13.10" and g.authorizations[0].args["version"] == "13.10"
