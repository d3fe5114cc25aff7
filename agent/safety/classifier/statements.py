"""The command walk: every statement kind of the bash parse (lists, control flow, loops,
functions, tests, assignments, declarations, subshells and groups) visited, with a finding for each
that the classifier does not accept as read-only."""

from __future__ import annotations

from tree_sitter import Node

from agent.safety.classifier.command import FORBIDDEN, MUTATING, _MAX_ALTERNATIVES, _Stdin
from agent.safety.classifier.families.interpreters import test_subscript_problem
from agent.safety.classifier.node_types import _CONTROL_FLOW, _QUIET_TYPES, _REDIRECT_TYPES, _WORD_TYPES
from agent.safety.classifier.tree import _is_fork_bomb, _text


class _Statements:
    """The walk over statements, each node kind to the method that judges it: a part of `_Analysis` (analysis.py),
    whose state and other parts it reaches through self."""

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
        # `for NAME in WORDS` over a finite list is read-only when its body is: each run of the body is
        # judged with the value it gets, or with an unknown one (a read's output: `for n in $(sinfo ...)`),
        # which only a plain `$n` in echo's arguments accepts. Its other forms stay control flow.
        variable = node.child_by_field_name("variable")
        body = node.child_by_field_name("body")
        if _text(node.children[0]) != "for" or variable is None or not node.children_by_field_name("value"):
            self.add(
                MUTATING,
                "control-flow",
                f"`{_text(node.children[0]) if node.children else 'for'}` is a loop, which the classifier does not "
                "accept as read-only",
                structural=True,
            )
        values: list[str | None] = []
        with self.uncertain():
            for value in node.children_by_field_name("value"):
                for alternative in self.expand(value, outputs=True):
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
