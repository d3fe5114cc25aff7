"""System and task prompts, kept as Markdown and loaded at run time."""

from importlib import resources


def load(name: str) -> str:
    """The text of prompts/NAME.md, as shipped with the package."""
    return resources.files(__name__).joinpath(f"{name}.md").read_text(encoding="utf-8")


def system_prompt(hosts: list[str]) -> str:
    """The system prompt, with one line per host of the session."""
    listing = "\n".join(f"- {h}" for h in hosts) if hosts else "(none yet)"
    return load("system").replace("{hosts}", listing)
