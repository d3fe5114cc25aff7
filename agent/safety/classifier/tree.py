"""The bash parser (tree-sitter-bash) and helpers that read its trees."""

from __future__ import annotations

import re
import shlex
import threading

import tree_sitter_bash
from tree_sitter import Language, Node, Parser, Tree

# One parser for the process; tree-sitter parsers are not thread-safe, parsing is fast.
_PARSER = Parser(Language(tree_sitter_bash.language()))
_PARSER_LOCK = threading.Lock()

# tree-sitter-bash's scanner calls isdigit()/isalpha() on the lookahead code point (after `{`, `?`,
# `-`, `$`); above 255 that reads outside the C library's table and can crash the process. Bash treats
# every non-ASCII character as an ordinary word character, so each byte of such a character (and of
# invalid UTF-8) is replaced by `x` before parsing: the parse and all byte offsets stay the same.
_UNSAFE_FOR_SCANNER = re.compile(rb"[\xc2\xc3][\x80-\xbf]|[\x80-\xff]")


def _parser_safe(data: bytes) -> bytes:
    return _UNSAFE_FOR_SCANNER.sub(lambda m: m.group() if len(m.group()) == 2 else b"x", data)


_EXPANSION_TYPES = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion"}
)


def parse_bash(data: bytes) -> Tree:
    """One parse, under the lock: tree-sitter parsers are not thread-safe, and parsing is fast."""
    with _PARSER_LOCK:
        return _PARSER.parse(_parser_safe(data))


# --------------------------------------------------------------------------- tree helpers


def _text(node: Node | None) -> str:
    if node is None or node.text is None:
        return ""
    return node.text.decode("utf-8", "replace")


def _excerpt(node_or_text: Node | str | None, limit: int = 60) -> str:
    text = node_or_text if isinstance(node_or_text, str) else _text(node_or_text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _inner_text(node: Node) -> str:
    """The command inside `$(...)`, backticks or `<(...)`."""
    text = _text(node)
    for opener, closer in (("$(", ")"), ("<(", ")"), (">(", ")"), ("`", "`")):
        if text.startswith(opener) and text.endswith(closer):
            return text[len(opener): -len(closer)].strip()
    return text


# Constructs inside which bash never accepts an unescaped newline between two parts.
_ONE_LINE_TYPES = frozenset(
    {"command", "pipeline", "list", "redirected_statement", "declaration_command", "unset_command", "file_redirect",
     "herestring_redirect", "variable_assignment", "concatenation", "negated_command"}
)


def _swallowed_newline(root: Node, data: bytes) -> int | None:
    """Offset of a newline the parser folded into one command, or None. Two grammar bugs do it:
    `a | b | c` NL `d | e && f` comes out as `c d`, and `ls` NL `\\rm x` gives ls a newline-led argument.
    A newline right after `|`, `&&` or `||`, or escaped by a backslash, is a continuation."""
    pending = [root]
    while pending:
        node = pending.pop()
        if node.type in ("word", "number", "extglob_pattern", "regex"):
            position = _unescaped_newline(data[node.start_byte: node.end_byte])
            if position is not None:
                return node.start_byte + position
        if node.type in _ONE_LINE_TYPES:
            for before, after in zip(node.children, node.children[1:]):
                if before.type in ("|", "|&", "&&", "||"):
                    continue
                gap = data[before.end_byte: after.start_byte].replace(b"\\\n", b"  ")
                position = gap.find(b"\n")
                if position >= 0:
                    return before.end_byte + position
        pending.extend(node.children)
    return None


def _unescaped_newline(text: bytes) -> int | None:
    backslashes = 0
    for position, byte in enumerate(text):
        if byte == 0x0A and backslashes % 2 == 0:
            return position
        backslashes = backslashes + 1 if byte == 0x5C else 0
    return None


def _first_error(node: Node) -> Node | None:
    pending = [node]
    while pending:
        current = pending.pop(0)
        if current.is_error or current.is_missing:
            return current
        pending.extend(current.children)
    return None


# Words that open or close a compound command when they start one: `{ {rm,-rf,/}; }` runs `{rm,-rf,/}`.
_RESERVED_STARTS = frozenset({"{", "}", "!", "if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                              "time"})


def _rough_commands(text: str, by_line: bool = False) -> list[list[str]]:
    """Split text that bash's grammar rejected into word lists at shell operators; [] if even that fails.

    `by_line` reads it as bash would line by line: newlines end commands, and reserved words
    that open or close a compound command are dropped from the start of one. Callers use both
    readings, so splitting more can only add commands to judge, never hide one.
    """
    separators = ";&|()<>" + ("\n" if by_line else "")
    lexer = shlex.shlex(text, posix=True, punctuation_chars=separators)
    if by_line:
        lexer.whitespace = " \t\r"
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError:
        return []
    commands: list[list[str]] = [[]]
    for token in tokens[:256]:
        if token and all(c in separators for c in token):
            commands.append([])
        elif by_line and not commands[-1] and token in _RESERVED_STARTS:
            continue
        else:
            commands[-1].append(token)
    return [c for c in commands if c]


def _first_descendant(node: Node | None, kind: str) -> Node | None:
    pending = [node] if node is not None else []
    while pending:
        current = pending.pop(0)
        if current.type == kind:
            return current
        pending.extend(current.named_children)
    return None


def _has_expansion(node: Node) -> bool:
    pending = [node]
    while pending:
        current = pending.pop()
        if current.type in _EXPANSION_TYPES:
            return True
        pending.extend(current.named_children)
    return False


def _is_pipe_tail(node: Node) -> bool:
    return node.type == "pipeline" and node.child_count > 0 and node.children[0].type in ("|", "|&")


def _heredoc_tail(node: Node) -> Node | None:
    for redirect in node.named_children:
        if redirect.type == "heredoc_redirect":
            for child in redirect.named_children:
                if _is_pipe_tail(child):
                    return child
    return None


def _redirected_stages(body: Node) -> list[Node]:
    """The pipeline a trailing redirection feeds: tree-sitter hangs `a && b > f` on the whole list,
    bash redirects only b (and in `a | b > f`, b's output, fed by a)."""
    node = body
    while True:
        if node.type == "list" and node.named_children:
            node = node.named_children[-1]
            continue
        stages, trailing = _pipeline_parts(node)
        if trailing:
            node = trailing[-1]
            continue
        return stages


def _pipeline_stages(node: Node) -> list[Node]:
    return _pipeline_parts(node)[0]


def _pipeline_parts(node: Node) -> tuple[list[Node], list[Node]]:
    """The stages of a pipeline, and the commands after a trailing `&&`/`||`.

    tree-sitter-bash reads `a | b | c && d` as `a | (b | c && d)`; bash reads `(a | b | c) && d`.
    A bare list is never a pipeline stage in bash, so such a list is unfolded here.
    """
    if node.type == "redirected_statement":
        tail = _heredoc_tail(node)
        if tail is None:
            return [node], []
        stages, trailing = _pipeline_parts(tail)
        return [node] + stages, trailing
    if node.type != "pipeline":
        return [node], []
    children = [c for c in node.named_children if c.type != "comment"]
    stages: list[Node] = []
    trailing: list[Node] = []
    for child in children[:-1]:
        stages.extend(_pipeline_parts(child)[0])
    last = children[-1] if children else None
    while last is not None and last.type == "list":
        parts = [c for c in last.named_children if c.type != "comment"]
        trailing = parts[1:] + trailing
        last = parts[0] if parts else None
    if last is not None:
        last_stages, last_trailing = _pipeline_parts(last)
        stages.extend(last_stages)
        trailing = last_trailing + trailing
    return stages, trailing


def _plain_variable(node: Node) -> str | None:
    """`$x` or `${x}` -> "x"; anything fancier (`${x:-y}`, `$1`) -> None."""
    named = node.named_children
    if len(named) == 1 and named[0].type == "variable_name":
        if node.type == "simple_expansion" or [c.type for c in node.children] == ["${", "variable_name", "}"]:
            return _text(named[0])
    return None


def _is_fork_bomb(name: str, body: Node) -> bool:
    """A function that calls itself in a pipeline or in the background: `:(){ :|:& };:`."""
    calls_itself = in_pipeline = False
    backgrounds = False
    pending = [body]
    while pending:
        current = pending.pop()
        if current.type == "command":
            command_name = current.child_by_field_name("name")
            if command_name is not None and _text(command_name) == name:
                calls_itself = True
                in_pipeline = in_pipeline or (current.parent is not None and current.parent.type == "pipeline")
        if any(c.type == "&" for c in current.children):
            backgrounds = True
        pending.extend(current.children)
    return calls_itself and (in_pipeline or backgrounds)
