"""One command's analysis: the state it walks with (variables, working directory, findings),
the nested contexts of inner commands and guesses, the findings recorded, and the verdict they give.
What it judges is in the parts it is made of: statements.py (the command walk), simple_commands.py,
pipes.py, redirections.py, expansions.py, and budget.py (the work budget)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from tree_sitter import Node

from agent.safety.classifier.budget import _WorkBudget
from agent.safety.classifier.code import _scan_embedded_commands, _scan_python
from agent.safety.classifier.command import (
    Arg, DESTRUCTIVE, FORBIDDEN, MUTATING, READ_ONLY, _Cmd, _Finding, _MAX_NESTING, _Stdin,
)
from agent.safety.classifier.expansions import _Expansions
from agent.safety.classifier.families.files import _FREE_ARGS
from agent.safety.classifier.families.interpreters import _WORKLOAD_WRITE_FLAGS
from agent.safety.classifier.paths import normalize, trusted_program_path
from agent.safety.classifier.pipes import _Pipes
from agent.safety.classifier.redirections import _Redirections
from agent.safety.classifier.simple_commands import _SimpleCommands
from agent.safety.classifier.statements import _Statements
from agent.safety.classifier.tree import _excerpt, _first_error, _rough_commands, _swallowed_newline, _text
from agent.safety.classifier.words import _expand_braces, _join, _may_become_option
from tools.base import Risk, RiskClass


class _Analysis(_Statements, _SimpleCommands, _Pipes, _Redirections, _Expansions, _WorkBudget):
    """Walks one parse tree and collects findings; nested contexts share the findings list.

    Its methods are in the classes it is made of, one per thing it judges; they share this object's
    state and call one another through self, so a family's handler gets one object that does all.
    """

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
        joined = _joining_continuation(root, data)
        if joined is not None:
            self.add(MUTATING, "line-continuation",
                     f"a backslash-newline inside the word `{joined}`: bash joins the two lines into one word, "
                     f"the parser reads two; write the word on one line", structural=True)
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


# Nodes in which a backslash-newline is either kept as text (single quotes, here-documents, comments) or
# removed by the classifier's own unquoting as bash removes it (double quotes).
_CONTINUATION_KEPT = frozenset({"raw_string", "ansi_c_string", "string", "heredoc_body", "heredoc_content", "comment"})


def _joining_continuation(root: Node, data: bytes) -> str | None:
    """The text around the first backslash-newline that joins two pieces of one word (`/de\\⏎v/watchdog`
    is `/dev/watchdog` to bash, where tree-sitter-bash ends the word at the backslash), or None."""
    start = data.find(b"\\\n")
    while start != -1:
        run = start
        while run > 0 and data[run - 1:run] == b"\\":
            run -= 1
        escaped = (start - run) % 2 == 1  # `\\` then a newline: a literal backslash, the newline ends the word
        before, after = data[run - 1:run], data[start + 2:start + 3]
        if not escaped and before and after and not before.isspace() and not after.isspace() \
                and before not in b";|&()<>" and not _inside(root, start, _CONTINUATION_KEPT):
            return data[max(0, run - 12):start + 14].decode("utf-8", "replace").replace("\\\n", "\\⏎")
        start = data.find(b"\\\n", start + 2)
    return None


def _inside(root: Node, offset: int, kinds: frozenset[str]) -> bool:
    node = root.descendant_for_byte_range(offset, offset + 1)
    while node is not None:
        if node.type in kinds:
            return True
        node = node.parent
    return False
