"""The settings file: what it sets, what beats it, and one-line errors for a wrong one."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from agent.errors import SessionConfigError
from app.config import apply_config, config_path, load_config


def write(tmp_path, text: str):
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


def test_the_file_sets_what_no_flag_gave_and_a_flag_wins(tmp_path, monkeypatch):
    monkeypatch.delenv("UPGRADE_AGENT_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    config = load_config(write(tmp_path, 'model = "qwen3"\nbase_url = "http://127.0.0.1:8000/v1"\n'
                                         'model_timeout = 300\nhosts = ["gpu1"]\n'
                                         '[price]\nprompt_per_mtok = 2.0\ncompletion_per_mtok = 8.0\n'))
    monkeypatch.delenv("UPGRADE_AGENT_PRICE", raising=False)
    unset = argparse.Namespace(model_timeout=None, host=[], context_tokens=None)
    apply_config(unset, config)
    assert (unset.model_timeout, unset.host) == (300, ["gpu1"])
    import os
    assert os.environ["UPGRADE_AGENT_MODEL"] == "qwen3" and os.environ["OPENAI_BASE_URL"].endswith(":8000/v1")
    assert os.environ["UPGRADE_AGENT_PRICE"] == "2.0,8.0"

    given = argparse.Namespace(model_timeout=30.0, host=["sim"], context_tokens=None)
    apply_config(given, config)
    assert (given.model_timeout, given.host) == (30.0, ["sim"])


def test_the_environment_beats_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("UPGRADE_AGENT_MODEL", "from-env")
    apply_config(argparse.Namespace(), load_config(write(tmp_path, 'model = "from-file"\n')))
    import os
    assert os.environ["UPGRADE_AGENT_MODEL"] == "from-env"


@pytest.mark.parametrize("text, says", [
    ('modle = "x"\n', "modle: unknown setting (known: model, base_url,"),
    ('api_key = "sk-123"\n', "'api_key' does not belong in a settings file: keys stay in the environment"),
    ('model = \n', "not TOML"),
    ('model_timeout = -1\n', "model_timeout: Input should be greater than 0"),
    ('base_url = "127.0.0.1:8000"\n', "base_url:"),
])
def test_a_wrong_file_is_one_line_that_names_it_and_what_is_wrong(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(SessionConfigError) as err:
        load_config(path)
    message = str(err.value)
    assert message.startswith(path) and says in message and "\n" not in message
    assert "sk-123" not in message


def test_no_file_is_the_defaults_and_the_path_follows_xdg(tmp_path, monkeypatch):
    monkeypatch.delenv("UPGRADE_AGENT_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    assert config_path() == tmp_path / "upgrade-agent" / "config.toml"
    assert load_config().model is None
    with pytest.raises(SessionConfigError, match="no such settings file"):
        load_config(str(tmp_path / "missing.toml"))


def test_agent_reads_the_file_and_a_wrong_one_is_exit_2_in_one_line(tmp_path):
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    bad = write(tmp_path, 'modle = "x"\n')
    r = subprocess.run([sys.executable, "-m", "app.cli", "--config", bad, "tools"], capture_output=True, text=True,
                       cwd=root, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "modle: unknown setting" in r.stderr
    good = write(tmp_path, 'model_timeout = 5\n')
    r = subprocess.run([sys.executable, "-m", "app.cli", "--config", good, "tools"], capture_output=True, text=True,
                       cwd=root, timeout=60)
    assert r.returncode == 0, r.stderr
