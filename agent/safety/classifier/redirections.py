"""Redirections: the files a command's `<`, `>` and `>>` open or write (raw disks, /dev/tcp, a
watchdog armed by opening it), and here-documents and here-strings, with the text they feed."""

from __future__ import annotations

from tree_sitter import Node

from agent.safety.classifier.command import Arg, DESTRUCTIVE, FORBIDDEN, MUTATING, _Stdin
from agent.safety.classifier.node_types import _WORD_TYPES
from agent.safety.classifier.paths import _write_risk, pattern_read_risk, read_risk
from agent.safety.classifier.tree import _excerpt, _first_descendant, _is_pipe_tail, _text


class _Redirections:
    """The redirections of a command: what each opens, writes or feeds to its stdin; a part of `_Analysis`
    (analysis.py), whose state and other parts it reaches through self."""

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
