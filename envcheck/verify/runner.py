"""Run the smoke suite in the target interpreter: one process per group, a fresh one after a crash.

Groups: ``main`` (every built-in check: one ``import torch`` for the whole CPU suite, docs/budgets.md),
``compile`` (``torch.compile``, opt-in, its own process) and ``custom`` (the user's checks, in their own
process beside ``main``). With ``runtime_probe`` (the gate), the ``main`` group's process first runs the
snapshot's runtime probe (``envcheck.inside.probe``), so one ``import torch`` serves both; a process that
ends inside the probe, other than in that import, gives the probe that ending and the group runs again in
a fresh process without it, as if the two had never shared one. When a group's process crashes or hangs,
the check it was running (``current`` in its result file) gets that outcome and the rest of the group runs
again in a fresh process, so one bad check never hides the others. All of it runs under one ``Deadline``
(``--timeout``): a rerun gets only the time that is left, and once none is left the checks not run yet are
``timeout`` results, not new processes.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envcheck.core.errors import ManifestError, ProbeError, UsageError
from envcheck.inside.copying import PACKAGE as TARGET_PACKAGE
from envcheck.manifest.codec import decode
from envcheck.manifest.model import ProbeOutcome
from envcheck.manifest.verify import CheckResult, VerifySection
from envcheck.process import awake, sessions
from envcheck.process.runner import NOTE_PREFIX, Deadline, TargetRun, read_result, run_target

if TYPE_CHECKING:
    from envcheck.verify.imports import Beside

# The smoke-suite harness's entry module (envcheck/inside/suite.py) in the copy of envcheck.inside.
SUITE_MODULE = f"{TARGET_PACKAGE}.suite"
COMPILE_OPT_IN = "opt-in: pass --compile (torch.compile takes 15-35 s on 2 cores, beyond the suite's budget)"
# A check that keeps crashing the process cannot loop forever: each rerun excludes at least one check.
_MAX_RERUNS = 64

Progress = Callable[[str], None]


class RuntimeProbe:
    """The snapshot's runtime probe, run in the smoke suite's ``main`` process: ``run_suite`` hands over
    its result and how it ended (``deliver``), ``take_snapshot`` waits for it (``wait``, as for a
    ``RunningTarget``). ``wait`` returns once the suite's first ``main`` process has ended, or raises what
    kept the suite from running it."""

    def __init__(self) -> None:
        self._ended: Future[TargetRun] = Future()
        self._lock = threading.Lock()

    def wait(self) -> TargetRun:
        return awake.result(self._ended)

    def kill(self) -> None:
        """Nothing to kill: the suite's process is the runner's, under the same deadline."""

    def deliver(self, run: TargetRun) -> None:
        """The first of ``deliver`` and ``fail`` counts; a later one is ignored."""
        with self._lock:
            if not self._ended.done():
                self._ended.set_result(run)

    def fail(self, error: BaseException) -> None:
        """The suite never ran the probe (``error`` says why): ``wait`` raises it, never blocks."""
        with self._lock:
            if not self._ended.done():
                self._ended.set_exception(error)

    def delivered(self) -> bool:
        return self._ended.done()


def run_suite(
    python: str | None,
    *,
    timeout: float,
    checks_file: Path | None = None,
    progress: Progress | None = None,
    compile: bool = False,
    entry_points: bool = True,
    env: dict[str, str] | None = None,
    deadline: Deadline | None = None,
    runtime_probe: RuntimeProbe | None = None,
    together: Beside | None = None,
) -> VerifySection:
    """Run the suite in ``python`` (default: this interpreter) and return its results.

    ``timeout`` is a hard deadline for all of it, every group and every rerun after a crash or hang;
    ``deadline``, when given, is one shared with the caller's other target work (the earlier of the two
    counts). Checks the deadline left no time for are ``timeout`` results. ``checks_file`` adds the user's
    ``check_*`` functions; ``entry_points`` adds those of the ``envcheck.checks`` entry-point group.
    ``compile`` opts into the ``torch.compile`` check. ``runtime_probe``: run the snapshot's runtime probe
    first in the ``main`` group's process and deliver it there (always delivered or failed on return).
    ``together``: the ``main`` group's first process may fork the application's imports together after its
    ``import torch`` (``envcheck.verify.imports.Beside``; always ended on return).
    Raises ``UsageError`` if ``checks_file`` does not exist and ``ProbeError`` if the interpreter cannot be
    started; everything else is a result.
    """
    try:
        return _run_suite(
            python,
            timeout,
            checks_file,
            progress,
            compile,
            entry_points,
            env,
            deadline,
            runtime_probe,
            together,
        )
    except BaseException as e:
        if runtime_probe is not None:
            runtime_probe.fail(e)
        raise
    finally:
        if runtime_probe is not None:
            runtime_probe.fail(ProbeError("the smoke suite ended without running the runtime probe"))
        if together is not None:
            together.ended()


def _run_suite(
    python: str | None,
    timeout: float,
    checks_file: Path | None,
    progress: Progress | None,
    compile: bool,
    entry_points: bool,
    env: dict[str, str] | None,
    deadline: Deadline | None,
    runtime_probe: RuntimeProbe | None,
    together: Beside | None = None,
) -> VerifySection:
    started = time.monotonic()
    if checks_file is not None and not checks_file.is_file():
        raise UsageError(
            f"checks file not found: {checks_file}", tip="Pass a Python file with check_* functions."
        )
    base: dict[str, Any] = {"compile": compile, "entry_points": entry_points}
    if checks_file is not None:
        base["checks_file"] = str(checks_file.resolve())
    groups = ["main", "custom"] + (["compile"] if compile else [])
    ends = Deadline.after(timeout) if deadline is None else deadline.earliest(Deadline.after(timeout))
    # Removed by an interrupt too, while the groups' threads still wait on their targets.
    with sessions.temporary_folder("envcheck-verify-") as tmp, _Poller(progress) as poller:
        jobs = {}
        with awake.Pool(len(groups)) as pool:
            for group in groups:
                progress_file = Path(tmp) / f"{group}.progress"
                progress_file.touch()
                poller.watch(progress_file)
                config = {**base, "group": group, "progress": str(progress_file)}
                probe = runtime_probe if group == "main" else None
                if probe is not None:
                    config["probe_out"] = str(Path(tmp) / "runtime-probe.json")
                beside = together if group == "main" else None
                if beside is not None:
                    config["together"] = beside.config()
                jobs[group] = pool.submit(_run_group, python, config, ends, env, probe, beside)
            by_group = {group: awake.result(job) for group, job in jobs.items()}
    results = by_group["main"][0]
    if not compile:
        results.append(
            CheckResult(
                name="torch_compile", family="runtime", device="cpu", status="skipped", reason=COMPILE_OPT_IN
            )
        )
    else:
        results.extend(by_group["compile"][0])
    results.extend(by_group["custom"][0])
    options: dict[str, Any] = {"compile": compile}
    if checks_file is not None:
        options["checks_file"] = checks_file.name
    return VerifySection(
        torch_version=by_group["main"][1],
        results=results,
        options=options,
        wall_s=round(time.monotonic() - started, 3),
    )


def _run_group(
    python: str | None,
    config: dict[str, Any],
    deadline: Deadline,
    env: dict[str, str] | None,
    probe: RuntimeProbe | None = None,
    together: Beside | None = None,
) -> tuple[list[CheckResult], str | None]:
    """Run one group to the end or to the deadline, rerunning after each crash or hang (each rerun with
    the time left); results in plan order, a ``timeout`` result for each check the deadline left out.
    ``probe``: the first process runs the runtime probe first (``config["probe_out"]``) and delivers it.
    ``together``: only the first process may fork the imports together (``config["together"]``)."""
    done: dict[str, CheckResult] = {}
    plan: list[tuple[str, str]] = []
    torch_version: str | None = None
    exclude: list[str] = []
    for _ in range(_MAX_RERUNS):
        if deadline.expired():
            break
        run = run_target(
            python,
            module=SUITE_MODULE,
            args=[json.dumps({**config, "exclude": exclude})],
            deadline=deadline,
            env=env,
        )
        if together is not None and config.pop("together", None) is not None:
            together.ended()
        if probe is not None and "probe_out" in config:
            probe_out = Path(config.pop("probe_out"))
            ended = _probe_run(probe_out, run)
            probe.deliver(ended)
            if _inside_probe(ended) and ended.data.get("stage") != "import torch":
                # It ended inside the probe, not in the import the two share: the group starts over in a
                # fresh process of its own, as it runs without the probe.
                continue
        data = run.data
        for item in _plan(data):
            if item not in plan:
                plan.append(item)
        for entry in data.get("results") or []:
            result = _result(entry)
            done[result.name] = result
            if result.name == "import_torch":
                version = result.info.get("version")
                torch_version = version if isinstance(version, str) else torch_version
        if run.outcome.status == "ok" or data.get("done") is True:
            break  # done: its results are final, whatever ended the process after them
        current = data.get("current") if isinstance(data.get("current"), str) else None
        names = [name for name, _ in plan]
        if current is None or current not in names:
            # It died outside any check (importing torch, loading the checks, finding the CUDA devices):
            # a rerun would die the same way, and what ran before it is already recorded.
            name = current or f"{config['group']}/start"
            done[name] = _ended(name, "cpu", run, data)
            if name not in names:
                plan.append((name, "cpu"))
            break
        done[current] = _ended(current, dict(plan)[current], run, data)
        # The rest of the group (including families not loaded yet) runs in a fresh process.
        exclude = sorted(done)
    if probe is not None and not probe.delivered():  # the deadline left no time to start the process
        probe.deliver(TargetRun(data={}, outcome=_timed_out(deadline)))
    if deadline.expired():
        # No time was left to start (or finish) these: each is a timeout, not a silent gap.
        if not plan:
            plan.append((f"{config['group']}/start", "cpu"))
        for name, device in plan:
            if name not in done:
                done[name] = CheckResult(
                    name=name,
                    family=_family(name),
                    device=device,
                    status="timeout",
                    timeout_s=deadline.seconds,
                )
    ordered = [done[name] for name, _ in plan if name in done]
    ordered += [r for name, r in done.items() if name not in {n for n, _ in plan}]
    return ordered, torch_version


def _probe_run(path: Path, run: TargetRun) -> TargetRun:
    """The runtime probe's result (read as the runner reads a target's) and how it ended: ``ok`` once it
    wrote ``done``, ``error`` when it raised (the process went on with the suite), else how the shared
    process ended (a crash or the deadline inside the probe), at the probe's own stage. A probe that ended
    and left the process to the suite has no duration of its own: the process's would be the suite's."""
    data, notes = read_result(path)
    outcome = run.outcome
    tail = outcome.stderr_tail
    if notes:
        tail = "\n".join([*(f"{NOTE_PREFIX}{note}]" for note in notes), *([tail] if tail else [])])
    stage = data.get("stage") if isinstance(data.get("stage"), str) else None
    if data.get("done") is True:
        return TargetRun(data=data, outcome=ProbeOutcome(status="ok"))
    exception = data.get("exception")
    if isinstance(exception, str):
        ended = ProbeOutcome(status="error", stage=stage, exception=exception, stderr_tail=tail)
        return TargetRun(data=data, outcome=ended)
    if outcome.status == "ok":  # the suite finished although the probe never wrote its end: malformed
        outcome = ProbeOutcome(status="error", exception="the runtime probe wrote no result", exit_code=0)
    return TargetRun(data=data, outcome=dataclasses.replace(outcome, stage=stage, stderr_tail=tail))


def _inside_probe(run: TargetRun) -> bool:
    """Whether the shared process ended inside the runtime probe (it neither finished nor raised)."""
    return run.data.get("done") is not True and not isinstance(run.data.get("exception"), str)


def _timed_out(deadline: Deadline) -> ProbeOutcome:
    return ProbeOutcome(status="timeout", timeout_s=deadline.seconds)


def _plan(data: dict[str, Any]) -> list[tuple[str, str]]:
    planned = data.get("planned")
    if not isinstance(planned, list):
        return []
    out = []
    for item in planned:
        if isinstance(item, list) and len(item) == 2 and all(isinstance(x, str) for x in item):
            out.append((item[0], item[1]))
    return out


def _result(entry: object) -> CheckResult:
    """Decode one result written by the target; a malformed one becomes an ``error`` result."""
    raw_name = entry.get("name") if isinstance(entry, dict) else None
    name = raw_name if isinstance(raw_name, str) else "?"
    if isinstance(entry, dict):
        fields = set(CheckResult.__dataclass_fields__)
        clean = {k: v for k, v in entry.items() if k in fields}
        try:
            return decode(CheckResult, clean, source=f"check {name}")
        except ManifestError as e:
            return CheckResult(name=name, family="custom", device="cpu", status="error", error=str(e))
    return CheckResult(name=name, family="custom", device="cpu", status="error", error="malformed result")


def _family(name: str) -> str:
    """The family of a check known only by name (it never reported its own)."""
    head = name.split("/", maxsplit=1)[0].split(":", maxsplit=1)[0]
    return "runtime" if name == "import_torch" else (head if head in ("custom", "cuda") else "suite")


def _ended(name: str, device: str, run: TargetRun, data: dict[str, Any]) -> CheckResult:
    """The result of the check that was running when its process ended abnormally."""
    outcome: ProbeOutcome = run.outcome
    family = _family(name)
    error = None
    for key in ("import_error", "load_error"):
        if isinstance(data.get(key), str):
            error = data[key]
    if error is not None:
        return CheckResult(name=name, family=family, device=device, status="error", error=error)
    if outcome.status == "timeout":
        return CheckResult(
            name=name,
            family=family,
            device=device,
            status="timeout",
            timeout_s=outcome.timeout_s,
            stderr_tail=outcome.stderr_tail,
        )
    return CheckResult(
        name=name,
        family=family,
        device=device,
        status="error" if outcome.status == "error" else "crashed",
        error=outcome.exception,
        signal=outcome.signal,
        exit_code=outcome.exit_code,
        stderr_tail=outcome.stderr_tail,
    )


class _Poller:
    """Reads the progress files the target appends to (``name<TAB>device<TAB>i/n``), reports each new line."""

    def __init__(self, progress: Progress | None) -> None:
        self._progress = progress
        self._files: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _Poller:
        if self._progress is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        awake.join(self._thread)

    def watch(self, path: Path) -> None:
        self._files[path] = 0

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            self._poll()
        self._poll()

    def _poll(self) -> None:
        assert self._progress is not None
        for path, offset in list(self._files.items()):
            try:
                with path.open("rb") as f:
                    f.seek(offset)
                    chunk = f.read()
            except OSError:
                continue
            complete = chunk[: chunk.rfind(b"\n") + 1]
            self._files[path] = offset + len(complete)
            for line in complete.decode("utf-8", "replace").splitlines():
                name, device, count = ([*line.split("\t"), "", ""])[:3]
                self._progress(
                    f"[{count}] {name} on {device or 'cpu'}" if count else f"{name} on {device or 'cpu'}"
                )
