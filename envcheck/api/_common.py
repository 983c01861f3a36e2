"""What the jobs of ``envcheck.api`` share: the progress callback's type, how a report names a manifest or
the inspected interpreter, the slips a first hour makes (an interpreter without torch checked against a
reference with torch: most often envcheck's own interpreter where the environment's was meant), and
``describe_error``: an error as the lines a person reads (the command line's and the pytest plugin's)."""

from __future__ import annotations

import builtins
import dataclasses
import enum
import functools
import inspect
import math
import os
import shutil
import sys
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from envcheck.core.errors import EnvcheckError, ManifestError, UsageError
from envcheck.core.escape import one_line
from envcheck.core.redact import redact_text

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection
    from envcheck.report import Report

# A job's progress: told one short line per step (the command line draws it; None: nobody listens).
Progress = Callable[[str], None]

# The longest ``timeout`` any job takes (a day): past it a deadline is no deadline, and ``inf`` or ``1e12``
# seconds overflow the waits of the standard library (``OverflowError``). ``--timeout`` is refused past it.
MAX_TIMEOUT_S = 86_400.0

P = ParamSpec("P")
R = TypeVar("R")

# What an interpreter option takes, in a face's tips (the CLI's --python, the plugin's --envcheck-python):
# any environment's interpreter, as typed on this machine (a Windows venv keeps python.exe in Scripts).
EXAMPLE_PYTHON = "path\\to\\venv\\Scripts\\python.exe" if os.name == "nt" else "path/to/venv/bin/python"


def prefixed(progress: Progress | None, prefix: str) -> Progress | None:
    """``progress`` with ``prefix`` on each line: the gate's snapshot and suite share one progress line."""
    if progress is None:
        return None
    return lambda line: progress(prefix + line)


def name(path: Path | str, manifest: Manifest) -> str:
    """One manifest named in a title: its label, else its path (doctor, gate, verify --against)."""
    return str(manifest.meta.label or path)


def interpreter_path(python: str | None) -> str:
    """The interpreter a job inspects, as a path: ``python`` as given (found on PATH when it is a bare
    name, made absolute), else this interpreter (``sys.executable``)."""
    if python is None:
        return sys.executable
    found = python if os.sep in python or (os.altsep and os.altsep in python) else shutil.which(python)
    return str(Path(found or python).absolute())


def live_name(executable: str) -> str:
    """How a report's title names the inspected environment: ``this machine (/path/to/python)``."""
    return f"this machine ({executable})"


@dataclass(frozen=True, kw_only=True, slots=True)
class WrongInterpreter:
    """An interpreter without torch checked against a reference with torch: what to say first."""

    executable: str
    own: bool  # no --python: envcheck's own interpreter was inspected
    reference: str  # the manifest's or the lock's name
    torch: str  # the reference's torch version

    @property
    def line(self) -> str:
        who = f"envcheck's own interpreter ({self.executable})" if self.own else self.executable
        return (
            f"warning: {who} has no torch, and {self.reference} has torch {self.torch}: "
            "probably the wrong interpreter"
        )

    @property
    def lines(self) -> tuple[str]:
        """The warning, as said on stderr before the report (redacted, one line). A fact: each face (the
        CLI, the pytest plugin) adds its own tip, naming its own option."""
        return (one_line(redact_text(self.line)),)

    @property
    def title_note(self) -> str:
        return f"probably the wrong interpreter (it has no torch, {self.reference} has torch {self.torch})"

    def titled(self, report: Report) -> Report:
        """``report`` whose title ends with the note (its first line says it too), marked
        ``wrong_interpreter`` so that each face can add its tip."""
        return dataclasses.replace(report, title=f"{report.title}: {self.title_note}", wrong_interpreter=True)


def wrong_interpreter(
    *,
    python: str | None,
    executable: str,
    reference: str,
    reference_torch: str | None,
    has_torch: bool,
) -> WrongInterpreter | None:
    """The slip when the reference (a manifest or a lock named ``reference``) has torch
    ``reference_torch`` and the inspected interpreter has none; else None."""
    if reference_torch is None or has_torch:
        return None
    return WrongInterpreter(
        executable=executable, own=python is None, reference=reference, torch=reference_torch
    )


def live_against(
    python: str | None, reference: str, base: Manifest, live: Manifest
) -> WrongInterpreter | None:
    """``wrong_interpreter`` of a live snapshot ``live`` checked against the manifest ``base`` (named
    ``reference``): a gate, or a diff against this machine."""
    return wrong_interpreter(
        python=python,
        executable=live.python.executable,
        reference=reference,
        reference_torch=base.torch.static.version if base.torch.static else None,
        has_torch=live.torch.static is not None,
    )


def suite_lacks_torch(section: VerifySection) -> bool:
    """Whether the smoke suite's first check failed because torch is not installed at all (not a torch
    that fails to load: that is the environment's own problem, reported as it is)."""
    result = section.result("import_torch")
    return (
        result is not None and result.status == "error" and "No module named 'torch'" in (result.error or "")
    )


def slipped(report: Report, slip: WrongInterpreter | None, tell: Progress | None) -> Report:
    """``report`` with ``slip`` noted in its title and its lines told to ``tell``; as it is without one."""
    if slip is None:
        return report
    if tell is not None:
        for line in slip.lines:
            tell(line)
    return slip.titled(report)


def error_message(error: BaseException) -> str:
    """What went wrong, in one phrase: an ``EnvcheckError``'s message, or ``internal error: Type: message``
    for anything else (a bug). Not yet redacted nor escaped (``describe_error`` does both)."""
    if isinstance(error, EnvcheckError):
        return str(error)
    return f"internal error: {type(error).__name__}: {error}"


def describe_error(error: BaseException) -> list[str]:
    """The lines a person reads for ``error``: ``error: …`` and, for an ``EnvcheckError`` with one,
    ``Tip: …``; a bug's tip says that ``ENVCHECK_DEBUG=1`` shows its traceback. Messages quote untrusted
    input (paths, manifest values): each line is redacted and escaped for the terminal."""
    lines = [f"error: {error_message(error)}"]
    if isinstance(error, EnvcheckError):
        lines += [f"Tip: {error.tip}"] if error.tip else []
    else:
        lines.append("Tip: this is a bug in envcheck; ENVCHECK_DEBUG=1 shows the traceback for a report.")
    return [one_line(redact_text(line)) for line in lines]


# --- the arguments of a public job -------------------------------------------------------------------------


def checked_timeout(value: float, where: str = "timeout", *, low: float = 0.0) -> float:
    """``value`` when it is a number of seconds a deadline can be made of: finite, more than ``low`` (0)
    or equal to it when it is not 0, at most ``MAX_TIMEOUT_S``; else ``UsageError`` naming ``where``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UsageError(f"{where} must be a number of seconds, not {type(value).__name__}")
    fits = math.isfinite(value) and (value >= low if low > 0 else value > 0) and value <= MAX_TIMEOUT_S
    if not fits:
        shown = f"more than {low:g}" if low <= 0 else f"at least {low:g}"
        raise UsageError(
            f"{where} {value!r}: give a number of seconds, {shown} and at most {MAX_TIMEOUT_S:g}"
        )
    return float(value)


def public(fn: Callable[P, R]) -> Callable[P, R]:
    """A public job of ``envcheck.api`` whose arguments are checked against its annotations before it
    runs: a wrong type (a list for a path, an int for a policy, ``None`` for a required option), a
    missing or unknown argument, and a ``timeout`` that is not a number of seconds (``checked_timeout``),
    in an options dataclass too, are ``UsageError`` naming the job and the parameter, never a
    ``TypeError`` or ``OverflowError`` from deep inside. Only what the caller passed is checked."""
    job = fn.__name__
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise UsageError(f"{job}(): {e}") from None
        hints = _hints(fn)
        for name, value in bound.arguments.items():
            if name in hints:
                _check(job, name, value, hints[name])
        return fn(*args, **kwargs)

    return wrapper


class _Lenient(dict[str, Any]):
    """Names for evaluating an annotation: one imported only for type checkers reads as ``Any``."""

    def __missing__(self, key: str) -> Any:
        return Any


@functools.cache
def _hints(fn: Callable[..., object]) -> dict[str, Any]:
    """Each parameter's annotation of ``fn`` (or a dataclass), evaluated; one that cannot be is left out
    (unchecked)."""
    names = _Lenient(vars(builtins))
    names.update(getattr(fn, "__globals__", None) or vars(sys.modules[fn.__module__]))
    names["Progress"] = Progress
    if isinstance(fn, type) and dataclasses.is_dataclass(fn):
        raw = {f.name: f.type for f in dataclasses.fields(fn)}
    else:
        raw = {k: v for k, v in fn.__annotations__.items() if k != "return"}
    out: dict[str, Any] = {}
    for name, text in raw.items():
        try:
            out[name] = eval(text, {}, names) if isinstance(text, str) else text  # an annotation's own text
        except Exception:  # an annotation that does not evaluate here: that parameter goes unchecked
            continue
    return out


def _check(job: str, name: str, value: object, hint: Any) -> None:
    if name.rsplit(".", 1)[-1] == "timeout" and value is not None and hint is not Any:
        checked_timeout(value, f"{job}(): {name} (--timeout)")  # type: ignore[arg-type]
        return
    if not _fits(value, hint):
        raise UsageError(f"{job}(): {name} must be {_expected(hint)}, not {_shown(value)}")
    if (
        dataclasses.is_dataclass(value)
        and not isinstance(value, type)
        and type(value).__module__.startswith("envcheck.")
    ):
        hints = _hints(type(value))
        for field in dataclasses.fields(value):
            if field.name in hints:
                _check(job, f"{name}.{field.name}", getattr(value, field.name), hints[field.name])


def _fits(value: object, hint: Any) -> bool:
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return any(_fits(value, arm) for arm in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return isinstance(value, PurePath)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Callable):  # type: ignore[arg-type]
        return callable(value)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Mapping):
        return isinstance(value, Mapping)
    if origin is not None and isinstance(origin, type) and issubclass(origin, Sequence):
        if isinstance(value, str | bytes) or not isinstance(value, Sequence):
            return False
        arms = typing.get_args(hint)
        if origin is tuple and arms and arms[-1] is not Ellipsis:
            # A fixed-length tuple (``tuple[Selector, Severity]``): each position its own type.
            return len(value) == len(arms) and all(_fits(v, a) for v, a in zip(value, arms, strict=True))
        return not arms or all(_fits(item, arms[0]) for item in value)
    if hint is Callable:
        return callable(value)
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True  # a form not checked here


def _expected(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        return " or ".join(dict.fromkeys(_expected(arm) for arm in typing.get_args(hint)))
    if hint is None or hint is type(None):
        return "None"
    if isinstance(hint, type) and issubclass(hint, PurePath):
        return "a path (pathlib.Path)"
    if hint is str:
        return "a string"
    if hint is bool:
        return "True or False"
    if hint in (int, float):
        return "a number"
    if origin is not None and isinstance(origin, type) and issubclass(origin, Callable):  # type: ignore[arg-type]
        return "a function"
    if origin is not None and isinstance(origin, type) and issubclass(origin, Sequence):
        item = _expected(typing.get_args(hint)[0]) if typing.get_args(hint) else "anything"
        return f"a list of {'strings' if item == 'a string' else f'items each {item}'} (not one string)"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return f"an {hint.__name__} ({', '.join(repr(m.value) for m in hint)})"
    if isinstance(hint, type):
        return f"a {hint.__name__}"
    return str(hint)


def _shown(value: object) -> str:
    """The value a caller passed, as an error names it: its type, with a number's or a short string's
    value (``float inf``), never a long one (it may be a manifest's content)."""
    kind = type(value).__name__
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{kind} {value!r}"
    return kind


def existing_manifest(output: str) -> Manifest | None:
    """The manifest already at ``output`` (None: nothing there, or not a regular file:
    ``envcheck.core.outputs`` judges that). Raises ``UsageError`` for a file that is not a manifest: a
    user's file is never replaced without --force."""
    if output == "-" or not Path(output).is_file():
        return None
    # Lazy: the manifest reader (0.05 s) loads before the target starts only when there is a file to read.
    from envcheck.manifest.io import load

    try:
        return load(output)
    except ManifestError as e:
        raise UsageError(
            f"{output} exists and is not a manifest envcheck can read ({'; '.join(e.problems[:1])}): "
            "not replaced",
            tip="Write the manifest elsewhere with -o FILE, or replace that file with --force.",
        ) from e
