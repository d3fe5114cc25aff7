"""A goal file's authorizations: what a scripted run may change, meaning exactly what they say.

Two kinds:

    - {host: gpu1, command: "systemctl restart sglang"}          one exact shell command
    - {host: gpu1, tool: pip_install, args: {index_url: "https://download.pytorch.org/whl/cu130",
                                              packages: ["torch==2.10.0+cu130", "sgl-kernel==*+cu130"]}}

A tool rule pins every argument that changes what the tool does: the arguments it names must match
(a value with `*` is a pattern; a list of values allows each of them; for a list argument such as
`packages`, every item of the call must match one of the rule's), and every argument it does not name
must keep its default. Values are compared by meaning: the tool turns a host path and its file://
URL into one form, a toolkit_path left out into its default, and trims trailing slashes, in the
call and in the rule alike (the goal loader normalizes the rule).

A step no backup undoes (a removed toolkit, a driver, system packages, conda: agent/safety/coverage.py)
is covered only by a rule that says `irreversible: true`, of either kind: the goal file's author agreed
that this change cannot be rolled back by the session.

`check` returns every way a rule falls short of a call, so a refusal can name the closest rule,
the fields that differ, and what would pass.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tools import default_tools
from tools.base import Action, Risk, RiskClass

COMMAND_PREFIX_GONE = ("command_prefix is no longer accepted: it let any words follow the prefix (a second index, "
                       "-r FILE, a URL, --target...). Write `tool: pip_install` with `args: {index_url: ..., packages: "
                       "[\"name==version\", ...]}` for installs, or `command:` for one exact command")


class Authorization(BaseModel):
    """One entry of a goal file's `authorizations:` list: exactly one of `command` or `tool` (with `args`),
    on `host`: one host, a group of the goal file's `groups:`, or "*" (every host in scope)."""

    model_config = ConfigDict(extra="forbid")

    host: str = "*"
    # A group's hosts, resolved by the goal loader (a goal file names the group, never this field): kept in
    # the rule so that the record, replay and a recipe read the same hosts without the goal file.
    members: list[str] | None = None
    command: str | None = None
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    destructive: bool = False  # a tool entry must say so to cover a destructive step
    irreversible: bool = False  # a rule must say so to cover a step no backup of the session undoes

    @model_validator(mode="before")
    @classmethod
    def _no_prefix_rules(cls, data: Any) -> Any:
        if isinstance(data, dict) and "command_prefix" in data:
            raise ValueError(COMMAND_PREFIX_GONE)
        return data

    @model_validator(mode="after")
    def _one_kind(self) -> "Authorization":
        if (self.command is None) == (self.tool is None):
            raise ValueError("an authorization needs exactly one of: command, tool")
        if self.args and not self.tool:
            raise ValueError("args only go with tool")
        return self

    def covers_host(self, host: str | None) -> bool:
        if self.host == "*":
            return True
        return host in self.members if self.members is not None else host == self.host

    def describe(self) -> str:
        """The rule as a sentence the model and the operator read."""
        where = ("any host" if self.host == "*" else
                 f"{self.host} ({', '.join(self.members)})" if self.members is not None else self.host)
        irreversible = ("; also a step no backup undoes (irreversible: true)" if self.irreversible else "")
        if self.command is not None:
            return f"on {where}: exactly the command `{self.command}`" + irreversible
        named = ", ".join(f"{k} {_allowed_text(v, k in _list_arguments(self.tool))}" for k, v in self.args.items())
        # Said from the tool's own arguments: which of the pinned ones the rule leaves at their defaults,
        # and which the caller chooses freely (every argument is in the schema, so "leave out" means null).
        pinned, free = _arguments(self.tool)
        unnamed = [a for a in pinned if a not in self.args]
        return (f"on {where}: {self.tool}" + (f" with {named}" if named else "")
                + (f"; {', '.join(unnamed)} at {'its default' if len(unnamed) == 1 else 'their defaults'} "
                   "(null, or the default value)" if unnamed else "")
                + (f"; {', '.join(free)} yours to give" if free else "")
                + ("; destructive steps too" if self.destructive else "") + irreversible)

    def check(self, tool: str, action: Action, risk: Risk, undone_by_none: str | None = None) -> list[str] | None:
        """None when the rule is of another kind or host (it says nothing about the call); else the ways
        it falls short of the call, each a short phrase (an empty list: the rule covers the call).
        `undone_by_none`: why no backup undoes the step, when none does (the rule must say irreversible)."""
        if not self.covers_host(action.host):
            return None
        irreversible = ([irreversible_miss(undone_by_none)] if undone_by_none and not self.irreversible else [])
        if self.command is not None:
            if tool != "ssh_exec":
                return None
            if action.subject.strip() != self.command.strip():
                return [f"the command is not `{self.command}`"]
            return irreversible
        if self.tool != tool:
            return None
        misses = []
        if risk.cls is RiskClass.DESTRUCTIVE and not self.destructive:
            misses.append(f"the step is destructive ({risk.reason}) and the rule does not say `destructive: true`")
        for name, value in action.args.items():
            if name in self.args:
                if not value_matches(value, self.args[name]):
                    misses.append(f"{name} is {json.dumps(value)}; the rule allows {json.dumps(self.args[name])}")
            elif name in action.defaults and value != action.defaults[name]:
                misses.append(f"{name} is {json.dumps(value)}; the rule does not name {name}, so it must keep its "
                              f"default ({json.dumps(action.defaults[name])}): leave it out")
            elif name not in action.defaults:
                misses.append(f"the rule does not name {name}, which {tool} needs")
        return misses + irreversible


def irreversible_miss(why: str) -> str:
    return f"no backup undoes this step ({why}) and the rule does not say `irreversible: true`"


def _allowed_text(value: Any, list_argument: bool = True) -> str:
    """A rule's value as it reads: `"13.0"`, `one of "a", "b"` for a single value, and for a list argument
    `each matching one of "torch==2.10.0+cu130", ...`."""
    if isinstance(value, list):
        return ("each matching one of " if list_argument else "one of ") + ", ".join(json.dumps(v) for v in value)
    return json.dumps(value)


def value_matches(value: Any, allowed: Any) -> bool:
    """A call's value against a rule's: a pattern (`*`), one of a list, or, for a list value, every item
    matching one of the rule's items."""
    if isinstance(value, list):
        options = allowed if isinstance(allowed, list) else [allowed]
        return all(any(_one(item, option) for option in options) for item in value)
    if isinstance(allowed, list):
        return any(_one(value, option) for option in allowed)
    return _one(value, allowed)


def _one(value: Any, allowed: Any) -> bool:
    if isinstance(allowed, str) and "*" in allowed:
        return isinstance(value, str) and fnmatch.fnmatchcase(value, allowed)
    return value == allowed


def closest(authorizations: list[Authorization], tool: str, action: Action, risk: Risk,
            undone_by_none: str | None = None) -> tuple[int | None, list[str] | None]:
    """(index, misses) of the rule that covers the call (misses empty), or of the one that comes closest."""
    best: tuple[int | None, list[str] | None] = (None, None)
    for i, auth in enumerate(authorizations):
        misses = auth.check(tool, action, risk, undone_by_none)
        if misses is None:
            continue
        if not misses:
            return i, []
        if best[1] is None or len(misses) < len(best[1]):
            best = (i, misses)
    return best


@functools.lru_cache(maxsize=None)
def _list_arguments(name: str | None) -> frozenset[str]:
    """The arguments of a tool that take a list (a rule's list then allows each item; else one value)."""
    found = default_tools([name]) if name else []
    return frozenset(k for k, f in found[0].Args.model_fields.items() if "list" in str(f.annotation)) if found else frozenset()


@functools.lru_cache(maxsize=None)
def _arguments(name: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A tool's pinned arguments and the others it takes (host aside); empty for an unknown tool."""
    found = default_tools([name]) if name else []
    if not found:
        return (), ()
    pinned = tuple(found[0].pinned)
    return pinned, tuple(a for a in found[0].Args.model_fields if a != "host" and a not in pinned)
