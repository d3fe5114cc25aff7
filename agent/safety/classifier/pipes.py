"""Pipelines and the data they carry: each stage in a subshell of its own, what a stage prints
where it only transforms data (echo, base64 -d, tr...), and whether a download flows into what follows,
so `echo BASE64 | base64 -d | sh` is judged by what the shell runs."""

from __future__ import annotations

import posixpath

from tree_sitter import Node

from agent.safety.classifier.command import Arg, _DOWNLOADERS, _MAX_NESTING, _Stdin
from agent.safety.classifier.families.wrappers import _WRAPPER_PARSERS, _innermost_prog
from agent.safety.classifier.filters import _FILTERS, _run_filter
from agent.safety.classifier.node_types import _REDIRECT_TYPES, _WORD_TYPES
from agent.safety.classifier.tree import (
    _excerpt, _first_descendant, _heredoc_tail, _pipeline_parts, _pipeline_stages, _redirected_stages, _text,
)


class _Pipes:
    """Pipelines and redirected statements, and the data that flows between their stages; a part of `_Analysis`
    (analysis.py), whose state and other parts it reaches through self."""

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
