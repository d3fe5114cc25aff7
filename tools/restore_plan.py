"""What a restore runs: the pip commands that bring an environment back to a backup, and the index each
local-version pin is fetched from.

restore_backup runs the plan; pip_freeze_backup records the indexes and rehearses the plan before the first
change (tools/restore_check.py); the session report prints it as the rollback by hand; the exported playbook
carries this module to its hosts and backs up, rehearses and restores with it, so it imports only the
standard library.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

# Never uninstalled to match a backup: removing the installer tooling would break the restore itself.
KEEP = {"pip", "setuptools", "wheel"}

# Wheels with a local version (+cu130) come from their project's own index, not PyPI.
# PyTorch's index is public and stable; others are taken from the environment's pip config.
KNOWN_INDEX_TEMPLATES = {
    name: "https://download.pytorch.org/whl/{tag}"
    for name in ("torch", "torchvision", "torchaudio", "triton", "pytorch-triton")
}


def configured_index_urls(pip_config: str, env_lines: list[str]) -> list[str]:
    """Index URLs from `pip config list` output and PIP_*INDEX_URL variables."""
    urls: list[str] = []
    for line in pip_config.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(("index-url", "extra-index-url")):
            urls.extend(value.strip().strip("'\"").split())
    for line in env_lines:
        key, _, value = line.partition("=")
        if key in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"):
            urls.extend(value.split())
    return urls


def index_for(name: str, version: str, configured: list[str]) -> str | None:
    """The index a local-version wheel (e.g. torch 2.10.0+cu130) must come from, if known."""
    tag = version.partition("+")[2]
    if not tag:
        return None
    for url in configured:  # the environment's own index for this build wins
        if re.search(rf"(^|[^a-z0-9]){re.escape(tag)}([^a-z0-9]|$)", url.lower()):
            return url
    template = KNOWN_INDEX_TEMPLATES.get(re.sub(r"[-_.]+", "-", name).lower())
    if template and re.fullmatch(r"cu\d+|cpu|rocm[\d.]+", tag):
        return template.format(tag=tag)
    return None


@dataclass(frozen=True)
class PipCommand:
    """One pip command of a restore: the shell line, the part after `-m pip`, and what it is for."""

    line: str
    args: str
    what: str


def pip_command(python: str, args: str, what: str) -> PipCommand:
    return PipCommand(line=f"{shlex.quote(python)} -m pip {args}", args=args, what=what)


@dataclass(frozen=True)
class RestorePlan:
    """The pip commands that bring an environment back to a backup, in the order they run."""

    uninstall: list[str]  # names the backup did not have
    install: list[str]  # requirement lines reinstalled by name, sorted
    commands: list[PipCommand]

    @property
    def lines(self) -> list[str]:
        return [c.line for c in self.commands]


def restore_plan(python: str, want: dict[str, str] | None, indexes: dict[str, str | None], remote_dir: str,
                 have: dict[str, str] | None = None, index_url: str | None = None) -> RestorePlan:
    """What restores `python` to a backup: its freeze `want`, the index of each local-version pin, its dir.

    `index_url` is the mirror to restore from, for a machine without a route to PyPI (or to
    PyTorch's index): the pins without an index of their own come from it, and it is searched
    before the index recorded for a local-version pin. Without it, those pins come from what the
    host's pip configuration names (PyPI by default).

    With the current freeze `have`: uninstall what the backup did not have (never pip, setuptools
    or wheel), then reinstall every pin that differs with --no-deps, grouped by the index each
    one needs, PyPI's group first. Without it (or without the backup's freeze): reinstall the
    local-version pins from their indexes, then the backup's whole freeze.txt, which pip skips
    where it is already satisfied, so the local versions are not looked up on PyPI; packages
    added since the backup stay.
    """
    def by_index(pins: list[str]) -> list[tuple[str | None, list[str]]]:
        groups: dict[str | None, list[str]] = {}
        for pin in pins:
            groups.setdefault(indexes.get(pin), []).append(pin)
        return sorted(((index, sorted(lines)) for index, lines in groups.items()), key=lambda kv: kv[0] or "")

    def install(index: str | None, lines: list[str], what: str) -> PipCommand:
        where = [u for u in (index_url, index) if u]
        where = list(dict.fromkeys(where))  # the mirror first; each index once
        options = "".join(f"--{'extra-' if i else ''}index-url {shlex.quote(u)} " for i, u in enumerate(where))
        return pip_command(python, "install --no-deps " + options + " ".join(shlex.quote(x) for x in lines),
                           what + (f" from {' and '.join(where)}" if where else ""))

    if want is None or have is None:
        groups = [(index, lines) for index, lines in by_index(list(indexes)) if index]
        commands = [install(index, lines, f"reinstalling {len(lines)} local-version pins") for index, lines in groups]
        whole = f"-r {shlex.quote(remote_dir + '/freeze.txt')}"
        commands.append(pip_command(python, "install --no-deps " + (f"--index-url {shlex.quote(index_url)} " if index_url
                                                                   else "") + whole,
                                    "reinstalling the backup's whole freeze"))
        return RestorePlan(uninstall=[], install=sorted(pin for _, lines in groups for pin in lines),
                           commands=commands)
    extras = sorted(n for n in have if n not in want and n not in KEEP)
    changed = [line for name, line in want.items() if have.get(name) != line]
    commands = []
    if extras:
        commands.append(pip_command(python, "uninstall -y " + " ".join(shlex.quote(n) for n in extras),
                                    "uninstalling what the backup did not have"))
    commands += [install(index, lines, f"reinstalling {len(lines)} pinned packages")
                 for index, lines in by_index(changed)]
    return RestorePlan(uninstall=extras, install=sorted(changed), commands=commands)


def dry_run(command: PipCommand, wheels_only: bool = False) -> str | None:
    """An install of the plan as a check that changes nothing (pip 22.2 and later resolve without installing);
    None for a command that is no install. One retry, not pip's five with back-off: an index that is not there
    is said in seconds, not a minute. `wheels_only` where nobody approved the check (a backup's rehearsal):
    reading a source package's metadata means running its build code."""
    if not command.args.startswith("install "):
        return None
    only = "--only-binary :all: " if wheels_only else ""
    return command.line.replace(" -m pip install ", f" -m pip install --dry-run --ignore-installed --retries 1 {only}",
                                1)


def rehearsable(pins: dict[str, str]) -> dict[str, str]:
    """The pins a rehearsal resolves: name==version only, never pip, setuptools or wheel. What a line names by
    file or URL (`x @ file:///...`, an editable checkout) pip would build to read, and a build runs the
    package's own code, in a step nobody approved."""
    return {name: line for name, line in pins.items()
            if name not in KEEP and re.fullmatch(r"[A-Za-z0-9._-]+==[^\s@;]+", line)}


def resolves_without_installing(pip_version: str) -> bool:
    """Whether this pip (`pip X.Y from ...`) has --dry-run: 22.2 and later."""
    version = re.match(r"pip (\d+)\.(\d+)", pip_version)
    return version is not None and (int(version[1]), int(version[2])) >= (22, 2)

