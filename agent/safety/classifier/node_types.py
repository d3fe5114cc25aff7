"""The kinds of tree-sitter-bash nodes the walk tells apart."""

from __future__ import annotations


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
