"""The analysis of one shell command: walks the bash parse tree, follows expansions, wrappers and
pipelines, hands each simple command to its program family, and turns the findings into a verdict.

This module is the classifier's entry: `classify`, `classify_workload` and `plain_words`. The walk is
`_Analysis` (analysis.py), made of what it judges: statements.py (the command walk), simple_commands.py
(each command to its program family), pipes.py (pipelines and the data they carry), redirections.py
(files opened and written), expansions.py (what words become), under the work budget of budget.py."""

from __future__ import annotations

from agent.safety.classifier.analysis import _Analysis
from agent.safety.classifier.budget import _MAX_TEXT, _TOO_COMPLEX, _TooComplex
from agent.safety.classifier.command import FORBIDDEN, READ_ONLY
from agent.safety.classifier.tree import parse_bash
from tools.base import Risk


# Node types a plain simple command may contain; anything else (expansions, substitutions,
# redirections, lists, pipelines) means its words are not known before it runs.
_PLAIN_NODES = {"program", "command", "command_name", "word", "raw_string", "string", "string_content", '"', "number"}


def plain_words(command: str) -> list[str] | None:
    """The words of a single simple command with nothing to expand, substitute or redirect, or None.

    The safety policy matches prefix authorizations on these whole words.
    """
    data = command.encode("utf-8", "surrogateescape")
    root = parse_bash(data).root_node
    if root.has_error or len(root.named_children) != 1 or root.named_children[0].type != "command":
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        if node.type not in _PLAIN_NODES:
            return None
        stack.extend(node.children)
    words: list[str] = []
    for child in root.named_children[0].named_children:
        node = child.named_children[0] if child.type == "command_name" else child
        text = data[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")  # the original, not the parsed copy
        if node.type in ("raw_string", "string"):
            words.append(text[1:-1])  # a string holds only string_content here: no expansions (checked above)
        elif node.type in ("word", "number") and not ("\\" in text or any(c in text for c in "*?[{~")):
            words.append(text)  # escapes and globs would change the word when the shell runs it
        else:
            return None
    return words


def classify(command: str) -> Risk:
    """Risk of one shell command, with the rule that decided it."""
    return _classify(command, workload=False)


def classify_workload(command: str) -> Risk:
    """Like classify, but the known benchmark entry points count as read-only workloads.

    Only when the rest of the command is clean by the same rules; otherwise the answer is
    classify(command), or what the workload reading found when that is worse.
    """
    risk = _classify(command, workload=True)
    if risk.cls is READ_ONLY:
        return risk
    general = classify(command)
    # What the workload reading found (e.g. --trust-remote-code) may be worse than the general one.
    return risk if risk.cls.rank > general.cls.rank else general


def _classify(command: str, workload: bool) -> Risk:
    if len(command) > _MAX_TEXT:
        return Risk(cls=FORBIDDEN, rule="too-complex", reason=_TOO_COMPLEX.format(what=f"long ({len(command)} "
                                                                                         f"characters)"))
    analysis = _Analysis(workload)
    try:
        analysis.analyze_command(command)
    except _TooComplex:
        return Risk(cls=FORBIDDEN, rule="too-complex", reason=_TOO_COMPLEX.format(what="complex"))
    except RecursionError:
        return Risk(cls=FORBIDDEN, rule="too-deep", reason="the command nests too deeply to analyse, so it is refused")
    except Exception as error:  # fail closed: a classifier bug must never let a command through
        return Risk(
            cls=FORBIDDEN,
            rule="classifier-error",
            reason=f"the classifier failed on this command ({type(error).__name__}: {error}); it is refused",
        )
    return analysis.verdict()
