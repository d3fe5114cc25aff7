"""Plain words of a single simple shell command, from the real bash parser.

Used where the policy matches commands on whole words (authorizations by prefix): only a
command with nothing to expand, substitute or redirect has words we can vouch for.
"""

from __future__ import annotations

import functools

import tree_sitter
import tree_sitter_bash

# Node types a plain simple command may contain; anything else (expansions, substitutions,
# redirections, lists, pipelines) means its words are not known before it runs.
_PLAIN = {"program", "command", "command_name", "word", "raw_string", "string", "string_content", '"', "number"}


@functools.lru_cache(maxsize=1)
def parser() -> tree_sitter.Parser:
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def plain_words(command: str) -> list[str] | None:
    tree = parser().parse(command.encode())
    root = tree.root_node
    if root.has_error or len(root.named_children) != 1 or root.named_children[0].type != "command":
        return None
    words: list[str] = []
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type not in _PLAIN:
            return None
        stack.extend(node.children)
    for child in root.named_children[0].named_children:
        node = child.named_children[0] if child.type == "command_name" else child
        text = node.text.decode()
        if node.type == "raw_string":
            words.append(text[1:-1])
        elif node.type == "string":
            words.append(text[1:-1])  # only string_content inside: no expansions (checked above)
        elif node.type in ("word", "number"):
            if "\\" in text or any(c in text for c in "*?[{~"):
                return None  # escapes and globs change the word when the shell runs it
            words.append(text)
        else:
            return None
    return words
