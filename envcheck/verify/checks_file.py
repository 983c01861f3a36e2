"""A ``--checks`` file as input: found broken before anything runs, and blamed by file:line when the target
cannot import it.

Two moments, because envcheck never executes user code in its own process (docs/architecture.md,
docs/guarantees.md):

- ``compile_checks_file`` before the suite starts: the file is read (a regular file, capped) and given to
  ``compile()``, which parses and compiles without running a line. A syntax error is a ``UsageError``
  naming ``file:line:column``.
- ``load_failure`` after the suite ran: the target imports the file in the ``custom`` group, and an import
  that fails there (a missing module, a ``NameError`` at the top level, a crash) becomes the group's
  ``custom/load`` result (``envcheck/inside/suite.py``: ``status`` ``error`` with ``"Type: message"``, or
  ``crashed`` / ``timeout`` when the process died). That is an input error too, not a finding: the line
  comes from the result's traceback when it has one, else from the error text (a ``SyntaxError`` in the
  target's own Python names its line), else from the file's syntax tree (the import, name or attribute
  the error names).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from envcheck.core.errors import UsageError
from envcheck.core.files import Unreadable, read_input
from envcheck.manifest.verify import CheckResult, VerifySection

# A checks file is a page of Python; this bound only keeps compile() from chewing on a bomb.
MAX_CHECKS_BYTES = 4 * 1024 * 1024
# The result the suite writes when the custom group cannot load its checks (envcheck/inside/suite.py).
LOAD_RESULT = "custom/load"
_TIP = "Fix the file, or run it with `python FILE` in the target environment to see the whole error."


@dataclass(frozen=True, kw_only=True, slots=True)
class Location:
    """Where in the checks file: 1-based line, and column when known."""

    line: int
    column: int | None = None

    def __str__(self) -> str:
        return f"{self.line}:{self.column}" if self.column else str(self.line)


def read_checks_file(path: Path) -> bytes:
    """The file's bytes. Raises ``UsageError`` when it is missing, not a regular file
    (``envcheck.core.files.read_input``: a FIFO is never waited on, the type is checked on the open
    descriptor) or larger than ``MAX_CHECKS_BYTES``."""
    try:
        return read_input(str(path), MAX_CHECKS_BYTES)
    except Unreadable as e:
        raise UsageError(f"checks file {e}", tip="Pass a Python file with check_* functions.") from e


def compile_checks_file(path: Path) -> None:
    """Compile ``path`` without executing it. Raises ``UsageError`` ``path:line:column: SyntaxError: …``
    when it does not compile (and what ``read_checks_file`` raises)."""
    source = read_checks_file(path)
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as e:  # IndentationError and TabError included
        where = Location(line=e.lineno, column=e.offset) if e.lineno else None
        raise UsageError(_message(path, where, f"{type(e).__name__}: {e.msg}"), tip=_TIP) from e
    except (ValueError, RecursionError, MemoryError) as e:
        # ValueError: NUL bytes before Python 3.12; RecursionError: nesting too deep for the compiler.
        raise UsageError(_message(path, None, f"does not compile: {type(e).__name__}: {e}"), tip=_TIP) from e


def load_failure(section: VerifySection, path: Path) -> UsageError | None:
    """The input error to raise when the suite's ``custom`` group could not load ``path``, else None."""
    result = next((r for r in section.results if r.name == LOAD_RESULT and r.status != "passed"), None)
    if result is None:
        return None
    what = _what_happened(result)
    where = _location(result, path)
    if where is None and result.status == "error" and not _mentions(result.traceback, path):
        # Nothing ties the error to the file: it may come from an `envcheck.checks` entry point, which
        # the same group loads.
        what += " (while loading the checks file and the envcheck.checks entry points)"
    return UsageError(_message(path, where, f"cannot be imported in the target: {what}"), tip=_TIP)


def raise_load_failure(section: VerifySection, path: Path) -> None:
    """Raise ``load_failure``'s error, if any."""
    error = load_failure(section, path)
    if error is not None:
        raise error


def _message(path: Path, where: Location | None, what: str) -> str:
    return f"{path}:{where}: {what}" if where is not None else f"{path}: {what}"


def _what_happened(result: CheckResult) -> str:
    if result.status == "timeout":
        return f"it did not finish loading within {result.timeout_s} s"
    if result.status == "crashed":
        how = result.signal or (f"exit code {result.exit_code}" if result.exit_code is not None else "")
        return f"the target died while loading it ({how or 'no result'})"
    error = (result.error or result.reason or result.status).strip()
    return error.splitlines()[-1] if error else result.status


# `File "/abs/checks.py", line 3, in <module>` (traceback module); `(checks.py, line 3)` (SyntaxError text).
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')
_SYNTAX = re.compile(r"\((?P<file>[^()]+), line (?P<line>\d+)\)\s*$")


def _same_file(candidate: str, path: Path) -> bool:
    try:
        return Path(candidate) == path.resolve() or Path(candidate).name == path.name
    except (OSError, ValueError):
        return False


def _mentions(text: str | None, path: Path) -> bool:
    return bool(text) and any(_same_file(m.group("file"), path) for m in _FRAME.finditer(text or ""))


def _location(result: CheckResult, path: Path) -> Location | None:
    # The innermost frame in the file: the traceback runs outermost first.
    frames = [m for m in _FRAME.finditer(result.traceback or "") if _same_file(m.group("file"), path)]
    if frames:
        return Location(line=int(frames[-1].group("line")))
    error = (result.error or "").strip()
    syntax = _SYNTAX.search(error.splitlines()[-1]) if error else None
    if syntax and _same_file(syntax.group("file"), path):
        return Location(line=int(syntax.group("line")))
    return _location_in_source(error, path)


_NO_MODULE = re.compile(r"^(?:ModuleNotFoundError|ImportError): No module named '(?P<module>[^']+)'")
_NO_NAME = re.compile(r"^ImportError: cannot import name '(?P<name>[^']+)' from '(?P<module>[^']+)'")
_NAME_ERROR = re.compile(r"^(?:NameError|UnboundLocalError): name '(?P<name>[^']+)' is not defined")
_ATTRIBUTE = re.compile(r"^AttributeError: .* has no attribute '(?P<name>[^']+)'")


def _location_in_source(error: str, path: Path) -> Location | None:
    """The statement of the file that the error text names (an import, a name, an attribute), found in
    its syntax tree (parsed, not run). None when the text names nothing the tree has, or it cannot be
    parsed here."""
    try:
        tree = ast.parse(read_checks_file(path), filename=str(path))
    except (UsageError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    nodes = list(_run_at_import(tree))
    match = _NO_MODULE.match(error)
    if match:
        module = match.group("module")
        for node in nodes:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names.append(node.module)
            if any(n == module or n.startswith(module + ".") or module.startswith(n + ".") for n in names):
                return _at(node)
        return None
    match = _NO_NAME.match(error)
    if match:
        for node in nodes:
            if isinstance(node, ast.ImportFrom) and any(a.name == match.group("name") for a in node.names):
                return _at(node)
        return None
    match = _NAME_ERROR.match(error)
    if match:
        for node in nodes:
            if isinstance(node, ast.Name) and node.id == match.group("name"):
                return _at(node)
        return None
    match = _ATTRIBUTE.match(error)
    if match:
        for node in nodes:
            if isinstance(node, ast.Attribute) and node.attr == match.group("name"):
                return _at(node)
    return None


def _run_at_import(tree: ast.AST) -> Iterator[ast.AST]:
    """The nodes importing the module evaluates, in source order: everything but the bodies of functions
    and lambdas (their decorators, defaults and annotations do run)."""
    stack: list[ast.AST] = [tree]
    found: list[ast.AST] = []
    while stack:
        node = stack.pop()
        found.append(node)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            children: list[ast.AST] = [*node.decorator_list, node.args]
            children += [node.returns] if node.returns else []
        elif isinstance(node, ast.Lambda):
            children = [node.args]
        else:
            children = list(ast.iter_child_nodes(node))
        stack.extend(reversed(children))
    yield from sorted(
        (n for n in found if hasattr(n, "lineno")),
        key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)),
    )


def _at(node: ast.AST) -> Location:
    return Location(line=getattr(node, "lineno", 1), column=getattr(node, "col_offset", 0) + 1)
