"""Program text in other languages (Python, Perl, JavaScript...): what it runs and deletes."""

from __future__ import annotations

import ast
import re

from agent.safety.classifier.command import _MAX_NESTING, DESTRUCTIVE, Analysis, Arg
from agent.safety.classifier.filters import _run_filter

# --------------------------------------------------------------------------- code in other languages

_PYTHON_SHELL_CALLS = frozenset(
    {"system", "popen", "run", "call", "check_call", "check_output", "Popen", "getoutput", "getstatusoutput"}
)
_PYTHON_DELETERS = frozenset({"rmtree", "unlink", "rmdir", "removedirs"})


def _scan_python(an: Analysis, code: str) -> None:
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


def _scan_embedded_commands(an: Analysis, code: str, language: str) -> None:
    """Shell commands inside perl/ruby/node/php code: system("..."), backticks, qx{...}."""
    commands = [m.group(2) for m in _EMBEDDED_COMMAND.finditer(code)]
    commands += [m.group(1) for m in _BACKTICKS.finditer(code)]
    commands += [next(g for g in m.groups() if g is not None) for m in _QX.finditer(code)]
    for command in commands[:16]:
        an.inner_source(command.replace("\\'", "'").replace('\\"', '"'), f"{language} code")
    deleter = _EMBEDDED_DELETERS.search(code)
    if deleter is not None:
        an.add(DESTRUCTIVE, f"{language}:delete", f"the {language} code calls {deleter.group(1)}, which deletes files")
