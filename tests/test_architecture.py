"""The layers of docs/architecture.md, checked on the source: no import runs upward, and no module imports
itself back through others.

The layers table of docs/architecture.md is the one statement of the layering: this test reads it (each
row's modules column, bottom row first) and keeps no list of its own. Every import counts: at module level,
inside a function (a lazy import runs too) and under ``if TYPE_CHECKING:`` (the names it gives are part of
the module's interface). A load by name (``importlib.import_module``, ``__import__``) counts too: each one
reads a declared table (``cli.COMMANDS``, ``api._JOBS``) whose rows become edges; any other by-name load of
an envcheck module fails.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parent.parent / "envcheck"
ARCHITECTURE = Path(__file__).parent.parent / "docs" / "architecture.md"
# The package root only holds the version.
ROOT = "envcheck"
# The stdlib-only code copied into the inspected interpreter: it imports nothing of envcheck
# (tests/inside/test_probe_compat.py checks that) and runs under another interpreter, so its imports are not
# counted in the shares below.
INSIDE = "envcheck.inside"
# A command module may import these of its own layer; never another command.
COMMAND_HELPERS = frozenset(
    {"envcheck.commands._common", "envcheck.commands.options", "envcheck.commands.progress"}
)
# At most this share of envcheck's imports of itself may sit inside a function.
LAZY_SHARE = 0.15
LAZY_COMMENT = "# Lazy: "


@cache
def layers() -> tuple[tuple[str, ...], ...]:
    """The module prefixes of each row of docs/architecture.md's layers table, lowest first."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    column = header.index("modules")
    found = []
    for row in rows[2:]:  # past the header and its |---| line
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        found.append(tuple(_module_of(path) for path in re.findall(r"`([^`]+)`", cells[column])))
    return tuple(found)


def _module_of(path: str) -> str:
    """``envcheck/core/`` -> ``envcheck.core``; ``envcheck/cli.py`` -> ``envcheck.cli``."""
    assert path.startswith("envcheck/"), (
        f"a module of docs/architecture.md's layers table is not a path: {path}"
    )
    return path.removesuffix("/").removesuffix(".py").replace("/", ".")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int | None:
    # The longest prefix decides: envcheck.cluster.__main__ is an entry point above its package.
    matches = [
        (len(p), i)
        for i, prefixes in enumerate(layers())
        for p in prefixes
        if module == p or module.startswith(p + ".")
    ]
    return max(matches)[1] if matches else None


def _is_type_checking(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class Import:
    """One import statement's envcheck module (one per name of a ``from`` import that names a submodule)."""

    def __init__(
        self, module: str, line: int, *, in_function: bool, type_checking: bool, by_name: bool = False
    ):
        self.module = module
        self.line = line
        self.in_function = in_function
        self.type_checking = type_checking
        self.by_name = by_name


def _walk(tree: ast.AST) -> Iterator[tuple[ast.AST, bool, bool]]:
    """Every node with whether it sits inside a function and under ``if TYPE_CHECKING:``."""
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    while stack:
        node, in_function, type_checking = stack.pop()
        yield node, in_function, type_checking
        inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if _is_type_checking(node):
            assert isinstance(node, ast.If)
            stack.extend((child, inner, True) for child in node.body)
            stack.extend((child, inner, type_checking) for child in node.orelse)
            continue
        stack.extend((child, inner, type_checking) for child in ast.iter_child_nodes(node))


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[Import]:
    """Every import of an envcheck module in ``tree``, by statement or by name."""
    for node, in_function, type_checking in _walk(tree):
        where = {"in_function": in_function, "type_checking": type_checking}
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == ROOT:
                    yield Import(alias.name, node.lineno, **where)
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
                    yield Import(full if _exists(full) else target, node.lineno, **where)
        elif isinstance(node, ast.Call) and _is_load_by_name(node):
            for loaded in _loaded_by_name(node, tree, module):
                yield Import(loaded, node.lineno, **where, by_name=True)


def _is_load_by_name(call: ast.Call) -> bool:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


# What a by-name load this test cannot read from a declared table counts as.
UNDECLARED = "<a load by name outside the declared tables>"


def _loaded_by_name(call: ast.Call, tree: ast.AST, module: str) -> list[str]:
    """The envcheck modules a by-name load can load: the rows of the declared table it reads, or the string
    literals it is given (none of envcheck: a third-party module); ``UNDECLARED`` otherwise."""
    if module in DECLARED:
        return DECLARED[module]()
    names = _literal_names(call, tree)
    if names is None or any(n.split(".")[0] == ROOT for n in names):
        return [UNDECLARED]
    return []


def _literal_names(call: ast.Call, tree: ast.AST) -> list[str] | None:
    """The names a load is given as string literals: the argument itself, or a loop variable over a tuple or
    list of literals. None when they are computed."""
    if not call.args:
        return None
    arg = call.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return [arg.value]
    if isinstance(arg, ast.Name):
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.For)
                and isinstance(node.target, ast.Name)
                and node.target.id == arg.id
                and isinstance(node.iter, ast.Tuple | ast.List)
                and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.iter.elts)
            ):
                return [e.value for e in node.iter.elts]  # type: ignore[attr-defined]
    return None


def _table(path: Path, name: str) -> ast.Dict | None:
    """The dict literal assigned to ``name`` at module level of ``path`` (None without the file)."""
    if not path.is_file():
        return None
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        targets: list[ast.expr]
        if isinstance(node, ast.AnnAssign):
            targets, value = [node.target], node.value
        elif isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        else:
            continue
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            assert isinstance(value, ast.Dict), f"{path}: {name} is not a dict literal"
            return value
    raise AssertionError(f"{path}: no {name} table at module level")


def _commands() -> list[str]:
    """``cli.COMMANDS``: command name -> (module of envcheck.commands, function)."""
    table = _table(PACKAGE / "cli.py", "COMMANDS")
    assert table is not None
    modules = {ast.literal_eval(v)[0] for v in table.values if v is not None}
    return sorted(f"envcheck.commands.{m}" for m in modules)


def _jobs() -> list[str]:
    """``api._JOBS``: job name -> module of envcheck.api."""
    table = _table(PACKAGE / "api" / "__init__.py", "_JOBS")
    if table is None:
        return []
    return sorted({f"envcheck.api.{ast.literal_eval(v).lstrip('.')}" for v in table.values if v is not None})


# The modules that load others by name, each through the one table it reads.
DECLARED = {"envcheck.cli": _commands, "envcheck.api": _jobs}


def _exists(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


@cache
def _sources() -> dict[str, tuple[Path, ast.Module]]:
    return {
        _module_name(path): (path, ast.parse(path.read_text(encoding="utf-8"), str(path)))
        for path in sorted(PACKAGE.rglob("*.py"))
    }


@cache
def _all_imports() -> dict[str, tuple[Import, ...]]:
    return {
        module: tuple(_imports(tree, module, path.name == "__init__.py"))
        for module, (path, tree) in _sources().items()
    }


def _graph() -> dict[str, list[tuple[str, int]]]:
    return {m: sorted({(i.module, i.line) for i in imports}) for m, imports in _all_imports().items()}


def test_the_layers_table_is_read() -> None:
    # Guards every test below against a table this test silently misreads.
    rows = layers()
    assert len(rows) >= 8 and all(rows), rows
    assert rows[0] == (INSIDE,)
    assert _layer("envcheck.core.findings") == 1
    assert _layer("envcheck.cluster.__main__") == len(rows) - 1
    assert (_layer("envcheck.cluster.report") or 0) < len(rows) - 1
    assert (
        (_layer("envcheck.app") or 0)
        < (_layer("envcheck.api") or 0)
        < (_layer("envcheck.commands.diff") or 0)
    )


def test_every_module_has_a_layer() -> None:
    unplaced = [m for m in _sources() if m != ROOT and _layer(m) is None]
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
    known = set(_sources())
    graph = {m: {i for i, _ in imports if i in known} for m, imports in _graph().items()}
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


def test_every_load_by_name_reads_a_declared_table() -> None:
    undeclared = [
        f"{module}:{i.line}"
        for module, imports in _all_imports().items()
        if not (module == INSIDE or module.startswith(INSIDE + "."))
        for i in imports
        if i.module == UNDECLARED
    ]
    assert not undeclared, "loads by name outside cli.COMMANDS and api._JOBS:\n" + "\n".join(undeclared)


def test_the_declared_tables_are_edges() -> None:
    by_name = {i.module for i in _all_imports()["envcheck.cli"] if i.by_name}
    assert "envcheck.commands.diff" in by_name and "envcheck.commands.verify" in by_name
    if not (PACKAGE / "api" / "__init__.py").is_file():
        pytest.skip("envcheck/api/__init__.py does not exist yet")
    api = {i.module for i in _all_imports()["envcheck.api"] if i.by_name}
    assert api and all(m.startswith("envcheck.api.") and _exists(m) for m in api), api


def test_only_diff_imports_its_rules() -> None:
    outside = [
        f"{module}:{i.line} imports {i.module}"
        for module, imports in _all_imports().items()
        if not module.startswith("envcheck.diff.") and module != "envcheck.diff"
        for i in imports
        if i.module == "envcheck.diff.rules" or i.module.startswith("envcheck.diff.rules.")
    ]
    assert not outside, "imports of envcheck.diff.rules from outside envcheck/diff/:\n" + "\n".join(outside)


def _is_command(module: str) -> bool:
    return module.startswith("envcheck.commands.") and module not in COMMAND_HELPERS


def test_no_command_imports_another() -> None:
    found = {
        f"{module}:{i.line} imports {i.module}"
        for module, imports in _all_imports().items()
        if module.startswith("envcheck.commands") or module == "envcheck.pytest_plugin"
        for i in imports
        if _is_command(i.module) and i.module != module
    }
    assert not found, "command modules imported by another command or the pytest plugin:\n" + "\n".join(
        sorted(found)
    )


def _internal_imports() -> list[tuple[str, Path, Import]]:
    return [
        (module, _sources()[module][0], i)
        for module, imports in _all_imports().items()
        if not (module == INSIDE or module.startswith(INSIDE + "."))
        for i in imports
        if not i.by_name
    ]


def test_imports_inside_functions_say_why() -> None:
    # The reason stands on the line above the import, or above the block of imports it opens (one reason
    # for the imports a function makes together, a blank line between them allowed).
    missing = set()
    for _, path, i in _internal_imports():
        if i.in_function:
            lines = path.read_text(encoding="utf-8").splitlines()
            taken = _import_lines(path)
            above = i.line - 1  # 1-based: the line above the statement's first
            while above >= 1 and (above in taken or not lines[above - 1].strip()):
                above -= 1
            if above < 1 or not lines[above - 1].strip().startswith(LAZY_COMMENT):
                missing.add(f"{path.relative_to(PACKAGE.parent)}:{i.line} imports {i.module}")
    assert not missing, f"imports inside a function without a `{LAZY_COMMENT}` line above:\n" + "\n".join(
        sorted(missing)
    )


@cache
def _import_lines(path: Path) -> frozenset[int]:
    """The lines of ``path`` that an import statement spans (1-based)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return frozenset(
        line
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)
    )


def test_few_imports_sit_inside_functions() -> None:
    statements = {(path, i.line, i.in_function) for _, path, i in _internal_imports()}
    inner = sum(1 for *_, in_function in statements if in_function)
    share = inner / len(statements)
    assert share <= LAZY_SHARE, (
        f"{inner} of {len(statements)} imports of envcheck sit inside a function ({share:.0%})"
    )


def test_the_scan_sees_imports() -> None:
    # Guards the tests above against a walker that silently finds nothing.
    graph = _graph()
    assert any(i == "envcheck.core.findings" for i, _ in graph["envcheck.app.flows"])
    assert any(i.startswith("envcheck.report") for i, _ in graph["envcheck.commands._common"])
    # An import under TYPE_CHECKING is an edge too.
    flows = {i.module for i in _all_imports()["envcheck.app.flows"] if i.type_checking}
    assert "envcheck.core.deadline" in flows


# The two faces (the command line's commands and the pytest plugin) reach envcheck's work through one door:
# these modules, lazy imports and the type checker's included.
DOOR = ("envcheck.api", "envcheck.report", "envcheck.core")


def _through_the_door(module: str) -> bool:
    return (
        module == "envcheck"
        or any(module == d or module.startswith(d + ".") for d in DOOR)
        or module in COMMAND_HELPERS
        or module.startswith("envcheck.pytest_plugin")
    ) and not module.startswith("envcheck.api._")


def test_the_commands_and_the_plugin_go_through_the_api() -> None:
    faces = [m for m in _all_imports() if m.startswith(("envcheck.commands.", "envcheck.pytest_plugin"))]
    assert "envcheck.pytest_plugin.gate" in faces and "envcheck.commands.diff" in faces
    past = sorted(
        f"{module}:{i.line} imports {i.module}"
        for module in faces
        for i in _all_imports()[module]
        if i.module.startswith("envcheck") and not _through_the_door(i.module)
    )
    assert not past, "imports from a command or the plugin that go round envcheck.api:\n" + "\n".join(past)


# The main thread waits on worker threads only in slices (``envcheck.process.awake``): a signal the kernel
# handed to a worker is handled in the main thread only once it wakes, and a blocked ``Future.result()`` kept
# a Ctrl-C waiting for the 60 s of ``predict``'s deadline. The inspected interpreter's code is not envcheck's
# process, and ``awake`` itself is where the slicing is done.
AWAKE = "envcheck.process.awake"


def test_the_main_thread_waits_on_threads_only_through_awake() -> None:
    found = []
    for module, (path, tree) in _sources().items():
        if module in (AWAKE, INSIDE) or module.startswith(INSIDE + "."):
            continue
        where = path.relative_to(PACKAGE.parent)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(a.name == "ThreadPoolExecutor" for a in node.names):
                found.append(f"{where}:{node.lineno} imports ThreadPoolExecutor (use awake.Pool)")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("result", "join")
                and not node.args
                and not node.keywords
            ):
                found.append(f"{where}:{node.lineno} waits without a bound: .{node.func.attr}() (use awake)")
    assert not found, "waits that can keep an interrupt from the main thread:\n" + "\n".join(found)


def test_no_module_imports_another_modules_private_name() -> None:
    found = []
    for module, (path, tree) in _sources().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("envcheck"):
                private = [
                    a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")
                ]
                if private and node.module != module:
                    found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.module}: {private}")
    assert not found, "imports of another module's private names:\n" + "\n".join(found)


# The test tree mirrors the package: a folder of tests/ is a package of envcheck/ (its tests), or one of
# these, which test across packages. Top-level test files test the top-level modules (cli.py, export.py) or
# the whole (architecture, citations, documented numbers, the remedy coverage, the canaries, the bounds of
# every command, the large-venv control).
CROSS_CUTTING_FOLDERS = {
    "fuzz": "hypothesis over real manifests, through every layer",
    "windows": "every command under Wine on a Windows machine",
    "kit": "the CI kit: ci/gate.sh, the CI templates and the pytest plugin in a sample project",
    "data": "committed manifests the tests read",
    "fixtures": "committed binaries and the scripts that built them",
}
TOP_LEVEL_TESTS = {
    "test_architecture.py",
    "test_bounds_deadline.py",
    "test_canaries.py",
    "test_citations.py",
    "test_cli_vocabulary.py",
    "test_doc_numbers.py",
    "test_export.py",
    "test_internal_errors.py",
    "test_large_venv_control.py",
    "test_remedy_coverage.py",
}


def test_the_test_tree_mirrors_the_package() -> None:
    tests = Path(__file__).parent
    packages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))}
    strays = sorted(folders - packages - set(CROSS_CUTTING_FOLDERS))
    assert not strays, f"test folders that name no package of envcheck: {strays}"
    top = {p.name for p in tests.glob("test_*.py")}
    assert top <= TOP_LEVEL_TESTS, f"tests that belong in a package's folder: {sorted(top - TOP_LEVEL_TESTS)}"
    untested = sorted(p for p in packages if p not in folders and p not in ("data", "pytest_plugin"))
    assert not untested, f"packages of envcheck with no test folder: {untested}"
