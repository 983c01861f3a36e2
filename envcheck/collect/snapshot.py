"""``take_snapshot``: the whole environment of a target interpreter as one ``Manifest``.

Work is arranged so that everything hides behind ``import torch`` (DESIGN §6): the runtime probe (which
imports torch) and the facts probe start together; while torch imports, envcheck reads the facts, walks
the native tree and hashes what RECORD does not cover.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from envcheck import __version__
from envcheck.collect import facts
from envcheck.collect.launch import Probes, SnapshotOptions, start_probes
from envcheck.errors import ProbeError
from envcheck.manifest.model import SCHEMA_VERSION, Manifest, Meta, ProbeOutcome
from envcheck.manifest.native import NativeSection
from envcheck.probe.runner import TargetRun

NativeScanner = Callable[[Manifest, SnapshotOptions], NativeSection | None]


def take_snapshot(
    options: SnapshotOptions, *, native: NativeScanner | None = None, probes: Probes | None = None
) -> Manifest:
    """Snapshot the target interpreter. A target that crashes, hangs or cannot import torch still yields a
    manifest, with ``meta.probe`` saying what happened. Raises ``ProbeError`` only when the interpreter
    cannot run even the standard-library facts probe. ``probes``: already started by ``start_probes``.
    """
    probes = probes or start_probes(options)
    started = probes.started
    python = probes.python
    runtime_probe = probes.runtime
    facts_run = probes.facts.wait()
    if not facts_run.data.get("done"):
        if runtime_probe is not None:
            runtime_probe.wait()
        raise ProbeError(_facts_failure(python, facts_run))
    data = facts_run.data
    version = data.get("python_version")
    if isinstance(version, list) and version[:2] < [3, 8]:
        if runtime_probe is not None:
            runtime_probe.wait()
        shown = ".".join(str(v) for v in version)
        raise ProbeError(
            f"the target interpreter {python} is Python {shown}; envcheck inspects Python 3.8 and newer",
            tip="Point --python at the interpreter that runs the application (3.8+).",
        )
    packages = facts.distributions(data.get("packages") or [])
    owners = facts.Owners(packages)
    base = Manifest(
        schema_version=SCHEMA_VERSION,
        meta=Meta(
            envcheck_version=__version__,
            label=options.label,
            target=python,
            probe=ProbeOutcome(status="not-run"),
            created=_now(),
        ),
        platform=facts.platform_info(data["platform"]),
        python=facts.python_info(data["python"]),
        packages=packages,
        torch=facts.torch_info(data.get("torch") or {}, None),
        gpu=None,
        runtimes=None,
        env=dict(sorted((data.get("env") or {}).items())),
    )
    # The native tree is static: it is walked while the runtime probe imports torch.
    native_section = native(base, options) if native is not None else None
    manifest = base.replace(native=native_section)
    if runtime_probe is not None:
        manifest = _add_runtime(manifest, runtime_probe.wait(), owners)
    manifest = manifest.replace(
        meta=dataclasses.replace(manifest.meta, duration_s=round(time.monotonic() - started, 3))
    )
    if options.redact_paths:
        manifest = redact_manifest_paths(manifest)
    return manifest


def _add_runtime(manifest: Manifest, run: TargetRun, owners: facts.Owners) -> Manifest:
    data = run.data
    outcome = run.outcome
    if outcome.status == "error" and data.get("traceback_tail"):
        outcome = dataclasses.replace(outcome, stderr_tail=str(data["traceback_tail"])[-4000:])
    gpu = facts.gpu_driver(data["gpu"]) if isinstance(data.get("gpu"), dict) else None
    torch = manifest.torch
    if isinstance(data.get("torch_runtime"), dict):
        torch = dataclasses.replace(torch, runtime=facts.torch_runtime(data["torch_runtime"]))
    runtimes = None
    loaded = data.get("loaded")
    if isinstance(loaded, list):
        paths = [p for p in loaded if isinstance(p, str)]
        identities = _identities([p for p in paths if owners.owner(p)[1] is None])
        pools = data.get("threadpools") if isinstance(data.get("threadpools"), list) else None
        runtimes = facts.runtimes(paths, pools, owners, identities)
    native = manifest.native
    if native is not None and runtimes is not None and native.skipped is None:
        # Static vs loaded: where the live process mapped something other than the tree predicts.
        from envcheck.native import reconcile_loaded

        native = reconcile_loaded(native, runtimes)
    return manifest.replace(
        torch=torch,
        gpu=gpu,
        runtimes=runtimes,
        native=native,
        meta=dataclasses.replace(manifest.meta, probe=outcome),
    )


def _identities(paths: Sequence[str]) -> dict[str, str | None]:
    """sha256 of files no RECORD vouches for (system libraries, hand-copied files), hashed in parallel."""
    from envcheck.native.hashing import file_sha256

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(paths, pool.map(file_sha256, paths), strict=True))


def _facts_failure(python: str, run: TargetRun) -> str:
    o = run.outcome
    how = {
        "timeout": f"did not answer within {o.timeout_s} s",
        "crashed": f"died ({o.signal or f'exit code {o.exit_code}'})",
        "error": f"raised {o.exception}",
    }.get(o.status, o.status)
    tail = f": {o.stderr_tail.splitlines()[-1]}" if o.stderr_tail else ""
    return f"the target interpreter {python} {how} while reading its standard-library facts{tail}"


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


def redact_manifest_paths(manifest: Manifest) -> Manifest:
    """``--redact-paths``: the user's home and login name replaced in every string of the manifest."""
    import getpass

    from envcheck.manifest.codec import decode, encode
    from envcheck.redact import PathRedactor

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
) -> Manifest:
    """``envcheck snapshot``: ``take_snapshot`` and, unless ``options.verify`` is off, the smoke suite
    (``envcheck.verify.run_suite``) side by side; the suite's outputs become the manifest's goldens.
    Raises what either raises (``ProbeError``, ``UsageError`` for a missing checks file).
    """
    from envcheck.manifest.verify import VerifySection

    if not options.verify:
        manifest = take_snapshot(options, native=native, probes=probes)
        return manifest.replace(verify=VerifySection(skipped="--no-verify"))
    from envcheck.verify import run_suite

    python = probes.python if probes is not None else options.python
    with ThreadPoolExecutor(1) as pool:
        suite = pool.submit(run_suite, python, timeout=options.timeout, checks_file=checks_file)
        manifest = take_snapshot(options, native=native, probes=probes)
        goldens = suite.result()
    if not manifest.torch.trees:  # nothing to verify: say so instead of keeping an import error as golden
        goldens = VerifySection(skipped="torch is not installed in the target")
    return manifest.replace(verify=goldens)
