"""The analysis of one shell command: walks the bash parse tree, follows expansions, wrappers and
pipelines, hands each simple command to its program family, and turns the findings into a verdict."""

from __future__ import annotations

import fnmatch
import posixpath
import re
from contextlib import contextmanager
from typing import Iterator

from tree_sitter import Node

from agent.safety.classifier import families  # noqa: F401  (registers every program family's handlers)
from agent.safety.classifier.code import _scan_embedded_commands, _scan_python
from agent.safety.classifier.command import (
    _CODE_LOADING_VARIABLES,
    _DOWNLOADERS,
    _MAX_ALTERNATIVES,
    _MAX_NESTING,
    DESTRUCTIVE,
    FORBIDDEN,
    MUTATING,
    READ_ONLY,
    Arg,
    _Cmd,
    _Finding,
    _Seg,
    _Stdin,
)
from agent.safety.classifier.families.files import _FREE_ARGS
from agent.safety.classifier.families.interpreters import _WORKLOAD_WRITE_FLAGS, test_subscript_problem
from agent.safety.classifier.families.wrappers import _WRAPPER_PARSERS, _innermost_prog
from agent.safety.classifier.filters import _FILTERS, _run_filter
from agent.safety.classifier.paths import _write_risk, normalize, pattern_read_risk, read_risk, trusted_program_path
from agent.safety.classifier.registry import _HANDLERS, _handler_for
from agent.safety.classifier.tree import (
    _excerpt,
    _first_descendant,
    _first_error,
    _has_expansion,
    _heredoc_tail,
    _inner_text,
    _is_fork_bomb,
    _is_pipe_tail,
    _pipeline_parts,
    _pipeline_stages,
    _plain_variable,
    _redirected_stages,
    _rough_commands,
    _swallowed_newline,
    _text,
    parse_bash,
)
from agent.safety.classifier.words import (
    _ansi_c,
    _arg_from,
    _combine,
    _expand_braces,
    _join,
    _may_become_option,
    _product,
    _split_ifs,
    _unquote_double,
    _unquote_word,
)
from tools.base import Risk, RiskClass

# --------------------------------------------------------------------------- public API


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


# Bounded cost: the analysis spends units of work (a parsed KiB, a visited node, a command judged)
# and stops at a budget, refusing the command as too complex to judge instead of getting slow.
# The budget is set so that the worst inputs stay well under 100 ms (benchmarks/classifier_cost.py);
# the longest commands of the corpora and recorded sessions spend under a sixth of it.
_MAX_TEXT = 16 * 1024  # bytes of command text, before anything is parsed
_MAX_WORK = 600


class _TooComplex(Exception):
    pass


_TOO_COMPLEX = ("the command is too {what} to judge in bounded time, so it is refused: split it into "
                "smaller commands, or copy large files with a tool instead of inline text")


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


# --------------------------------------------------------------------------- the analysis


_WORD_TYPES = frozenset(
    {
        "word", "number", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation",
        "simple_expansion", "expansion", "command_substitution", "process_substitution",
        "arithmetic_expansion", "brace_expression", "extglob_pattern", "array",
    }
)
_REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
# Leaves that carry no behaviour of their own inside the constructs that contain them.
_QUIET_TYPES = frozenset(
    {"comment", "variable_name", "special_variable_name", "test_operator", "regex", "file_descriptor",
     "heredoc_start", "heredoc_end", "heredoc_content", "string_content"}
)
_CONTROL_FLOW = {
    "if_statement": "if",
    "for_statement": "for",
    "c_style_for_statement": "for ((...))",
    "while_statement": "while",
    "case_statement": "case",
}


class _Analysis:
    """Walks one parse tree and collects findings; nested contexts share the findings list."""

    def __init__(self, workload: bool):
        self.workload = workload
        self.changed_dir = False  # a `cd` ran earlier: relative paths no longer mean the project's files
        # The working directory as far as known, for what relative paths open. It starts as the login
        # directory, one level below / (`../dev/watchdog` reaches /dev from /root); None after a `cd`
        # to a place the classifier cannot know.
        self.cwd: str | None = "/~"
        self.findings: list[_Finding] = []
        self.allowed: list[str] = []  # allowlisted commands seen, for the read-only reason
        self.trees: list = []  # keeps parse trees (and so their nodes) alive
        # Possible values of shell variables assigned in the command; None stands for "unknown".
        self.vars: dict[str, frozenset[str | None]] = {}
        self.via: tuple[str, ...] = ()
        self.decoded: str | None = None
        self.depth = 0
        self.certain = True  # False inside branches and loops: an assignment there may not happen
        self.work = [0]  # shared: units of work spent on this command (see _MAX_WORK)
        self.network = [False]  # shared: a /dev/tcp descriptor was opened, so any pipe may carry a download
        # A guess at what might run (a glob or unknown command name): it may only raise the class,
        # so findings of mutating or below, and allowlist entries, are dropped.
        self.speculative = False
        self.output: _Stdin | None = None  # what the command being redirected prints, as far as known

    # -- contexts

    def speculate(self, via: str, decoded: str | None = None) -> "_Analysis":
        child = self.nested(via, decoded)
        child.speculative = True
        return child

    def nested(self, via: str | None = None, decoded: str | None = None) -> "_Analysis":
        """A context for an inner command: same findings, its own copy of the variables."""
        child = object.__new__(_Analysis)
        child.__dict__.update(self.__dict__)
        child.vars = dict(self.vars)
        if via is not None:
            child.via = self.via + (via,)
            child.depth = self.depth + 1
        if decoded is not None:
            child.decoded = decoded
        return child

    @contextmanager
    def uncertain(self) -> Iterator[None]:
        saved, self.certain = self.certain, False
        try:
            yield
        finally:
            self.certain = saved

    # -- recording

    def add(self, cls: RiskClass, rule: str, reason: str, *, structural: bool = False, decoded: str | None = None,
            reaches: str | None = None):
        if self.speculative and cls.rank <= MUTATING.rank:
            return
        self.findings.append(_Finding(cls, rule, reason, self.via, decoded or self.decoded, structural, reaches))

    def allow(self, cmd: _Cmd, label: str | None = None, check_globs: bool = True) -> None:
        """The command passed its allowlist check; it stays read-only unless something else says otherwise."""
        if self.speculative:
            return
        if cmd.prog == "cd":
            self.changed_dir = True
            target = [a.text for a in cmd.args if a.text != "--"]
            self.cwd = normalize(target[0], self.cwd) if target and target[0] and not cmd.args[-1].pattern \
                and target[0] != "-" else ("/~" if not target else None)
        if "/" in cmd.name and not trusted_program_path(cmd.name):
            self.add(
                MUTATING,
                "unknown-command",
                f"`{cmd.name}` is a program at a relative or world-writable path, not the system's `{cmd.prog}`",
            )
            return
        if check_globs and cmd.prog not in _FREE_ARGS:
            risky = next((a for a in cmd.args if _may_become_option(a)), None)
            if risky is not None:
                self.add(
                    MUTATING,
                    f"{cmd.prog}:glob-option",
                    f"the unquoted pattern `{risky.text}` could expand to a file name that `{cmd.prog}` reads as an option",
                )
                return
        self.allowed.append(label or cmd.prog)

    def allow_workload(self, cmd: _Cmd, label: str) -> None:
        """A known benchmark entry point, run by a plain or absolute interpreter path, with arguments
        that neither write files nor run code fetched with the model."""
        if self.speculative:
            return
        name = cmd.name
        if "/" in name and not trusted_program_path(name):
            # `./python3` is whatever lies in a directory the model chose, not an interpreter we know.
            self.add(MUTATING, "unknown-command", f"`{name}` is an interpreter at an untrusted path")
            return
        if label.startswith("benchmarks/") and self.changed_dir:
            self.add(MUTATING, "workload:cd", f"after `cd`, `{label}` is whatever lies in that directory, not the "
                                              f"project's benchmark script")
            return
        for arg in cmd.args:
            flag = (arg.text or "").split("=", 1)[0]
            if flag == "--trust-remote-code":
                self.add(DESTRUCTIVE, "workload:--trust-remote-code",
                         f"`{label}` with --trust-remote-code runs code downloaded with the model")
                return
            if flag.startswith(_WORKLOAD_WRITE_FLAGS):
                self.add(MUTATING, f"workload:{flag}", f"`{label}` with {flag} writes files on the host")
                return
        self.allowed.append(f"workload:{label}")

    def verdict(self) -> Risk:
        if not self.findings:
            return self._read_only_verdict()
        cls = READ_ONLY
        for finding in self.findings:
            cls = cls.at_least(finding.cls)  # findings only ever raise the class
        # The rule shown is the first finding of that class, preferring what a command does over shape.
        deciding = [f for f in self.findings if f.cls is cls]
        best = next((f for f in deciding if not f.structural), deciding[0])
        decoded = best.decoded or next((f.decoded for f in self.findings if f.decoded), None)
        reason = best.reason + (f" (via {' -> '.join(best.via)})" if best.via else "")
        reaches = next((f.reaches for f in self.findings if f.reaches), None)
        return Risk(cls=best.cls, rule=best.rule, reason=reason, decoded=decoded, reaches=reaches)

    def _read_only_verdict(self) -> Risk:
        names = list(dict.fromkeys(self.allowed))
        if not names:  # fail closed: a handler that neither allowed the command nor said why
            return Risk(cls=MUTATING, rule="unjudged",
                        reason="no rule accepted this command as read-only, so it is not read-only")
        workloads = [n for n in names if n.startswith("workload:")]
        if workloads:
            others = [n for n in names if not n.startswith("workload:")]
            rest = f"; every other command is on the read-only allowlist ({', '.join(others)})" if others else ""
            entries = ", ".join(w.removeprefix("workload:") for w in workloads)
            return Risk(cls=READ_ONLY, rule=workloads[0], reason=f"a known benchmark entry point ({entries}){rest}")
        if len(names) == 1:
            return Risk(
                cls=READ_ONLY,
                rule=f"allowlist:{names[0]}",
                reason=f"`{names[0]}` is on the read-only allowlist and its arguments passed the checks",
            )
        return Risk(
            cls=READ_ONLY,
            rule="allowlist",
            reason="every command is on the read-only allowlist with its arguments checked: " + ", ".join(names),
        )

    # -- entry points

    def analyze_command(self, command: str) -> None:
        data = command.encode("utf-8", "surrogatepass")
        if b"\x00" in data:
            self.add(MUTATING, "nul-byte", "the command contains a NUL byte, where the shell would cut it short")
        root = self.analyze_source(data)
        if not any(c.type != "comment" for c in root.named_children):
            self.add(MUTATING, "empty-command", "the command is empty, so there is nothing to allow", structural=True)

    def analyze_source(self, data: bytes) -> Node:
        root = self.parse(data)
        repaired, repaired_root = data, root
        for _ in range(_MAX_NESTING):
            offset = _swallowed_newline(repaired_root, repaired)
            if offset is None:
                break
            repaired = repaired[:offset] + b";" + repaired[offset:]
            repaired_root = self.parse(repaired)
        if repaired == data:
            self.analyze_tree(root)
            return root
        # tree-sitter-bash sometimes folds a line into the command before it, where bash ends the
        # command at the newline. The repaired text is bash's reading; the parser's own reading
        # may still only raise the class.
        self.nested().analyze_tree(repaired_root)
        self.speculate("the parser's reading").analyze_tree(root)
        return root

    def spend(self, units: int = 1) -> None:
        self.work[0] += units
        if self.work[0] > _MAX_WORK:
            raise _TooComplex

    def parse(self, data: bytes) -> Node:
        self.spend(1 + len(data) // 256)
        tree = parse_bash(data)
        self.trees.append(tree)
        return tree.root_node

    def analyze_tree(self, root: Node) -> None:
        if root.has_error:
            bad = _first_error(root)
            near = f" near `{_excerpt(bad)}`" if bad is not None and bad.text else ""
            self.add(
                MUTATING,
                "parse-error",
                f"bash cannot parse the command cleanly{near}, so not every part of it can be accounted for",
                structural=True,
            )
            self._unparsed_fallback(root)
        self.visit(root)

    def _unparsed_fallback(self, root: Node) -> None:
        """Text the parser rejects may still run (`{rm,-rf,/}` is valid bash): split all of it the
        simple way, at operators and parentheses, and let what it would run raise the class."""
        readings = _rough_commands(_text(root))
        readings += [words for words in _rough_commands(_text(root), by_line=True) if words not in readings]
        for words in readings:
            args = [Arg(w) for word in words for w in _expand_braces(word)]
            if args:
                self.speculate("unparsed text", _join(args)).run_words(args, None)

    def inner_source(self, text: str, via: str) -> None:
        """Shell code given as a string (`bash -c`, `eval`, decoded base64): parse and classify it too."""
        if self.depth >= _MAX_NESTING:
            self.add(FORBIDDEN, "too-deep", f"commands nested more than {_MAX_NESTING} levels deep are refused")
            return
        self.nested(via, decoded=text).analyze_source(text.encode("utf-8", "surrogatepass"))

    def inner_words(self, args: list[Arg], via: str, stdin: _Stdin | None = None) -> None:
        """A command given as separate words (`sudo CMD ARGS`): classify it as if typed alone."""
        if not args:
            return
        if self.depth >= _MAX_NESTING:
            self.add(FORBIDDEN, "too-deep", f"commands nested more than {_MAX_NESTING} levels deep are refused")
            return
        self.nested(via, decoded=_join(args)).run_words(args, stdin)

    def code_text(self, text: str, language: str, via: str) -> None:
        """Inline program text in some language: shell code is parsed, other languages scanned."""
        if language == "sh":
            self.inner_source(text, via)
        elif language == "python":
            _scan_python(self.nested(via, decoded=text), text)
        else:
            _scan_embedded_commands(self.nested(via, decoded=text), text, language)

    # -- statements

    def visit(self, node: Node, stdin: _Stdin | None = None) -> None:
        self.spend()
        kind = node.type
        if any(c.type == "&" for c in node.children):
            self.add(
                MUTATING,
                "background",
                "`&` leaves a command running in the background after the call returns",
                structural=True,
            )
        if kind in ("program", "do_group", "else_clause", "elif_clause", "case_item", "negated_command", "ERROR"):
            self._visit_children(node, stdin)
        elif kind == "list":
            self._visit_list(node, stdin)
        elif kind == "pipeline":
            self._pipeline_statement(node, stdin)
        elif kind == "redirected_statement":
            self._visit_redirected_statement(node, stdin)
        elif kind == "command":
            self._visit_command(node, stdin)
        elif kind in ("variable_assignment", "variable_assignments"):
            self._visit_assignments(node)
        elif kind == "declaration_command":
            self._visit_declaration(node)
        elif kind == "unset_command":
            self._visit_unset(node)
        elif kind == "subshell":
            self.add(MUTATING, "subshell", "a `( ... )` subshell is not accepted as read-only", structural=True)
            self.nested()._visit_children(node, stdin)
        elif kind == "compound_statement":
            opener = _text(node.children[0]) if node.children else "{"
            shown = "(( ... ))` arithmetic command" if opener == "((" else "{ ...; }` group"
            self.add(MUTATING, "group", f"a `{shown} is not accepted as read-only", structural=True)
            self._visit_children(node, stdin)
        elif kind == "function_definition":
            self._visit_function(node)
        elif kind == "for_statement":
            self._visit_for(node, stdin)
        elif kind in _CONTROL_FLOW:
            self._control_flow(node, stdin)
        elif kind == "test_command":
            self._visit_test(node)
        elif kind in _WORD_TYPES:
            self.expand(node)
        elif kind in _REDIRECT_TYPES:
            self._redirects([node], stdin)
        elif kind in _QUIET_TYPES or not node.is_named:
            return
        elif kind in ("unary_expression", "binary_expression", "ternary_expression", "postfix_expression",
                      "parenthesized_expression", "subscript"):
            self._visit_children(node, stdin)
        else:
            self.add(
                MUTATING,
                "unsupported-syntax",
                f"the shell construct `{kind}` is not accepted as read-only",
                structural=True,
            )
            self._visit_children(node, stdin)

    def _visit_children(self, node: Node, stdin: _Stdin | None) -> None:
        for child in node.named_children:
            self.visit(child, stdin)

    def _visit_list(self, node: Node, stdin: _Stdin | None) -> None:
        # `a && b`, `a || b`: what follows the first command may or may not run.
        parts = [c for c in node.named_children if c.type != "comment"]
        if parts:
            self.visit(parts[0], stdin)
        with self.uncertain():
            for part in parts[1:]:
                self.visit(part, stdin)

    def _control_flow(self, node: Node, stdin: _Stdin | None) -> None:
        keyword = _CONTROL_FLOW.get(node.type, node.type)
        self.add(
            MUTATING,
            "control-flow",
            f"`{keyword}` is control flow, which the classifier does not accept as read-only",
            structural=True,
        )
        with self.uncertain():
            self._visit_children(node, stdin)

    def _visit_for(self, node: Node, stdin: _Stdin | None) -> None:
        # Follow the loop variable through literal values, so `for c in rm; do $c -rf /; done` is seen.
        self.add(
            MUTATING,
            "control-flow",
            f"`{_text(node.children[0]) if node.children else 'for'}` is a loop, which the classifier does not "
            "accept as read-only",
            structural=True,
        )
        variable = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        values: list[str | None] = []
        with self.uncertain():
            for value in node.children_by_field_name("value"):
                for alternative in self.expand(value):
                    values.extend(a.text for a in alternative)
            name = _text(variable) if variable is not None else None
            if body is None:
                return
            if name and values and None not in values and len(values) <= _MAX_ALTERNATIVES:
                for value in values:
                    self.vars[name] = frozenset({value})
                    self.visit(body, stdin)
                self.vars[name] = frozenset(values)
            else:
                if name:
                    self.vars[name] = frozenset({None})
                self.visit(body, stdin)

    def _visit_function(self, node: Node) -> None:
        name_node = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        name = _text(name_node) if name_node is not None else "?"
        self.add(
            MUTATING,
            "function-definition",
            f"defining the function `{name}` is not accepted as read-only",
            structural=True,
        )
        if body is not None and _is_fork_bomb(name, body):
            self.add(
                FORBIDDEN,
                "forbidden:fork-bomb",
                f"the function `{name}` calls itself in a pipeline or in the background: a fork bomb",
            )
        if body is not None:
            with self.uncertain():
                self.visit(body)

    def _visit_test(self, node: Node) -> None:
        opener = node.children[0].type if node.children else "["
        if opener == "[[":
            self.add(
                MUTATING,
                "test-expression",
                "`[[ ... ]]` evaluates its operands arithmetically, which can run commands; it is not accepted "
                "as read-only",
                structural=True,
            )
        else:
            words = self._test_words(node)
            problem = test_subscript_problem(words)
            if problem is not None:
                self.add(*problem)
            elif not self.speculative:
                self.allowed.append("[")
        self._visit_children(node, None)

    def _test_words(self, node: Node) -> list[str | None]:
        """The operators and operands of `[ ... ]` in order, as bash's test builtin sees them."""
        words: list[str | None] = []
        for child in node.named_children:
            if child.type == "test_operator":
                words.append(_text(child))
            elif child.type in _WORD_TYPES:
                words.append(self.literal(child))
            else:
                words.extend(self._test_words(child))
        return words

    def _visit_assignments(self, node: Node) -> None:
        if node.type == "variable_assignments":
            for child in node.named_children:
                self._visit_assignments(child)
            return
        name_node = node.child_by_field_name("name")
        name = _text(name_node) if name_node is not None else "?"
        self.add(
            MUTATING,
            "assignment",
            f"`{name}=...` sets a shell variable, which can change what later commands run",
            structural=True,
        )
        self._assign(node)

    def _assign(self, node: Node) -> None:
        """Remember the possible values of `name=value`, so later `$name` can be followed."""
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        values: set[str | None] = set()
        if value_node is None:
            values.add("")
        else:
            for alternative in self.expand(value_node, split=False):
                values.add(alternative[0].text if len(alternative) == 1 else None)
        if name_node is None or name_node.type != "variable_name":
            return  # array elements are not followed
        name = _text(name_node)
        if any(c.type == "+=" for c in node.children):
            old = self.vars.get(name, frozenset({None}))
            values = {None if a is None or b is None else a + b for a in old for b in values}
        if self.certain:
            self.vars[name] = frozenset(values)
        else:
            self.vars[name] = self.vars.get(name, frozenset({None})) | frozenset(values)

    def _visit_declaration(self, node: Node) -> None:
        keyword = _text(node.children[0]) if node.children else "declare"
        self.add(
            MUTATING,
            "assignment",
            f"`{keyword}` sets shell variables or attributes, which can change what later commands run",
            structural=True,
        )
        for child in node.named_children:
            if child.type == "variable_assignment":
                self._assign(child)
            elif child.type in _WORD_TYPES:
                self.expand(child)

    def _visit_unset(self, node: Node) -> None:
        self.add(MUTATING, "assignment", "`unset` removes shell variables or functions", structural=True)
        for child in node.named_children:
            if child.type in ("variable_name", "word"):
                name = _text(child)
                self.vars[name] = frozenset({""}) if self.certain else self.vars.get(name, frozenset({None})) | {""}
            elif child.type in _WORD_TYPES:
                self.expand(child)

    # -- pipelines and redirections

    def _visit_redirected_statement(self, node: Node, stdin: _Stdin | None, head: bool = False) -> None:
        if not head and _heredoc_tail(node) is not None:
            # `cat <<EOF | sh`: tree-sitter hangs the rest of the pipeline under the here-document.
            self._pipeline_statement(node, stdin)
            return
        body = node.child_by_field_name("body")
        redirects = [c for c in node.named_children if c.type in _REDIRECT_TYPES]
        # `echo 'rm -rf /' > >(sh)`: what the body prints is what the process substitution reads
        if body is not None:
            stages = _redirected_stages(body)
            data = stdin.data if stdin is not None else None
            for stage in stages:
                data = self._simulate(stage, data)
            self.output = _Stdin("pipe", data, source=self._stage_label(stages[-1]))
        try:
            stdin = self._redirects(redirects, stdin)
        finally:
            self.output = None
        if body is not None:
            self.visit(body, stdin)

    def _pipeline_statement(self, node: Node, stdin: _Stdin | None) -> None:
        stages, trailing = _pipeline_parts(node)
        self._pipeline(stages, stdin)
        with self.uncertain():  # what tree-sitter hung inside the last stage runs after `&&` / `||`
            for part in trailing:
                self.visit(part, stdin)

    def _pipeline(self, stages: list[Node], stdin: _Stdin | None) -> None:
        incoming = stdin
        data: bytes | None = None
        # tree-sitter reads `a | b | c && d` as `a | (b | c && d)`, so a pipeline can sit inside a
        # stage of another: what the outer pipe carries flows on.
        download = bool(stdin is not None and stdin.download)
        producers: list[str] = [stdin.source] if stdin is not None and stdin.kind == "pipe" and stdin.source else []
        for index, stage in enumerate(stages):
            if index > 0:
                incoming = _Stdin("pipe", data, download, " | ".join(producers))
            scope = self.nested()  # each stage runs in a subshell of its own
            if stage.type == "redirected_statement":
                scope._visit_redirected_statement(stage, incoming, head=True)
            else:
                scope.visit(stage, incoming)
            if index + 1 < len(stages):  # what flows on only matters to a next stage
                data = self._simulate(stage, incoming.data if incoming is not None else None)
                download = download or self.has_downloader(stage)
                producers.append(self._stage_label(stage))

    def _redirects(self, redirects: list[Node], stdin: _Stdin | None) -> _Stdin | None:
        for redirect in redirects:
            if redirect.type == "file_redirect":
                stdin = self._file_redirect(redirect, stdin)
            elif redirect.type == "heredoc_redirect":
                stdin = self._heredoc(redirect)
            else:
                stdin = self._herestring(redirect)
        return stdin

    def _file_redirect(self, node: Node, stdin: _Stdin | None) -> _Stdin | None:
        operator = next((c.type for c in node.children if not c.is_named), "")
        destination = node.child_by_field_name("destination")
        if destination is None:
            return stdin  # `>&-`: closing a descriptor
        if operator in (">&", "<&") and (destination.type == "number" or _text(destination) == "-"):
            return stdin  # `2>&1`: duplicating a descriptor
        targets = [a for alternative in self.expand(destination) for a in alternative]
        if any((t.text or "").startswith(("/dev/tcp/", "/dev/udp/")) for t in targets):
            self.add(
                DESTRUCTIVE,
                "redirect:network",
                f"`{_excerpt(node)}` connects the command to the network through bash's /dev/tcp",
            )
            self.network[0] = True
            if operator in ("<", "<&", "<>"):
                return _Stdin("pipe", None, download=True, source=_excerpt(destination))
            return stdin
        if operator in ("<", "<&"):
            substitution = _first_descendant(destination, "process_substitution")
            if substitution is not None:
                output = self.substitution_output(substitution)
                return _Stdin(
                    "pipe",
                    output.encode() if output is not None else None,
                    self.has_downloader(substitution),
                    "<(...)",
                )
            for target in targets:  # the shell opens it: `wc -c < /dev/watchdog` arms the watchdog
                problem = read_risk(target.text, self.cwd) if not target.pattern else \
                    pattern_read_risk(target.text, self.cwd)
                if problem is not None:
                    self.add(problem[0], f"redirect:{problem[1]}", f"the `{operator}` redirection opens what it should not: {problem[2]}")
            return _Stdin("file", None, source=targets[0].text or "" if targets else "")
        if len(targets) != 1:
            targets = [Arg(None, node=destination)]
        for target in targets:
            self.write(target, f"the `{operator}` redirection", "redirect")
        return stdin

    def _heredoc(self, node: Node) -> _Stdin:
        self.add(
            MUTATING,
            "heredoc",
            "a here-document feeds literal text to the command; here-documents are not accepted as read-only",
            structural=True,
        )
        body = next((c for c in node.named_children if c.type == "heredoc_body"), None)
        for child in node.named_children:
            if child.type == "heredoc_body":
                # An unquoted delimiter lets `$(...)` in the body run before the command does.
                for part in child.named_children:
                    if part.type != "heredoc_content":
                        self.expand(part)
            elif child.type in ("heredoc_start", "heredoc_end") or _is_pipe_tail(child):
                continue  # the pipe tail belongs to the pipeline that owns this here-document
            else:
                with self.uncertain():
                    self.visit(child)
        return _Stdin("heredoc", (_text(body) if body is not None else "").encode(), source="a here-document")

    def _herestring(self, node: Node) -> _Stdin:
        self.add(
            MUTATING,
            "herestring",
            "a here-string (`<<<`) feeds text to the command; here-strings are not accepted as read-only",
            structural=True,
        )
        words = [c for c in node.named_children if c.type in _WORD_TYPES]
        text = None
        if words:
            alternatives = self.expand(words[0], split=False)
            if len(alternatives) == 1 and len(alternatives[0]) == 1:
                text = alternatives[0][0].text
        return _Stdin("herestring", (text + "\n").encode() if text is not None else None, source="a here-string")

    def write(self, target: Arg, how: str, rule_prefix: str) -> None:
        """A file the command writes: harmless sinks pass, raw disks are refused, the rest needs approval."""
        if target.text is None:
            self.add(MUTATING, f"{rule_prefix}:file", f"{how} writes to a file named only at run time")
            return
        risk = _write_risk(target.text)
        if risk is None:
            return
        cls, kind, why = risk
        rule = "forbidden:raw-disk-write" if cls is FORBIDDEN else f"{rule_prefix}:{kind}"
        self.add(cls, rule, f"{how} writes to {target.text}{why}")

    # -- simple commands

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
        # `echo $PATH`: echo's options only shape its output, so a plain variable in its arguments,
        # whatever its value, cannot make it write or run anything (subscripts, `${!x}` and
        # `${x:=y}` still count: they evaluate or assign).
        self.spend(len(words))  # expanding and judging each word costs about a unit
        plain_echo = not dynamic and self.literal(name_node) == "echo"
        expanded = [self.expand(w, plain_variables=plain_echo and i > 0) for i, w in enumerate(words)]
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
        if name in _CODE_LOADING_VARIABLES:
            why = f"`{name}=...` before the command changes which code it loads or runs"
        else:
            why = f"`{name}=...` before the command changes its environment"
        self.add(MUTATING, "assignment", why + "; assignments are not accepted as read-only", structural=True)
        value = node.child_by_field_name("value")
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
        handler = _handler_for(prog)
        if handler is not None:
            handler(self, cmd)
        else:
            self.add(
                MUTATING,
                "unknown-command",
                f"`{name}` is not on the read-only allowlist, and the classifier does not know what it changes",
            )

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

    # -- words

    def expand(self, node: Node, split: bool = True, plain_variables: bool = False) -> list[list[Arg]]:
        """The possible word lists one word node becomes; records a finding for every expansion in it
        (but plain `$x` / `${x}` where plain_variables says the command cannot misuse their values)."""
        self._note_expansions(node, plain_variables)
        return [self._fields(segments, node, split) for segments in self._segments(node)]

    def _note_expansions(self, node: Node, plain_variables: bool = False) -> None:
        pending = [node]
        while pending:
            current = pending.pop()
            kind = current.type
            if kind == "command_substitution" and _single_word_substitution(current):
                continue  # `$(uname -r)`: a read-only command whose output is one plain word
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
            if kind in ("simple_expansion", "expansion") and not (plain_variables and _plain_variable(current)):
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
        return [(_Seg(None),)]

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

    # -- following data through pipes

    def _simulate(self, stage: Node, data: bytes | None) -> bytes | None:
        """What a pipeline stage writes to stdout, for stages that only transform data (echo, base64 -d...)."""
        self.spend(1 + len(data or b"") // 1024)
        body, redirects = stage, []
        if stage.type == "redirected_statement":
            body = stage.child_by_field_name("body")
            redirects = [c for c in stage.named_children if c.type in _REDIRECT_TYPES]
        if body is None or body.type != "command":
            return None
        words = []
        for child in body.named_children:
            if child.type in _REDIRECT_TYPES:
                redirects.append(child)
            elif child.type == "variable_assignment":
                return None
            elif child.type == "command_name":
                words.append(child.named_children[0] if child.named_child_count else child)
            elif child.type != "comment":
                words.append(child)
        for redirect in redirects:
            if redirect.type == "heredoc_redirect":
                content = next((c for c in redirect.named_children if c.type == "heredoc_body"), None)
                data = (_text(content) if content is not None else "").encode()
            elif redirect.type == "herestring_redirect":
                word = next((c for c in redirect.named_children if c.type in _WORD_TYPES), None)
                text = self.literal(word) if word is not None else None
                data = (text + "\n").encode() if text is not None else None
            else:
                operator = next((c.type for c in redirect.children if not c.is_named), "")
                descriptor = redirect.child_by_field_name("descriptor")
                if operator in ("<", "<&"):
                    data = None
                elif descriptor is None or _text(descriptor) != "2":
                    return None  # stdout goes elsewhere
        name = posixpath.basename(self.literal(words[0]) or "") if words else ""
        if name not in _FILTERS and name not in _WRAPPER_PARSERS:
            return None
        args = [Arg(self.literal(w)) for w in words]
        for _ in range(_MAX_NESTING):  # `sudo echo ...` prints what `echo ...` prints
            parse = _WRAPPER_PARSERS.get(posixpath.basename(args[0].text or "")) if args else None
            if parse is None:
                break
            commands = parse(args[1:]).commands
            args = commands[0] if commands else []
        texts = [a.text for a in args]
        if not texts or any(t is None for t in texts):
            return None
        return _run_filter(texts, data)  # type: ignore[arg-type]

    def substitution_output(self, node: Node) -> str | None:
        """The output of `$(...)` or `<(...)` when it is a chain of data-only commands."""
        statements = [c for c in node.named_children if c.type != "comment"]
        if len(statements) != 1:
            return None
        data = None
        for stage in _pipeline_stages(statements[0]):
            data = self._simulate(stage, data)
            if data is None:
                return None
        return data.decode("utf-8", "replace") if data is not None else None

    def has_downloader(self, node: Node) -> bool:
        """Whether a network download (curl, wget, ...) runs anywhere inside node."""
        pending = [node]
        while pending:
            current = pending.pop()
            if current.type == "command":
                words = []
                for child in current.named_children:
                    if child.type == "command_name":
                        words.append(child.named_children[0] if child.named_child_count else child)
                    elif child.type in _WORD_TYPES:
                        words.append(child)
                name = posixpath.basename(self.literal(words[0]) or "") if words else ""
                if name in _DOWNLOADERS or (
                    name in _WRAPPER_PARSERS and _innermost_prog([Arg(self.literal(w)) for w in words]) in _DOWNLOADERS
                ):
                    return True
            pending.extend(current.named_children)
        return False

    def _stage_label(self, stage: Node) -> str:
        command = stage if stage.type == "command" else _first_descendant(stage, "command")
        if command is not None:
            name = command.child_by_field_name("name")
            if name is not None:
                return self.literal(name.named_children[0] if name.named_child_count else name) or _excerpt(name)
        return _excerpt(stage)


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
