"""The user's settings file: ~/.config/upgrade-agent/config.toml (or $UPGRADE_AGENT_CONFIG, or --config).

    model = "gpt-4.1"                          # the model when neither a flag nor the goal file names one
    base_url = "http://127.0.0.1:8000/v1"      # an OpenAI-compatible server
    model_timeout = 300                        # seconds per model request
    context_tokens = 32000                     # the model's context, for compaction
    hosts = ["gpu1", "gpu2"]                   # chat's hosts when no --host is given
    [price]                                    # for the cost shown beside the token counts
    prompt_per_mtok = 2.0                      # USD per million prompt tokens (as UPGRADE_AGENT_PRICE)
    completion_per_mtok = 8.0

Every setting is overridden by its flag. The model and the server follow the order a user of
several tools expects: a flag, then the goal file, then the environment (UPGRADE_AGENT_MODEL,
OPENAI_BASE_URL), then this file, then the built-in default. Keys stay in the environment
(OPENAI_API_KEY): this file holds none, and one that tries is refused.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.errors import SessionConfigError
from agent.input_files import InputFileError, read_text_file

SECRET_KEYS = ("api_key", "openai_api_key", "exa_api_key", "key", "token", "password")


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_per_mtok: float = Field(ge=0)
    completion_per_mtok: float = Field(ge=0)


class Config(BaseModel):
    model_config = ConfigDict(extra="forbid")
    model: str | None = None
    base_url: str | None = Field(default=None, pattern=r"^https?://\S+$")
    model_timeout: float | None = Field(default=None, gt=0)
    context_tokens: int | None = Field(default=None, ge=2000)
    hosts: list[str] = Field(default_factory=list)
    price: Price | None = None
MAX_CONFIG_BYTES = 64 * 1024  # a settings file holds a few keys


def config_path(given: str | None = None) -> Path:
    if given:
        return Path(given).expanduser()
    if os.environ.get("UPGRADE_AGENT_CONFIG"):
        return Path(os.environ["UPGRADE_AGENT_CONFIG"]).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "upgrade-agent" / "config.toml"


def load_config(given: str | None = None) -> Config:
    """The settings file, or the defaults when there is none; a file that is wrong is a one-line error."""
    path = config_path(given)
    if not path.exists() and not path.is_symlink():
        if given:
            raise SessionConfigError(f"{path}: no such settings file") from None
        return Config()
    try:
        text = read_text_file(path, MAX_CONFIG_BYTES, "settings file")
    except InputFileError as e:
        raise SessionConfigError(str(e)) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SessionConfigError(f"{path}: not TOML: {e}; see `agent --help` for the settings it takes") from None
    secrets = [k for k in data if k.lower() in SECRET_KEYS]
    if secrets:
        raise SessionConfigError(f"{path}: {secrets[0]!r} does not belong in a settings file: keys stay in the "
                                 "environment (OPENAI_API_KEY, EXA_API_KEY); remove it")
    try:
        return Config.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "(top)"
        known = ", ".join(Config.model_fields)
        what = (f"unknown setting (known: {known})" if err["type"] == "extra_forbidden" else err["msg"])
        raise SessionConfigError(f"{path}: {where}: {what}") from None


def apply_config(args, config: Config) -> None:
    """Fill what no flag gave from the settings file (the model and server through the environment, below
    the goal file); flags always win."""
    if config.model:
        os.environ.setdefault("UPGRADE_AGENT_MODEL", config.model)
    if config.base_url:
        os.environ.setdefault("OPENAI_BASE_URL", config.base_url)
    if getattr(args, "model_timeout", 0) is None:
        args.model_timeout = config.model_timeout or 120.0
    if hasattr(args, "context_tokens") and args.context_tokens is None:
        args.context_tokens = config.context_tokens
    if hasattr(args, "host") and not args.host and config.hosts:
        args.host = list(config.hosts)
    if config.price is not None:  # chat's cost line reads it as USD per million prompt, completion tokens
        os.environ.setdefault("UPGRADE_AGENT_PRICE", f"{config.price.prompt_per_mtok},{config.price.completion_per_mtok}")
