"""A read's output as an argument of another read: `ps -p $(pgrep -o -f vllm)`, `kill -0 "$(cat PIDFILE)"`,
`dpkg -S $(readlink -f /usr/bin/nvidia-smi)`, `ldd $(python3 -c "import torch; print(torch._C.__file__)")`.

Such a substitution is accepted only when all of this holds:
- it is a whole word (`$(...)` or `"$(...)"`), not part of one (`/proc/$(pgrep x)/status` names any path);
- the command inside is itself read-only, judged on its own, and has no substitution of its own;
- its output lands where the outer program takes a value whose text cannot make it act: a PID
  (`ps -p`, `pstree`, `kill -0`, the query forms of ionice, chrt and taskset), a search pattern
  (`dpkg -S`), a container ID (`crictl inspect`), or, for ldd only, a path printed by a Python probe;
- unquoted, the output is split into words by the shell, so each word could be an option
  (`kill -0 $(cat F)` with F holding `-s KILL 1` sends SIGKILL): then the inner command must be one
  whose output is only such tokens (pgrep's PIDs, `crictl ps -q`'s IDs), or, for ldd, the probe.

Everything else stays what it was: the substitution is refused as one the classifier cannot see through.
"""

from __future__ import annotations

import re
import shlex

from tree_sitter import Node

from agent.safety.classifier.command import Arg, _Cmd
from agent.safety.classifier.tree import _inner_text, _text

# What an accepted substitution stands for while the outer command is judged, by where it lands.
_PLACEHOLDERS = {"pid": "1", "pattern": "placeholder", "id": "0123456789ab", "path": "/usr/lib/placeholder.so"}


def whole_word_substitution(node: Node) -> Node | None:
    """The `$(...)` a word consists of, alone or as the only thing in double quotes; None otherwise."""
    if node.type == "command_substitution":
        sub = node
    elif node.type == "string" and len(node.named_children) == 1 and \
            node.named_children[0].type == "command_substitution" and len(_text(node)) == len(
            _text(node.named_children[0])) + 2:
        sub = node.named_children[0]
    else:
        return None
    if _text(sub.children[0]) != "$(":
        return None
    inner = _inner_text(sub)
    if any(mark in inner for mark in ("$(", "`", "<(", ">(")):
        return None  # one level only: what a nested one prints is not followed
    return sub


_TOKEN_FILTERS = {"head", "tail", "sort", "uniq"}  # pass lines through, keep each one whole


def output_shape(inner: str) -> str:
    """What the inner command prints: "tokens" (only words that are neither options nor patterns:
    pgrep's PIDs, container IDs of `crictl ps -q`), "probe" (what a Python probe prints) or "text"."""
    try:
        stages = [shlex.split(stage) for stage in inner.split("|")]
    except ValueError:
        return "text"
    if not stages or not stages[0] or any(not s or s[0] not in _TOKEN_FILTERS for s in stages[1:]):
        return "text"
    first = stages[0]
    prog = first[0].rsplit("/", 1)[-1]
    options = [w for w in first[1:] if w.startswith("-")]
    if prog in ("pgrep", "pidof"):
        # -l/-a/--list-* add the process name, -d changes the separator; pidof -S too
        listing = any(o.startswith("--") and (o.startswith("--list") or o.startswith("--delim")) or
                      not o.startswith("--") and any(c in o[1:] for c in "ladS") for o in options)
        return "text" if listing else "tokens"
    if prog in ("crictl", "docker", "podman") and ("-q" in options or "--quiet" in options):
        return "tokens"
    if re.fullmatch(r"python(3(\.\d+)?)?", prog) and first[1:2] == ["-c"]:
        return "probe"
    if prog in ("readlink", "realpath") and len(first) > 1 and first[-1].startswith("/"):
        return "absolute-path"  # a resolved absolute path: its first word starts with `/`, never `-`
    return "text"


def _previous(args: list[Arg], index: int) -> str | None:
    return args[index - 1].text if index > 0 else None


def _where(cmd: _Cmd, index: int) -> str | None:
    """The kind of value the outer command takes at args[index], or None when an unknown one is not harmless."""
    args, prog = cmd.args, cmd.prog
    before = _previous(args, index)
    others = [a.text for i, a in enumerate(args) if i != index]
    if prog == "ps" and before in ("-p", "--pid", "-q", "--quick-pid", "--ppid"):
        return "pid"
    if prog == "pstree" and index == len(args) - 1 and all(re.fullmatch(r"-[aAcglnpsStTuUZ]+", t or "") for t in others):
        return "pid"
    if prog == "kill" and index == len(args) - 1 and others in (["-0"], ["-0", "--"], ["-s", "0"]):
        return "pid"
    if prog == "ionice" and others == ["-p"] or prog == "chrt" and others == ["-p"] or \
            prog == "taskset" and others in (["-p"], ["-cp"], ["-pc"]):
        return "pid"
    if prog == "dpkg" and others == ["-S"] or prog == "dpkg" and others == ["--search"]:
        return "pattern"
    if prog == "crictl" and args and args[0].text in ("inspect", "inspectp", "inspecti", "logs") and index > 0 \
            and not (before or "").startswith("-"):
        return "id"
    if prog == "ldd" and all((t or "").startswith("-") for t in others):
        return "path"
    return None


def accepted_output_args(cmd: _Cmd) -> list[Arg] | None:
    """cmd's arguments with each read's output replaced by a stand-in of its kind, when every one of them
    lands where it is harmless (see the module's docstring); None when one does not."""
    replaced = list(cmd.args)
    for index, arg in enumerate(cmd.args):
        if arg.output_of is None:
            continue
        where = _where(cmd, index)
        if where is None:
            return None
        shape = output_shape(arg.output_of)
        if where == "path" and shape != "probe":
            return None  # ldd opens the path: only one that installed package code printed
        unquoted = arg.node is not None and arg.node.type == "command_substitution"
        # Unquoted, it is split into words that may be options; dpkg stops reading options at the first
        # operand, so after a path's first word (`/...`) the rest are only more patterns.
        # ldd's probe path is taken as the probe's package code printed it (see "path" above).
        if unquoted and not (shape == "tokens" or shape == "absolute-path" and where == "pattern"
                             or shape == "probe" and where == "path"):
            return None
        replaced[index] = Arg(_PLACEHOLDERS[where])
    return replaced
