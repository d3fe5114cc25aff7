"""Every option spec is checked against the program itself, where the program is installed.

A spec lists every option its program accepts; an option it does not list makes the command
not read-only. The danger is the other way round: a program update adds `--exec-helper=CMD`,
and an old spec that reads `--exec` as an abbreviation of a harmless `--exec-time` would pass
it. So each installed program's `--help` is read here, and the test fails when the program
accepts a long option that its spec does not list.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pytest

from agent.safety.classifier.families import all_specs

LONG_OPTION = re.compile(r"(?<![\w-])(--[a-zA-Z0-9][a-zA-Z0-9_-]*)")


def help_text(spec) -> str | None:
    program = shutil.which(spec.program)
    if program is None:
        return None
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C", "COLUMNS": "200", "HOME": "/nonexistent"}
    texts = []
    for args in spec.help:
        done = subprocess.run([program, *args], capture_output=True, text=True, timeout=20, env=env,
                              stdin=subprocess.DEVNULL)
        texts.append(done.stdout + done.stderr)
    return "\n".join(texts)


# Specs of programs this machine lacks cannot be checked here; .ci/run installs the ones it can.
SPECS = [spec for spec in all_specs() if spec.help and shutil.which(spec.program)]


def test_specs_are_checked_at_all():
    assert len(SPECS) >= 20, f"only {len(SPECS)} specs have their program installed here"


@pytest.mark.parametrize("spec", SPECS, ids=[f"{s.program}{':' + s.label if s.label else ''}" for s in SPECS])
def test_spec_lists_every_long_option_of_the_program(spec):
    text = help_text(spec)
    assert text, f"{spec.program} printed no help"
    offered = set(LONG_OPTION.findall(text))
    missing = sorted(name for name in offered if name not in spec.long and name not in spec.not_options)
    assert not missing, f"{spec.program} accepts long options its spec does not list: {' '.join(missing)}"
