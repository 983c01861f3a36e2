"""The layers of docs/architecture.md, checked on the source: no import runs upward, and no module imports
itself back through others. Every import counts, at module level or inside a function (a lazy import runs
too); only imports under ``if TYPE_CHECKING:`` are left out, as they never run."""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "envcheck"

# Lowest first. A module may import its own layer or a lower one. The target package runs inside another
# interpreter and imports nothing of envcheck at all (tests/test_probe_compat.py checks that).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("envcheck.inside",),
    ("envcheck.core",),
    ("envcheck.manifest",),
    (
        "envcheck.process",
        "envcheck.native",
        "envcheck.diff",
        "envcheck.verify",
        "envcheck.collect",
        "envcheck.predict",
        "envcheck.lock",
    ),
    ("envcheck.report", "envcheck.export"),
    ("envcheck.app", "envcheck.cluster"),
    ("envcheck.api",),
    ("envcheck.commands",),
    ("envcheck.cli", "envcheck.__main__", "envcheck.pytest_plugin", "envcheck.cluster.__main__"),
)
# The package root only holds the version.
ROOT = "envcheck"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int | None:
    # The longest prefix decides: envcheck.cluster.__main__ is an entry point above its package.
    matches = [
        (len(p), i)
        for i, prefixes in enumerate(LAYERS)
        for p in prefixes
        if module == p or module.startswith(p + ".")
    ]
    return max(matches)[1] if matches else None


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[str, int]]:
    """``(imported envcheck module, line)`` for every import that runs."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] == ROOT:
                # `from envcheck.x import y` may name a submodule y: count the deepest that exists.
                for alias in node.names:
                    full = f"{target}.{alias.name}"
                    yield (full if _exists(full) else target), node.lineno
        stack.extend(ast.iter_child_nodes(node))


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph() -> dict[str, list[tuple[str, int]]]:
    graph: dict[str, list[tuple[str, int]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        graph[module] = sorted(set(_imports(tree, module, path.name == "__init__.py")))
    return graph


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in _graph() if m != ROOT and _layer(m) is None]
    assert not unplaced, f"modules outside every layer of docs/architecture.md: {unplaced}"


def test_no_import_runs_upward() -> None:
    upward = []
    for module, imports in _graph().items():
        own = _layer(module)
        for imported, line in imports:
            theirs = _layer(imported)
            if own is not None and theirs is not None and theirs > own:
                upward.append(f"{module}:{line} imports {imported}")
    assert not upward, "imports that run upward:\n" + "\n".join(upward)


def test_no_import_cycles() -> None:
    graph = {m: {i for i, _ in imports if i in _known()} for m, imports in _graph().items()}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package's __init__ that re-exports its submodules is imported by them as their parent, not a cycle.
    real = [c for c in cycles if not _through_parent_package(c)]
    assert not real, "import cycles:\n" + "\n".join(" -> ".join(c) for c in real)


def _through_parent_package(cycle: list[str]) -> bool:
    return any(b.startswith(a + ".") or a.startswith(b + ".") for a, b in itertools.pairwise(cycle))


def _known() -> set[str]:
    return {_module_name(p) for p in PACKAGE.rglob("*.py")}


def test_the_scan_sees_imports() -> None:
    # Guards the tests above against a walker that silently finds nothing.
    graph = _graph()
    assert ("envcheck.core.findings", 17) in graph["envcheck.app.flows"] or any(
        i == "envcheck.core.findings" for i, _ in graph["envcheck.app.flows"]
    )
    assert any(i.startswith("envcheck.report") for i, _ in graph["envcheck.commands._common"])
