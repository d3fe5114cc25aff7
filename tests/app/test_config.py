"""The settings file: what it sets, what beats it, and one-line errors for a wrong one."""

from __future__ import annotations

import argparse

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
                                         'model_timeout = 300\nhosts = ["gpu1"]\nverbosity = "quiet"\n'
                                         '[price]\nprompt_per_mtok = 2.0\ncompletion_per_mtok = 8.0\n'))
    unset = argparse.Namespace(model_timeout=None, host=[], verbosity=None, price=None, context_tokens=None)
    apply_config(unset, config)
    assert (unset.model_timeout, unset.host, unset.verbosity, unset.price) == (300, ["gpu1"], "quiet", (2.0, 8.0))
    import os
    assert os.environ["UPGRADE_AGENT_MODEL"] == "qwen3" and os.environ["OPENAI_BASE_URL"].endswith(":8000/v1")

    given = argparse.Namespace(model_timeout=30.0, host=["sim"], verbosity="verbose", price=None, context_tokens=None)
    apply_config(given, config)
    assert (given.model_timeout, given.host, given.verbosity) == (30.0, ["sim"], "verbose")


def test_the_environment_beats_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("UPGRADE_AGENT_MODEL", "from-env")
    apply_config(argparse.Namespace(), load_config(write(tmp_path, 'model = "from-file"\n')))
    import os
    assert os.environ["UPGRADE_AGENT_MODEL"] == "from-env"


@pytest.mark.parametrize("text, says", [
    ('modle = "x"\n', "modle: unknown setting (known: model, base_url,"),
    ('api_key = "sk-123"\n', "'api_key' does not belong in a settings file: keys stay in the environment"),
    ('model = \n', "not TOML"),
    ('verbosity = "loud"\n', "verbosity: Input should be 'quiet', 'normal' or 'verbose'"),
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
