"""Simple commands: their prefix assignments, their words expanded, and each word list handed
to its program family's handler (agent/safety/classifier/families/); a name known only at run time,
or a glob, is guessed at, and a guess may only raise the class."""

from __future__ import annotations

import re

import fnmatch
import posixpath

from tree_sitter import Node

from agent.safety.classifier import families  # noqa: F401  (registers every program family's handlers)
from agent.safety.classifier.command import Arg, MUTATING, _CODE_LOADING_VARIABLES, _Cmd, _MAX_ALTERNATIVES, _Stdin
from agent.safety.classifier.node_types import _REDIRECT_TYPES
from agent.safety.classifier.outputs import accepted_output_args
from agent.safety.classifier.registry import _HANDLERS, _handler_for
from agent.safety.classifier.tree import _excerpt, _has_expansion, _text
from agent.safety.classifier.words import _combine, _join


# Variables that only narrow which GPUs a command sees (CUDA's own: no code, file or host is named by
# them), with literal values: indexes, UUIDs of GPUs or MIG instances.
_DEVICE_SELECTION = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER"})
_DEVICE_LIST = re.compile(r"""(["']?)[A-Za-z0-9,._:/-]*\1""")


class _SimpleCommands:
    """Simple commands: from the parse node, or as words, to the handler of their program; a part of `_Analysis`
    (analysis.py), whose state and other parts it reaches through self."""

    def _visit_command(self, node: Node, stdin: _Stdin | None) -> None:
        prefix, words, redirects = [], [], []
        for child in node.named_children:
            if child.type == "variable_assignment":
                prefix.append(child)
            elif child.type in _REDIRECT_TYPES:
                redirects.append(child)
            elif child.type == "command_name":
                words.append(child.named_children[0] if child.named_child_count else child)
            elif child.type != "comment":
                words.append(child)
        for assignment in prefix:
            self._prefix_assignment(assignment)
        stdin = self._redirects(redirects, stdin)
        if not words:
            return
        name_node = words[0]
        dynamic = _has_expansion(name_node)
        if dynamic:
            self.add(
                MUTATING,
                "dynamic-command",
                f"the command name `{_excerpt(name_node)}` is computed at run time, so the classifier cannot "
                "see for sure what runs",
                structural=True,
            )
        # `echo $PATH`, `echo $?`: echo's options only shape its output, so a plain variable (or the last
        # status) in its arguments, whatever its value, cannot make it write or run anything (subscripts,
        # `${!x}` and `${x:=y}` still count: they evaluate or assign).
        self.spend(len(words))  # expanding and judging each word costs about a unit
        plain_echo = not dynamic and self.literal(name_node) == "echo"
        expanded = [self.expand(w, plain_variables=plain_echo and i > 0, outputs=i > 0) for i, w in enumerate(words)]
        for args in _combine(expanded):
            if not args:
                continue
            if args[0].text is None:
                self._unknown_program(args, stdin, _excerpt(name_node))  # the finding is recorded above
            elif dynamic:
                self.nested(f"{_excerpt(name_node)} = {args[0].text}", decoded=_join(args)).run_words(args, stdin)
            else:
                self.run_words(args, stdin)

    def _unknown_program(self, args: list[Arg], stdin: _Stdin | None, shown: str) -> None:
        """A command name known only at run time: guess what it could be, only to raise the class."""
        if self.speculative:
            return  # one level of guessing: guesses inside guesses multiply without bound
        texts = [a.text for a in args]
        if len(args) > 1 and texts[1] is not None and not (texts[1] or "").startswith("-"):
            # `$SUDO rm -rf /`: it may be a wrapper
            self.speculate(f"`{shown}` if it wraps a command", _join(args[1:])).run_words(args[1:], stdin)
        if "-c" in texts and texts.index("-c") + 1 < len(texts):
            code = args[texts.index("-c") + 1]
            if code.text is not None:  # `$SHELL -c '...'`
                self.speculate(f"`{shown}` if it is a shell").inner_source(code.text, f"{shown} -c")
        if stdin is not None and stdin.data is not None:
            self.speculate(f"`{shown}` if it is a shell").code_text(
                stdin.data.decode("utf-8", "replace"), "sh", f"| {shown}"
            )

    def _prefix_assignment(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None else "?"
        value = node.child_by_field_name("value")
        if name in _DEVICE_SELECTION and (value is None or _DEVICE_LIST.fullmatch(_text(value))):
            return  # `CUDA_VISIBLE_DEVICES=0 python3 -c ...`: which GPUs the command sees, nothing it runs or writes
        if name in _CODE_LOADING_VARIABLES:
            why = f"`{name}=...` before the command changes which code it loads or runs"
        else:
            why = f"`{name}=...` before the command changes its environment"
        self.add(MUTATING, "assignment", why + "; assignments are not accepted as read-only", structural=True)
        if value is not None:
            self.expand(value, split=False)

    def run_words(self, args: list[Arg], stdin: _Stdin | None) -> None:
        """Classify one simple command given as words; args[0] is the command name."""
        self.spend(1 + len(args) // 8)
        name = args[0].text
        if name is None:
            self.add(
                MUTATING,
                "dynamic-command",
                "the command name is computed at run time, so the classifier cannot see for sure what runs",
                structural=True,
            )
            self._unknown_program(args, stdin, _excerpt(args[0].node) if args[0].node else "...")
            return
        if not name:
            return  # nothing runs: an empty name, or a piece the parser left missing
        if name in ("{", "}", "!"):
            # tree-sitter reads `time { rm -rf /; }` as `time` with the words `{ rm -rf /`: a group after all
            if name == "{":
                self.add(MUTATING, "group", "a `{ ...; }` group is not accepted as read-only", structural=True)
            if name != "}" and len(args) > 1:
                self.run_words(args[1:], stdin)
            return
        prog = posixpath.basename(name) if "/" in name else name
        if args[0].pattern:
            self._glob_program(name, prog, args, stdin)
        cmd = _Cmd(name, prog, list(args[1:]), stdin)
        if any(a.output_of is not None for a in cmd.args):
            cmd = self._with_outputs(cmd)
        handler = _handler_for(prog)
        if handler is not None:
            handler(self, cmd)
        else:
            self.add(
                MUTATING,
                "unknown-command",
                f"`{name}` is not on the read-only allowlist, and the classifier does not know what it changes",
            )

    def _with_outputs(self, cmd: _Cmd) -> _Cmd:
        """A read's output among the arguments: judged with a stand-in where it is harmless (outputs.py), else
        refused as the substitution it is."""
        accepted = accepted_output_args(cmd)
        if accepted is not None:
            return _Cmd(cmd.name, cmd.prog, accepted, cmd.stdin)
        for arg in cmd.args:
            if arg.output_of is not None:
                self.add(MUTATING, "substitution",
                         f"the command substitution `$({arg.output_of})` runs a read whose output `{cmd.prog}` would "
                         f"take where an unknown value is not harmless; substitutions are accepted only as PIDs, "
                         f"IDs and search patterns", structural=True, decoded=arg.output_of)
        return cmd

    def _glob_program(self, name: str, prog: str, args: list[Arg], stdin: _Stdin | None) -> None:
        """`/bin/r? -rf /`: the program is whichever file the pattern matches; try the known ones."""
        self.add(
            MUTATING,
            "dynamic-command",
            f"the command name `{name}` is a glob pattern, so what runs depends on the files present",
            structural=True,
        )
        if self.speculative:
            return  # one level of guessing: guesses inside guesses multiply without bound
        for candidate in sorted(k for k in _HANDLERS if fnmatch.fnmatchcase(k, prog))[:_MAX_ALTERNATIVES]:
            guess = [Arg(candidate)] + args[1:]
            self.speculate(f"`{name}` matching {candidate}", _join(guess)).run_words(guess, stdin)
