"""The house's plan, read from the source: three floors, dependencies pointing down, no circles.

    app/     entry points and the terminal           may import agent, tools and the data packages
    agent/   the core: loop, batch, model, safety...  may import tools and the data packages
    tools/   typed tools, the host layer, the sim     may import the data packages
    prompts/, goals/, transcripts/                    data, imported by anything above

Every import counts, module-level or inside a function, since a lazy import that closes a circle
is still a circle. No room is over MAX_LINES lines, and the turn (agent/loop.py) not over LOOP_LINES:
a module that grows past them is split by what it does, or named below with the reason it may not be. A first-party import inside a function must say why on its line
(`# lazy: ...`): hidden imports hide the module graph, so each one has to buy something.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FLOORS = {"app": 3, "agent": 2, "tools": 1, "prompts": 0, "goals": 0, "transcripts": 0}
# The sim's host-side programs run inside the simulated host with the standard library only.
OUTSIDE = ("tools/sim/files/",)
OUTSIDE_MODULES = ("tools.sim.files",)

MAX_LINES = 700
LOOP_LINES = 320  # the turn, read in one sitting: send -> step -> prepare -> batch -> append -> close
# Longer by nature: a program family's specs are read as a table, one entry per program; the read sandbox's
# launcher runs on the host with the standard library only and travels whole, compressed, in one line
# (tools/sandbox/host.py), as the sim's host-side programs (tools/sim/files/, outside the graph) do.
LONG_BY_NATURE = ("agent/safety/classifier/families/", "tools/sandbox/launcher.py")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def first_party_modules() -> dict[str, Path]:
    found = {}
    for top in FLOORS:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(OUTSIDE):
                found[module_name(path)] = path
    return found


MODULES = first_party_modules()


def resolve(importer: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> list[str]:
    """The first-party modules an import statement loads (the most specific known module for each name)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            base = importer.split(".")
            base = base if is_package else base[:-1]
            base = base[: len(base) - (node.level - 1)]
            prefix = ".".join(base + ([node.module] if node.module else []))
        else:
            prefix = node.module or ""
        names = [f"{prefix}.{a.name}" if f"{prefix}.{a.name}" in MODULES else prefix for a in node.names]
    out = []
    for name in names:
        if name.startswith(OUTSIDE_MODULES):
            continue
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name.split(".")[0] in FLOORS:
            out.append(name)
    return out


def imports_of(name: str) -> list[tuple[str, int, bool]]:
    """(imported module, line, inside a function) for every first-party import of a module."""
    path = MODULES[name]
    tree = ast.parse(path.read_text(), str(path))
    found: list[tuple[str, int, bool]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for target in resolve(name, path.name == "__init__.py", child):
                    if target != name:
                        found.append((target, child.lineno, in_function))
            visit(child, inner)

    visit(tree, False)
    return found


GRAPH = {name: imports_of(name) for name in MODULES}


def test_the_graph_is_read_from_real_modules():
    """The reader itself must see the house: a reader that found nothing would pass every check."""
    assert {"app.cli", "agent.loop", "agent.batch", "agent.safety.policy", "tools.base"} <= set(MODULES)
    assert "agent.batch" in {t for t, _, _ in GRAPH["agent.loop"]}
    assert "tools.base" in {t for t, _, _ in GRAPH["agent.safety.policy"]}


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down_a_floor_or_stay_on_it(name):
    floor = FLOORS[name.split(".")[0]]
    up = [f"{target} (line {line})" for target, line, _ in GRAPH[name] if FLOORS[target.split(".")[0]] > floor]
    assert not up, f"{name} imports a floor above it: {', '.join(up)}"


def find_circles(edges: dict[str, list[str]]) -> list[list[str]]:
    state: dict[str, int] = {}  # 1 on the current path, 2 done
    path: list[str] = []
    circles: list[list[str]] = []

    def walk(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in edges.get(node, []):
            if state.get(nxt) == 1:
                circles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt)
        path.pop()
        state[node] = 2

    for name in sorted(edges):
        if name not in state:
            walk(name)
    return circles


def test_no_import_circles():
    circles = find_circles({name: sorted({t for t, _, _ in GRAPH[name]}) for name in MODULES})
    assert not circles, "import circles: " + "; ".join(" -> ".join(c) for c in circles)


def test_imports_inside_functions_say_why():
    hidden = []
    for name, found in GRAPH.items():
        lines = MODULES[name].read_text().splitlines()
        for target, line, in_function in found:
            if in_function and "# lazy:" not in lines[line - 1]:
                hidden.append(f"{MODULES[name].relative_to(ROOT)}:{line} imports {target}")
    assert not hidden, ("first-party imports inside functions without a `# lazy: why` comment "
                        "(move them to the top of the module, or say what they buy):\n" + "\n".join(hidden))


def test_a_circle_or_an_upward_import_would_be_caught():
    """The checks above fail on the shapes they exist for (a guard against checks that cannot fail)."""
    assert find_circles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c", "a"]]
    assert find_circles({"a": ["b"], "b": [], "c": ["a", "b"]}) == []
    upward = ast.parse("from app.cli import main\n").body[0]
    assert resolve("tools.base", False, upward) == ["app.cli"] and FLOORS["app"] > FLOORS["tools"]
    relative = ast.parse("from . import build\n").body[0]
    assert resolve("tools.sim", True, relative) == ["tools.sim.build"]


def too_long(paths: dict[str, Path]) -> list[str]:
    """Modules over their line bound, each with its size."""
    found = []
    for name, path in sorted(paths.items()):
        rel = path.relative_to(ROOT).as_posix() if path.is_relative_to(ROOT) else path.name
        bound = LOOP_LINES if name == "agent.loop" else MAX_LINES
        lines = len(path.read_text().splitlines())
        if lines > bound and not rel.startswith(LONG_BY_NATURE):
            found.append(f"{rel}: {lines} lines (bound {bound})")
    return found


def test_no_module_is_over_its_line_bound():
    long = too_long(MODULES)
    assert not long, "split these by what they do (docs/architecture.md says where things go):\n" + "\n".join(long)


def test_the_line_bound_would_catch_a_long_module(tmp_path):
    """The size check fails on the shape it exists for: a module one line over, and a loop over its own bound."""
    over = tmp_path / "big.py"
    over.write_text("x = 1\n" * (MAX_LINES + 1))
    loop = tmp_path / "loop.py"
    loop.write_text("x = 1\n" * (LOOP_LINES + 1))
    at = tmp_path / "at.py"
    at.write_text("x = 1\n" * MAX_LINES)
    assert too_long({"app.big": over, "agent.loop": loop, "app.at": at}) == [  # at the bound is within it
        f"loop.py: {LOOP_LINES + 1} lines (bound {LOOP_LINES})", f"big.py: {MAX_LINES + 1} lines (bound {MAX_LINES})"]
