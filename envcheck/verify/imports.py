"""The application's imports, part of ``verify`` and ``gate``: every installed module with native code, and
the application's own entry modules (``--import``, ``imports = [...]`` in the policy), imported in the
target interpreter.

Three steps, all under the command's ``--timeout`` (one ``Deadline``), each target process killed with its
whole session at its deadline (``envcheck.process.runner``):

1. **Plan** (one process, imports nothing): the top-level modules that hold each distribution's native
   files (``RECORD``), sorted by module, each with its risk (``envcheck.inside.app_imports``: it links
   torch's libraries, or its distribution requires torch or NumPy). The order of the imports is that
   plan, minus what the policy declares ``not_imported``, then the application's modules in the order
   given (the manifest's recorded ones first); **the cap** (``MAX_APP_IMPORTS``) chooses by risk, never by
   name: the application's modules first, then the modules that link torch, then those that need NumPy,
   then the rest by name. Each module it leaves out is named in a warning.
2. **Each import alone**, in a fresh process (``ISOLATED_WORKERS`` at a time), with at most
   ``IMPORT_TIMEOUT_SHARE`` of ``--timeout`` each: a crash, a hang or an error is that import's own. Alone
   first go the application's modules and those that link or require torch: an extension that loads its
   library before ``import torch`` fails alone and passes after torch, and only a fresh process tells.
3. **All of them in one process**, in order (those that passed alone, and the others not yet tried): after
   each import, the shared libraries it added to the process; at the end, the thread pools. Two OpenMP
   runtimes brought in by the application's imports are a finding naming the import that loaded each.
   When that process is clean (every import passed, a clean exit), the modules not imported alone passed
   (``among_others``): on a healthy machine each is imported once. Otherwise they are imported alone
   too, as in step 2, and then all that passed alone together again, so that every failure is its own
   import's. The first try has the deadline of one import alone, so a hang there leaves time for the rest.

**A real exit.** The processes of steps 2 and 3 leave through the interpreter's normal exit once their
result is written: non-daemon threads joined, atexit hooks and destructors run, as when the application
ends. The exit has its own deadline, at most ``EXIT_TIMEOUT`` seconds of what is left of the process's; a
signal after the result is a crash at exit, a process still there at the exit's deadline a hang at exit
(the target's interval timer kills it with SIGALRM after dumping every thread's stack), each the import's
own finding (``import MODULE at exit``). A module that does not exit cleanly alone is not imported with the
others.

Findings: ``VERIFY-IMPORT`` (an import raised; a NumPy ABI break says so, and in a gate whose base had
another NumPy major it is a consequence of ``ENV-NUMPY-MAJOR``; a warning naming what the cap left out),
``VERIFY-CRASH`` / ``VERIFY-TIMEOUT`` (an import killed its process or hung, or its process crashed or hung
at exit), ``VERIFY-IMPORT-OPENMP`` (two OpenMP runtimes). An import runs the module's code: its side
effects are the application's (docs/guarantees.md).
"""

from __future__ import annotations

import json
import os
import re
import signal as signals
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import envcheck.verify.rules  # noqa: F401 - registers the VERIFY-* rules
from envcheck.core.files import open_regular
from envcheck.core.findings import Finding, Rule, registered_rule
from envcheck.core.redact import redact_text
from envcheck.inside.copying import PACKAGE as TARGET_PACKAGE
from envcheck.manifest.model import ProbeOutcome
from envcheck.manifest.query import major, omp_family, pkg
from envcheck.manifest.remedy import install_action, pip_install, remedy_text, requirement_action
from envcheck.process import awake
from envcheck.process.runner import STDERR_TAIL_CHARS, Deadline, TargetRun, read_result, run_target

if TYPE_CHECKING:
    from envcheck.core.remedy import Action
    from envcheck.manifest.model import Manifest

APP_IMPORTS_MODULE = f"{TARGET_PACKAGE}.app_imports"
# At most this many imports per command (the plan's modules are cut first, the application's never):
# each costs a process start and its import; a venv with hundreds of native distributions is not
# imported whole by default, and a warning names every module left out. What is kept goes by risk.
MAX_APP_IMPORTS = 64
# The plan's risks, in the order the cap takes them (after the application's own modules); a module
# without one comes after them, by name.
RISK_ORDER = ("torch", "numpy")
# The interpreter's exit after an import may take at most this long (and never more than what is left of
# its process's deadline): an exit that joins a thread pool takes milliseconds, torch's teardown ~0.3 s.
EXIT_TIMEOUT = 5.0
# How many modules left out by the cap the warning names before it counts the rest.
OVER_CAP_SHOWN = 40
# One import alone may take at most this share of --timeout (30 s of the default 120 s), so that one hang
# leaves time for the others and for the imports all together.
IMPORT_TIMEOUT_SHARE = 0.25
# Imports alone run this many at a time (each is its own process).
ISOLATED_WORKERS = 2
# How many imports the stderr summary names, in order.
ORDER_SHOWN = 24
# The plan reads metadata only: when it needs more than this, something is wrong.
PLAN_TIMEOUT = 60.0
# A module name as Python spells one: dotted identifiers.
MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")
MAX_MODULE_NAME = 200
# What an extension built against one NumPy ABI says when it is imported under the other.
_NUMPY_ABI = re.compile(
    r"numpy\.dtype size changed|numpy\.core\.multiarray failed to import|numpy\.core\._multiarray_umath "
    r"failed to import|compiled using NumPy 1\.x cannot be run in|_ARRAY_API not found",
    re.IGNORECASE,
)

ImportStatus = Literal["passed", "error", "crashed", "timeout", "skipped"]
Progress = Callable[[str], None]


@dataclass(frozen=True, kw_only=True, slots=True)
class ImportResult:
    """One import, alone in its process. ``distribution``/``version``: the distribution whose native files
    the module holds (None for the application's own module). ``skipped``: ``reason`` says why.
    ``at_exit``: the import ended (``error`` says how when it raised) and the process then crashed or hung
    in the interpreter's exit (``status`` ``crashed`` or ``timeout``; ``timeout_s``: the exit's deadline).
    ``among_others``: it passed among the others and was not imported alone (nothing there failed, and it
    neither links nor requires torch nor is the application's own)."""

    module: str
    distribution: str | None = None
    version: str | None = None
    status: ImportStatus = "passed"
    error: str | None = None
    traceback: str | None = None
    stderr_tail: str | None = None
    signal: str | None = None
    exit_code: int | None = None
    timeout_s: float | None = None
    reason: str | None = None
    duration_s: float | None = None
    at_exit: bool = False
    among_others: bool = False

    @property
    def who(self) -> str:
        """``import h5py`` (h5py 3.10.0), as a report names it."""
        owner = f" ({self.distribution} {self.version})" if self.distribution else ""
        return f"`import {self.module}`{owner}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Together:
    """The imports that passed alone, all in one process, in order: the libraries each one added to the
    process, the thread pools at the end, what raised there, and how the process ended (``status`` as a
    ``ProbeOutcome``'s; ``current``: the import it died in; ``at_exit``: it died or hung in the
    interpreter's exit, after every import)."""

    modules: tuple[str, ...]
    loaded: tuple[tuple[str, tuple[str, ...]], ...] = ()
    threadpools: tuple[tuple[str, str], ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    status: str = "ok"
    current: str | None = None
    signal: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    timeout_s: float | None = None
    at_exit: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class AppImports:
    """What the application's imports did in the target. ``order``: every import planned, in order;
    ``over_cap``: modules left out by the cap (``cap``, ``MAX_APP_IMPORTS`` by default); ``plan_error``:
    why no plan was made."""

    results: tuple[ImportResult, ...] = ()
    together: Together | None = None
    over_cap: tuple[str, ...] = ()
    cap: int = MAX_APP_IMPORTS
    versions: dict[str, str] = field(default_factory=dict)
    plan_error: str | None = None
    wall_s: float | None = None

    @property
    def order(self) -> tuple[str, ...]:
        return tuple(r.module for r in self.results)


class Beside:
    """The imports together, run beside the smoke suite in a child of its ``main`` process, forked after
    its ``import torch`` (``envcheck.inside.together``): one ``import torch`` for both. The folder ``folder``
    holds the files the two speak through. ``run_suite`` gives the first ``main`` process ``config()`` and
    calls ``ended()`` when it is over; ``run_imports`` calls ``request()`` (or ``decline()``) once it knows
    the modules, then ``wait()`` for how the child ended: None when there was no child (not Linux, CUDA,
    another thread, the suite's process ended before it forked), and the imports run in a process of their
    own instead."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._paths = {name: str(folder / f"together.{name}") for name in ("request", "out", "end", "stderr")}
        self._requested = False
        self._import_s: float | None = None
        self._run: TargetRun | None = None
        self._ended = threading.Event()
        self._lock = threading.Lock()

    def config(self) -> dict[str, str]:
        return dict(self._paths)

    def request(self, modules: Sequence[str], process: Deadline, import_s: float, path: str) -> None:
        with self._lock:
            if self._requested:
                return
            self._requested = True
            self._import_s = import_s
            request = {"modules": list(modules), "path": path, "import_s": import_s, **_exit_config(process)}
            part = Path(self._paths["request"] + ".part")
            part.write_text(json.dumps(request), encoding="utf-8")
            part.replace(self._paths["request"])

    def decline(self) -> None:
        """Nothing to import beside the suite (the child, if any, ends at once); idempotent."""
        self.request([], Deadline.after(1.0), 1.0, "")

    def ended(self) -> None:
        """The suite's process that could fork the child is over: read how the child ended. Idempotent."""
        with self._lock:
            if self._ended.is_set():
                return
            try:
                self._run = self._read()
            finally:
                self._ended.set()

    def wait(self) -> TargetRun | None:
        """How the child ended, once the suite's process is over; None at once when the suite said it did
        not fork."""
        while not self._ended.wait(0.02):
            end, _ = read_result(Path(self._paths["end"]))
            if end.get("forked") is False:
                return None
        return self._run

    def _read(self) -> TargetRun | None:
        end, _ = read_result(Path(self._paths["end"]))
        if end.get("forked") is not True:
            return None
        data, _ = read_result(Path(self._paths["out"]))
        number = end.get("signal")
        code = end.get("exit_code")
        name = None
        if isinstance(number, int) and not isinstance(number, bool):
            try:
                name = signals.Signals(number).name
            except ValueError:
                name = f"signal {number}"
        exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
        timeout_s = None
        if name is None and exit_code == 0:
            status = "ok"
        elif name == "SIGALRM" and data.get("stage") != "exit":
            status, timeout_s = "timeout", self._import_s  # the child's own timer, in an import
        else:
            status = "crashed"
        outcome = ProbeOutcome(
            status=status,  # type: ignore[arg-type]
            stage=data.get("stage") if isinstance(data.get("stage"), str) else None,
            exit_code=exit_code,
            signal=name,
            stderr_tail=_tail(Path(self._paths["stderr"])),
            timeout_s=timeout_s,
        )
        return TargetRun(data=data, outcome=outcome)


def _tail(path: Path) -> str | None:
    """The redacted end of the child's stderr file (at most ``STDERR_TAIL_CHARS``), read without following
    a link or waiting on a FIFO the target may have put there."""
    try:
        fd = open_regular(str(path))
    except (OSError, ValueError):
        return None
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - 4 * STDERR_TAIL_CHARS), os.SEEK_SET)
        raw = os.read(fd, 4 * STDERR_TAIL_CHARS)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = raw.decode("utf-8", "replace").strip()[-STDERR_TAIL_CHARS:]
    return redact_text(text) if text else None


def check_module_names(names: Sequence[str], where: str) -> list[str]:
    """Problems with module names given by a user (``--import``, the policy's ``imports``): each must be
    a dotted Python name, at most ``MAX_APP_IMPORTS`` of them."""
    problems = []
    if len(names) > MAX_APP_IMPORTS:
        problems.append(f"{where}: {len(names)} modules, more than the {MAX_APP_IMPORTS} allowed")
    for i, name in enumerate(names):
        if not isinstance(name, str) or len(name) > MAX_MODULE_NAME or not MODULE_NAME.match(name):
            shown = name if isinstance(name, str) and len(name) <= 40 else f"{str(name)[:37]}..."
            problems.append(f"{where}[{i}]: {shown!r} is not a Python module name (e.g. myapp.main)")
    return problems


def plan_order(
    found: Sequence[tuple[str, str | None, str | None]],
    modules: Sequence[str],
    not_imported: Sequence[str],
    limit: int = MAX_APP_IMPORTS,
    risk: Mapping[str, str] | None = None,
) -> tuple[list[ImportResult], list[str]]:
    """The imports in order: the plan's modules (``found``: module, distribution, version), then the
    application's ``modules`` (each once, first mention kept); a module (or a package above it) that the
    policy declares ``not_imported`` is a ``skipped`` result. Returns them and the plan's modules left out
    by ``limit``, in the plan's order. What the cap keeps goes by risk, never by name: the application's
    modules always count first, then the plan's modules whose ``risk`` is ``torch``, then ``numpy``
    (``RISK_ORDER``), then the rest in the plan's order."""

    def excluded(module: str) -> bool:
        return any(module == n or module.startswith(n + ".") for n in not_imported)

    own = list(dict.fromkeys(modules))
    room = max(0, limit - len(own))
    risks = risk or {}
    candidates = [module for module, _, _ in found if module not in own and not excluded(module)]
    rank = {name: i for i, name in enumerate(RISK_ORDER)}
    by_risk = sorted(
        range(len(candidates)), key=lambda i: (rank.get(risks.get(candidates[i], ""), len(rank)), i)
    )
    kept = {candidates[i] for i in by_risk[:room]}
    planned: list[ImportResult] = []
    over: list[str] = []
    for module, dist, version in found:
        if module in own:
            continue
        if excluded(module):
            planned.append(_skipped(module, dist, version))
        elif module in kept:
            planned.append(ImportResult(module=module, distribution=dist, version=version))
        else:
            over.append(module)
    for module in own:
        planned.append(_skipped(module, None, None) if excluded(module) else ImportResult(module=module))
    return planned, over


def _skipped(module: str, dist: str | None, version: str | None) -> ImportResult:
    return ImportResult(
        module=module,
        distribution=dist,
        version=version,
        status="skipped",
        reason="the policy declares it not imported (not_imported)",
    )


def run_imports(
    python: str | None,
    *,
    timeout: float,
    modules: Sequence[str] = (),
    not_imported: Sequence[str] = (),
    deadline: Deadline | None = None,
    env: dict[str, str] | None = None,
    progress: Progress | None = None,
    limit: int = MAX_APP_IMPORTS,
    alone_elsewhere: Mapping[str, str] | None = None,
    beside: Beside | None = None,
) -> AppImports:
    """Plan, import each module alone, then all together (see the module's docstring), all within
    ``timeout`` seconds (and ``deadline`` when given). ``alone_elsewhere``: modules the caller imports
    alone in another process (torch: the smoke suite's ``import_torch`` check, which reports its failure)
    -> where; they are not imported alone again, only together with the others. ``beside``: the first
    try of the imports together runs in a child of the smoke suite's process when it can (``Beside``).
    Raises ``ProbeError`` only when the interpreter cannot be started; every other end is a result."""
    try:
        return _run_imports(
            python, timeout, modules, not_imported, deadline, env, progress, limit, alone_elsewhere, beside
        )
    finally:
        if beside is not None:
            beside.decline()  # the suite's child never waits on imports that will not come


def _run_imports(
    python: str | None,
    timeout: float,
    modules: Sequence[str],
    not_imported: Sequence[str],
    deadline: Deadline | None,
    env: dict[str, str] | None,
    progress: Progress | None,
    limit: int,
    alone_elsewhere: Mapping[str, str] | None,
    beside: Beside | None,
) -> AppImports:
    started = time.monotonic()
    ends = Deadline.after(timeout) if deadline is None else deadline.earliest(Deadline.after(timeout))
    say = progress or (lambda line: None)
    say("listing the modules with native code")
    plan = run_target(
        python,
        module=APP_IMPORTS_MODULE,
        args=[json.dumps({"mode": "plan"})],
        deadline=ends.earliest(Deadline.after(PLAN_TIMEOUT)),
        env=env,
    )
    found, risk = _found(plan.data.get("found"))
    if plan.outcome.status != "ok" or found is None:
        o = plan.outcome
        why = {"timeout": f"did not finish within {o.timeout_s} s", "crashed": "crashed"}.get(
            o.status, o.exception or "gave no list"
        )
        return AppImports(plan_error=why, wall_s=round(time.monotonic() - started, 3))
    versions = {dist: version for _, dist, version in found if dist and version}
    planned, over = plan_order(found, modules, not_imported, limit, risk)
    cwd = str(Path.cwd())
    alone_s = max(1.0, ends.seconds * IMPORT_TIMEOUT_SHARE)
    elsewhere = dict(alone_elsewhere or {})
    planned = [
        _replace(r, reason=f"imported alone by {elsewhere[r.module]}") if r.module in elsewhere else r
        for r in planned
    ]
    todo = [r for r in planned if r.status != "skipped" and r.module not in elsewhere]
    # Alone first: the application's modules and those that link or require torch (an extension loaded
    # before torch fails where one loaded after it passes: only a fresh process tells). The others go
    # straight in with them; only when that process is not clean are they imported alone too.
    first = [r for r in todo if r.distribution is None or risk.get(r.module) == "torch"]
    later = [r for r in todo if not (r.distribution is None or risk.get(r.module) == "torch")]

    def alone(result: ImportResult) -> ImportResult:
        if ends.expired():
            return _replace(result, status="timeout", timeout_s=ends.seconds)
        say(f"import {result.module}")
        process = ends.earliest(Deadline.after(alone_s))
        run = run_target(
            python,
            module=APP_IMPORTS_MODULE,
            args=[json.dumps({"mode": "one", "module": result.module, "path": cwd, **_exit_config(process)})],
            deadline=process,
            env=env,
        )
        return _alone_result(result, run)

    def each_alone(results: list[ImportResult]) -> dict[str, ImportResult]:
        with awake.Pool(ISOLATED_WORKERS) as pool:
            return dict(zip([r.module for r in results], pool.map(alone, results), strict=True))

    def all_together(modules: tuple[str, ...], process: Deadline) -> Together | None:
        if not modules or process.expired():
            return None
        say("all imports in one process")
        config = {"mode": "all", "modules": list(modules), "path": cwd, **_exit_config(process)}
        run = run_target(
            python, module=APP_IMPORTS_MODULE, args=[json.dumps(config)], deadline=process, env=env
        )
        return _together(modules, run)

    done = each_alone(first)
    unproven = {r.module for r in later}
    tried = tuple(
        r.module for r in planned if r.module in unproven or done.get(r.module, r).status == "passed"
    )
    # The others' first try shares the deadline of one import alone, so that a hang among them leaves
    # the time to import each of them alone. Beside the suite when it can: one `import torch` for both.
    together = None
    if beside is not None and not (later and tried):
        beside.decline()
    if later:
        first_try = ends.earliest(Deadline.after(alone_s))
        if beside is not None and tried:
            say("all imports in one process, beside the smoke suite")
            beside.request(tried, first_try, alone_s, cwd)
            run = beside.wait()
            together = _together(tried, run) if run is not None else None
        if together is None:
            together = all_together(tried, first_try)
    if together is not None and _clean(together):
        done.update((r.module, _replace(r, status="passed", among_others=True)) for r in later)
    else:
        done.update(each_alone(later))
        results = tuple(done.get(r.module, r) for r in planned)
        together = all_together(tuple(r.module for r in results if r.status == "passed"), ends)
    results = tuple(done.get(r.module, r) for r in planned)
    return AppImports(
        results=results,
        together=together,
        over_cap=tuple(over),
        cap=limit,
        versions=versions,
        wall_s=round(time.monotonic() - started, 3),
    )


def _clean(together: Together) -> bool:
    """Whether every import of ``together`` passed and its process exited cleanly."""
    return together.status == "ok" and not together.failed and not together.at_exit


def _found(raw: object) -> tuple[list[tuple[str, str | None, str | None]] | None, dict[str, str]]:
    """The plan's ``[module, distribution, version, risk]`` rows, well-formed ones only (None: no list),
    and each module's risk (one of ``RISK_ORDER``; a row of three, from an older plan, has none)."""
    if not isinstance(raw, list):
        return None, {}
    out = []
    risk: dict[str, str] = {}
    for row in raw:
        if (
            isinstance(row, list)
            and len(row) in (3, 4)
            and isinstance(row[0], str)
            and MODULE_NAME.match(row[0])
        ):
            dist = row[1] if isinstance(row[1], str) else None
            version = row[2] if isinstance(row[2], str) else None
            out.append((row[0], dist, version))
            if len(row) == 4 and row[3] in RISK_ORDER:
                risk[row[0]] = row[3]
    return out, risk


def _exit_config(process: Deadline) -> dict[str, float]:
    """What a target needs to bound its own exit: at most ``EXIT_TIMEOUT``, never past ``process``."""
    left = process.remaining()
    return {"exit_s": EXIT_TIMEOUT, **({"deadline_s": round(left, 3)} if left != float("inf") else {})}


def _exit_status(data: Mapping[str, object], o: ProbeOutcome) -> Literal["crashed", "timeout"] | None:
    """How a target that wrote its result (``stage: "exit"``) ended in the interpreter's exit: ``timeout``
    (killed at the process's deadline, or by its own exit timer: SIGALRM, or faulthandler's exit code 1
    where there is no timer), ``crashed`` (any other signal or exit code), None (a clean exit, or it died
    before its exit)."""
    if data.get("stage") != "exit" or o.status == "ok":
        return None
    if o.status == "timeout" or o.signal == "SIGALRM":
        return "timeout"
    tail = o.stderr_tail or ""
    if o.exit_code == 1 and re.search(r"^Timeout \(\d+:\d\d:\d\d", tail, re.M):
        return "timeout"
    return "crashed"


def _replace(result: ImportResult, **changes: object) -> ImportResult:
    import dataclasses

    return dataclasses.replace(result, **changes)  # type: ignore[arg-type]


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _exit_timeout(data: Mapping[str, object], o: ProbeOutcome) -> float | None:
    """The deadline an exit that hung ran into: its own (``exit_s``, the target's timer), or its process's."""
    exit_s = data.get("exit_s")
    if o.status != "timeout" and isinstance(exit_s, int | float):
        return float(exit_s)
    return o.timeout_s


def _alone_result(result: ImportResult, run: TargetRun) -> ImportResult:
    o = run.outcome
    data = run.data
    duration = data.get("duration_s")
    duration_s = float(duration) if isinstance(duration, int | float) else None
    at_exit = _exit_status(data, o)
    if at_exit is not None:
        return _replace(
            result,
            status=at_exit,
            at_exit=True,
            error=_text(data.get("error")),
            traceback=_text(data.get("traceback")),
            signal=o.signal,
            exit_code=o.exit_code,
            stderr_tail=o.stderr_tail,
            timeout_s=_exit_timeout(data, o),
            duration_s=duration_s,
        )
    if o.status == "ok":
        error = _text(data.get("error"))
        if error is None:
            return _replace(result, status="passed", duration_s=duration_s)
        return _replace(
            result,
            status="error",
            error=error,
            traceback=_text(data.get("traceback")),
            stderr_tail=o.stderr_tail,
            duration_s=duration_s,
        )
    if o.status == "timeout":
        return _replace(result, status="timeout", timeout_s=o.timeout_s, stderr_tail=o.stderr_tail)
    return _replace(
        result,
        status="crashed",
        error=o.exception,
        signal=o.signal,
        exit_code=o.exit_code,
        stderr_tail=o.stderr_tail,
    )


def _together(modules: tuple[str, ...], run: TargetRun) -> Together:
    data = run.data
    loaded = []
    for row in data.get("loaded") or []:
        if isinstance(row, list) and len(row) == 2 and isinstance(row[0], str) and isinstance(row[1], list):
            loaded.append((row[0], tuple(p for p in row[1] if isinstance(p, str))))
    pools = []
    for pool in data.get("threadpools") or []:
        if isinstance(pool, dict) and isinstance(pool.get("filepath"), str):
            pools.append((str(pool.get("user_api")), pool["filepath"]))
    failed = []
    for row in data.get("failed") or []:
        if isinstance(row, list) and len(row) == 2 and all(isinstance(x, str) for x in row):
            failed.append((row[0], row[1]))
    o = run.outcome
    at_exit = _exit_status(data, o)
    return Together(
        modules=modules,
        loaded=tuple(loaded),
        threadpools=tuple(pools),
        failed=tuple(failed),
        status=at_exit or o.status,
        current=_text(data.get("current")),
        signal=o.signal,
        exit_code=o.exit_code,
        stderr_tail=o.stderr_tail if o.status != "ok" else None,
        timeout_s=_exit_timeout(data, o) if at_exit else o.timeout_s,
        at_exit=at_exit is not None,
    )


# --------------------------------------------------------------------------------------------- findings


def import_findings(
    run: AppImports, *, base: Manifest | None = None, target: Manifest | None = None
) -> list[Finding]:
    """The findings of the application's imports. ``base``/``target``: the gate's two manifests (a NumPy
    ABI break is then a consequence of their NumPy major change, when there is one)."""
    findings: list[Finding] = []
    if run.plan_error is not None:
        findings.append(
            _rule("VERIFY-IMPORT").finding(
                "app imports",
                f"the installed modules with native code could not be listed: the target {run.plan_error}",
                "Run `envcheck doctor` on this interpreter; rerun with a larger --timeout if it was slow.",
            )
        )
    for result in run.results:
        findings += _result_findings(result, run, base, target)
    if run.together is not None:
        findings += _together_findings(run.together, run)
    if run.over_cap:
        more = len(run.over_cap) - OVER_CAP_SHOWN
        shown = ", ".join(run.over_cap[:OVER_CAP_SHOWN]) + (f" and {more} more" if more > 0 else "")
        findings.append(
            _rule("VERIFY-IMPORT").finding(
                "app imports",
                f"{len(run.over_cap)} modules with native code were not imported, over the cap of "
                f"{run.cap} imports (kept by risk: the application's imports, then modules that link "
                f"torch, then those that need NumPy, then by name), so nothing says they import: {shown}",
                "Name the modules your application imports with --import (or `imports = [...]` in the "
                "policy), and skip the others with `not_imported = [...]`: the cap then keeps what the "
                "application runs.",
                severity="warning",
            )
        )
    return findings


def _rule(rule_id: str) -> Rule:

    rule = registered_rule(rule_id)
    assert rule is not None, rule_id
    return rule


def _result_findings(
    result: ImportResult, run: AppImports, base: Manifest | None, target: Manifest | None
) -> list[Finding]:
    subject = f"import {result.module}"
    tail = f"\n{result.stderr_tail}" if result.stderr_tail else ""
    if result.at_exit:
        raised = (
            _result_findings(_replace(result, status="error", at_exit=False), run, base, target)
            if result.error
            else []
        )
        return [*raised, _exit_finding(result.module, result.who, result, "its process")]
    match result.status:
        case "passed" | "skipped":
            return []
        case "timeout":
            return [
                _rule("VERIFY-TIMEOUT").finding(
                    subject,
                    f"{result.who} did not finish within {result.timeout_s} s; its process session was "
                    f"killed{tail}",
                    "Rerun with a larger --timeout to tell slow from hung; a hang at import is often a "
                    "deadlock between two OpenMP runtimes or a network call at import time. Skip a module "
                    'the application never imports with `not_imported = ["' + result.module + '"]`.',
                )
            ]
        case "crashed":
            how = result.signal or f"exit code {result.exit_code}"
            return [
                _rule("VERIFY-CRASH").finding(
                    subject,
                    f"{result.who} killed its process ({how}){tail}",
                    "Run `envcheck doctor`: two OpenMP runtimes, a CPU without the instructions the build "
                    "needs, or a foreign library loaded in place of the wheel's.",
                )
            ]
    text = " ".join(x for x in (result.error, result.traceback, result.stderr_tail) if x)
    if _NUMPY_ABI.search(text):
        return [_numpy_abi(result, run, base, target)]
    where = _last_frame(result.traceback)
    actions, remedy = _import_remedy(result, target)
    return [
        _with_actions(
            "VERIFY-IMPORT",
            subject,
            f"{result.who} raised {result.error}" + (f" ({where})" if where else ""),
            remedy,
            actions,
        )
    ]


def _with_actions(
    rule_id: str,
    subject: str,
    message: str,
    remedy: str,
    actions: tuple[Action, ...],
    *,
    base: str | None = None,
    target: str | None = None,
    caused_by: str | None = None,
) -> Finding:
    """A finding of ``rule_id`` whose remedy is ``actions`` (``remedy`` their text). The VERIFY-* rules are
    registered by ``envcheck.verify.rules``: the actions ride on the finding where the rule declares their
    kinds (``Rule.fixes``); the text says the same either way."""
    rule = _rule(rule_id)
    declared = {a.kind for a in actions} <= {*rule.fixes, "manual"}
    return rule.finding(
        subject,
        message,
        remedy,
        base=base,
        target=target,
        caused_by=caused_by,
        actions=actions if declared else (),
    )


def _exit_finding(
    module: str | None, who: str, ended: ImportResult | Together, process: str, after: str = ""
) -> Finding:
    """A process that crashed or hung in the interpreter's exit after importing ``module`` (None: the
    imports together, and no frame of the stack names one of them)."""
    tail = f"\n{ended.stderr_tail}" if ended.stderr_tail else ""
    skip = (
        f' Skip a module the application never imports with `not_imported = ["{module}"]`.'
        if module is not None
        else " Import the modules in the application's order to find the one whose exit fails."
    )
    subject = f"import {module} at exit" if module is not None else "app imports at exit"
    if ended.status == "timeout":
        return _rule("VERIFY-TIMEOUT").finding(
            subject,
            f"{who} was imported{after}, then {process} hung at exit: the interpreter's exit did not end "
            f"within {ended.timeout_s} s (a non-daemon thread still running, or an atexit hook or a "
            f"destructor that blocks); the application will hang each time it ends{tail}",
            "Read the stacks above: the thread or hook the exit waits on. Update the package, or make the "
            "application stop the threads it starts (or start them as daemon threads)." + skip,
        )
    how = ended.signal or f"exit code {ended.exit_code}"
    return _rule("VERIFY-CRASH").finding(
        subject,
        f"{who} was imported{after}, then {process} crashed at exit ({how}): an atexit hook, a destructor "
        f"or a thread of the module died as the interpreter shut down; the application will end the same "
        f"way (a lost exit code, lost output, a core dump){tail}",
        "Read the Python stack above for the hook or destructor; update or reinstall the package (`envcheck "
        "doctor` names a foreign library loaded in place of the wheel's)." + skip,
    )


def _import_remedy(result: ImportResult, target: Manifest | None) -> tuple[tuple[Action, ...], str]:
    """The remedy of an import that raised: its distribution reinstalled (the same build, from where it
    came: ``install_action``), or what to change where no command says it."""
    if result.error and result.error.startswith("ModuleNotFoundError") and result.distribution is None:
        return (), (
            f"Install the package that provides `{result.module}` in this environment, or run from the "
            "folder that holds it (the current folder is searched last); check the --import name."
        )
    if result.distribution and result.version:
        pins = [(result.distribution, result.version)]
        actions = (install_action(pins, source=target, force=True, no_deps=True),)
        text = pip_install(pins, source=target, on=target, options="--force-reinstall --no-deps")
        return actions, (
            f"Reinstall it: {text}; the error names a missing library or a version the module needs."
        )
    return (), "Fix what the exception names, at the innermost frame shown."


def _numpy_abi(
    result: ImportResult, run: AppImports, base: Manifest | None, target: Manifest | None
) -> Finding:
    numpy_here = run.versions.get("numpy")
    if target is not None and pkg(target, "numpy") is not None:
        numpy_here = pkg(target, "numpy").version  # type: ignore[union-attr]
    numpy_base = pkg(base, "numpy") if base is not None else None
    here_major = major(numpy_here)
    what = result.distribution or result.module
    built_for = "1.x" if here_major not in (None, "0", "1") else "2.x"
    other = "numpy<2" if built_for == "1.x" else "numpy>=2"
    head = (
        f"{result.who} fails: a NumPy ABI break: it was compiled against NumPy {built_for} and NumPy "
        f"{numpy_here or '?'} is installed here ({result.error})"
    )
    # A newer release of the module, built for the NumPy installed here (what ``pip install --upgrade``
    # takes); under NumPy 1, a module built for NumPy 2 needs NumPy 2, which no release of it changes.
    newer = (
        requirement_action(f"{result.distribution}>{result.version.split('+')[0]}")
        if result.distribution and result.version and built_for == "1.x"
        else None
    )
    if numpy_base is not None and target is not None and major(numpy_base.version) != here_major:
        pins = [("numpy", numpy_base.version)]
        upgrade = (
            f", or {remedy_text([newer], target)} (a release of {what} built for NumPy {here_major}.x)"
            if newer is not None
            else ""
        )
        return _with_actions(
            "VERIFY-IMPORT",
            f"import {result.module}",
            head + f"; the base has NumPy {numpy_base.version}, which it works with",
            f"On the target: {pip_install(pins, source=base, on=target)}{upgrade}.",
            (install_action(pins, source=base),),
            base=numpy_base.version,
            target=numpy_here,
            caused_by="ENV-NUMPY-MAJOR:numpy",
        )
    if newer is not None:
        actions: tuple[Action, ...] = (newer,)
        note = (
            f"(a release of {what} built for NumPy {here_major}.x); or "
            f"{remedy_text([requirement_action(other)], target)} where no release of {what} supports NumPy "
            f"{here_major}."
        )
    else:
        actions = (requirement_action(other),)
        note = f"(the NumPy {what} was built for); or a build of {what} made against NumPy {numpy_here}."
    return _with_actions(
        "VERIFY-IMPORT",
        f"import {result.module}",
        head,
        remedy_text(actions, target, note=note),
        actions,
        target=numpy_here,
    )


def _base(path: str) -> str:
    """The file name of a path from the target, whatever its separators."""
    return re.split(r"[\\/]", path)[-1]


def _last_frame(traceback: str | None) -> str | None:
    if not traceback:
        return None
    # The import system's own frames (``<frozen importlib._bootstrap>``) say nothing about the module.
    frames = [f for f in re.findall(r'File "([^"]+)", line (\d+)', traceback) if not f[0].startswith("<")]
    if not frames:
        return None
    path, line = frames[-1]
    return f"{_base(path)}:{line}"


def _together_findings(together: Together, run: AppImports) -> list[Finding]:
    findings: list[Finding] = []
    owners = {r.module: r for r in run.results}
    if together.at_exit and together.status in ("crashed", "timeout"):
        module = _exit_culprit(together.stderr_tail, together.modules)
        if module is not None:
            who = owners[module].who if module in owners else f"`import {module}`"
            findings.append(_exit_finding(module, who, together, "the process that imported them all"))
        else:
            names = ", ".join(f"`{m}`" for m in together.modules[:8])
            more = f" and {len(together.modules) - 8} more" if len(together.modules) > 8 else ""
            findings.append(
                _exit_finding(
                    None,
                    f"each of {names}{more}",
                    together,
                    "their process",
                    after=" (each exits cleanly alone, or is imported alone elsewhere)",
                )
            )
    if together.status in ("crashed", "timeout", "error") and together.current:
        index = together.modules.index(together.current) if together.current in together.modules else 0
        before = together.modules[:index]
        after = ", ".join(f"`{m}`" for m in before[-5:]) or "nothing"
        who = owners[together.current].who if together.current in owners else f"`import {together.current}`"
        alone = _alone(owners.get(together.current))
        tail = f"\n{together.stderr_tail}" if together.stderr_tail else ""
        if together.status == "timeout":
            findings.append(
                _rule("VERIFY-TIMEOUT").finding(
                    f"import {together.current}",
                    f"{who} {alone} did not finish after {after} in the same process, within "
                    f"{together.timeout_s} s{tail}",
                    "A deadlock between libraries the imports load (two OpenMP runtimes, two thread "
                    "pools): run `envcheck doctor` and import the modules in the application's order.",
                )
            )
        else:
            how = together.signal or f"exit code {together.exit_code}"
            findings.append(
                _rule("VERIFY-CRASH").finding(
                    f"import {together.current}",
                    f"{who} {alone} killed the process ({how}) after {after}{tail}",
                    "Two libraries that cannot share a process (two OpenMP runtimes: 'OMP: Error #15'): "
                    "run `envcheck doctor`, and keep one OpenMP family in the environment.",
                )
            )
    for module, error in together.failed:
        who = owners[module].who if module in owners else f"`import {module}`"
        alone = _alone(owners.get(module))
        pair = "import them in the application's order and read the error."
        elsewhere = _elsewhere(owners.get(module))
        findings.append(
            _rule("VERIFY-IMPORT").finding(
                f"import {module}",
                f"{who} {alone} raised {error} after the imports before it in one process",
                # Not run alone here: whether it fails alone too is that other check's finding.
                f"If {elsewhere} passed, two modules cannot be imported together: {pair} If it failed, fix "
                "that failure first."
                if elsewhere
                else f"Two modules that cannot be imported together: {pair}",
            )
        )
    findings += _openmp(together, owners)
    return findings


def _exit_culprit(tail: str | None, modules: Sequence[str]) -> str | None:
    """The imported module whose code the Python stack in ``tail`` (faulthandler's, most recent call
    first) runs in at a crash or hang at exit: the first frame in a file under one of ``modules``."""
    tops = {m.split(".", 1)[0]: m for m in modules}
    for path in re.findall(r'File "([^"]+)", line \d+', tail or ""):
        parts = re.split(r"[\\/]", path)
        # Below the last site folder, when there is one: a module is never named by the folders above it.
        sites = [i for i, part in enumerate(parts) if part in ("site-packages", "dist-packages")]
        start = sites[-1] + 1 if sites else 0
        for i, part in enumerate(parts[start:], start):
            stem = part.split(".", 1)[0] if i == len(parts) - 1 else part
            if stem in tops and (i < len(parts) - 1 or part.endswith((".py", ".so", ".pyd"))):
                return tops[stem]
    return None


def _elsewhere(result: ImportResult | None) -> str | None:
    """The check that imports ``result``'s module alone in another process (``alone_elsewhere``), or None."""
    prefix = "imported alone by "
    if result is None or result.status != "passed" or not (result.reason or "").startswith(prefix):
        return None
    return (result.reason or "")[len(prefix) :]


def _alone(result: ImportResult | None) -> str:
    """How the import went alone, for a finding about it among the others."""
    if result is not None and result.reason and result.status == "passed":
        return f"({result.reason}; here among the others)"
    return "passes alone but"


def _openmp(together: Together, owners: dict[str, ImportResult]) -> list[Finding]:
    """Two OpenMP runtimes in the process after the application's imports, each named with the import
    that loaded it: one per file the process mapped (the loader's list gives real paths, so one file is
    never counted twice; threadpoolctl's list, which may spell a path through a link, is not counted)."""
    by: dict[str, tuple[str, str]] = {}
    for module, paths in together.loaded:
        for path in paths:
            family = omp_family(path)
            if family and path not in by:
                by[path] = (family, module)
    if len(by) < 2:
        return []
    families = sorted({family for family, _ in by.values()})
    only_gnu = families == ["GNU"]
    parts = []
    for path, (family, module) in by.items():
        owner = owners.get(module)
        dist = f", {owner.distribution}'s" if owner is not None and owner.distribution else ""
        parts.append(f"{_base(path)} ({family}{dist}) loaded by `import {module}`")
    consequence = (
        "a module imported before torch binds its OpenMP calls to its own copy, so two worker pools run, and "
        "the idle pool's threads spin (OMP_WAIT_POLICY unset) on the cores the other pool needs: measured on "
        "2 cores with scikit-learn imported before torch, one more OpenMP thread (3 on 2 cores) and loops "
        "alternating torch ops with scikit-learn's 40-100x slower (12-32 ms an iteration against 0.2-0.4 ms "
        "with one pool). Imported after torch, whose libgomp is loaded RTLD_GLOBAL, the module's calls bind "
        "to torch's copy: one pool."
        if only_gnu
        else "mixing them initialises OpenMP twice in one process: crashes, deadlocks or 'OMP: Error #15'."
    )
    later = sorted({module for family, module in by.values() if module != "torch"})
    return [
        _rule("VERIFY-IMPORT-OPENMP").finding(
            "OpenMP (app imports)",
            f"{len(by)} OpenMP runtimes in one process after the application's imports: "
            + "; ".join(parts)
            + f": {consequence}",
            (
                f"Import torch before {', '.join(f'`{m}`' for m in later)} (one pool serves both), or set "
                "OMP_WAIT_POLICY=PASSIVE (idle OpenMP threads sleep instead of spinning)."
                if only_gnu and "torch" in {module for _, module in by.values()}
                else "Set OMP_WAIT_POLICY=PASSIVE (idle OpenMP threads sleep instead of spinning), or import "
                "the modules that bring the two copies in separate processes."
                if only_gnu
                else "Keep one OpenMP family in the process: install the packages built with the OpenMP "
                "torch uses (pip's torch brings GNU libgomp; do not mix it with Intel's libiomp5 from MKL "
                "builds), or import the module that brings the other one in a separate process. Never ship "
                "KMP_DUPLICATE_LIB_OK=TRUE."
            ),
            target=", ".join(sorted(by)),
            severity="warning" if only_gnu else None,
        )
    ]


def tally(run: AppImports) -> str:
    """One line for stderr: how the imports ended (``12 imports in 4.1 s: 11 passed, 1 error``)."""
    counts: dict[str, int] = {}
    together = run.together
    failed = dict(together.failed) if together is not None else {}
    for r in run.results:
        status: str = r.status
        if _elsewhere(r):
            # Imported alone by another check, not here: what it did is what it did among the others.
            if together is None:
                status = "imported alone elsewhere"
            elif r.module in failed:
                status = "error"
            elif together.current == r.module and together.status in ("crashed", "timeout", "error"):
                status = together.status
        if r.at_exit:
            status = f"{status} at exit"
        counts[status] = counts.get(status, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    among = sum(1 for r in run.results if r.among_others)
    if among:
        parts.append(f"{among} of them only among the others")
    if together is not None and together.at_exit:
        parts.append(f"the imports together: {together.status} at exit")
    if run.over_cap:
        parts.append(f"{len(run.over_cap)} over the cap")
    wall = f" in {run.wall_s:.1f} s" if run.wall_s is not None else ""
    line = f"{len(run.results)} imports{wall}: {', '.join(parts) or 'none'}"
    if run.plan_error is not None:
        return f"{line} (the modules could not be listed: {run.plan_error})"
    order = [r.module for r in run.results if r.status != "skipped"]
    if order:
        shown = ", ".join(order[:ORDER_SHOWN]) + (
            f" and {len(order) - ORDER_SHOWN} more" if len(order) > ORDER_SHOWN else ""
        )
        line += f"\nimported in this order: {shown}"
    return line
