"""The fleet diff: one base against many manifests (``envcheck diff BASE fleet/``), in bounded memory.

A fleet of inference machines sends its manifests to one place, most of them the same environment recorded
at another time on another host. The fleet diff reads each manifest once, cheaply, to find which
environment it is, and decodes and diffs each distinct environment once:

1. *Scan* (every file, in parallel): read it (regular files only, capped, ``envcheck.core.files``), parse the
   JSON, keep its label and the **fingerprint** of its non-volatile content, drop the rest.
2. *Diff* (one file per distinct fingerprint, in parallel): decode it into a ``Manifest``, run the
   difference rules against the base and the single-environment rules on it, keep the findings, drop the
   manifest.

Memory is bounded whatever the number of manifests: no decoded manifest outlives its diff, each worker
holds one parsed document at a time, and what is kept per file is its name and fingerprint. The findings of
one environment exist once, shared by every machine that has it (``Environment.findings``), and all the
environments together hold at most ``MAX_FLEET_FINDINGS`` (each costs a few KB until the report is
written: 100 environments of 2,000 findings each took a fleet diff to 1.07 GB).

Work runs in a pool of forked processes, one per usable CPU (the affinity mask, not the host's count):
forked workers inherit the decoded base instead of decoding it again. With one CPU, one file, or no
``fork`` (Windows), it runs inline.

A manifest that cannot be read (not a regular file, a link loop, too big, not JSON, a newer schema,
invalid) is not diffed: it is listed in ``Fleet.unreadable`` with the one-line reason, and the others are
diffed as usual (the command names each such file on stderr and exits 2: an environment nobody could read
cannot pass a gate).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import signal
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envcheck.core.deadline import DeadlineExpired
from envcheck.core.errors import EnvcheckError, ManifestError
from envcheck.core.files import MAX_MANIFEST_BYTES
from envcheck.core.findings import Finding
from envcheck.diff import engine
from envcheck.manifest import codec
from envcheck.manifest.io import check_counts, check_values, loads, read_text
from envcheck.manifest.model import SCHEMA_VERSION, Manifest

if TYPE_CHECKING:
    from envcheck.core.deadline import Deadline


def _volatile_paths() -> tuple[str, ...]:
    return (*codec.volatile_paths(Manifest), "meta.label")


def volatile_fields() -> tuple[str, ...]:
    """The fields the fingerprint leaves out, as dotted paths (``[]``: every item of an array).

    They are the schema's volatile fields (``x-volatile``: what changes between two snapshots of one
    environment: ``meta.created``, ``meta.duration_s``, ``meta.probe.duration_s``, ``platform.hostname``,
    ``verify.wall_s``, ``verify.results[].duration_s``, ``verify.results[].metrics``) and ``meta.label``,
    the machine's name. Any other field, present, absent or changed, changes the fingerprint.
    """
    return _volatile_paths()


def fingerprint(document: Mapping[str, Any]) -> str:
    """The SHA-256 of the canonical JSON (keys sorted, no spaces) of a parsed manifest document without
    its volatile fields (``volatile_fields``): two manifests of one environment, recorded at other times
    on other hosts under other labels, have the same fingerprint; any other difference gives another."""
    stripped = document
    for path in _volatile_paths():
        stripped = _without(stripped, path.replace("[]", ".[]").split("."))
    text = json.dumps(stripped, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _without(value: Any, path: Sequence[str]) -> Any:
    """``value`` less the field at ``path``, copying only the containers on the way (the document is never
    changed). A path that does not fit the document (a missing key, another type) removes nothing."""
    head, rest = path[0], path[1:]
    if head == "[]":
        if not isinstance(value, list):
            return value
        return [_without(item, rest) for item in value]
    if not isinstance(value, dict) or head not in value:
        return value
    if not rest:
        return {k: v for k, v in value.items() if k != head}
    return {**value, head: _without(value[head], rest)}


@dataclass(frozen=True, kw_only=True, slots=True)
class Environment:
    """One distinct environment of a fleet: the names of the machines that have it (each its label, else
    its file path), in the order given, and its findings (difference rules against the base, then its own
    single-environment rules), unlinked and before any policy. ``identical_to_base``: its fingerprint is
    the base's."""

    fingerprint: str
    members: tuple[str, ...]
    findings: tuple[Finding, ...]
    identical_to_base: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Fleet:
    """A fleet diff's result: the distinct environments (most machines first) and the files that could not
    be read, each with the ``ManifestError`` that says why."""

    environments: tuple[Environment, ...]
    unreadable: tuple[ManifestError, ...] = ()

    @property
    def machines(self) -> int:
        return sum(len(e.members) for e in self.environments)


@dataclass(frozen=True, slots=True)
class _Problems:
    """A ``ManifestError`` as it crosses from a worker (an exception pickles by its message alone)."""

    source: str
    problems: tuple[str, ...]
    tip: str | None

    @classmethod
    def of(cls, error: ManifestError) -> _Problems:
        return cls(error.source, error.problems, error.tip)

    def error(self, source: str | None = None) -> ManifestError:
        return ManifestError(source or self.source, self.problems, tip=self.tip)


@dataclass(frozen=True, slots=True)
class _Scanned:
    path: str
    label: str | None
    fingerprint: str | None
    error: _Problems | None


def read_document(path: str) -> dict[str, Any]:
    """A manifest file parsed as JSON, checked as far as the fingerprint needs (an object of a schema this
    envcheck reads), not decoded. Raises ``ManifestError`` with the message ``envcheck.manifest.io.load``
    gives for the same file."""
    try:  # a fleet may hold several oversized files: refuse them before reading 32 MiB of each
        size = Path(path).stat().st_size
    except OSError:
        size = 0  # the reader below says why
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(path, [f"larger than {MAX_MANIFEST_BYTES} bytes"])  # as read_text says it
    text = read_text(path)
    data: Any = None
    if len(text) <= MAX_MANIFEST_BYTES:  # a longer text is refused by loads below, with its size
        check_values(text, path)
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):  # the checking reader below names the problem
            data = None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= SCHEMA_VERSION:
        loads(text, source=path)  # raises the located error; a document it accepts is decoded below anyway
    if not isinstance(data, dict):
        raise ManifestError(path, ["<top>: expected a JSON object, the manifest"])
    check_counts(data, path)
    return data


def _label(document: Mapping[str, Any]) -> str | None:
    meta = document.get("meta")
    label = meta.get("label") if isinstance(meta, dict) else None
    return label if isinstance(label, str) and label else None


def _scan(path: str) -> _Scanned:
    """Step 1 for one file: its label and fingerprint, or why it cannot be read."""
    try:
        document = read_document(path)
    except ManifestError as e:
        return _Scanned(path, None, None, _Problems.of(e))
    return _Scanned(path, _label(document), fingerprint(document), None)


# The findings a fleet report may hold, all environments together (docs/guarantees.md): past it the
# command stops with one line naming it. A diff of one manifest at every item limit gives ~20,000.
MAX_FLEET_FINDINGS = 20_000
# The base, set before the pool forks so that every worker inherits it decoded.
_BASE: Manifest | None = None


def diff_one(base: Manifest, target: Manifest) -> tuple[Finding, ...]:
    """One environment's findings: the difference rules against ``base``, then its own single rules."""
    return tuple(engine.diff_and_doctor(base, target))


def _diff_file(job: tuple[str, str]) -> tuple[Finding, ...] | _Problems:
    """Step 2 for one distinct environment: decode the file (whose fingerprint must still be ``expected``)
    and diff it against the inherited base; the manifest is dropped on return."""
    path, expected = job
    assert _BASE is not None
    try:
        document = read_document(path)
        if fingerprint(document) != expected:
            raise ManifestError(path, ["changed while the fleet was being read"])
        enabled = gc.isenabled()
        gc.disable()  # as envcheck.manifest.io.loads: the decoded objects all live until the diff ends
        try:
            target = codec.decode(Manifest, document, source=path)
        finally:
            if enabled:
                gc.enable()
    except ManifestError as e:
        return _Problems.of(e)
    del document
    return diff_one(_BASE, target)


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask where the OS has one, else the host's count."""
    if hasattr(os, "process_cpu_count"):  # Python 3.13
        return max(1, os.process_cpu_count() or 1)
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _quiet_worker() -> None:
    # Ctrl-C reaches the whole process group: the parent alone handles it (and shuts the pool down), the
    # workers would otherwise each print a KeyboardInterrupt traceback. The pool ends a worker with SIGTERM:
    # the handler the command installed for its own cleanup is not the worker's.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


class _Runner:
    """Maps a function over items inline or in a pool of forked workers, results in order."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Any = None

    def __enter__(self) -> _Runner:
        import multiprocessing

        if self.jobs > 1 and "fork" in multiprocessing.get_all_start_methods():  # not on Windows
            from concurrent.futures import ProcessPoolExecutor

            self._pool = ProcessPoolExecutor(
                max_workers=self.jobs,
                mp_context=multiprocessing.get_context("fork"),
                initializer=_quiet_worker,
            )
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if self._pool is None:
            return
        # Stopped or done, what was not started is cancelled; what a worker has started (one item each, see
        # ``map``) ends on its own. Workers are never killed: one killed while writing a large result leaves
        # a partial message in the result pipe, and the executor's thread then waits for its end forever
        # (seen: a fleet diff at --timeout 1 hung until killed).
        self._pool.shutdown(wait=True, cancel_futures=True)

    def map(
        self, fn: Callable[[Any], Any], items: Sequence[Any], deadline: Deadline | None = None
    ) -> Iterator[Any]:
        """``fn`` over ``items``, in order; with ``deadline``, waiting for a result past it raises
        ``TimeoutError``."""
        if self._pool is None or len(items) <= 1:
            return map(fn, items)
        # Chunks amortise the round trips; a few per worker keep the load balanced. Under a deadline a
        # worker takes one item at a time, so that stopping waits for one item each, not for a chunk.
        chunk = 1 if deadline is not None else max(1, min(64, len(items) // (self.jobs * 8)))
        timeout = deadline.remaining() if deadline is not None else None
        return iter(self._pool.map(fn, items, chunksize=chunk, timeout=timeout))


def diff_files(
    base: Manifest,
    base_fingerprint: str,
    paths: Sequence[str],
    *,
    jobs: int | None = None,
    deadline: Deadline | None = None,
) -> Fleet:
    """Diff every manifest file in ``paths`` against ``base`` (whose fingerprint is ``base_fingerprint``),
    each distinct environment once, on ``jobs`` processes (default: every usable CPU). Never raises for a
    bad file: it goes to ``Fleet.unreadable``. ``paths`` are taken once each, in order. Raises
    ``EnvcheckError`` when a worker process is killed, and ``DeadlineExpired`` (naming how many files were
    read and environments diffed) once ``deadline`` passes: the workers still at it are cancelled."""
    global _BASE  # noqa: PLW0603 - the workers inherit it through fork, not through a pickle

    unique = list(dict.fromkeys(paths))
    workers = max(1, min(jobs or usable_cpus(), len(unique)))
    by_fingerprint: dict[str, list[tuple[str, str | None]]] = {}
    labels: Counter[str] = Counter()
    unreadable: list[ManifestError] = []
    results: dict[str, tuple[Finding, ...] | _Problems] = {}
    held = 0  # findings kept, all environments together
    read = 0  # manifests read
    _BASE = base
    from concurrent.futures.process import BrokenProcessPool

    try:
        with _Runner(workers) as runner:
            for scanned in runner.map(_scan, unique, deadline):
                if deadline is not None:
                    deadline.check(_STEP, _done(read, len(unique), len(results)))
                read += 1
                if scanned.error is not None:
                    unreadable.append(scanned.error.error())
                    continue
                assert scanned.fingerprint is not None
                by_fingerprint.setdefault(scanned.fingerprint, []).append((scanned.path, scanned.label))
                if scanned.label:
                    labels[scanned.label] += 1
            jobs_ = [(members[0][0], fp) for fp, members in by_fingerprint.items() if fp != base_fingerprint]
            for (_, fp), result in zip(jobs_, runner.map(_diff_file, jobs_, deadline), strict=True):
                if deadline is not None:
                    deadline.check(_STEP, _done(read, len(unique), len(results)))
                results[fp] = result
                held += len(result) if isinstance(result, tuple) else 0
                if held > MAX_FLEET_FINDINGS:
                    raise EnvcheckError(
                        f"the fleet's environments hold more than the {MAX_FLEET_FINDINGS} findings one "
                        f"report holds ({len(results)} of {len(jobs_)} environments diffed): not reported",
                        tip="Diff the environments with the most findings alone first "
                        "(`envcheck diff BASE ONE.json`), or fewer manifests at a time.",
                    )
    except TimeoutError as e:  # a worker's result did not come by the deadline
        assert deadline is not None
        raise DeadlineExpired(_STEP, deadline, _done(read, len(unique), len(results))) from e
    except BrokenProcessPool as e:  # a worker was killed (the OOM killer, a signal): no result to report
        raise EnvcheckError(
            f"a worker of the fleet diff ended abruptly ({e})", tip="Run again; check the machine's memory."
        ) from e
    finally:
        _BASE = None
    environments: list[Environment] = []
    for fp, members in by_fingerprint.items():
        names = tuple(label if label and labels[label] == 1 else path for path, label in members)
        if fp == base_fingerprint:
            found: tuple[Finding, ...] = _identical(base)
        else:
            result = results[fp]
            if isinstance(result, _Problems):  # every member is the same bad document
                unreadable += [result.error(path) for path, _ in members]
                continue
            found = result
        same = fp == base_fingerprint
        environments.append(
            Environment(fingerprint=fp, members=names, findings=found, identical_to_base=same)
        )
    position = {path: i for i, path in enumerate(unique)}
    unreadable.sort(key=lambda e: position.get(e.source, 0))
    return Fleet(environments=_ordered(environments), unreadable=tuple(unreadable))


_STEP = "reading and diffing the fleet"


def _done(read: int, files: int, diffed: int) -> str:
    return f"{read} of {files} manifests read, {diffed} environments diffed"


def _identical(base: Manifest) -> tuple[Finding, ...]:
    """An environment identical to the base differs from it in nothing: its findings are the base's own
    single-environment findings."""
    return tuple(engine.beside_a_base(engine.doctor(base)))


def diff_manifests(base: Manifest, targets: Iterable[tuple[str, Manifest]]) -> Fleet:
    """``diff_files`` for manifests already in memory (a library caller's), each distinct one diffed once,
    inline. Fingerprints are taken of the encoded manifests, the base's too."""
    base_fp = fingerprint(codec.encode(base))
    groups: dict[str, list[tuple[str, Manifest]]] = {}
    for name, manifest in targets:
        groups.setdefault(fingerprint(codec.encode(manifest)), []).append((name, manifest))
    environments = [
        Environment(
            fingerprint=fp,
            members=tuple(name for name, _ in members),
            findings=_identical(base) if fp == base_fp else diff_one(base, members[0][1]),
            identical_to_base=fp == base_fp,
        )
        for fp, members in groups.items()
    ]
    return Fleet(environments=_ordered(environments))


def _ordered(environments: Sequence[Environment]) -> tuple[Environment, ...]:
    """The environment identical to the base first, then the others, most machines first, then by their
    first member's name (the same input, the same order)."""
    return tuple(sorted(environments, key=lambda e: (not e.identical_to_base, -len(e.members), e.members[0])))


def base_document(path: str) -> tuple[Manifest, str]:
    """The base manifest decoded, and its fingerprint. Raises ``ManifestError``."""
    document = read_document(path)
    return codec.decode(Manifest, document, source=path), fingerprint(document)
