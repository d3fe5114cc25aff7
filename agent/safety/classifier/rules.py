"""The shell-command classifier: how much can one shell command change a host?

A command is read-only only when a real bash parse (tree-sitter-bash) accounts for
every part of it: each simple command is on an allowlist *with its arguments
checked*, the commands are joined only by `&&`, `||`, `;`, `|` and newlines, and
output is redirected at most to /dev/null. Anything the classifier cannot see
through makes the command at least mutating: parse errors, command and process
substitution, variable expansion, assignments, eval and source, here-documents,
subshells and groups, background jobs, functions, control flow, and wrappers such
as sudo, env, timeout, xargs or `bash -c`.

The rest of the module works out how much worse than mutating a command is. It
looks inside wrappers (`sudo ...`, `bash -c '...'`, `python -c`, `find -exec`,
`git -c core.pager=...`), follows simple obfuscations (quoted or escaped command
names, `x=rm; $x`, `echo BASE64 | base64 -d | sh`) and applies what it knows about
particular commands (pip uninstall, runfile flags, update-alternatives, rm of
system directories). Every detector only raises the class: `cls.at_least(...)`.

Choices worth knowing:
- Where tree-sitter-bash is known to misread bash (a newline swallowed into the previous command,
  `a | b | c && d` nested the wrong way, `time { ...; }` as words), the classifier follows bash's
  reading. Guesses (a glob or unknown command name, text the parser rejects) may only raise the class.
- Variable expansion is never read-only, not even in the arguments of an
  allowlisted command (`echo $PATH`, `ls ${dir}`): the value is invisible here
  and can smuggle in options (`sed -n p $F` with F="-i x" edits a file).
- A wrapper is at least mutating even around a read-only command
  (`timeout 5 nvidia-smi`): the allowlist checked the command, not the wrapper.
- An unquoted glob or brace pattern that could expand to an option
  (`sed -n p *`) is not read-only for commands whose options matter; globs are
  fine for commands with no dangerous options (`ls /usr/local/cuda-*`).
"""

from __future__ import annotations

import ast
import base64
import binascii
import bz2
import fnmatch
import itertools
import lzma
import posixpath
import re
import shlex
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Callable, Iterator

import tree_sitter_bash
from tree_sitter import Language, Node, Parser

from tools.base import Risk, RiskClass

READ_ONLY = RiskClass.READ_ONLY
MUTATING = RiskClass.MUTATING
DESTRUCTIVE = RiskClass.DESTRUCTIVE
FORBIDDEN = RiskClass.FORBIDDEN

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


_MAX_NESTING = 12  # wrappers inside wrappers; deeper than this is refused, not guessed
_MAX_ALTERNATIVES = 16  # possible values of a variable the classifier follows at once
_MAX_DECODED = 1 << 20  # bytes a decoder (base64, gzip) may produce

# --------------------------------------------------------------------------- public API


# Node types a plain simple command may contain; anything else (expansions, substitutions,
# redirections, lists, pipelines) means its words are not known before it runs.
_PLAIN_NODES = {"program", "command", "command_name", "word", "raw_string", "string", "string_content", '"', "number"}


def plain_words(command: str) -> list[str] | None:
    """The words of a single simple command with nothing to expand, substitute or redirect, or None.

    The safety policy matches prefix authorizations on these whole words.
    """
    data = command.encode("utf-8", "surrogateescape")
    with _PARSER_LOCK:
        root = _PARSER.parse(_parser_safe(data)).root_node
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
    analysis = _Analysis(workload)
    try:
        analysis.analyze_command(command)
    except RecursionError:
        return Risk(cls=FORBIDDEN, rule="too-deep", reason="the command nests too deeply to analyse, so it is refused")
    except Exception as error:  # fail closed: a classifier bug must never let a command through
        return Risk(
            cls=FORBIDDEN,
            rule="classifier-error",
            reason=f"the classifier failed on this command ({type(error).__name__}: {error}); it is refused",
        )
    return analysis.verdict()


# --------------------------------------------------------------------------- data


@dataclass(frozen=True)
class Arg:
    """One word of a command after quote removal and the expansions the classifier can follow."""

    text: str | None  # None: it depends on something known only at run time
    pattern: bool = False  # unquoted glob or brace pattern: the shell may turn it into other words
    node: Node | None = field(default=None, compare=False)  # where it came from, to look for downloads


@dataclass(frozen=True)
class _Stdin:
    """What a command reads on standard input, as far as the classifier can tell."""

    kind: str  # "pipe", "heredoc", "herestring" or "file"
    data: bytes | None = None  # the bytes themselves, when they can be worked out
    download: bool = False  # a network download feeds the pipe
    source: str = ""  # what produces it, for reasons: "curl", "echo | base64"


@dataclass
class _Cmd:
    name: str  # as written, after quote removal: "/usr/bin/nvidia-smi"
    prog: str  # its base name: "nvidia-smi"
    args: list[Arg]
    stdin: _Stdin | None

    @property
    def texts(self) -> list[str | None]:
        return [a.text for a in self.args]


@dataclass(frozen=True)
class _Finding:
    cls: RiskClass
    rule: str
    reason: str
    via: tuple[str, ...]
    decoded: str | None
    structural: bool  # about the shape (wrapper, expansion) rather than what a command does


@dataclass(frozen=True)
class _Seg:
    """A piece of a word: literal text, or the value of an expansion."""

    text: str | None
    quoted: bool = False
    split: bool = False  # unquoted expansion: word splitting and globbing apply
    glob: bool = False  # unquoted literal with an unescaped glob character


# --------------------------------------------------------------------------- the analysis


_WORD_TYPES = frozenset(
    {
        "word", "number", "string", "raw_string", "ansi_c_string", "translated_string", "concatenation",
        "simple_expansion", "expansion", "command_substitution", "process_substitution",
        "arithmetic_expansion", "brace_expression", "extglob_pattern", "array",
    }
)
_REDIRECT_TYPES = frozenset({"file_redirect", "heredoc_redirect", "herestring_redirect"})
_EXPANSION_TYPES = frozenset(
    {"simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion"}
)
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
        self.findings: list[_Finding] = []
        self.allowed: list[str] = []  # allowlisted commands seen, for the read-only reason
        self.trees: list = []  # keeps parse trees (and so their nodes) alive
        # Possible values of shell variables assigned in the command; None stands for "unknown".
        self.vars: dict[str, frozenset[str | None]] = {}
        self.via: tuple[str, ...] = ()
        self.decoded: str | None = None
        self.depth = 0
        self.certain = True  # False inside branches and loops: an assignment there may not happen
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

    def add(self, cls: RiskClass, rule: str, reason: str, *, structural: bool = False, decoded: str | None = None):
        if self.speculative and cls.rank <= MUTATING.rank:
            return
        self.findings.append(_Finding(cls, rule, reason, self.via, decoded or self.decoded, structural))

    def allow(self, cmd: _Cmd, label: str | None = None, check_globs: bool = True) -> None:
        """The command passed its allowlist check; it stays read-only unless something else says otherwise."""
        if self.speculative:
            return
        if cmd.prog == "cd":
            self.changed_dir = True
        if "/" in cmd.name and not _trusted_path(cmd.name):
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
        if "/" in name and not _trusted_path(name) or ".." in name.split("/"):
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
        return Risk(cls=best.cls, rule=best.rule, reason=reason, decoded=decoded)

    def _read_only_verdict(self) -> Risk:
        names = list(dict.fromkeys(self.allowed))
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

    def parse(self, data: bytes) -> Node:
        with _PARSER_LOCK:
            tree = _PARSER.parse(_parser_safe(data))
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
        elif not self.speculative:
            self.allowed.append("[")
        self._visit_children(node, None)

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
        expanded = [self.expand(w) for w in words]
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

    def expand(self, node: Node, split: bool = True) -> list[list[Arg]]:
        """The possible word lists one word node becomes; records a finding for every expansion in it."""
        self._note_expansions(node)
        return [self._fields(segments, node, split) for segments in self._segments(node)]

    def _note_expansions(self, node: Node) -> None:
        pending = [node]
        while pending:
            current = pending.pop()
            kind = current.type
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
            if kind in ("simple_expansion", "expansion"):
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


# --------------------------------------------------------------------------- word helpers


def _unquote_word(raw: str) -> tuple[str, bool]:
    """Backslash removal for an unquoted word, and whether an unescaped glob character is left."""
    if "\\" not in raw:
        return raw, any(c in raw for c in "*?[")
    out: list[str] = []
    glob = False
    index = 0
    while index < len(raw):
        char = raw[index]
        if char == "\\" and index + 1 < len(raw):
            if raw[index + 1] != "\n":
                out.append(raw[index + 1])
            index += 2
            continue
        glob = glob or char in "*?["
        out.append(char)
        index += 1
    return "".join(out), glob


def _unquote_double(raw: str) -> str:
    return re.sub(r'\\([$`"\\\n])', lambda m: "" if m.group(1) == "\n" else m.group(1), raw)


_ANSI_SIMPLE = {
    "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", "'": "'", '"': '"', "?": "?",
}


def _ansi_c(body: str, echo_octal: bool = False) -> str:
    """Decode `$'...'` escapes (also used for `echo -e` and printf formats)."""
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        if char != "\\" or index + 1 >= len(body):
            out.append(char)
            index += 1
            continue
        code = body[index + 1]
        if code in _ANSI_SIMPLE:
            out.append(_ANSI_SIMPLE[code])
            index += 2
        elif code in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = re.match(rf"[0-9a-fA-F]{{1,{width}}}", body[index + 2:])
            if digits and int(digits.group(), 16) <= 0x10FFFF:
                out.append(chr(int(digits.group(), 16)))
                index += 2 + len(digits.group())
            else:
                out.append("\\" + code)
                index += 2
        elif code in "01234567":
            start = index + 2 if echo_octal and code == "0" else index + 1
            digits = re.match(r"[0-7]{1,3}", body[start:])
            value = digits.group() if digits else "0"
            out.append(chr(int(value, 8) & 0xFF))
            index = start + (len(digits.group()) if digits else 0)
        elif code == "c" and index + 2 < len(body):
            out.append(chr(ord(body[index + 2]) & 0x1F))
            index += 3
        else:
            out.append("\\" + code)
            index += 2
    return "".join(out)


def _product(parts: list[list[tuple[_Seg, ...]]]) -> list[tuple[_Seg, ...]]:
    total = 1
    for alternatives in parts:
        total *= len(alternatives)
    if total > _MAX_ALTERNATIVES:
        return [(_Seg(None),)]
    return [tuple(itertools.chain.from_iterable(combo)) for combo in itertools.product(*parts)]


def _combine(expanded: list[list[list[Arg]]]) -> list[list[Arg]]:
    """Every full word list a command can become; words with too many possibilities become unknown."""
    total = 1
    for alternatives in expanded:
        total *= len(alternatives)
    if total > _MAX_ALTERNATIVES:
        expanded = [alts if len(alts) == 1 else [[Arg(None)]] for alts in expanded]
    return [list(itertools.chain.from_iterable(combo)) for combo in itertools.product(*expanded)]


_BRACE_PATTERN = re.compile(r"\{[^{}]*(,|\.\.)[^{}]*\}")


def _arg_from(segments: list[_Seg], node: Node, braces: bool = True) -> list[Arg]:
    """The word (or, after brace expansion, words) that pieces make."""
    text = "".join(s.text or "" for s in segments)
    unquoted = "".join(s.text or "" if not s.quoted else "x" * len(s.text or "") for s in segments)
    glob = any(s.glob and not s.quoted for s in segments)
    if braces and _BRACE_PATTERN.search(unquoted):
        return [Arg(t, glob or any(c in t for c in "*?["), node) for t in _expand_braces(text)]
    return [Arg(text, glob, node)]


def _expand_braces(text: str, budget: int = 64) -> list[str]:
    """Bash brace expansion: `a{b,c}` -> ab ac, `{1..3}` -> 1 2 3; capped, for obfuscation like `{rm,-rf,/}`."""
    depth, start = 0, -1
    for index, char in enumerate(text):
        if char == "{":
            if depth == 0:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if depth:
                continue
            options = _brace_options(text[start + 1: index])
            if options is None:
                continue
            results: list[str] = []
            for option in options:
                results.extend(_expand_braces(text[:start] + option + text[index + 1:], budget - len(results)))
                if len(results) >= budget:
                    break
            return results[:budget] or [text]
    return [text]


def _brace_options(body: str) -> list[str] | None:
    parts, depth, current = [], 0, ""
    for char in body:
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += char == "{"
        depth -= char == "}" and depth > 0
        current += char
    parts.append(current)
    if len(parts) > 1:
        return parts
    numeric = re.fullmatch(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?", body)
    if numeric:
        first, last = int(numeric.group(1)), int(numeric.group(2))
        step = abs(int(numeric.group(3) or 1)) or 1
        values = range(first, last + 1, step) if first <= last else range(first, last - 1, -step)
        return [str(v) for v in values[:64]]
    letters = re.fullmatch(r"([A-Za-z])\.\.([A-Za-z])", body)
    if letters:
        first, last = ord(letters.group(1)), ord(letters.group(2))
        return [chr(c) for c in (range(first, last + 1) if first <= last else range(first, last - 1, -1))][:64]
    return None


def _split_ifs(text: str, separators: str) -> list[str]:
    if not separators:
        return [text]
    blanks = "".join(c for c in separators if c in " \t\n")
    others = "".join(c for c in separators if c not in " \t\n")
    if not others:
        return re.split(f"[{re.escape(blanks)}]+", text)
    blank = f"[{re.escape(blanks)}]*" if blanks else ""
    return re.split(f"{blank}[{re.escape(others)}]{blank}" + (f"|[{re.escape(blanks)}]+" if blanks else ""), text)


def _join(args: list[Arg]) -> str:
    return " ".join(shlex.quote(a.text) if a.text is not None else "..." for a in args)


def _may_become_option(arg: Arg) -> bool:
    """An unquoted pattern whose expansion could start with '-': `*`, `?x`, `{-r,x}`."""
    return arg.pattern and bool(arg.text) and arg.text[0] in "*?[{-"  # type: ignore[index]


def _trusted_path(path: str) -> bool:
    """An absolute program path outside world-writable directories."""
    if not path.startswith("/") or ".." in path.split("/"):
        return False
    return not path.startswith(("/tmp/", "/var/tmp/", "/dev/shm/", "/run/user/"))


# --------------------------------------------------------------------------- files and paths

_HARMLESS_SINKS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"})
_RAW_DISK = re.compile(
    r"^/dev/(sd[a-z]|hd[a-z]|vd[a-z]|xvd[a-z]|nvme\d|mmcblk\d|md\d|dm-\d|loop\d|nbd\d|sr\d|"
    r"disk/|mapper/|root$|mem$|kmem$|port$)"
)
_CRITICAL_FILES = frozenset(
    {"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/fstab",
     "/etc/crypttab", "/etc/ld.so.preload", "/etc/ld.so.cache"}
)
_CRITICAL_DIRS = (
    "/boot/", "/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/usr/bin/", "/usr/sbin/", "/usr/lib/",
    "/usr/lib32/", "/usr/lib64/", "/usr/libexec/", "/etc/sudoers.d/",
)
# Directories whose recursive removal (or chmod -R) wipes the system: refused outright.
_SYSTEM_DIRS = frozenset(
    {
        "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
        "/opt", "/proc", "/root", "/run", "/sbin", "/snap", "/srv", "/sys", "/usr", "/var", "/usr/bin",
        "/usr/sbin", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libexec", "/usr/include", "/usr/share",
        "/usr/src", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/local/sbin", "/usr/local/share",
        "/var/lib", "/var/log", "/var/cache", "/var/spool", "/etc/alternatives",
    }
)


def _write_risk(path: str) -> tuple[RiskClass, str, str] | None:
    """How bad writing to path is: None for harmless sinks, else (class, kind, explanation)."""
    if path in _HARMLESS_SINKS or re.fullmatch(r"/dev/fd/[0-9]+|/proc/self/fd/[0-9]+", path):
        return None
    norm = posixpath.normpath(path) if path.startswith("/") else path
    if _RAW_DISK.match(norm):
        return FORBIDDEN, "raw-disk", ", a raw disk or memory device, destroying what it holds"
    if norm.startswith("/dev/"):
        return DESTRUCTIVE, "device", ", a device node"
    if norm == "/proc/sysrq-trigger":
        return DESTRUCTIVE, "sysrq", ", which can crash or reboot the machine"
    if norm.startswith("/sys/") and posixpath.basename(norm) in ("remove", "reset", "unbind", "rescan"):
        return DESTRUCTIVE, "sysfs", ", which detaches or resets a device"
    if norm in _CRITICAL_FILES or norm.startswith(_CRITICAL_DIRS):
        return DESTRUCTIVE, "system-file", ", a file the system needs to boot, log in or load programs"
    return MUTATING, "file", ""


def _system_dir_hit(arg: Arg) -> str | None:
    """The system directory a recursive operation on arg would wipe, if any (`/`, `/usr/*`, `/u*`)."""
    if arg.text is None:
        return None
    for variant in _expand_braces(arg.text):
        path = variant
        while True:
            stripped = re.sub(r"/(\*|\.\*|\.)?$", "", path)
            if stripped == path:
                break
            path = stripped
        if not path:
            path = "/"
        if not path.startswith("/"):
            continue
        norm = posixpath.normpath(path)
        norm = "/" if norm.startswith("//") and norm.strip("/") == "" else norm
        if norm in _SYSTEM_DIRS:
            return norm
        if arg.pattern and any(fnmatch.fnmatchcase(d, norm) for d in _SYSTEM_DIRS):
            return norm
    return None


def _short_options(args: list[Arg]) -> set[str]:
    """Letters of every short option cluster (`-rf` -> {"r", "f"}) before `--`."""
    letters: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("-") and not arg.text.startswith("--"):
            letters.update(arg.text[1:])
    return letters


def _long_options(args: list[Arg]) -> set[str]:
    names: set[str] = set()
    for arg in args:
        if arg.text == "--":
            break
        if arg.text and arg.text.startswith("--") and len(arg.text) > 2:
            names.add(arg.text.split("=", 1)[0])
    return names


def _operands(args: list[Arg]) -> list[Arg]:
    """Arguments that are not options (GNU tools accept options anywhere before `--`)."""
    out: list[Arg] = []
    after_dashes = False
    for arg in args:
        if after_dashes:
            out.append(arg)
        elif arg.text == "--":
            after_dashes = True
        elif not (arg.text and arg.text.startswith("-") and arg.text != "-"):
            out.append(arg)
    return out


def _abbreviates(name: str, full: str, minimum: int = 4) -> bool:
    """getopt_long accepts unique prefixes: `--rot` means `--rotate`."""
    return len(name) >= minimum and full.startswith(name)


# --------------------------------------------------------------------------- option parsing


@dataclass
class _Opts:
    options: list[tuple[str, Arg | None]]
    operands: list[Arg]
    unsure: bool  # an option the spec does not know: whether it takes a value is a guess

    def has(self, *names: str) -> bool:
        return any(name in names for name, _ in self.options)

    def values(self, *names: str) -> list[Arg]:
        return [value for name, value in self.options if name in names and value is not None]


def _getopt(
    args: list[Arg],
    short_value: str = "",
    long_value: frozenset[str] | set[str] = frozenset(),
    short_flags: str | None = None,
    long_flags: frozenset[str] | set[str] | None = None,
    permute: bool = False,
    short_optional: str = "",
) -> _Opts:
    """getopt-style split of options and operands. Without permute, parsing stops at the first operand."""
    options: list[tuple[str, Arg | None]] = []
    operands: list[Arg] = []
    unsure = False
    known_long = set(long_value) | set(long_flags or ())
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        if text is None:
            unsure = True
            if not permute:
                operands.extend(args[index:])
                break
            operands.append(arg)
            index += 1
            continue
        if text == "--":
            operands.extend(args[index + 1:])
            break
        if text.startswith("--"):
            name, equals, value = text.partition("=")
            matches = [k for k in known_long if k.startswith(name)]
            if name not in known_long and len(matches) == 1:
                name = matches[0]
            if name in long_value and not equals:
                options.append((name, args[index + 1] if index + 1 < len(args) else None))
                index += 2
                continue
            if long_flags is not None and name not in known_long:
                unsure = True
            options.append((name, Arg(value) if equals else None))
            index += 1
            continue
        if text.startswith("-") and len(text) > 1:
            position = 1
            while position < len(text):
                letter = text[position]
                rest = text[position + 1:]
                if letter in short_value:
                    if rest:
                        options.append(("-" + letter, Arg(rest)))
                    else:
                        options.append(("-" + letter, args[index + 1] if index + 1 < len(args) else None))
                        index += 1
                    break
                if letter in short_optional:
                    options.append(("-" + letter, Arg(rest) if rest else None))
                    break
                if short_flags is not None and letter not in short_flags:
                    unsure = True
                options.append(("-" + letter, None))
                position += 1
            index += 1
            continue
        if not permute:
            operands.extend(args[index:])
            break
        operands.append(arg)
        index += 1
    return _Opts(options, operands, unsure)


# --------------------------------------------------------------------------- wrappers


@dataclass
class _Wrapped:
    """What a wrapper runs: inner commands as words, shell code as strings, files it writes."""

    commands: list[list[Arg]] = field(default_factory=list)  # two candidates when an option's arity is a guess
    sources: list[Arg] = field(default_factory=list)
    writes: list[Arg] = field(default_factory=list)
    note: str = "runs another program"


def _candidates(opts: _Opts, operands: list[Arg]) -> list[list[Arg]]:
    if not operands:
        return []
    if opts.unsure and len(operands) > 1:
        return [operands, operands[1:]]
    return [operands]


def _skip_assignments(args: list[Arg]) -> list[Arg]:
    index = 0
    while index < len(args) and args[index].text and re.match(r"[A-Za-z_][A-Za-z0-9_]*=", args[index].text or ""):
        index += 1
    return args[index:]


def _wrap_sudo(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="ugpCDrtTUR",
        long_value={"--user", "--group", "--prompt", "--role", "--type", "--close-from", "--chdir",
                    "--command-timeout", "--other-user", "--chroot", "--host"},
        short_flags="AbEeHiKklnPSsVvBN",
        long_flags={"--askpass", "--background", "--preserve-env", "--edit", "--set-home", "--login",
                    "--remove-timestamp", "--reset-timestamp", "--list", "--non-interactive", "--preserve-groups",
                    "--stdin", "--shell", "--version", "--validate", "--bell", "--help"},
    )
    operands = _skip_assignments(opts.operands)
    if operands:
        return _Wrapped(_candidates(opts, operands), note="runs a command as root")
    if opts.has("-s", "-i", "--shell", "--login"):
        return _Wrapped(note="opens a root shell")
    if opts.has("-e", "--edit"):
        return _Wrapped(note="edits files as root")
    return _Wrapped(note="manages sudo credentials")


def _wrap_doas(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="uC", short_flags="ns")
    if opts.operands:
        return _Wrapped(_candidates(opts, opts.operands), note="runs a command as another user")
    return _Wrapped(note="opens a root shell")


def _wrap_env(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="uCSa",
        long_value={"--unset", "--chdir", "--split-string", "--argv0"},
        short_flags="i0v",
        long_flags={"--ignore-environment", "--null", "--debug", "--block-signal", "--default-signal",
                    "--ignore-signal", "--list-signal-handling", "--help", "--version"},
    )
    operands = _skip_assignments(opts.operands)
    split = opts.values("-S", "--split-string")
    if split:
        texts = [split[0].text] + [a.text for a in operands]
        source = None if any(t is None for t in texts) else " ".join(
            [texts[0]] + [shlex.quote(t) for t in texts[1:]]  # type: ignore[arg-type, list-item]
        )
        return _Wrapped(sources=[Arg(source, node=split[0].node)], note="runs a command from a split string")
    if operands:
        return _Wrapped(_candidates(opts, operands), note="runs a command in a changed environment")
    return _Wrapped(note="prints the environment")


def _wrap_timeout(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="sk", long_value={"--signal", "--kill-after"}, short_flags="v",
        long_flags={"--preserve-status", "--foreground", "--verbose", "--help", "--version"},
    )
    return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command with a time limit")


def _wrap_plain(args: list[Arg]) -> _Wrapped:
    """Wrappers whose arguments are the command itself: nohup, builtin, unbuffer, coproc."""
    return _Wrapped([args] if args else [], note="runs another program")


def _wrap_nice(args: list[Arg]) -> _Wrapped:
    while args and args[0].text and re.fullmatch(r"--?\d+", args[0].text):
        args = args[1:]  # legacy `nice -10 cmd`
    opts = _getopt(args, short_value="n", long_value={"--adjustment"}, short_flags="", long_flags={"--help"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command at another priority")


def _wrap_ionice(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="cnpPu", long_value={"--class", "--classdata", "--pid", "--pgid", "--uid"},
        short_flags="th", long_flags={"--ignore", "--help", "--version"},
    )
    if opts.has("-p", "-P", "-u", "--pid", "--pgid", "--uid"):
        return _Wrapped(note="changes the I/O priority of running processes")
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command at another I/O priority")


def _wrap_chrt(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="TPD", long_value={"--sched-runtime", "--sched-period", "--sched-deadline"},
        short_flags="abdefiomprRvh",
    )
    if opts.has("-p", "--pid", "-m", "--max"):
        return _Wrapped(note="changes the scheduling of running processes")
    operands = opts.operands
    if operands and operands[0].text and operands[0].text.isdigit():
        operands = operands[1:]
    return _Wrapped(_candidates(opts, operands), note="runs a command under another scheduling policy")


def _wrap_taskset(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="acph", long_flags={"--all-tasks", "--pid", "--cpu-list", "--help", "--version"})
    if opts.has("-p", "--pid"):
        return _Wrapped(note="changes the CPU affinity of running processes")
    return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command pinned to CPUs")


_NUMACTL_VALUE = {
    "--interleave", "--preferred", "--membind", "--cpunodebind", "--physcpubind", "--cpubind",
    "--weighted-interleave", "--preferred-many", "--shm", "--file", "--length", "--shmmode", "--offset",
}


def _wrap_numactl(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="ipmNCPwSfLM", long_value=_NUMACTL_VALUE, short_flags="lsHabVtuh",
        long_flags={"--localalloc", "--show", "--hardware", "--all", "--balancing", "--verify", "--touch",
                    "--huge", "--strict", "--dump", "--dump-nodes", "--shmid", "--help"},
    )
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command with a NUMA policy")


def _wrap_stdbuf(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="ioe", long_value={"--input", "--output", "--error"}, short_flags="",
                   long_flags={"--help", "--version"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command with other buffering")


def _wrap_time(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="of", long_value={"--output", "--format"}, short_flags="apqvV",
        long_flags={"--append", "--portability", "--quiet", "--verbose", "--help", "--version"},
    )
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o", "--output"), note="times a command")


def _wrap_strace(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="abeEIoOpPsSuUX", long_value={"--output", "--attach", "--user", "--env", "--trace"},
        short_flags="cCdDfFhiknqrtTvVwxyzZ",
    )
    if opts.has("-p", "--attach") and not opts.operands:
        return _Wrapped(writes=opts.values("-o", "--output"), note="attaches to a running process")
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o", "--output"), note="traces a command")


def _wrap_ltrace(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="aAeFlnopsuxDw", short_flags="bcCfhiLrStTV")
    if opts.has("-p") and not opts.operands:
        return _Wrapped(writes=opts.values("-o"), note="attaches to a running process")
    return _Wrapped(_candidates(opts, opts.operands), writes=opts.values("-o"), note="traces a command")


def _wrap_chroot(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, long_value={"--userspec", "--groups"}, short_flags="",
                   long_flags={"--skip-chdir", "--help", "--version"})
    if len(opts.operands) > 1:
        return _Wrapped(_candidates(opts, opts.operands[1:]), note="runs a command in another root directory")
    return _Wrapped(note="opens a shell in another root directory")


def _wrap_su(args: list[Arg], runuser: bool = False) -> _Wrapped:
    opts = _getopt(
        args,
        short_value="cgGsw" + ("u" if runuser else ""),
        long_value={"--command", "--session-command", "--group", "--supp-group", "--shell",
                    "--whitelist-environment", "--user"},
        short_flags="flmpPh",
        long_flags={"--login", "--preserve-environment", "--pty", "--fast", "--help", "--version"},
        permute=True,
    )
    code = opts.values("-c", "--command", "--session-command")
    if code:
        return _Wrapped(sources=code[:1], note="runs a command as another user")
    operands = [a for a in opts.operands if a.text != "-"]
    if runuser and opts.has("-u", "--user") and operands:
        return _Wrapped([operands], note="runs a command as another user")
    return _Wrapped(note="opens a shell as another user")


def _wrap_flock(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="Ewc", long_value={"--conflict-exit-code", "--timeout", "--wait", "--command"},
        short_flags="sexunoFvh",
        long_flags={"--shared", "--exclusive", "--unlock", "--nonblock", "--nb", "--close", "--no-fork",
                    "--verbose", "--help", "--version"},
    )
    code = opts.values("-c", "--command")
    rest = opts.operands[1:]
    if not code and rest and rest[0].text in ("-c", "--command"):
        code = rest[1:2]
    if code:
        return _Wrapped(sources=code[:1], note="runs a command under a lock")
    if rest:
        return _Wrapped([rest], note="runs a command under a lock")
    return _Wrapped(note="holds a lock on a file descriptor")


def _wrap_setsid(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="cfwh", long_flags={"--ctty", "--fork", "--wait", "--help", "--version"})
    return _Wrapped(_candidates(opts, opts.operands), note="runs a command in a new session")


def _wrap_watch(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="nq", long_value={"--interval", "--equexit"}, short_flags="dtbegcxpwhvr",
        long_flags={"--differences", "--no-title", "--beep", "--errexit", "--chgexit", "--color", "--no-color",
                    "--exec", "--precise", "--no-wrap", "--no-rerun", "--help", "--version"},
    )
    if not opts.operands:
        return _Wrapped(note="repeats a command")
    if opts.has("-x", "--exec"):
        return _Wrapped(_candidates(opts, opts.operands), note="repeats a command")
    texts = [a.text for a in opts.operands]
    source = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
    return _Wrapped(sources=[Arg(source, node=opts.operands[0].node)], note="repeats a command through sh -c")


_XARGS_LONG_VALUE = {"--arg-file", "--delimiter", "--max-lines", "--max-args", "--max-procs", "--max-chars",
                     "--process-slot-var"}


def _xargs_opts(args: list[Arg]) -> _Opts:
    return _getopt(
        args, short_value="aEdILnPs", long_value=_XARGS_LONG_VALUE, short_flags="0prtx", short_optional="eil",
        long_flags={"--null", "--no-run-if-empty", "--verbose", "--interactive", "--exit", "--open-tty",
                    "--show-limits", "--eof", "--replace", "--help", "--version"},
    )


def _wrap_xargs(args: list[Arg]) -> _Wrapped:
    opts = _xargs_opts(args)
    operands = opts.operands or [Arg("echo")]
    return _Wrapped(_candidates(opts, operands), note="runs a command on arguments read from its input")


def _wrap_parallel(args: list[Arg]) -> _Wrapped:
    texts = [a.text for a in args]
    cut = texts.index(":::") if ":::" in texts else len(args)
    opts = _getopt(args[:cut], short_value="jNnSIdaE", short_flags="kqXuvg0")
    words = opts.operands
    inputs = [a for a in args[cut + 1:] if a.text not in (":::", "::::")][:8]
    if len(words) == 1 and words[0].text and " " in words[0].text:
        template = words[0].text
        sources = [Arg(template.replace("{}", i.text) if i.text else None) for i in inputs] or [Arg(template)]
        return _Wrapped(sources=sources, note="runs a command for each input")
    commands = _candidates(opts, words)
    if inputs:
        commands = [c + [i] for c in commands for i in inputs]
    return _Wrapped(commands, note="runs a command for each input")


_SSH_LOCAL_COMMANDS = ("proxycommand", "localcommand", "knownhostscommand")


def _wrap_ssh(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="BbcDEeFIiJLlmOoPpQRSWw", short_flags="46AaCfGgKkMNnqsTtVvXxYy")
    sources = []
    for value in opts.values("-o"):
        if value.text:
            parts = re.split(r"\s*=\s*|\s+", value.text.strip(), maxsplit=1)
            if len(parts) == 2 and parts[0].lower() in _SSH_LOCAL_COMMANDS:
                sources.append(Arg(parts[1]))
    remote = opts.operands[1:]
    if remote:
        texts = [a.text for a in remote]
        source = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
        sources.append(Arg(source, node=remote[0].node))
        return _Wrapped(sources=sources, writes=opts.values("-E"), note="runs a command on another host")
    return _Wrapped(sources=sources, writes=opts.values("-E"), note="opens an interactive session on another host")


def _wrap_exec(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_value="a", short_flags="cl")
    if opts.operands:
        return _Wrapped(_candidates(opts, opts.operands), note="replaces the shell with another program")
    return _Wrapped(note="changes the shell's file descriptors")


def _wrap_command(args: list[Arg]) -> _Wrapped:
    opts = _getopt(args, short_flags="pvV")
    return _Wrapped(_candidates(opts, opts.operands), note="runs a program, bypassing shell functions")


def _wrap_script(args: list[Arg]) -> _Wrapped:
    opts = _getopt(
        args, short_value="cEIOBTm",
        long_value={"--command", "--echo", "--log-in", "--log-out", "--log-io", "--log-timing", "--output-limit"},
        short_flags="aefqhVk",
    )
    writes = opts.operands[:1] or [Arg("typescript")]
    code = opts.values("-c", "--command")
    if code:
        return _Wrapped(sources=code[:1], writes=writes, note="records a command")
    return _Wrapped(writes=writes, note="records an interactive shell")


def _wrap_unsure(args: list[Arg]) -> _Wrapped:
    """Wrappers with many options (systemd-run, nsenter, pkexec): try both readings of the first operand."""
    opts = _getopt(args, short_value="pEMHutSGw")
    operands = opts.operands
    commands = [operands, operands[1:]] if len(operands) > 1 else ([operands] if operands else [])
    return _Wrapped(commands, note="runs a command in another context")


_WRAPPER_PARSERS: dict[str, Callable[[list[Arg]], _Wrapped]] = {
    "sudo": _wrap_sudo, "doas": _wrap_doas, "env": _wrap_env, "timeout": _wrap_timeout, "nohup": _wrap_plain,
    "nice": _wrap_nice, "ionice": _wrap_ionice, "chrt": _wrap_chrt, "taskset": _wrap_taskset,
    "numactl": _wrap_numactl, "stdbuf": _wrap_stdbuf, "time": _wrap_time, "strace": _wrap_strace,
    "ltrace": _wrap_ltrace, "chroot": _wrap_chroot, "su": _wrap_su,
    "runuser": lambda args: _wrap_su(args, runuser=True), "flock": _wrap_flock, "setsid": _wrap_setsid,
    "watch": _wrap_watch, "xargs": _wrap_xargs, "parallel": _wrap_parallel, "ssh": _wrap_ssh,
    "exec": _wrap_exec, "command": _wrap_command, "builtin": _wrap_plain, "busybox": _wrap_plain,
    "unbuffer": _wrap_plain, "coproc": lambda args: _wrap_plain(args[1:] if args[1:2] and args[1].text == "{" else args), "script": _wrap_script, "systemd-run": _wrap_unsure,
    "nsenter": _wrap_unsure, "pkexec": _wrap_unsure, "sg": _wrap_unsure, "catchsegv": _wrap_plain,
}


def _innermost_prog(args: list[Arg]) -> str | None:
    """The program a wrapper chain finally runs: `sudo -E env X=1 curl ...` -> "curl"."""
    for _ in range(_MAX_NESTING):
        if not args or args[0].text is None:
            return None
        prog = posixpath.basename(args[0].text)
        parse = _WRAPPER_PARSERS.get(prog)
        if parse is None:
            return prog
        wrapped = parse(args[1:])
        if not wrapped.commands:
            return prog
        args = wrapped.commands[0]
    return None


def _run_wrapper(an: _Analysis, cmd: _Cmd, wrapped: _Wrapped) -> None:
    inner = _join(wrapped.commands[0]) if wrapped.commands else None
    if inner is None and wrapped.sources:
        inner = wrapped.sources[0].text
    what = f"runs `{_excerpt(inner, 80)}`" if inner else wrapped.note
    an.add(
        MUTATING,
        f"wrapper:{cmd.prog}",
        f"`{cmd.prog}` {what}; a wrapper is never read-only, whatever it runs",
        structural=True,
        decoded=inner,
    )
    for target in wrapped.writes:
        an.write(target, f"`{cmd.prog}`", cmd.prog)
    for source in wrapped.sources:
        _run_code(an, cmd, source, "sh", cmd.prog)
    for command in wrapped.commands:
        an.inner_words(command, cmd.prog, cmd.stdin)


def _run_code(an: _Analysis, cmd: _Cmd, code: Arg | None, language: str, via: str) -> None:
    """Program text handed to an interpreter: follow it when it is known, refuse downloads."""
    if code is None:
        return
    if code.text is not None:
        an.code_text(code.text, language, via)
    elif code.node is not None and an.has_downloader(code.node):
        an.add(
            FORBIDDEN,
            "forbidden:download-to-shell",
            f"`{cmd.prog}` runs code fetched from the network without anyone seeing it",
        )


# --------------------------------------------------------------------------- handlers

_Handler = Callable[[_Analysis, _Cmd], None]
_HANDLERS: dict[str, _Handler] = {}


def _handles(*names: str) -> Callable[[_Handler], _Handler]:
    def register(function: _Handler) -> _Handler:
        for name in names:
            _HANDLERS[name] = function
        return function

    return register


# Read-only commands whose arguments cannot make them write, run programs or change state.
_FREE_ARGS = frozenset(
    {
        "ls", "cat", "head", "tail", "wc", "grep", "egrep", "fgrep", "readlink", "realpath", "stat", "which",
        "whereis", "basename", "dirname", "md5sum", "sha1sum", "sha224sum", "sha256sum", "sha384sum",
        "sha512sum", "b2sum", "cksum", "cut", "tr", "column", "nl", "tac", "uname", "id", "whoami", "groups",
        "uptime", "df", "du", "free", "lscpu", "lsblk", "lspci", "lsmod", "nproc", "printenv", "echo", "true",
        "false", "sleep", "test", "[", "pwd", "type", "jq", "diff", "cmp", "od", "strings", "ps", "pgrep",
        "pidof", "lsof", "getconf", "locale", "lsb_release", "arch", "tty", "w", "who", "cd", ":",
    }
)


def _allow_free(an: _Analysis, cmd: _Cmd) -> None:
    an.allow(cmd)


for _name in _FREE_ARGS:
    _HANDLERS[_name] = _allow_free


def _checked(check: Callable[[_Cmd], tuple[RiskClass, str, str] | None]) -> _Handler:
    """A handler from a check that returns None (read-only) or (class, rule, reason)."""

    def handler(an: _Analysis, cmd: _Cmd) -> None:
        problem = check(cmd)
        if problem is None:
            an.allow(cmd)
        else:
            an.add(*problem)

    return handler


def _simple(cls: RiskClass, reason: str) -> _Handler:
    def handler(an: _Analysis, cmd: _Cmd) -> None:
        an.add(cls, f"{cls.value}:{cmd.prog}", reason.format(prog=cmd.prog))

    return handler


def _handler_for(prog: str) -> _Handler | None:
    handler = _HANDLERS.get(prog)
    if handler is not None:
        return handler
    if _PYTHON_NAME.fullmatch(prog):
        return _python
    if re.fullmatch(r"pip\d*(\.\d+)?", prog):
        return _pip_command
    if prog.startswith("mkfs"):
        return _HANDLERS["mkfs"]
    if re.fullmatch(r"perl[\d.]*", prog):
        return _perl
    if prog.endswith(".run"):
        return lambda an, cmd: _runfile(an, cmd.name, cmd.args)
    return None


# -- wrappers and shell builtins that run code


def _wrapper_handler(an: _Analysis, cmd: _Cmd) -> None:
    _run_wrapper(an, cmd, _WRAPPER_PARSERS[cmd.prog](cmd.args))


for _name in _WRAPPER_PARSERS:
    _HANDLERS[_name] = _wrapper_handler


@_handles("env")
def _env(an: _Analysis, cmd: _Cmd) -> None:
    if not cmd.args:
        an.allow(cmd)
    else:
        _run_wrapper(an, cmd, _wrap_env(cmd.args))


@_handles("command")
def _command(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_flags="pvV")
    if opts.has("-v", "-V") or not opts.operands:
        an.allow(cmd, "command -v")  # `command -v X` only looks X up
    else:
        _run_wrapper(an, cmd, _wrap_command(cmd.args))


@_handles("numactl")
def _numactl(an: _Analysis, cmd: _Cmd) -> None:
    wrapped = _wrap_numactl(cmd.args)
    opts = _getopt(cmd.args, short_value="ipmNCPwSfLM", long_value=_NUMACTL_VALUE)
    if not wrapped.commands and opts.has("-s", "-H", "--show", "--hardware") and not opts.has(
        "-S", "-f", "--shm", "--file"
    ):
        an.allow(cmd)
    else:
        _run_wrapper(an, cmd, wrapped)


@_handles("xargs")
def _xargs(an: _Analysis, cmd: _Cmd) -> None:
    # xargs appends what it reads to the command; when the input is known, so are the arguments.
    opts = _xargs_opts(cmd.args)
    command = opts.operands or [Arg("echo")]
    wrapped = _Wrapped(_candidates(opts, command), note="runs a command on arguments read from its input")
    data = cmd.stdin.data if cmd.stdin is not None else None
    if data is not None and wrapped.commands:
        text = data.decode("utf-8", "replace")
        replace = [v.text for v in opts.values("-I", "--replace", "-i") if v.text] or (
            ["{}"] if opts.has("-i", "--replace") else []
        )
        if replace:
            lines = [line for line in text.splitlines() if line.strip()][:8]
            wrapped.commands = [
                [Arg(a.text.replace(replace[0], line) if a.text else None) for a in c]
                for c in wrapped.commands for line in lines
            ] or wrapped.commands
        else:
            words = [Arg(w) for w in text.split()[:64]]
            wrapped.commands = [c + words for c in wrapped.commands]
    _run_wrapper(an, cmd, wrapped)
    inner = _innermost_prog(command)
    if inner is not None and _language_of(inner) is not None and cmd.stdin is not None and cmd.stdin.kind == "pipe":
        _piped_code(an, cmd, inner, _language_of(inner) or "sh", None)


@_handles("eval")
def _eval(an: _Analysis, cmd: _Cmd) -> None:
    texts = [a.text for a in cmd.args]
    code = None if any(t is None for t in texts) else " ".join(texts)  # type: ignore[arg-type]
    an.add(MUTATING, "eval", "`eval` runs its arguments as shell code", structural=True, decoded=code)
    if code is not None:
        an.inner_source(code, "eval")
    elif any(a.node is not None and an.has_downloader(a.node) for a in cmd.args):
        an.add(FORBIDDEN, "forbidden:download-to-shell", "`eval` runs code fetched from the network unseen")


@_handles("source", ".")
def _source(an: _Analysis, cmd: _Cmd) -> None:
    if not cmd.args:
        an.add(MUTATING, "source", f"`{cmd.prog}` without a file is not read-only")
        return
    _script(an, cmd, cmd.args[0], cmd.args[1:], "sh", rule="source")


@_handles("trap")
def _trap(an: _Analysis, cmd: _Cmd) -> None:
    an.add(MUTATING, "trap", "`trap` installs a command that the shell runs later, on a signal or at exit")
    operands = _operands(cmd.args)
    if len(operands) >= 2 and operands[0].text not in (None, "-", ""):
        _run_code(an, cmd, operands[0], "sh", "trap")


@_handles("alias")
def _alias(an: _Analysis, cmd: _Cmd) -> None:
    an.add(MUTATING, "alias", "`alias` defines a name that can later stand for another command")
    for arg in cmd.args:
        if arg.text and "=" in arg.text:
            an.inner_source(arg.text.split("=", 1)[1], "alias")


# -- interpreters

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "ash", "fish", "csh", "tcsh", "rbash", "yash", "posh"})
_PYTHON_NAME = re.compile(r"python(\d+(\.\d+)?)?")
_WORKLOAD_PYTHON = re.compile(r"python(3(\.\d+)?)?")
# Benchmark options that write files (results, traces, logs): the run is then no longer read-only.
_WORKLOAD_WRITE_FLAGS = ("--output-file", "--output-dir", "--output-json", "--output-path", "--result", "--save",
                         "--profile", "--torch-profile", "--log-file", "--dump", "--append-result", "--export",
                         "--trace")
_WORKLOAD_MODULES = frozenset({"sglang.bench_serving", "sglang.bench_one_batch", "sglang.bench_offline_throughput"})
_BENCHMARK_SCRIPT = re.compile(r"(\./)?benchmarks/[A-Za-z0-9_][A-Za-z0-9_.-]*\.py")


_LANGUAGE_NAMES = {"sh": "shell", "python": "Python", "perl": "Perl", "ruby": "Ruby", "node": "JavaScript",
                   "nodejs": "JavaScript", "php": "PHP", "lua": "Lua"}


def _language_of(prog: str) -> str | None:
    if prog in _SHELLS:
        return "sh"
    if _PYTHON_NAME.fullmatch(prog):
        return "python"
    if re.fullmatch(r"perl[\d.]*", prog):
        return "perl"
    if prog in ("ruby", "node", "nodejs", "php", "lua"):
        return prog
    return None


@_handles(*_SHELLS)
def _shell(an: _Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    code_mode = stdin_mode = False
    while index < len(args):
        text = args[index].text
        if text is None:
            break
        if text in ("--", "-"):
            stdin_mode = stdin_mode or text == "-"
            index += 1
            break
        if text.startswith("--"):
            if text in ("--rcfile", "--init-file"):
                an.add(MUTATING, f"script:{cmd.prog}", f"`{cmd.prog} {text}` runs a startup file the classifier cannot see")
                index += 1
            index += 1
            continue
        if text[0] in "-+" and len(text) > 1:
            letters = text[1:]
            code_mode = code_mode or (text[0] == "-" and "c" in letters)
            stdin_mode = stdin_mode or "s" in letters
            if "o" in letters or "O" in letters:
                index += 1  # `-o pipefail`: the option name is the next word
            index += 1
            continue
        break
    operands = args[index:]
    if code_mode:
        _inline_code(an, cmd, operands[0] if operands else None, "sh", "-c")
    elif operands and not stdin_mode:
        _script(an, cmd, operands[0], operands[1:], "sh")
    else:
        _stdin_program(an, cmd, "sh")


@_handles("python")
def _python(an: _Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    only_info = True  # nothing but --version / --help so far
    while index < len(args):
        text = args[index].text
        if text is None:
            break
        if text in ("-V", "-VV", "--version", "-h", "--help", "-?"):
            index += 1
            continue
        if text == "-":
            break
        if text.startswith("--"):
            only_info = False
            index += 1
            continue
        if text.startswith("-") and len(text) > 1:
            only_info = False
            letters = text[1:]
            for position, letter in enumerate(letters):
                attached = letters[position + 1:]
                value = Arg(attached) if attached else (args[index + 1] if index + 1 < len(args) else None)
                rest = args[index + 1:] if attached else args[index + 2:]
                if letter == "c":
                    _inline_code(an, cmd, value, "python", "-c")
                    return
                if letter == "m":
                    _python_module(an, cmd, value, rest)
                    return
                if letter in "WX":
                    index += 0 if attached else 1
                    break
            index += 1
            continue
        break
    operands = args[index:]
    if operands and operands[0].text != "-":
        script = operands[0].text or ""
        if an.workload and _WORKLOAD_PYTHON.fullmatch(cmd.prog) and _BENCHMARK_SCRIPT.fullmatch(script):
            an.allow_workload(cmd, script.removeprefix("./"))
        else:
            _script(an, cmd, operands[0], operands[1:], "python")
    elif only_info and args:
        an.allow(cmd)
    else:
        _stdin_program(an, cmd, "python")


def _python_module(an: _Analysis, cmd: _Cmd, module_arg: Arg | None, rest: list[Arg]) -> None:
    module = module_arg.text if module_arg is not None else None
    if module == "pip":
        _pip(an, cmd, rest, f"{cmd.prog} -m pip")
        return
    is_benchmark = module in _WORKLOAD_MODULES or (
        module == "vllm.entrypoints.cli.main" and bool(rest) and rest[0].text == "bench"
    )
    if is_benchmark and an.workload and _WORKLOAD_PYTHON.fullmatch(cmd.prog):
        an.allow_workload(cmd, module or "")
    elif is_benchmark:
        an.add(
            MUTATING,
            "python:-m",
            f"`{cmd.prog} -m {module}` runs a benchmark, which counts as read-only only as a workload",
        )
    else:
        an.add(MUTATING, "python:-m", f"`{cmd.prog} -m {module or '...'}` runs a Python module, which can change the host")


@_handles("vllm")
def _vllm(an: _Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    if texts and texts[0] == "bench" and len(texts) > 1 and texts[1] in ("serve", "latency", "throughput"):
        if an.workload:
            an.allow_workload(cmd, f"vllm bench {texts[1]}")
        else:
            an.add(MUTATING, "vllm:bench", "`vllm bench` runs a benchmark, which counts as read-only only as a workload")
    elif texts in (["--version"], ["-v"]):
        an.allow(cmd)
    else:
        sub = texts[0] if texts and texts[0] else "..."
        an.add(MUTATING, f"vllm:{sub}", f"`vllm {sub}` starts a server or job, which is not read-only")


@_handles("perl", "ruby")
def _perl(an: _Analysis, cmd: _Cmd) -> None:
    language = "ruby" if cmd.prog == "ruby" else "perl"
    args = cmd.args
    index = 0
    code: list[Arg | None] = []
    in_place = False
    while index < len(args):
        text = args[index].text
        if text is None or text == "--" or not text.startswith("-") or text == "-":
            break
        letters = text[1:]
        takes_next = False
        for position, letter in enumerate(letters):
            if letter == "i":
                in_place = True
                break  # -i[extension] takes the rest of the cluster
            if letter in "eE":
                takes_next = True
            if letter in "IMmxCdrF":
                break  # these take the rest of the cluster as their value
        if takes_next:
            code.append(args[index + 1] if index + 1 < len(args) else None)
            index += 1
        index += 1
    if in_place:
        an.add(MUTATING, f"{language}:-i", f"`{cmd.prog} -i` edits files in place")
    if code:
        for program in code:
            _inline_code(an, cmd, program, language, "-e")
    elif index < len(args) and args[index].text not in ("-", "--"):
        _script(an, cmd, args[index], args[index + 1:], language)
    else:
        _stdin_program(an, cmd, language)


@_handles("node", "nodejs", "php")
def _node(an: _Analysis, cmd: _Cmd) -> None:
    code_flags = ("-r",) if cmd.prog == "php" else ("-e", "--eval", "-p", "--print")
    texts = cmd.texts
    for index, text in enumerate(texts):
        if text in code_flags:
            _inline_code(an, cmd, cmd.args[index + 1] if index + 1 < len(texts) else None, cmd.prog, text)
            return
        if text and text.startswith(tuple(f + "=" for f in code_flags if f.startswith("--"))):
            _inline_code(an, cmd, Arg(text.split("=", 1)[1]), cmd.prog, text.split("=", 1)[0])
            return
    operands = [a for a in cmd.args if not (a.text or "").startswith("-")]
    if operands:
        _script(an, cmd, operands[0], [], cmd.prog)
    else:
        _stdin_program(an, cmd, cmd.prog)


def _inline_code(an: _Analysis, cmd: _Cmd, code: Arg | None, language: str, flag: str) -> None:
    text = code.text if code is not None else None
    an.add(
        MUTATING,
        f"wrapper:{cmd.prog}",
        f"`{cmd.prog} {flag}` runs inline {_LANGUAGE_NAMES.get(language, language)} code, which can do anything "
        "the user can",
        structural=True,
        decoded=text,
    )
    _run_code(an, cmd, code, language, f"{cmd.prog} {flag}")


def _script(an: _Analysis, cmd: _Cmd, script: Arg, rest: list[Arg], language: str, rule: str | None = None) -> None:
    """An interpreter running a file: runfiles have their own rules; `<(curl ...)` is a download."""
    rule = rule or f"script:{cmd.prog}"
    path = script.text
    if path is not None and posixpath.basename(path).endswith(".run"):
        _runfile(an, path, rest, launcher=cmd.prog)
        return
    substitution = _first_descendant(script.node, "process_substitution") if script.node is not None else None
    if substitution is not None:
        an.add(MUTATING, rule, f"`{cmd.prog}` runs code produced by a process substitution")
        if an.has_downloader(substitution):
            an.add(
                FORBIDDEN,
                "forbidden:download-to-shell",
                f"`{cmd.prog} <(...)` runs a download as {_LANGUAGE_NAMES.get(language, language)} code unseen",
            )
        output = an.substitution_output(substitution)
        if output is not None:
            an.code_text(output, language, f"{cmd.prog} <(...)")
        return
    shown = path if path is not None else _excerpt(script.node)
    an.add(MUTATING, rule, f"`{cmd.prog} {shown}` runs a script file the classifier cannot see")


def _stdin_program(an: _Analysis, cmd: _Cmd, language: str) -> None:
    """An interpreter reading its program from standard input."""
    stdin = cmd.stdin
    if stdin is None:
        an.add(
            MUTATING,
            f"wrapper:{cmd.prog}",
            f"`{cmd.prog}` without a program reads code from its input, which the classifier cannot see",
            structural=True,
        )
    elif stdin.kind == "pipe":
        _piped_code(an, cmd, cmd.prog, language, stdin)
    elif stdin.kind == "file":
        an.add(MUTATING, f"script:{cmd.prog}", f"`{cmd.prog} < {stdin.source}` runs code from a file the classifier cannot see")
    else:
        code = stdin.data.decode("utf-8", "replace") if stdin.data is not None else None
        an.add(
            MUTATING,
            f"wrapper:{cmd.prog}",
            f"`{cmd.prog}` runs the code in {stdin.source}",
            structural=True,
            decoded=code,
        )
        if code is not None:
            an.code_text(code, language, f"{cmd.prog} {'<<EOF' if stdin.kind == 'heredoc' else '<<<'}")


def _piped_code(an: _Analysis, cmd: _Cmd, interpreter: str, language: str, stdin: _Stdin | None) -> None:
    """Text piped into an interpreter runs as code: at least destructive, forbidden for downloads."""
    stdin = stdin or cmd.stdin
    if stdin is None:
        return
    code = stdin.data.decode("utf-8", "replace") if stdin.data is not None else None
    source = stdin.source or "a pipe"
    if stdin.download or an.network[0]:
        an.add(
            FORBIDDEN,
            "forbidden:download-to-shell",
            f"`{source} | {interpreter}` runs a download as code without anyone seeing it",
            decoded=code,
        )
    an.add(
        DESTRUCTIVE,
        "pipe-to-shell",
        f"`{source} | {interpreter}` runs piped text as {_LANGUAGE_NAMES.get(language, language)} code",
        decoded=code,
    )
    if code is not None:
        an.code_text(code, language, f"{source} | {interpreter}")


# -- runfiles


def _runfile(an: _Analysis, path: str, args: list[Arg], launcher: str | None = None) -> None:
    """CUDA and driver `.run` installers: only `--silent --toolkit` without `--driver` is a side-by-side install."""
    name = posixpath.basename(path)
    flags = {a.text.split("=", 1)[0] for a in args if a.text}
    hidden = any(a.text is None for a in args)
    how = f"`{launcher} {name}`" if launcher else f"`{name}`"
    if name.startswith("NVIDIA-Linux") or "--driver" in flags:
        an.add(
            DESTRUCTIVE,
            "runfile:driver",
            f"{how} installs the NVIDIA driver, replacing the kernel module the GPUs run on",
        )
    elif "--uninstall" in flags:
        an.add(DESTRUCTIVE, "runfile:uninstall", f"{how} --uninstall removes an installed toolkit or driver")
    elif "--silent" in flags and "--toolkit" in flags and not hidden:
        an.add(
            MUTATING,
            "runfile:toolkit-only",
            f"{how} with --silent --toolkit installs a CUDA toolkit side by side, without touching the driver",
        )
    else:
        missing = " and ".join(f for f in ("--silent", "--toolkit") if f not in flags) or "arguments it can see"
        an.add(
            DESTRUCTIVE,
            "runfile:not-toolkit-only",
            f"{how} without {missing} can install the driver as well as the toolkit",
        )


# -- read-only commands with argument checks

_NVSMI_QUERY_FLAGS = frozenset(
    {"-L", "--list-gpus", "-q", "--query", "-x", "--xml-format", "-u", "--unit", "-h", "--help", "--version",
     "-B", "--list-excluded-gpus", "-a"}
)
_NVSMI_QUERY_VALUES = frozenset(
    {"-i", "--id", "-d", "--display", "-l", "--loop", "-lms", "--loop-ms", "--query-gpu",
     "--query-supported-clocks", "--query-compute-apps", "--query-accounted-apps", "--query-retired-pages",
     "--query-remapped-rows", "--format"}
)
_NVSMI_SETTINGS = frozenset(
    {"-pm", "--persistence-mode", "-pl", "--power-limit", "-ac", "--applications-clocks", "-rac",
     "--reset-applications-clocks", "-mig", "--multi-instance-gpu", "-c", "--compute-mode", "-e", "--ecc-config",
     "-p", "--reset-ecc-errors", "-lgc", "--lock-gpu-clocks", "-rgc", "--reset-gpu-clocks", "-lmc",
     "--lock-memory-clocks", "-rmc", "--reset-memory-clocks", "-am", "--accounting-mode", "-caa",
     "--clear-accounted-apps", "-acp", "--accounted-apps-permission", "-cc", "--cuda-clocks", "-dm",
     "--driver-model", "-fdm", "--force-driver-model", "-f", "--filename"}
)
_NVSMI_SUBCOMMANDS_READ = {
    "topo": ({"-m", "--matrix", "-mp", "--matrix_pci"}, {"-i", "--id"}),
    "nvlink": ({"-s", "--status", "-c", "--capabilities"}, {"-i", "--id", "-l", "--link"}),
    "dmon": (set(), {"-i", "--id", "-d", "--delay", "-c", "--count", "-s", "--select", "-o", "--options"}),
    "pmon": (set(), {"-i", "--id", "-d", "--delay", "-c", "--count", "-s", "--select", "-o", "--options"}),
    "mig": ({"-lgi", "-lgip", "-lci", "-lcip", "--list-gpu-instances", "--list-gpu-instance-profiles",
             "--list-compute-instances", "--list-compute-instance-profiles"}, {"-i", "--id", "-gi", "--gpu-instance-id"}),
}


@_handles("nvidia-smi")
def _nvidia_smi(an: _Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    if texts and texts[0] and not texts[0].startswith("-"):
        _nvidia_smi_subcommand(an, cmd, texts[0], texts[1:])
        return
    problems = 0
    index = 0
    while index < len(texts):
        text = texts[index]
        index += 1
        if text is None:
            continue
        name, equals, _ = text.partition("=")
        if name in _NVSMI_QUERY_FLAGS and not equals:
            continue
        if name in _NVSMI_QUERY_VALUES:
            index += 0 if equals else 1
            continue
        problems += 1
        if name in ("-r", "--gpu-reset"):
            an.add(
                DESTRUCTIVE,
                "nvidia-smi:--gpu-reset",
                "`nvidia-smi --gpu-reset` resets the GPU, killing everything running on it",
            )
        elif name in _NVSMI_SETTINGS:
            an.add(MUTATING, f"nvidia-smi:{name}", f"`nvidia-smi {name}` changes a GPU setting or writes a file")
        else:
            an.add(MUTATING, f"nvidia-smi:{name}", f"`nvidia-smi {name}` is not a query flag the classifier accepts")
    if not problems:
        an.allow(cmd)


def _nvidia_smi_subcommand(an: _Analysis, cmd: _Cmd, sub: str, rest: list[str | None]) -> None:
    if sub == "mig" and any(t and t.startswith(("-dgi", "-dci", "--destroy")) for t in rest):
        an.add(DESTRUCTIVE, "nvidia-smi:mig-destroy", "`nvidia-smi mig -dgi/-dci` destroys GPU instances")
        return
    spec = _NVSMI_SUBCOMMANDS_READ.get(sub)
    if spec is not None:
        flags, values = spec
        index, clean = 0, True
        while index < len(rest):
            text = rest[index] or ""
            if text in values:
                index += 2
                continue
            clean = clean and (text in flags or text.split("=", 1)[0] in values)
            index += 1
        if clean:
            an.allow(cmd, f"nvidia-smi {sub}")
            return
    an.add(MUTATING, f"nvidia-smi:{sub}", f"`nvidia-smi {sub}` with these arguments is not a read-only query")


@_handles("nvcc")
def _nvcc(an: _Analysis, cmd: _Cmd) -> None:
    informative = {"--version", "-V", "--help", "-h", "--list-gpu-arch", "--list-gpu-code"}
    if all(t in informative for t in cmd.texts):
        an.allow(cmd)
    else:
        an.add(MUTATING, "nvcc:compile", "`nvcc` with these arguments compiles code and writes output files")


_PIP_GLOBAL_VALUES = frozenset(
    {"--python", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host", "--cert",
     "--client-cert", "--cache-dir", "--log", "--log-file", "--local-log", "--keyring-provider", "--use-feature",
     "--use-deprecated", "--root-user-action", "--directory", "--project", "--config-file", "--color", "-p"}
)
_PIP_READ = frozenset({"list", "freeze", "show", "check", "inspect", "help", "debug", "hash", "tree"})


def _is_pip_log(name: str) -> bool:
    return name != "--local" and any(_abbreviates(name, full) or name == full
                                      for full in ("--log", "--log-file", "--local-log"))


@_handles("pip")
def _pip_command(an: _Analysis, cmd: _Cmd) -> None:
    _pip(an, cmd, cmd.args, cmd.prog)


def _pip(an: _Analysis, cmd: _Cmd, args: list[Arg], label: str) -> None:
    """pip (and `python -m pip`, `uv pip`): list/freeze/show are read-only, install mutates, uninstall destroys."""
    index = 0
    while index < len(args) and args[index].text and (args[index].text or "").startswith("-"):
        text = args[index].text or ""
        if text in _PIP_GLOBAL_VALUES:
            index += 1
        index += 1
    if any(_is_pip_log(name) for name in _long_options(args)):
        an.add(MUTATING, "pip:--log", f"`{label} --log` writes a log file")
        return
    if any(a.text in ("--python", "-p") or (a.text or "").startswith("--python=") for a in args):
        an.add(MUTATING, "pip:--python", f"`{label} --python` runs another Python interpreter")
        return
    if index >= len(args):
        an.allow(cmd, label)  # `pip --version`, `pip -h`
        return
    sub = args[index].text
    rest = [a.text for a in args[index + 1:]]
    first = next((t for t in rest if t and not t.startswith("-")), None)
    if sub in _PIP_READ:
        an.allow(cmd, f"{label} {sub}")
    elif (sub, first) in {("config", "list"), ("config", "get"), ("config", "debug"), ("index", "versions"),
                          ("cache", "dir"), ("cache", "info"), ("cache", "list")}:
        an.allow(cmd, f"{label} {sub} {first}")
    elif sub == "uninstall":
        an.add(DESTRUCTIVE, "pip:uninstall", f"`{label} uninstall` removes installed Python packages")
    elif sub == "sync":
        an.add(DESTRUCTIVE, "pip:sync", f"`{label} sync` removes every installed package not in its list")
    elif sub == "install":
        an.add(MUTATING, "pip:install", f"`{label} install` installs or replaces Python packages")
    elif sub in ("download", "wheel"):
        an.add(MUTATING, f"pip:{sub}", f"`{label} {sub}` fetches or builds packages and writes them to disk")
    else:
        an.add(MUTATING, f"pip:{sub or 'unknown'}", f"`{label} {sub or '...'}` is not one of pip's read-only commands")


@_handles("uv")
def _uv(an: _Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    while index < len(args) and (args[index].text or "").startswith("-"):
        index += 2 if args[index].text in _PIP_GLOBAL_VALUES else 1
    if index >= len(args):
        if all(t in ("--version", "-V", "--help", "-h") for t in cmd.texts):
            an.allow(cmd)
        else:
            an.add(MUTATING, "uv:unknown", "`uv` with these options is not a read-only command")
        return
    sub = args[index].text
    rest = args[index + 1:]
    rest_texts = [a.text for a in rest]
    if sub == "pip":
        _pip(an, cmd, rest, "uv pip")
    elif sub == "run":
        opts = _getopt(
            rest,
            short_value="pw",
            long_value={"--with", "--python", "--directory", "--project", "--env-file", "--extra", "--group",
                        "--package", "--index", "--index-url", "--extra-index-url", "--with-requirements"},
            short_flags="qvm",
            long_flags={"--no-project", "--isolated", "--all-extras", "--frozen", "--locked", "--no-sync",
                        "--active", "--offline", "--module", "--script", "--no-dev"},
        )
        _run_wrapper(an, cmd, _Wrapped(_candidates(opts, opts.operands), note="runs a command in a project environment"))
    elif sub == "sync" and "--inexact" not in rest_texts:
        an.add(DESTRUCTIVE, "uv:sync", "`uv sync` removes packages that are not in the lockfile")
    elif sub == "remove" or (sub == "tool" and rest_texts[:1] == ["uninstall"]) or (
        sub == "venv" and "--clear" in rest_texts
    ):
        an.add(DESTRUCTIVE, f"uv:{sub}", f"`uv {sub}` removes installed packages or environments")
    else:
        an.add(MUTATING, f"uv:{sub or 'unknown'}", f"`uv {sub or '...'}` is not a read-only command")


@_handles("conda", "mamba", "micromamba")
def _conda(an: _Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    texts = [a.text for a in operands]
    sub = texts[0] if texts else None
    second = texts[1] if len(texts) > 1 else None
    if sub is None and all(t in ("--version", "-V", "--help", "-h") for t in cmd.texts):
        an.allow(cmd)
    elif sub in ("list", "info", "search") or (sub == "env" and second == "list") or (
        sub == "config" and any(t in ("--show", "--get", "--show-sources") for t in cmd.texts)
    ):
        an.allow(cmd, f"{cmd.prog} {sub}")
    elif sub == "run":
        opts = _getopt(cmd.args[1:] if cmd.args and cmd.args[0].text == "run" else cmd.args,
                       short_value="np", long_value={"--name", "--prefix", "--cwd"},
                       short_flags="", long_flags={"--no-capture-output", "--live-stream", "--debug-wrapper-scripts"})
        _run_wrapper(an, cmd, _Wrapped(_candidates(opts, opts.operands), note="runs a command in a conda environment"))
    elif sub in ("remove", "uninstall") or (sub == "env" and second == "remove"):
        shown = f"{sub} {second}" if sub == "env" else sub
        an.add(DESTRUCTIVE, f"{cmd.prog}:remove", f"`{cmd.prog} {shown}` removes packages or environments")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` is not a read-only command")


_APT_READ = frozenset({"list", "show", "search", "policy", "depends", "rdepends", "madison", "showsrc", "showpkg",
                       "pkgnames", "stats", "unmet", "dump", "dumpavail"})
_APT_DESTRUCTIVE = frozenset({"remove", "purge", "autoremove", "autopurge", "dist-upgrade", "full-upgrade"})
# Packages that install or replace the NVIDIA kernel driver (the `cuda` metapackages pull it in too).
_DRIVER_PACKAGE = re.compile(
    r"^(nvidia-driver|nvidia-open|nvidia-dkms|nvidia-kernel|nvidia-headless|nvidia-utils|libnvidia-compute|"
    r"cuda-drivers|linux-modules-nvidia|linux-image|kmod-nvidia|akmod-nvidia|xorg-x11-drv-nvidia)|^cuda(-\d+-\d+)?$"
)
_DRIVER_SAMPLES = ("nvidia-driver-580", "nvidia-open-580", "cuda-drivers", "cuda", "cuda-13-0", "nvidia-dkms-580")


def _is_driver_package(arg: Arg) -> bool:
    if arg.text is None:
        return False
    name = re.split(r"[=:]", arg.text, maxsplit=1)[0]
    if arg.pattern:
        return any(fnmatch.fnmatchcase(sample, name) for sample in _DRIVER_SAMPLES)
    return bool(_DRIVER_PACKAGE.match(name))


@_handles("apt", "apt-get", "apt-cache", "aptitude")
def _apt(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_value="oct", long_value={"--option", "--config-file", "--target-release",
                                                            "--default-release"}, permute=True)
    sub = opts.operands[0].text if opts.operands else None
    packages = opts.operands[1:]
    hooks = opts.has("-o", "--option", "-c", "--config-file")
    if sub in _APT_READ and not hooks and (cmd.prog != "apt-cache" or sub != "gencaches"):
        an.allow(cmd, f"{cmd.prog} {sub}")
    elif sub in _APT_READ:
        an.add(MUTATING, f"{cmd.prog}:-o", f"`{cmd.prog} -o/-c` sets APT options, which can run hook commands")
    elif sub in _APT_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "reinstall") and any(_is_driver_package(p) for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    elif sub == "install" and any(p.text and p.text.endswith("-") and not p.text.startswith("-") for p in packages):
        an.add(DESTRUCTIVE, f"{cmd.prog}:remove", f"`{cmd.prog} install pkg-` (a trailing minus) uninstalls pkg")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages or APT state")


@_handles("dnf", "yum", "microdnf", "zypper", "tdnf")
def _rpm_tool(an: _Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    sub = operands[0].text if operands else None
    if sub in ("remove", "erase", "autoremove", "rm", "groupremove", "distro-sync"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{sub}", f"`{cmd.prog} {sub}` uninstalls packages")
    elif sub in ("install", "in", "reinstall", "update", "upgrade") and any(_is_driver_package(p) for p in operands[1:]):
        an.add(DESTRUCTIVE, f"{cmd.prog}:driver-install", f"`{cmd.prog} {sub}` of a driver package replaces the GPU driver")
    else:
        an.add(MUTATING, f"{cmd.prog}:{sub or 'unknown'}", f"`{cmd.prog} {sub or '...'}` changes installed packages")


_DPKG_READ = frozenset(
    {"-l", "--list", "-L", "--listfiles", "-s", "--status", "-S", "--search", "-p", "--print-avail", "-c",
     "--contents", "-I", "--info", "--get-selections", "--print-architecture", "--print-foreign-architectures",
     "--version", "--help", "-C", "--audit", "-V", "--verify", "--compare-versions", "--admindir", "--root",
     "--no-pager", "-W", "--show", "-f", "--showformat"}
)


@_handles("dpkg")
def _dpkg(an: _Analysis, cmd: _Cmd) -> None:
    options = [(a.text or "").split("=", 1)[0] for a in cmd.args if (a.text or "").startswith("-")]
    if any(o in ("-r", "--remove", "-P", "--purge") for o in options):
        an.add(DESTRUCTIVE, "dpkg:-r", "`dpkg -r/-P` removes installed packages")
    elif any(o in ("-i", "--install") for o in options) and any(
        _is_driver_package(Arg(posixpath.basename(a.text))) for a in _operands(cmd.args) if a.text
    ):
        an.add(DESTRUCTIVE, "dpkg:driver-install", "`dpkg -i` of a driver package replaces the GPU driver")
    elif options and all(o in _DPKG_READ for o in options):
        an.allow(cmd)
    else:
        shown = next((o for o in options if o not in _DPKG_READ), "...")
        an.add(MUTATING, f"dpkg:{shown}", f"`dpkg {shown}` installs, configures or changes package state")


@_handles("dpkg-query")
def _dpkg_query(an: _Analysis, cmd: _Cmd) -> None:
    an.allow(cmd)  # only ever queries the package database


@_handles("update-alternatives", "alternatives")
def _update_alternatives(an: _Analysis, cmd: _Cmd) -> None:
    names = [(a.text or "").split("=", 1)[0] for a in cmd.args if (a.text or "").startswith("--")]
    changing = [n for n in names if n in ("--set", "--install", "--remove", "--remove-all", "--config", "--auto",
                                           "--all", "--set-selections")]
    if changing:
        an.add(
            DESTRUCTIVE,
            f"update-alternatives:{changing[0]}",
            f"`{cmd.prog} {changing[0]}` switches which version a system-wide name points to",
        )
    elif "--log" in names:
        an.add(MUTATING, "update-alternatives:--log", f"`{cmd.prog} --log` writes a log file")
    elif any(n in ("--display", "--query", "--list", "--get-selections") for n in names):
        an.allow(cmd)
    else:
        an.add(MUTATING, "update-alternatives:unknown", f"`{cmd.prog}` without a query action is not read-only")


@_handles("ldconfig")
def _ldconfig(an: _Analysis, cmd: _Cmd) -> None:
    if cmd.args and all(t in ("-p", "--print-cache", "-V", "--version", "--help") for t in cmd.texts):
        an.allow(cmd)
    else:
        an.add(MUTATING, "ldconfig:rebuild-cache", "`ldconfig` without -p rebuilds the dynamic linker cache")


_SYSTEMCTL_READ = frozenset(
    {"status", "is-active", "is-enabled", "is-failed", "is-system-running", "list-units", "list-unit-files",
     "list-sockets", "list-timers", "list-jobs", "list-dependencies", "list-machines", "list-automounts",
     "list-paths", "show", "cat", "help", "show-environment", "get-default"}
)
_SYSTEMCTL_DESTRUCTIVE = frozenset(
    {"stop", "disable", "mask", "restart", "kill", "try-restart", "reload-or-restart", "try-reload-or-restart",
     "condrestart", "force-reload", "isolate", "reboot", "poweroff", "halt", "kexec", "suspend", "hibernate",
     "hybrid-sleep", "suspend-then-hibernate", "emergency", "rescue", "default", "switch-root", "soft-reboot",
     "clean", "exit"}
)


@_handles("systemctl")
def _systemctl(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="tpsHMnoP",
        long_value={"--type", "--property", "--signal", "--host", "--machine", "--lines", "--output", "--state",
                    "--root", "--kill-whom", "--kill-value", "--job-mode", "--what", "--timestamp", "--preset-mode",
                    "--message", "--image", "--drop-in", "--when", "--reboot-argument"},
        permute=True,
    )
    sub = opts.operands[0].text if opts.operands else None
    if not opts.operands or sub in _SYSTEMCTL_READ:
        an.allow(cmd, f"systemctl {sub or 'list-units'}")
    elif sub in _SYSTEMCTL_DESTRUCTIVE:
        an.add(DESTRUCTIVE, f"systemctl:{sub}", f"`systemctl {sub}` stops, disables or restarts services or the machine")
    else:
        an.add(MUTATING, f"systemctl:{sub or 'unknown'}", f"`systemctl {sub or '...'}` changes service state")


@_handles("service")
def _service(an: _Analysis, cmd: _Cmd) -> None:
    texts = cmd.texts
    action = texts[1] if len(texts) > 1 else None
    if action in ("stop", "restart", "force-reload", "try-restart", "condrestart", "force-stop"):
        an.add(DESTRUCTIVE, f"service:{action}", f"`service ... {action}` stops or restarts a service")
    else:
        an.add(MUTATING, f"service:{action or 'unknown'}", "`service` runs an init script, which is not read-only")


_JOURNALCTL_WRITES = ("--vacuum-size", "--vacuum-time", "--vacuum-files", "--rotate", "--flush", "--sync",
                      "--relinquish-var", "--smart-relinquish-var", "--setup-keys", "--update-catalog",
                      "--cursor-file")


@_handles("journalctl")
def _journalctl(an: _Analysis, cmd: _Cmd) -> None:
    for name in _long_options(cmd.args):
        full = next((f for f in _JOURNALCTL_WRITES if f == name or _abbreviates(name, f)), None)
        if full is not None:
            an.add(MUTATING, f"journalctl:{full}", f"`journalctl {full}` deletes, rotates or writes journal files")
            return
    an.allow(cmd)


_GIT_READ = frozenset({"status", "log", "diff", "show", "rev-parse", "describe", "ls-files", "ls-tree", "blame",
                       "shortlog", "version", "help", "show-ref", "grep"})
_GIT_GLOBAL_VALUES = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_GIT_GLOBAL_FLAGS = frozenset(
    {"--no-pager", "-P", "--paginate", "-p", "--bare", "--no-replace-objects", "--literal-pathspecs",
     "--glob-pathspecs", "--noglob-pathspecs", "--icase-pathspecs", "--no-optional-locks", "--no-lazy-fetch",
     "--version", "--help", "-h", "--html-path", "--man-path", "--info-path"}
)
_GIT_COMMAND_KEYS = ("pager", "editor", "sshcommand", "fsmonitor", "askpass", "external", "command", "textconv",
                     "driver", "clean", "smudge", "process", "helper", "program", "difffilter", "packobjectshook",
                     "gitproxy", "cmd")


@_handles("git")
def _git(an: _Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    index = 0
    clean = True
    while index < len(args) and (args[index].text or "").startswith("-"):
        text = args[index].text or ""
        name = text.split("=", 1)[0]
        if text in ("-c", "--config-env") or name == "--config-env":
            setting = args[index + 1] if text in ("-c", "--config-env") and index + 1 < len(args) else Arg(text.split("=", 1)[-1])
            _git_config_override(an, cmd, setting)
            clean = False
            index += 2 if text in ("-c", "--config-env") else 1
            continue
        if name == "--exec-path" or name == "--super-prefix":
            an.add(MUTATING, f"git:{name}", f"`git {name}` changes where git finds the programs it runs")
            clean = False
        elif text in _GIT_GLOBAL_VALUES:
            index += 1
        elif name not in _GIT_GLOBAL_VALUES and name not in _GIT_GLOBAL_FLAGS:
            an.add(MUTATING, f"git:{name}", f"`git {name}` is not an option the classifier accepts as read-only")
            clean = False
        index += 1
    sub = args[index].text if index < len(args) else None
    rest = args[index + 1:]
    problem = _git_subcommand_problem(sub, rest) if index < len(args) else None
    if problem is not None:
        an.add(*problem)
    elif clean:
        an.allow(cmd, f"git {sub}" if sub else "git")


def _git_config_override(an: _Analysis, cmd: _Cmd, setting: Arg) -> None:
    an.add(
        MUTATING,
        "git:-c",
        "`git -c` overrides configuration, which can name a program for git to run (pager, editor, diff tool)",
        decoded=setting.text,
    )
    if setting.text is None or "=" not in setting.text:
        return
    written, value = setting.text.split("=", 1)
    key = written.lower()
    if not value:
        return
    if key.startswith("alias."):
        code = value[1:] if value.startswith("!") else f"git {value}"
        an.inner_source(code, f"git -c {written}")
    elif key.startswith("pager.") or key.rsplit(".", 1)[-1] in _GIT_COMMAND_KEYS:
        an.inner_source(value, f"git -c {written}")


def _git_subcommand_problem(sub: str | None, rest: list[Arg]) -> tuple[RiskClass, str, str] | None:
    texts = [a.text or "" for a in rest]
    shorts = _short_options(rest)
    longs = _long_options(rest)
    operands = [t for t in texts if t and not t.startswith("-")]
    if sub in _GIT_READ:
        if any(n == "--output" or _abbreviates(n, "--output", 5) for n in longs):
            return MUTATING, "git:--output", f"`git {sub} --output` writes to a file"
        if any(n == "--ext-diff" or _abbreviates(n, "--ext-diff", 5) for n in longs):
            return MUTATING, "git:--ext-diff", f"`git {sub} --ext-diff` runs an external diff program"
        if sub == "grep" and ("O" in shorts or any(_abbreviates(n, "--open-files-in-pager", 5) for n in longs)):
            return MUTATING, "git:grep-O", "`git grep -O` runs a pager program on the results"
        return None
    if sub == "branch":
        if shorts & set("dDmMcCfu") or longs & {"--delete", "--move", "--copy", "--force", "--set-upstream-to",
                                                   "--unset-upstream", "--edit-description", "--track"}:
            cls = DESTRUCTIVE if shorts & {"D", "d"} or "--delete" in longs else MUTATING
            return cls, "git:branch", "`git branch` with these options deletes, moves or configures branches"
        if operands and not (shorts & {"l", "a", "r"} or "--list" in longs or longs & {"--contains", "--merged",
                                                                                   "--no-merged", "--points-at"}):
            return MUTATING, "git:branch", "`git branch NAME` creates a branch"
        return None
    if sub == "tag":
        if operands and not (shorts & {"l"} or "--list" in longs) or shorts & set("dafsmu") - {"l"}:
            return MUTATING, "git:tag", "`git tag` with these arguments creates or deletes tags"
        return None
    if sub == "remote":
        if not operands or operands[0] in ("show", "get-url"):
            return None
        return MUTATING, "git:remote", "`git remote` with these arguments changes remotes"
    if sub == "config":
        reads = {"--get", "--get-all", "--get-regexp", "--list", "--get-urlmatch", "--get-color", "--get-colorbool"}
        writes = {"--add", "--unset", "--unset-all", "--replace-all", "--rename-section", "--remove-section", "--edit"}
        if (operands[:1] in (["get"], ["list"]) or longs & reads or "l" in shorts) and not (longs & writes or "e" in shorts):
            return None
        return MUTATING, "git:config", "`git config` with these arguments changes configuration"
    if sub == "stash":
        if operands[:1] in (["list"], ["show"]):
            return None
        if operands[:1] in (["drop"], ["clear"]):
            return DESTRUCTIVE, "git:stash-drop", "`git stash drop/clear` discards stashed changes"
        return MUTATING, "git:stash", "`git stash` changes the working tree"
    if sub == "reflog":
        if not operands or operands[0] == "show":
            return None
        return DESTRUCTIVE, "git:reflog", "`git reflog expire/delete` discards history entries"
    if sub == "reset" and longs & {"--hard", "--merge", "--keep"}:
        return DESTRUCTIVE, "git:reset-hard", "`git reset --hard` discards uncommitted changes"
    if sub == "clean" and ("f" in shorts or "--force" in longs):
        return DESTRUCTIVE, "git:clean", "`git clean -f` deletes untracked files"
    if sub in ("checkout", "switch") and ("f" in shorts or "--force" in longs or "--" in texts):
        return DESTRUCTIVE, f"git:{sub}-force", f"`git {sub}` with -f or paths discards local changes"
    if sub == "restore":
        return DESTRUCTIVE, "git:restore", "`git restore` discards local changes"
    if sub == "push" and ("f" in shorts or longs & {"--force", "--force-with-lease", "--delete", "--mirror"}):
        return DESTRUCTIVE, "git:push-force", "`git push --force/--delete` overwrites or deletes remote history"
    return MUTATING, f"git:{sub or 'unknown'}", f"`git {sub or '...'}` changes the repository or its configuration"


_FIND_RUNNERS = ("-exec", "-execdir", "-ok", "-okdir")
_FIND_WRITERS = ("-fprint", "-fprint0", "-fprintf", "-fls")
_FIND_DANGEROUS = _FIND_RUNNERS + _FIND_WRITERS + ("-delete",)


@_handles("find")
def _find(an: _Analysis, cmd: _Cmd) -> None:
    args = cmd.args
    clean = True
    index = 0
    while index < len(args):
        arg = args[index]
        text = arg.text
        index += 1
        if text in _FIND_RUNNERS:
            end = index
            while end < len(args) and args[end].text not in (";", "+"):
                end += 1
            inner = args[index:end]
            an.add(
                MUTATING,
                f"find:{text}",
                f"`find` with {text} runs another command",
                structural=True,
                decoded=_join(inner) if inner else None,
            )
            an.inner_words(inner, f"find {text}")
            index = end + 1
            clean = False
        elif text == "-delete":
            an.add(DESTRUCTIVE, "find:-delete", "`find -delete` deletes every file it matches")
            clean = False
        elif text in _FIND_WRITERS:
            an.add(MUTATING, f"find:{text}", f"`find {text}` writes its output to a file")
            if index < len(args):
                an.write(args[index], f"`find {text}`", "find")
            index += 1
            clean = False
        elif arg.pattern and text and any(fnmatch.fnmatchcase(d, text) for d in _FIND_DANGEROUS):
            an.add(
                MUTATING,
                "find:glob-option",
                f"the unquoted pattern `{text}` could expand to a find action such as -delete or -exec",
            )
            clean = False
    if clean:
        an.allow(cmd, check_globs=False)


@_handles("sed", "gsed")
def _sed(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="efl",
        long_value={"--expression", "--file", "--line-length"},
        short_flags="nsuzErb",
        long_flags={"--quiet", "--silent", "--separate", "--unbuffered", "--null-data", "--regexp-extended",
                    "--posix", "--debug", "--sandbox", "--binary", "--follow-symlinks", "--in-place", "--help",
                    "--version", "--zero-terminated"},
        permute=True,
        short_optional="i",
    )
    problems = 0
    if opts.has("-i", "--in-place"):
        an.add(MUTATING, "sed:-i", "`sed -i` edits files in place")
        problems += 1
    if opts.has("-f", "--file"):
        an.add(MUTATING, "sed:-f", "`sed -f` reads its script from a file the classifier cannot see")
        problems += 1
    if opts.unsure:
        an.add(MUTATING, "sed:option", "`sed` is given an option the classifier does not accept as read-only")
        problems += 1
    scripts = opts.values("-e", "--expression") or opts.operands[:1]
    for script in scripts:
        if script.text is None:
            continue
        for kind, detail in _scan_sed(script.text):
            problems += 1
            if kind == "w":
                an.add(MUTATING, "sed:w", f"the sed script writes to the file {detail or '(unnamed)'}")
                if detail:
                    an.write(Arg(detail), "the sed `w` command", "sed")
            elif kind == "e":
                an.add(MUTATING, "sed:e", "the sed script runs shell commands (`e`)")
                if detail:
                    an.inner_source(detail, "sed e")
            else:
                an.add(MUTATING, "sed:script", f"the sed script uses `{detail}`, which is not accepted as read-only")
    if not problems:
        an.allow(cmd)


def _scan_sed(script: str) -> list[tuple[str, str]]:
    """Commands in a sed script that write files (w) or run programs (e); ("unknown", ...) for the rest."""
    problems: list[tuple[str, str]] = []
    size = len(script)

    def end_of_regex(start: int, delimiter: str) -> int | None:
        position = start
        while position < size:
            char = script[position]
            if char == "\\":
                position += 2
                continue
            if char == delimiter:
                return position + 1
            if char == "\n":
                return None
            position += 1
        return None

    def rest_of_line(start: int) -> tuple[str, int]:
        stop = script.find("\n", start)
        stop = size if stop < 0 else stop
        return script[start:stop].strip(), stop

    def address(position: int) -> int | None:
        if position >= size:
            return position
        char = script[position]
        if char.isdigit():
            while position < size and (script[position].isdigit() or script[position] == "~"):
                position += 1
            return position
        if char == "$":
            return position + 1
        if char in "+~" and position + 1 < size and script[position + 1].isdigit():
            position += 1
            while position < size and script[position].isdigit():
                position += 1
            return position
        if char == "/" or (char == "\\" and position + 1 < size):
            delimiter = "/" if char == "/" else script[position + 1]
            end = end_of_regex(position + (1 if char == "/" else 2), delimiter)
            if end is None:
                return None
            while end < size and script[end] in "IM":
                end += 1
            return end
        return position

    position = 0
    while position < size:
        char = script[position]
        if char in " \t\n;{}":
            position += 1
            continue
        if char == "#":
            _, position = rest_of_line(position)
            continue
        after = address(position)
        if after is not None and after < size and script[after] == ",":
            after = address(after + 1)
        if after is None:
            return problems + [("unknown", "an unterminated address")]
        position = after
        while position < size and script[position] in " \t!":
            position += 1
        if position >= size:
            return problems + [("unknown", "an address without a command")]
        command = script[position]
        position += 1
        if command in "{}=dDgGhHnNpPxzF":
            continue
        if command in "lqQL":
            while position < size and (script[position].isdigit() or script[position] in " \t"):
                position += 1
            continue
        if command in ":btT":
            while position < size and script[position] not in ";\n}":
                position += 1
            continue
        if command in "aic":
            while True:  # text to the end of the line, continued by a trailing backslash
                line_end = script.find("\n", position)
                if line_end < 0:
                    position = size
                    break
                if line_end > 0 and script[line_end - 1] == "\\":
                    position = line_end + 1
                    continue
                position = line_end
                break
            continue
        if command in "rR":
            _, position = rest_of_line(position)
            continue
        if command in "wW":
            name, position = rest_of_line(position)
            problems.append(("w", name))
            continue
        if command == "e":
            text, position = rest_of_line(position)
            problems.append(("e", text))
            continue
        if command in "sy":
            if position >= size or script[position] in "\n\\":
                return problems + [("unknown", command)]
            delimiter = script[position]
            middle = end_of_regex(position + 1, delimiter)
            end = end_of_regex(middle, delimiter) if middle is not None else None
            if end is None:
                return problems + [("unknown", f"an unterminated {command} command")]
            position = end
            while command == "s" and position < size and script[position] in "gpiImMe0123456789w":
                flag = script[position]
                if flag == "e":
                    problems.append(("e", ""))
                if flag == "w":
                    name, position = rest_of_line(position + 1)
                    problems.append(("w", name))
                    break
                position += 1
            continue
        return problems + [("unknown", command)]
    return problems


@_handles("awk", "gawk", "mawk", "nawk", "busybox-awk")
def _awk(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(
        cmd.args,
        short_value="FvfEilWe",
        long_value={"--field-separator", "--assign", "--file", "--exec", "--include", "--load", "--source"},
        short_flags="bcCgIhkMnNOPrsStV",
        long_flags={"--sandbox", "--posix", "--traditional", "--characters-as-bytes", "--re-interval", "--lint",
                    "--optimize", "--no-optimize", "--use-lc-numeric", "--bignum", "--non-decimal-data",
                    "--copyright", "--version", "--help", "--pretty-print", "--profile", "--dump-variables",
                    "--debug", "--gen-pot"},
        short_optional="dDLop",
    )
    problems = 0
    for names, rule, why in (
        (("-f", "-E", "--file", "--exec"), "awk:-f", "reads its program from a file the classifier cannot see"),
        (("-i", "-l", "--include", "--load"), "awk:-i", "loads extra awk code or extensions"),
        (("-o", "-p", "-d", "-D", "--pretty-print", "--profile", "--dump-variables", "--debug"), "awk:-o",
         "writes a profile, dump or listing file"),
        (("-W",), "awk:-W", "passes implementation options the classifier does not check"),
    ):
        if opts.has(*names):
            an.add(MUTATING, rule, f"`{cmd.prog}` {why}")
            problems += 1
    if opts.unsure:
        an.add(MUTATING, "awk:option", f"`{cmd.prog}` is given an option the classifier does not accept as read-only")
        problems += 1
    programs = opts.values("-e", "--source")
    if not programs and not opts.has("-f", "-E", "--file", "--exec"):
        programs = opts.operands[:1]
    for program in programs:
        if program.text is None:
            continue
        text = program.text
        if "system" in text:
            an.add(MUTATING, "awk:system", "the awk program calls system(), which runs shell commands")
            for command in re.findall(r'system\s*\(\s*"((?:[^"\\]|\\.)*)"', text):
                an.inner_source(command.replace('\\"', '"'), "awk system()")
            problems += 1
        if "|" in text.replace("||", ""):
            an.add(MUTATING, "awk:pipe", "the awk program pipes to or from a command (`|`)")
            problems += 1
        if re.search(r"\bprintf?\b", text) and ">" in text:
            an.add(MUTATING, "awk:print-to-file", "the awk program may print into a file (`print > file`)")
            for target in re.findall(r'>>?\s*"((?:[^"\\]|\\.)*)"', text):
                an.write(Arg(target), "the awk program", "awk")
            problems += 1
        if "@" in text:
            an.add(MUTATING, "awk:indirect-call", "the awk program uses `@` (indirect calls or directives)")
            problems += 1
    if not problems:
        an.allow(cmd)


def _sort_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for arg in cmd.args:
        text = arg.text or ""
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            if name == "--output" or _abbreviates(name, "--output", 3):
                return MUTATING, "sort:-o", "`sort -o` writes its output to a file"
            if name == "--compress-program" or _abbreviates(name, "--compress-program", 5):
                return MUTATING, "sort:--compress-program", "`sort --compress-program` runs another program"
        elif text.startswith("-") and len(text) > 1:
            for letter in text[1:]:
                if letter == "o":
                    return MUTATING, "sort:-o", "`sort -o` writes its output to a file"
                if letter in "ktST":
                    break  # the rest of the cluster is this option's value
    return None


def _uniq_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    opts = _getopt(cmd.args, short_value="fsw", long_value={"--skip-fields", "--skip-chars", "--check-chars",
                                                             "--group", "--all-repeated"}, permute=True)
    if len(opts.operands) >= 2:
        return MUTATING, "uniq:output-file", "`uniq INPUT OUTPUT` writes to OUTPUT"
    return None


def _date_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    skip = False
    for text in cmd.texts:
        if skip:
            skip = False
            continue
        text = text or ""
        if text.startswith("+"):
            continue
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            if name == "--set" or _abbreviates(name, "--set", 4):
                return MUTATING, "date:--set", "`date --set` sets the system clock"
            skip = "=" not in text and name in ("--date", "--reference", "--file")
        elif text.startswith("-") and len(text) > 1:
            if "s" in text[1:]:
                return MUTATING, "date:--set", "`date -s` sets the system clock"
            skip = text[-1] in "dfr"
        else:
            return MUTATING, "date:set", "`date MMDDhhmm` sets the system clock"
    return None


def _hostname_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    reads = {"-s", "--short", "-f", "--fqdn", "--long", "-d", "--domain", "-i", "--ip-address", "-I",
             "--all-ip-addresses", "-A", "--all-fqdns", "-a", "--alias", "-y", "--yp", "--nis", "-V", "--version",
             "-h", "--help"}
    if all(t in reads for t in cmd.texts):
        return None
    return MUTATING, "hostname:set", "`hostname NAME` (or -F, -b) sets the host name"


def _printf_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if cmd.args and (cmd.args[0].text or "").startswith("-v"):
        return MUTATING, "printf:-v", "`printf -v` assigns a shell variable, which can change later commands"
    return None


def _file_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if "C" in _short_options(cmd.args) or any(_abbreviates(n, "--compile", 4) for n in _long_options(cmd.args)):
        return MUTATING, "file:-C", "`file -C` compiles a magic file and writes it"
    return None


def _rg_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for name in _long_options(cmd.args):
        if name in ("--pre", "--hostname-bin"):
            return MUTATING, f"rg:{name}", f"`rg {name}` runs another program"
    return None


def _dmesg_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    for text in cmd.texts:
        text = text or ""
        if text.startswith("--"):
            name = text.split("=", 1)[0]
            if any(name == f or _abbreviates(name, f, 5) for f in ("--clear", "--read-clear", "--console-off",
                                                                   "--console-on", "--console-level")):
                return MUTATING, "dmesg:--clear", f"`dmesg {name}` clears the kernel log or changes console logging"
        elif text.startswith("-"):
            for letter in text[1:]:
                if letter in "cCDEn":
                    return MUTATING, f"dmesg:-{letter}", f"`dmesg -{letter}` clears the kernel log or changes console logging"
                if letter in "flsFS":
                    break
    return None


def _set_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    harmless = {"pipefail", "errexit", "nounset", "xtrace", "verbose", "noclobber"}
    texts = cmd.texts
    index = 0
    while index < len(texts):
        text = texts[index] or ""
        if re.fullmatch(r"[-+][euxvEC]*o?", text) and len(text) > 1:
            if text.endswith("o"):
                index += 1
                if index >= len(texts) or texts[index] not in harmless:
                    return MUTATING, "set", "`set -o` with this option changes how the shell runs later commands"
            index += 1
            continue
        return MUTATING, "set", "`set` with these arguments changes the shell's state"
    return None


def _exit_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if len(cmd.args) <= 1 and all((t or "").isdigit() for t in cmd.texts):
        return None
    return MUTATING, "exit", "`exit` with these arguments is not accepted as read-only"


def _base64_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    if "o" in _short_options(cmd.args) or "--output" in _long_options(cmd.args):
        return MUTATING, "base64:-o", "`base64 -o` writes a file"
    return None


def _partition_check(cmd: _Cmd) -> tuple[RiskClass, str, str] | None:
    """fdisk and friends: listing is read-only, anything else can rewrite a partition table."""
    texts = [t or "" for t in cmd.texts]
    listing = {"fdisk": {"-l", "--list"}, "sfdisk": {"-l", "--list", "-d", "--dump", "-s", "--show-size"},
               "sgdisk": {"-p", "--print"}, "gdisk": {"-l"}, "parted": {"-l", "--list"}}.get(cmd.prog, set())
    options = [t for t in texts if t.startswith("-")]
    words = [t for t in texts if not t.startswith("-")]
    if cmd.prog == "parted":
        scripted = all(o in ("-s", "--script", "-l", "--list", "-m", "--machine") for o in options)
        if scripted and (set(options) & listing and not words or words[1:] == ["print"]):
            return None
    elif options and all(o in listing for o in options):
        return None
    return FORBIDDEN, "forbidden:partition-table", f"`{cmd.prog}` can rewrite a disk's partition table"


for _names, _check in (
    (("sort",), _sort_check), (("uniq",), _uniq_check), (("date",), _date_check), (("hostname",), _hostname_check),
    (("printf",), _printf_check), (("file",), _file_check), (("rg",), _rg_check), (("dmesg",), _dmesg_check),
    (("set",), _set_check), (("exit",), _exit_check), (("base64",), _base64_check),
    (("fdisk", "sfdisk", "sgdisk", "gdisk", "cfdisk", "parted"), _partition_check),
):
    for _name in _names:
        _HANDLERS[_name] = _checked(_check)


@_handles("tee")
def _tee(an: _Analysis, cmd: _Cmd) -> None:
    targets = _operands(cmd.args)
    risky = [t for t in targets if t.text not in _HARMLESS_SINKS]
    for target in risky:
        an.write(target, "`tee`", "tee")
    if not risky:
        an.allow(cmd)


@_handles("docker", "podman", "nerdctl")
def _docker(an: _Analysis, cmd: _Cmd) -> None:
    opts = _getopt(cmd.args, short_value="Hcl", long_value={"--host", "--context", "--config", "--log-level",
                                                             "--tlscacert", "--tlscert", "--tlskey"})
    words = [a.text for a in opts.operands if not (a.text or "").startswith("-")]
    groups = {"image", "container", "volume", "network", "system", "compose", "builder", "buildx", "plugin"}
    sub = words[0] if words else None
    action = words[1] if sub in groups and len(words) > 1 else sub
    where = f"{sub} {action}" if action != sub else sub
    if action in ("ps", "images", "version", "info", "inspect", "logs", "ls", "list", "top", "port", "history") and sub != "system":
        an.allow(cmd, f"{cmd.prog} {where}")
    elif action in ("rm", "rmi", "stop", "kill", "prune", "down", "restart", "remove"):
        an.add(DESTRUCTIVE, f"{cmd.prog}:{action}", f"`{cmd.prog} {where}` stops or removes containers, images or data")
    else:
        an.add(MUTATING, f"{cmd.prog}:{action or 'unknown'}", f"`{cmd.prog} {where or '...'}` changes containers or images")


# -- commands that change the host

_DESTRUCTIVE_SIMPLE = {
    "rmdir": "`rmdir` removes directories",
    "unlink": "`unlink` deletes a file",
    "reboot": "`reboot` restarts the machine",
    "shutdown": "`shutdown` powers off or restarts the machine",
    "poweroff": "`poweroff` powers the machine off",
    "halt": "`halt` stops the machine",
    "kexec": "`kexec` boots another kernel",
    "init": "`init` changes the runlevel (0 halts, 6 reboots)",
    "telinit": "`telinit` changes the runlevel (0 halts, 6 reboots)",
    "kill": "`{prog}` sends signals that stop running processes",
    "pkill": "`{prog}` sends signals that stop running processes",
    "killall": "`{prog}` sends signals that stop running processes",
    "killall5": "`{prog}` sends signals that stop running processes",
    "skill": "`{prog}` sends signals that stop running processes",
    "rmmod": "`rmmod` unloads a kernel module",
    "userdel": "`userdel` deletes a user account",
    "groupdel": "`groupdel` deletes a group",
    "deluser": "`deluser` deletes a user account",
    "nvidia-uninstall": "`nvidia-uninstall` removes the NVIDIA driver",
    "nvidia-installer": "`nvidia-installer` installs or removes the NVIDIA driver",
    "cuda-uninstaller": "`cuda-uninstaller` removes a CUDA toolkit",
}
_MUTATING_SIMPLE = {
    "mkdir": "`mkdir` creates directories",
    "touch": "`touch` creates files or changes their times",
    "mktemp": "`mktemp` creates a file or directory",
    "tar": "`tar` creates or unpacks archives, writing files",
    "unzip": "`unzip` unpacks an archive, writing files",
    "gzip": "`{prog}` compresses or decompresses files in place",
    "gunzip": "`{prog}` compresses or decompresses files in place",
    "bzip2": "`{prog}` compresses or decompresses files in place",
    "xz": "`{prog}` compresses or decompresses files in place",
    "zstd": "`{prog}` compresses or decompresses files in place",
    "7z": "`7z` packs or unpacks archives, writing files",
    "patch": "`patch` edits files",
    "make": "`make` runs build commands",
    "cmake": "`cmake` configures a build and writes files",
    "ninja": "`ninja` runs build commands",
    "gcc": "`{prog}` compiles code and writes output files",
    "g++": "`{prog}` compiles code and writes output files",
    "cc": "`{prog}` compiles code and writes output files",
    "insmod": "`insmod` loads a kernel module",
    "depmod": "`depmod` rewrites the kernel module index",
    "update-initramfs": "`update-initramfs` rebuilds the boot image",
    "dracut": "`dracut` rebuilds the boot image",
    "umount": "`umount` detaches a filesystem",
    "swapon": "`swapon` enables swap",
    "swapoff": "`swapoff` disables swap",
    "sysctl": "`sysctl` reads or sets kernel parameters",
    "hostnamectl": "`hostnamectl` changes the host name",
    "timedatectl": "`timedatectl` changes time settings",
    "ulimit": "`ulimit` changes resource limits",
    "umask": "`umask` changes the file creation mask",
    "add-apt-repository": "`add-apt-repository` changes the package sources",
    "apt-key": "`apt-key` changes trusted package keys",
    "apt-mark": "`apt-mark` changes package state",
    "snap": "`snap` installs or changes packages",
    "useradd": "`useradd` creates a user account",
    "usermod": "`usermod` changes a user account",
    "groupadd": "`groupadd` creates a group",
    "passwd": "`passwd` changes a password",
    "nvidia-persistenced": "`nvidia-persistenced` starts the persistence daemon",
    "nvidia-ctk": "`nvidia-ctk` changes container runtime configuration",
    "scp": "`scp` copies files between hosts",
    "aria2c": "`aria2c` downloads files",
    "ldd": "`ldd` may execute the program it inspects",
    "read": "`read` assigns shell variables",
    "let": "`let` evaluates arithmetic, which can assign variables and run commands through subscripts",
    "ip": "`ip` can change network configuration",
    "iptables": "`iptables` changes firewall rules",
}

for _name, _reason in _DESTRUCTIVE_SIMPLE.items():
    _HANDLERS[_name] = _simple(DESTRUCTIVE, _reason)
for _name, _reason in _MUTATING_SIMPLE.items():
    _HANDLERS[_name] = _simple(MUTATING, _reason)


@_handles("crontab")
def _crontab(an: _Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args):
        an.add(DESTRUCTIVE, "crontab:-r", "`crontab -r` deletes all scheduled jobs")
    elif cmd.texts == ["-l"]:
        an.allow(cmd)
    else:
        an.add(MUTATING, "mutating:crontab", "`crontab` changes scheduled jobs")


@_handles("dkms")
def _dkms(an: _Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("install", "build", "autoinstall") and any("nvidia" in (t or "") for t in cmd.texts):
        an.add(DESTRUCTIVE, "dkms:driver-install", f"`dkms {sub}` of the NVIDIA module replaces the GPU driver")
    elif sub in ("remove", "uninstall", "unbuild"):
        an.add(DESTRUCTIVE, f"dkms:{sub}", f"`dkms {sub}` removes a kernel module such as the GPU driver")
    elif sub == "status":
        an.allow(cmd, "dkms status")
    else:
        an.add(MUTATING, f"dkms:{sub or 'unknown'}", f"`dkms {sub or '...'}` builds or installs kernel modules")


@_handles("rm")
def _rm(an: _Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    if any(n == "--no-preserve-root" or _abbreviates(n, "--no-preserve-root", 6) for n in longs):
        an.add(FORBIDDEN, "forbidden:rm-root", "`rm --no-preserve-root` is only ever used to delete the whole filesystem")
        return
    recursive = bool(shorts & {"r", "R"}) or any(n == "--recursive" or _abbreviates(n, "--recursive", 5) for n in longs)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            what = "the root filesystem" if hit == "/" else f"the system directory {hit}"
            an.add(FORBIDDEN, "forbidden:rm-system-dir", f"`rm -r {target.text}` wipes {what}")
            return
    targets = [t.text for t in _operands(cmd.args) if t.text]
    shown = ", ".join(targets[:3]) + (", ..." if len(targets) > 3 else "") if targets else "files"
    an.add(DESTRUCTIVE, "destructive:rm", f"`rm` deletes {shown}")


def _recursive_owner_change(an: _Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    recursive = "R" in shorts or "--recursive" in _long_options(cmd.args)
    for target in _operands(cmd.args):
        hit = _system_dir_hit(target) if recursive else None
        if hit is not None:
            an.add(
                FORBIDDEN,
                f"forbidden:{cmd.prog}-system-dir",
                f"`{cmd.prog} -R` on {target.text} changes the permissions or owner of a whole system directory",
            )
            return
    an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` changes file permissions or ownership")


for _name in ("chmod", "chown", "chgrp", "chattr", "setfacl"):
    _HANDLERS[_name] = _recursive_owner_change


@_handles("mv")
def _mv(an: _Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    for source in operands[:-1]:
        hit = _system_dir_hit(source)
        if hit is not None:
            an.add(FORBIDDEN, "forbidden:mv-system-dir", f"`mv {source.text}` moves the system directory {hit} away")
            return
    if operands:
        _destination_check(an, cmd, operands[-1])
    an.add(DESTRUCTIVE, "destructive:mv", "`mv` can replace or remove files at its destination")


def _destination_check(an: _Analysis, cmd: _Cmd, target: Arg) -> None:
    if target.text is not None:
        risk = _write_risk(target.text)
        if risk is not None and risk[0].rank >= DESTRUCTIVE.rank:
            an.write(target, f"`{cmd.prog}`", cmd.prog)


@_handles("cp", "install", "rsync")
def _copy(an: _Analysis, cmd: _Cmd) -> None:
    operands = _operands(cmd.args)
    if len(operands) >= 2:
        _destination_check(an, cmd, operands[-1])
    if cmd.prog == "rsync" and any(n.startswith("--del") or n == "--remove-source-files" for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "rsync:--delete", "`rsync --delete` deletes files at the destination")
    else:
        an.add(MUTATING, f"mutating:{cmd.prog}", f"`{cmd.prog}` writes files")


@_handles("ln")
def _ln(an: _Analysis, cmd: _Cmd) -> None:
    shorts = _short_options(cmd.args)
    longs = _long_options(cmd.args)
    operands = _operands(cmd.args)
    target_dirs = [a.text for a in _getopt(cmd.args, short_value="tS", long_value={"--target-directory",
                                                                                   "--suffix"}).values("-t")]
    link = operands[-1].text if len(operands) >= 2 and not target_dirs else None
    if "f" in shorts or "--force" in longs:
        an.add(DESTRUCTIVE, "ln:-f", "`ln -f` replaces an existing file or link")
    elif link is not None and posixpath.normpath(link) == "/usr/local/cuda":
        an.add(DESTRUCTIVE, "ln:/usr/local/cuda", "`ln` onto /usr/local/cuda replaces the link that selects the toolkit")
    else:
        an.add(MUTATING, "mutating:ln", "`ln` creates a new link")


@_handles("truncate")
def _truncate(an: _Analysis, cmd: _Cmd) -> None:
    for target in _operands(cmd.args):
        _destination_check(an, cmd, target)
    an.add(DESTRUCTIVE, "destructive:truncate", "`truncate` cuts files to a new size, discarding data")


@_handles("shred")
def _shred(an: _Analysis, cmd: _Cmd) -> None:
    if any((t.text or "").startswith("/dev/") for t in _operands(cmd.args)):
        an.add(FORBIDDEN, "forbidden:shred", "`shred` on a device overwrites the whole disk")
    else:
        an.add(DESTRUCTIVE, "destructive:shred", "`shred` overwrites and destroys files")


@_handles("dd")
def _dd(an: _Analysis, cmd: _Cmd) -> None:
    for text in cmd.texts:
        if text and text.startswith("of="):
            target = text[3:]
            risk = _write_risk(target)
            if target.startswith("/dev/") and risk is not None:
                an.add(FORBIDDEN, "forbidden:dd", f"`dd of={target}` writes raw data onto a device")
            elif risk is not None and risk[0] is DESTRUCTIVE:
                an.write(Arg(target), "`dd`", "dd")
    an.add(MUTATING, "mutating:dd", "`dd` copies raw data and writes it to its output")


@_handles("mkfs", "mke2fs", "mkswap", "mkdosfs", "mkntfs", "wipefs", "blkdiscard")
def _wipe_filesystem(an: _Analysis, cmd: _Cmd) -> None:
    family = "mkfs" if cmd.prog.startswith(("mkfs", "mke2fs", "mkdosfs", "mkntfs")) else cmd.prog
    an.add(FORBIDDEN, f"forbidden:{family}", f"`{cmd.prog}` erases a filesystem or a whole device")


@_handles("wget", "curl")
def _download(an: _Analysis, cmd: _Cmd) -> None:
    if cmd.prog == "wget":
        opts = _getopt(cmd.args, short_value="OoaPeUtTwQlABDIXRY", long_value={"--output-document", "--output-file"},
                       permute=True)
        targets = [v for v in opts.values("-O", "--output-document") if v.text != "-"]
    else:
        opts = _getopt(cmd.args, short_value="oXdHuFTAeEKrwmxyYzCbcD", long_value={"--output", "--data", "--header",
                                                                                    "--user", "--request"}, permute=True)
        targets = opts.values("-o", "--output")
    for target in targets:
        an.write(target, f"`{cmd.prog}`", cmd.prog)
    an.add(MUTATING, f"download:{cmd.prog}", f"`{cmd.prog}` fetches from the network and can save files")


@_handles("modprobe")
def _modprobe(an: _Analysis, cmd: _Cmd) -> None:
    if "r" in _short_options(cmd.args) or any(_abbreviates(n, "--remove", 5) or n == "--remove" for n in _long_options(cmd.args)):
        an.add(DESTRUCTIVE, "modprobe:-r", "`modprobe -r` unloads a kernel module, stopping whatever uses it")
    else:
        an.add(MUTATING, "modprobe:load", "`modprobe` loads a kernel module")


@_handles("module", "ml")
def _module(an: _Analysis, cmd: _Cmd) -> None:
    sub = cmd.texts[0] if cmd.texts else None
    if sub in ("unload", "rm", "del", "purge", "swap", "switch", "sw"):
        an.add(DESTRUCTIVE, "module:unload", f"`module {sub}` unloads environment modules other commands rely on")
    else:
        an.add(MUTATING, f"module:{sub or 'unknown'}", f"`module {sub or '...'}` changes the loaded environment modules")


# --------------------------------------------------------------------------- code in other languages

_PYTHON_SHELL_CALLS = frozenset(
    {"system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput"}
)
_PYTHON_DELETERS = frozenset({"rmtree", "unlink", "rmdir", "removedirs"})


def _scan_python(an: _Analysis, code: str) -> None:
    """Shell commands and file deletions in Python source given inline (`python -c`)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted_name(node.func)
        last = name.rsplit(".", 1)[-1]
        first = node.args[0] if node.args else None
        if last in _PYTHON_SHELL_CALLS and first is not None:
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                an.inner_source(first.value, f"python {name}()")
            elif isinstance(first, (ast.List, ast.Tuple)) and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in first.elts
            ):
                an.inner_words([Arg(e.value) for e in first.elts], f"python {name}()")  # type: ignore[attr-defined]
        elif last in ("exec", "eval") and isinstance(first, ast.Constant) and isinstance(first.value, str):
            if an.depth < _MAX_NESTING:
                _scan_python(an.nested(f"python {last}()"), first.value)
        elif last in ("b64decode", "decodebytes", "a85decode", "b32decode") and isinstance(first, ast.Constant):
            # exec(base64.b64decode('...')): the decoded text is code too, Python or shell
            decoded = _run_filter(["base64", "-d"], str(first.value).encode()) if last != "b32decode" else None
            if decoded and an.depth < _MAX_NESTING:
                text = decoded.decode("utf-8", "replace")
                _scan_python(an.nested(f"python {last}()", decoded=text), text)
                an.speculate(f"python {last}()", text).inner_source(text, "decoded text")
        if last in _PYTHON_DELETERS or name in ("os.remove", "remove"):
            an.add(DESTRUCTIVE, "python:delete", f"the Python code calls {name}(), which deletes files")


def _dotted_name(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted_name(node.value)}.{node.attr}"
    return "?"


_EMBEDDED_COMMAND = re.compile(
    r"""\b(?:execSync|spawnSync|execFileSync|system|exec|popen|shell_exec|passthru|proc_open|spawn)\s*[({]?\s*"""
    r"""(["'])((?:\\.|(?!\1).)*)\1"""
)
_BACKTICKS = re.compile(r"`([^`]+)`")
_QX = re.compile(r"\bqx\s*(?:\{([^}]*)\}|\(([^)]*)\)|\[([^\]]*)\]|/([^/]*)/)")
_EMBEDDED_DELETERS = re.compile(r"\b(unlink|rmtree|remove_tree|rm_rf|rm_r|rmSync|unlinkSync|rmdirSync|rmdir)\b")


def _scan_embedded_commands(an: _Analysis, code: str, language: str) -> None:
    """Shell commands inside perl/ruby/node/php code: system("..."), backticks, qx{...}."""
    commands = [m.group(2) for m in _EMBEDDED_COMMAND.finditer(code)]
    commands += [m.group(1) for m in _BACKTICKS.finditer(code)]
    commands += [next(g for g in m.groups() if g is not None) for m in _QX.finditer(code)]
    for command in commands[:16]:
        an.inner_source(command.replace("\\'", "'").replace('\\"', '"'), f"{language} code")
    deleter = _EMBEDDED_DELETERS.search(code)
    if deleter is not None:
        an.add(DESTRUCTIVE, f"{language}:delete", f"the {language} code calls {deleter.group(1)}, which deletes files")


# --------------------------------------------------------------------------- data filters


def _run_filter(words: list[str], data: bytes | None) -> bytes | None:
    """Output of a data-only command (echo, printf, base64 -d, rev, tr, gunzip...) given its input."""
    prog = posixpath.basename(words[0])
    args = words[1:]
    try:
        if prog == "echo":
            newline, escapes = True, False
            while args and re.fullmatch(r"-[neE]+", args[0]):
                newline = newline and "n" not in args[0]
                escapes = "e" in args[0] or (escapes and "E" not in args[0])
                args = args[1:]
            text = " ".join(args)
            return ((_ansi_c(text, echo_octal=True) if escapes else text) + ("\n" if newline else "")).encode()
        if prog == "printf":
            if not args:
                return None
            template, values = args[0], args[1:]
            if values and template in ("%s", "%s\n", "%b", "%b\n"):
                tail = "\n" if template.endswith("\n") else ""
                return "".join(_ansi_c(v) if "b" in template else v + tail for v in values).encode()
            if values or "%" in template.replace("%%", ""):
                return None
            return _ansi_c(template).replace("%%", "%").encode()
        if data is None:
            return None
        options = [a for a in args if a.startswith("-")]
        operands = [a for a in args if not a.startswith("-")]
        if prog in ("cat", "tee") and not operands:
            return data
        decode = any(o in ("-d", "--decode", "-D") or re.fullmatch(r"-[a-zA-Z]*d[a-zA-Z]*", o) for o in options)
        if prog in ("base64", "base32") and not operands:
            if not decode:
                return (base64.b64encode if prog == "base64" else base64.b32encode)(data) + b"\n"
            compact = b"".join(data.split())
            if prog == "base64":
                return base64.b64decode(compact + b"=" * (-len(compact) % 4))
            return base64.b32decode(compact + b"=" * (-len(compact) % 8))
        if prog == "xxd" and "-r" in options and any(o in ("-p", "-ps", "-plain") for o in options):
            return binascii.unhexlify(b"".join(data.split()))
        if prog == "rev" and not operands:
            return b"\n".join(line[::-1] for line in data.split(b"\n"))
        if prog == "tr" and not options and len(operands) == 2:
            source, target = _tr_set(operands[0]), _tr_set(operands[1])
            if source is None or target is None or not target:
                return None
            target = target + target[-1] * max(0, len(source) - len(target))
            return data.decode("latin-1").translate(str.maketrans(source, target[: len(source)])).encode("latin-1")
        if prog in ("gunzip", "zcat") or (prog == "gzip" and decode):
            return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, _MAX_DECODED)
        if prog in ("unxz", "xzcat") or (prog == "xz" and decode):
            return lzma.LZMADecompressor().decompress(data, _MAX_DECODED)
        if prog in ("bunzip2", "bzcat") or (prog == "bzip2" and decode):
            return bz2.BZ2Decompressor().decompress(data, _MAX_DECODED)
    except (ValueError, binascii.Error, zlib.error, lzma.LZMAError, OSError, EOFError):
        return None
    return None


# Commands whose output _run_filter can compute from their input.
_FILTERS = frozenset({"echo", "printf", "cat", "tee", "base64", "base32", "xxd", "rev", "tr", "gunzip", "zcat", "gzip",
                      "unxz", "xzcat", "xz", "bunzip2", "bzcat", "bzip2"})


def _tr_set(spec: str) -> str | None:
    """A tr character set with ranges (`a-z`); classes like [:upper:] are not followed."""
    if "[:" in spec or "[=" in spec:
        return None
    text = _ansi_c(spec)
    out: list[str] = []
    index = 0
    while index < len(text):
        if index + 2 < len(text) and text[index + 1] == "-" and ord(text[index]) <= ord(text[index + 2]):
            out.extend(chr(c) for c in range(ord(text[index]), ord(text[index + 2]) + 1))
            index += 3
        else:
            out.append(text[index])
            index += 1
    return "".join(out)


_DOWNLOADERS = frozenset(
    {"curl", "wget", "fetch", "http", "https", "nc", "ncat", "netcat", "socat", "lwp-request", "lwp-download",
     "GET", "aria2c", "tftp", "ftp"}
)
_CODE_LOADING_VARIABLES = frozenset(
    {"LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "PATH", "PYTHONPATH", "PYTHONSTARTUP", "BASH_ENV", "ENV",
     "IFS", "PS4", "PROMPT_COMMAND", "PERL5LIB", "PERL5OPT", "NODE_OPTIONS", "GIT_EXTERNAL_DIFF", "GIT_PAGER",
     "PAGER", "EDITOR", "VISUAL", "GIT_SSH_COMMAND", "SHELLOPTS", "BASHOPTS"}
)


@_handles("fuser")
def _fuser(an: _Analysis, cmd: _Cmd) -> None:
    if "k" in _short_options(cmd.args) or "--kill" in _long_options(cmd.args):
        an.add(DESTRUCTIVE, "fuser:-k", "`fuser -k` kills the processes using a file or device")
    else:
        an.allow(cmd)


@_handles("kubectl")
def _kubectl(an: _Analysis, cmd: _Cmd) -> None:
    sub = next((t for t in cmd.texts if t and not t.startswith("-")), None)
    if sub in ("delete", "drain"):
        an.add(DESTRUCTIVE, f"kubectl:{sub}", f"`kubectl {sub}` removes or evicts workloads")
    else:
        an.add(MUTATING, f"kubectl:{sub or 'unknown'}", f"`kubectl {sub or '...'}` talks to a cluster and is not read-only")


@_handles("mount")
def _mount(an: _Analysis, cmd: _Cmd) -> None:
    if all(t in ("-l", "--show-labels") for t in cmd.texts):
        an.allow(cmd)  # without arguments mount only lists what is mounted
    else:
        an.add(MUTATING, "mutating:mount", "`mount` attaches a filesystem")


@_handles("ubuntu-drivers")
def _ubuntu_drivers(an: _Analysis, cmd: _Cmd) -> None:
    sub = next((t for t in cmd.texts if t and not t.startswith("-")), None)
    if sub in ("install", "autoinstall"):
        an.add(DESTRUCTIVE, "ubuntu-drivers:install", f"`ubuntu-drivers {sub}` installs a GPU driver")
    elif sub in ("list", "devices", "debug"):
        an.allow(cmd, f"ubuntu-drivers {sub}")
    else:
        an.add(MUTATING, f"ubuntu-drivers:{sub or 'unknown'}", "`ubuntu-drivers` with these arguments is not read-only")
