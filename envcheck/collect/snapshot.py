"""``take_snapshot``: the whole environment of a target interpreter as one ``Manifest``.

Work is arranged so that everything hides behind ``import torch`` (docs/budgets.md): the runtime probe (which
imports torch) and the facts probe start together; while torch imports, envcheck reads the facts, walks
the native tree and hashes what RECORD does not cover.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path, PureWindowsPath

from envcheck import __version__
from envcheck.collect import facts
from envcheck.collect.launch import Probes, SnapshotOptions, start_probes
from envcheck.core.deadline import Deadline, DeadlineExpired
from envcheck.core.errors import ManifestError, ProbeError
from envcheck.core.redact import PathRedactor
from envcheck.inside.environment import CALLER_SHELL
from envcheck.inside.windows_facts import OPENMP_DLL
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.model import Manifest, Meta, ProbeOutcome, Runtimes, WindowsInfo
from envcheck.manifest.native import NativeSection
from envcheck.manifest.verify import VerifySection
from envcheck.native import reconcile_loaded
from envcheck.native.hashing import hash_files
from envcheck.process import awake, sessions
from envcheck.process.runner import NOTE_PREFIX, TargetRun
from envcheck.verify.checks_file import compile_checks_file, raise_load_failure
from envcheck.verify.runner import run_suite

NativeScanner = Callable[[Manifest, SnapshotOptions], NativeSection | None]
# Told the step the snapshot is at (``envcheck.commands.progress`` draws it on a terminal).
Progress = Callable[[str], None]


def _nothing(step: str) -> None:
    pass


def _caller_shell(given: str | None, python: str, env: dict[str, str]) -> list[str] | None:
    """``Manifest.env_caller``: None when the target is envcheck's own interpreter (the shell that started
    envcheck runs that environment), else the names of ``env`` that only describe the caller's shell."""
    import sys

    if given is None or python == sys.executable:
        return None
    return sorted(name for name in env if name.upper() in CALLER_SHELL)


def take_snapshot(
    options: SnapshotOptions,
    *,
    native: NativeScanner | None = None,
    probes: Probes | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """Snapshot the target interpreter. A target that crashes, hangs or cannot import torch still yields a
    manifest, with ``meta.probe`` saying what happened; so does a runtime probe result that is malformed
    (``meta.probe``: ``error``, "malformed probe result: <locations>"). Raises ``ProbeError`` only when
    the interpreter cannot run even the standard-library facts probe, or answers it with a result that
    is malformed (every location named). ``probes``: already started by ``start_probes``. ``progress`` is
    told each step as it starts.
    """
    say = progress or _nothing
    if probes is None:
        say("starting the target")
        probes = start_probes(options)
    started = probes.started
    python = probes.python
    runtime_probe = probes.runtime
    say("reading packages and facts")
    facts_run = probes.facts.wait()
    try:
        done = facts_run.data.get("done")
        if done is not True and facts_run.outcome.status != "ok":
            sessions.raise_if_interrupted()  # killed by an interrupt: that is what to report
            raise ProbeError(_facts_failure(python, facts_run))
        _refuse_old_python(python, facts_run.data.get("python_version"))
        try:
            if done is not True:  # it exited 0 claiming success, but not in the result's own terms
                raise ManifestError(facts.SOURCE, [f"done: expected true, got {done!r:.40}"])
            found = facts.static_facts(facts_run.data)
        except ManifestError as e:
            raise ProbeError(
                f"the target interpreter {python} answered with a malformed facts result: "
                + _shown(e.problems),
                tip=f"Check that {python} is a Python 3.8+ interpreter (run it with --version).",
            ) from e
    except ProbeError:
        if runtime_probe is not None:
            runtime_probe.wait()  # collected, not left running until its deadline
        raise
    owners = facts.Owners(found.packages)
    meta = Meta(
        envcheck_version=__version__,
        label=options.label,
        target=python,
        probe=ProbeOutcome(status="not-run"),
        created=facts.utc_now(),
    )
    base = dataclasses.replace(
        found.manifest(meta), env_caller=_caller_shell(options.python, python, found.env)
    )
    # The native tree is static: it is walked while the runtime probe imports torch.
    if native is not None:
        say("walking the native tree")
    # envcheck's own work ends with the targets' deadline (plus the grace to read what they left).
    own = (probes.deadline or Deadline.after(options.timeout)).for_own_work()
    native_section = native(base, dataclasses.replace(options, deadline=own)) if native is not None else None
    manifest = base.replace(native=native_section)
    if runtime_probe is not None:
        say("waiting for import torch in the target")
        run = runtime_probe.wait()
        say("reading the libraries the target loaded")
        manifest = _add_runtime(manifest, run, owners, own)
    manifest = manifest.replace(
        meta=dataclasses.replace(manifest.meta, duration_s=round(time.monotonic() - started, 3))
    )
    if options.redact_paths:
        manifest = redact_manifest_paths(manifest)
    return manifest


def _refuse_old_python(python: str, version: object) -> None:
    """Raise ``ProbeError`` for a target older than 3.8 (a malformed version is left to the decoder)."""
    if not (isinstance(version, list) and len(version) >= 2 and all(type(v) is int for v in version)):
        return
    if version[:2] < [3, 8]:
        shown = ".".join(str(v) for v in version)
        raise ProbeError(
            f"the target interpreter {python} is Python {shown}; envcheck inspects Python 3.8 and newer",
            tip="Point --python at the interpreter that runs the application (3.8+).",
        )


def _shown(problems: Sequence[str], limit: int = 5) -> str:
    more = f" (and {len(problems) - limit} more)" if len(problems) > limit else ""
    return "; ".join(problems[:limit]) + more


def _malformed(outcome: ProbeOutcome, error: ManifestError) -> ProbeOutcome:
    """The outcome of a runtime probe whose result does not decode. A crash or a timeout stays what it
    was (the result is partial anyway); a probe that claims success, or reports an exception, becomes an
    ``error`` whose exception says the result was malformed and where."""
    if outcome.status in ("crashed", "timeout"):
        return outcome
    note = "malformed probe result: " + _shown(error.problems)
    exception = f"{outcome.exception}; {note}" if outcome.exception else note
    return dataclasses.replace(outcome, status="error", exception=exception[:4000])


def _add_runtime(
    manifest: Manifest, run: TargetRun, owners: facts.Owners, deadline: Deadline | None = None
) -> Manifest:
    """The runtime probe's sections and outcome added to ``manifest``; a malformed result adds only an
    outcome that says so (the static facts stand)."""
    outcome = run.outcome
    try:
        found = facts.runtime_facts(run.data)
    except ManifestError as e:
        return manifest.replace(meta=dataclasses.replace(manifest.meta, probe=_malformed(outcome, e)))
    if outcome.status == "error" and found.traceback_tail:
        # The traceback says more than stderr; the runner's notes on what it cut stay in front of it.
        notes = [line for line in (outcome.stderr_tail or "").splitlines() if line.startswith(NOTE_PREFIX)]
        outcome = dataclasses.replace(outcome, stderr_tail="\n".join([*notes, found.traceback_tail[-4000:]]))
    torch = manifest.torch
    if found.torch_runtime is not None:
        torch = dataclasses.replace(torch, runtime=found.torch_runtime)
    runtimes = None
    if found.loaded is not None:
        paths = found.loaded
        identities = _identities([p for p in paths if owners.owner(p)[1] is None], deadline)
        runtimes = facts.runtimes(paths, found.threadpools, owners, identities)
    native = manifest.native
    if native is not None and runtimes is not None and native.skipped is None:
        # Static vs loaded: where the live process mapped something other than the tree predicts.
        native = reconcile_loaded(native, runtimes)
    windows = _windows_runtime(manifest.windows, found, runtimes)
    python = manifest.python
    if found.stdlib_errors is not None:
        python = dataclasses.replace(python, stdlib_errors=dict(sorted(found.stdlib_errors.items())))
    return manifest.replace(
        python=python,
        torch=torch,
        gpu=found.gpu,
        runtimes=runtimes,
        native=native,
        meta=dataclasses.replace(manifest.meta, probe=outcome),
        windows=windows,
    )


def _windows_runtime(
    windows: WindowsInfo | None, found: facts.RuntimeFacts, runtimes: Runtimes | None
) -> WindowsInfo | None:
    """The Windows facts with what the runtime probe learnt: the modules loaded and where the loader stopped
    after a failed ``import torch``, and the OpenMP runtimes among the loaded modules (either list)."""
    if windows is None:
        return None
    load = found.windows_load
    loaded = load.loaded if load is not None else None
    paths = loaded if loaded is not None else [lib.path for lib in runtimes.loaded] if runtimes else []
    openmp = [p for p in paths if OPENMP_DLL.match(PureWindowsPath(p).name)]
    return dataclasses.replace(
        windows,
        loaded=loaded,
        load_failure=load.load_failure if load is not None else None,
        openmp=openmp,
    )


def _identities(paths: Sequence[str], deadline: Deadline | None = None) -> dict[str, str | None]:
    """sha256 of files no RECORD vouches for (system libraries, hand-copied files), hashed in parallel.

    The paths come from the target: ``file_sha256`` reads only regular files (a "library" that is a FIFO
    would block the open, /dev/zero would never end); anything else has no identity. A target may also
    name thousands of large files: hashing stops at ``deadline``, and ``DeadlineExpired`` says how many
    were hashed (an interpreter that lied so kept ``snapshot --timeout 30`` running 126 s)."""
    digests, cut = hash_files(paths, deadline)
    if cut and deadline is not None:
        raise DeadlineExpired(
            "hashing the libraries the target loaded",
            deadline,
            f"{len(digests)} of {len(digests) + len(cut)} hashed; first not hashed: {cut[0]}",
        )
    return digests


def _facts_failure(python: str, run: TargetRun) -> str:
    o = run.outcome
    how = {
        "timeout": f"did not answer within {o.timeout_s} s",
        "crashed": f"died ({o.signal or f'exit code {o.exit_code}'})",
        "error": f"raised {o.exception}",
    }.get(o.status, o.status)
    tail = f": {o.stderr_tail.splitlines()[-1]}" if o.stderr_tail else ""
    return f"the target interpreter {python} {how} while reading its standard-library facts{tail}"


def redact_manifest_paths(manifest: Manifest) -> Manifest:
    """``--redact-paths``: the user's home and login name replaced in every string of the manifest."""
    import getpass

    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):
        user = None
    redactor = PathRedactor(str(Path.home()), user)
    return decode(Manifest, redactor.json(encode(manifest)), source="redacted manifest")


def record(
    options: SnapshotOptions,
    *,
    native: NativeScanner | None = None,
    probes: Probes | None = None,
    checks_file: Path | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """``envcheck snapshot``: ``take_snapshot`` and, unless ``options.verify`` is off, the smoke suite
    (``envcheck.verify.runner.run_suite``) side by side; the suite's outputs become the manifest's goldens.
    Raises what either raises (``ProbeError``), and ``UsageError`` (file:line) for a checks file that is
    missing, does not compile (found before the suite starts) or cannot be imported in the target.
    ``progress`` is told the snapshot's steps and the suite's checks as they start.
    """
    if not options.verify:
        manifest = take_snapshot(options, native=native, probes=probes, progress=progress)
        # A fact, not a flag: the API and every face word it alike.
        reason = "the smoke suite was not run" if options.probe else "no runtime probe: the suite was not run"
        return manifest.replace(verify=VerifySection(skipped=reason))
    if checks_file is not None:
        compile_checks_file(checks_file)
    python = probes.python if probes is not None else options.python
    with awake.Pool(1) as pool:
        suite_progress = None if progress is None else _prefixed(progress, "smoke suite: ")
        # One deadline for the command: the suite's processes end with the probes'
        # (``envcheck.core.deadline``).
        shared = probes.deadline if probes is not None else options.deadline
        suite = pool.submit(
            run_suite,
            python,
            timeout=options.timeout,
            checks_file=checks_file,
            progress=suite_progress,
            deadline=shared,
        )
        manifest = take_snapshot(options, native=native, probes=probes, progress=progress)
        if progress is not None and not suite.done():
            progress("smoke suite: recording the goldens")
        goldens = awake.result(suite)
    if checks_file is not None:
        # Goldens recorded without the user's checks would make every later verify report them missing.
        raise_load_failure(goldens, checks_file)
    if not manifest.torch.trees:  # nothing to verify: say so instead of keeping an import error as golden
        goldens = VerifySection(skipped="torch is not installed in the target")
    return manifest.replace(verify=goldens)


def _prefixed(progress: Progress, prefix: str) -> Progress:
    return lambda step: progress(prefix + step)
