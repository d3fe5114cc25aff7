"""What a word becomes: the values of its expansions (variables followed through assignments
and loops, `${x:-default}`, substrings), word splitting on IFS, and a finding for every expansion or
substitution whose value the classifier cannot know before the command runs."""

from __future__ import annotations

import re

from tree_sitter import Node

from agent.safety.classifier.command import Arg, MUTATING, READ_ONLY, _Seg, _Stdin
from agent.safety.classifier.outputs import whole_word_substitution
from agent.safety.classifier.tree import _excerpt, _inner_text, _plain_variable, _text
from agent.safety.classifier.words import _ansi_c, _arg_from, _product, _split_ifs, _unquote_double, _unquote_word


# What the outer command sees for a reading process substitution: a pipe's path (bash's first is /dev/fd/63).
_READ_PIPE = "/dev/fd/63"


class _Expansions:
    """The words of a command: each word node's possible word lists, and the findings its expansions call for; a
    part of `_Analysis` (analysis.py), whose state and other parts it reaches through self."""

    def expand(self, node: Node, split: bool = True, plain_variables: bool = False,
               outputs: bool = False) -> list[list[Arg]]:
        """The possible word lists one word node becomes; records a finding for every expansion in it
        (but plain `$x` / `${x}` where plain_variables says the command cannot misuse their values).

        With outputs (a command's arguments, a loop's words), a whole word that is a read-only command's
        output becomes one Arg with output_of set and no finding: whoever takes it judges it (outputs.py)."""
        if outputs:
            inner = self._read_only_output(node)
            if inner is not None:
                return [[Arg(None, node=node, output_of=inner)]]
        self._note_expansions(node, plain_variables)
        return [self._fields(segments, node, split) for segments in self._segments(node)]

    def _read_only_output(self, node: Node) -> str | None:
        """The inner command of a word that is one `$(...)` whose command is read-only, judged on its own."""
        sub = whole_word_substitution(node)
        if sub is None or _single_word_substitution(sub) or self.substitution_output(sub) is not None:
            return None  # not one, or one whose output the classifier works out (`$(printf '\x72\x6d')`)
        inner = _inner_text(sub)
        self.spend(1 + len(inner) // 8)
        return inner if self._read_only_alone(inner) else None

    def _read_only_alone(self, command: str) -> bool:
        """Whether a command is read-only judged on its own, as `classify` would judge it: a fresh analysis
        of the same kind (not a nested one: its findings must not become the outer command's)."""
        alone = type(self)(workload=False)
        try:
            alone.analyze_command(command)
        except Exception:  # too complex, too deep, or a classifier bug: classify refuses it, so not a read
            return False
        return alone.verdict().cls is READ_ONLY

    def _note_expansions(self, node: Node, plain_variables: bool = False) -> None:
        pending = [node]
        while pending:
            current = pending.pop()
            kind = current.type
            if kind == "command_substitution" and _single_word_substitution(current):
                continue  # `$(uname -r)`: a read-only command whose output is one plain word
            if kind == "process_substitution" and self._reading_substitution(current):
                pending.extend(current.named_children)  # `diff <(pip freeze) req.lock`: judged as the read it is
                continue
            if kind in ("command_substitution", "process_substitution"):
                label = "$(...)" if kind == "command_substitution" else f"{_text(current.children[0])}...)"
                what = "command substitution" if kind == "command_substitution" else "process substitution"
                rule = "substitution" if kind == "command_substitution" else "process-substitution"
                inner = _inner_text(current)
                self.add(
                    MUTATING,
                    rule,
                    f"the {what} `{_excerpt(current)}` runs a command; substitutions are not accepted as read-only",
                    structural=True,
                    decoded=inner,
                )
                scope = self.nested(label, decoded=inner)
                # `>(...)` reads what the outer command writes: a shell in there runs piped text
                writes_into = current.children and current.children[0].type == ">("
                feed = (self.output or _Stdin("pipe", source="its output")) if writes_into else None
                for child in current.named_children:
                    scope.visit(child, feed)
                continue
            if kind in ("simple_expansion", "expansion") and not (plain_variables and (_plain_variable(current) or
                                                                                      _text(current) == "$?")) \
                    and not self._known_variable(current):
                self.add(
                    MUTATING,
                    "variable-expansion",
                    f"`{_excerpt(current)}` expands to a value known only at run time; the read-only allowlist "
                    "accepts only literal arguments",
                    structural=True,
                )
            elif kind == "arithmetic_expansion":
                self.add(
                    MUTATING,
                    "arithmetic-expansion",
                    f"the arithmetic expansion `{_excerpt(current)}` can run commands through array subscripts",
                    structural=True,
                )
            pending.extend(current.named_children)

    def _known_variable(self, node: Node) -> bool:
        """`$f` of a `for f in LITERALS` loop: each value is known, and the command is judged with each."""
        name = _plain_variable(node)
        values = self.vars.get(name) if name is not None else None
        return bool(values) and None not in values

    def _segments(self, node: Node, quoted: bool = False) -> list[tuple[_Seg, ...]]:
        """Alternatives, each a sequence of pieces whose texts concatenate into the word."""
        kind = node.type
        raw = _text(node)
        if kind in ("word", "number"):
            if quoted:
                return [(_Seg(raw, quoted=True),)]
            text, glob = _unquote_word(raw)
            return [(_Seg(text, glob=glob),)]
        if kind == "raw_string":
            return [(_Seg(raw[1:-1], quoted=True),)]
        if kind == "ansi_c_string":
            return [(_Seg(_ansi_c(raw[2:-1]), quoted=True),)]
        if kind == "string_content":
            return [(_Seg(_unquote_double(raw), quoted=True),)]
        if kind in ("string", "translated_string", "concatenation"):
            inner_quoted = quoted or kind != "concatenation"
            return _product([self._segments(c, inner_quoted) for c in node.named_children])
        if kind in ("simple_expansion", "expansion"):
            values = self._expansion_values(node)
            if values is None:
                return [(_Seg(None),)]
            return [(_Seg(v, quoted=quoted, split=not quoted),) for v in sorted(values, key=lambda v: v or "")]
        if kind == "command_substitution" and _single_word_substitution(node):
            return [(_Seg(_SINGLE_WORD, quoted=True),)]
        if kind == "command_substitution":
            output = self.substitution_output(node)
            if output is None:
                return [(_Seg(None),)]
            return [(_Seg(output.rstrip("\n"), quoted=quoted, split=not quoted),)]
        if kind == "brace_expression":
            return [(_Seg(raw, quoted=quoted, glob=not quoted),)]
        if kind == "process_substitution" and self._reading_substitution(node):
            return [(_Seg(_READ_PIPE, quoted=True),)]
        return [(_Seg(None),)]

    def _reading_substitution(self, node: Node) -> bool:
        """`<(COMMAND)` of a command that is read-only judged on its own: the outer command gets a pipe to read
        (its path, /dev/fd/N, reads as any pipe does). `>(...)` is handed what the outer command writes."""
        if not node.children or node.children[0].type != "<(":
            return False
        inner = _inner_text(node)
        self.spend(1 + len(inner) // 8)
        return self._read_only_alone(inner)

    def _expansion_values(self, node: Node) -> frozenset[str | None] | None:
        """Possible values of `$x`, `${x}`, `${x:-default}` or `${x:0:2}`; None when nothing is known."""
        name = _plain_variable(node)
        if name is not None:
            return self._variable(name)
        named = node.named_children
        if node.type != "expansion" or not named or named[0].type != "variable_name":
            return None
        current = self._variable(_text(named[0])) or frozenset({None})
        operators = [c.type for c in node.children if c.is_named is False and c.type not in ("${", "}")]
        operands = named[1:]
        if operators in ([":-"], ["-"], [":="], ["="]) and len(operands) == 1:
            # unset (the usual case) gives the default, so both readings are followed
            default = self.literal(operands[0])
            return current | {default}
        if operators in ([":"], [":", ":"]) and all(o.type == "number" for o in operands):
            numbers = [int(_text(o)) for o in operands]
            start, length = numbers[0], numbers[1] if len(numbers) > 1 else None
            return frozenset(
                None if v is None else (v[start:] if length is None else v[start:start + length]) for v in current
            )
        return None

    def _variable(self, name: str) -> frozenset[str | None] | None:
        if name == "IFS" and name not in self.vars:
            return frozenset({" \t\n"})  # bash sets IFS itself; `cat${IFS}/etc/passwd` splits on it
        return self.vars.get(name)

    def _fields(self, segments: tuple[_Seg, ...], node: Node, split: bool = True) -> list[Arg]:
        """Join pieces into words, applying word splitting to unquoted expansions."""
        if any(s.text is None for s in segments):
            return [Arg(None, node=node)]
        if not split:
            return [_arg_from(list(segments), node, braces=False)[0]]
        separators = self._ifs()
        fields: list[list[_Seg]] = []
        current: list[_Seg] = []
        started = False
        for segment in segments:
            if not segment.split:
                current.append(segment)
                started = True
                continue
            for index, piece in enumerate(_split_ifs(segment.text or "", separators)):
                if index > 0 and started:
                    fields.append(current)
                    current, started = [], False
                if piece:
                    current.append(_Seg(piece, glob=any(c in piece for c in "*?[")))
                    started = True
        if started:
            fields.append(current)
        return [arg for f in fields for arg in _arg_from(f, node)]

    def _ifs(self) -> str:
        values = self.vars.get("IFS")
        if not values:
            return " \t\n"
        known = [v for v in values if v is not None]
        if len(known) == 1 and None not in values:
            return known[0]
        return "".join(sorted(set(" \t\n" + "".join(known))))

    def literal(self, node: Node) -> str | None:
        """The single word a node stands for, without recording findings; None if not knowable."""
        alternatives = self._segments(node)
        if len(alternatives) != 1:
            return None
        fields = self._fields(alternatives[0], node)
        return fields[0].text if len(fields) == 1 else None


# Read-only commands whose output is one word of letters, digits and `._+:/-` that never starts with
# `-` (a kernel release, a machine name, a count, a user name): `ls /lib/modules/$(uname -r)/` is a
# read however bash splits it, since the word can neither become an option nor split in two.
_SINGLE_WORD_COMMANDS = re.compile(
    r"uname( -[rmspio])?|nproc( --all)?|arch|whoami|id -[ug]n?|hostname( -s)?|getconf [A-Z_0-9]+|"
    r"date \+(%[a-zA-Z]|[-_:.])+|python3? -c 'import sys; print\(sys\.version_info\[0\]\)'"
)
_SINGLE_WORD = "single-word"  # what such a substitution stands for in the words it is part of


def _single_word_substitution(node: Node) -> bool:
    if node.type != "command_substitution" or _text(node.children[0]) != "$(":
        return False
    return _SINGLE_WORD_COMMANDS.fullmatch(" ".join(_inner_text(node).split())) is not None
