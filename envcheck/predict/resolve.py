"""Resolution for another platform with pip's own resolver, in report mode, in a subprocess.

The source manifest's importable distributions become pip's input: the roots of its requirement graph as
exact pins, every other distribution as a constraint (so markers drop what the target does not need:
torch's ``nvidia-*`` requirements are Linux-only). A distribution installed from a local path, a VCS or
an editable checkout is left out (no index serves it). A pin no index has a wheel of for the target is
dropped and the rest resolved again, so one failing root never hides another; what exists instead comes
from the indexes' own answer (``pip index versions`` for the target, and for a few common platforms).
"""

# Every subprocess here is pip, run by envcheck's own interpreter with an argument list (no shell).

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.core.deadline import Deadline, DeadlineExpired
from envcheck.core.errors import UsageError
from envcheck.manifest.model import LeftOut, Unavailable
from envcheck.manifest.query import canon, index, parse_version
from envcheck.manifest.requirements import graph
from envcheck.predict import uv as uv_tools
from envcheck.predict.target import PredictTarget
from envcheck.process import awake, sessions

if TYPE_CHECKING:
    from envcheck.manifest.model import Distribution, Manifest

# The most of one pip run's report envcheck reads back.
MAX_REPORT_BYTES = 64 * 1024**2
# Versions named in a finding, newest first.
MAX_VERSIONS_SHOWN = 8
# Platforms asked about when a pinned version has no wheel for the target: where else its wheels exist.
OTHER_PLATFORMS = (
    "win_amd64",
    "macosx_14_0_arm64",
    "macosx_11_0_arm64",
    "manylinux_2_28_x86_64",
    "manylinux_2_28_aarch64",
)
_PIP_ENTRY = Path(__file__).with_name("pip_entry.py")
_UNREACHABLE = "ENVCHECK-UNREACHABLE "
_NO_MATCH = re.compile(r"No matching distribution found for ([A-Za-z0-9][A-Za-z0-9._-]*)")
_NO_VERSION = re.compile(
    r"Could not find a version that satisfies the requirement ([A-Za-z0-9][A-Za-z0-9._-]*)"
)
_CONSTRAINT = re.compile(r"The user requested \(constraint\) ([A-Za-z0-9][A-Za-z0-9._-]*)")
_CANNOT_INSTALL = re.compile(r"Cannot install ([A-Za-z0-9][A-Za-z0-9._-]*)")
_AVAILABLE = re.compile(r"^Available versions: (.*)$", re.M)


@dataclass(frozen=True, kw_only=True, slots=True)
class IndexOptions:
    """Where pip looks, on top of its own configuration: ``--index-url`` replaces the configured index,
    ``--extra-index-url`` and ``--find-links`` add to it. ``timeout`` bounds each pip run (seconds)."""

    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    timeout: float = 300.0
    # ``pip``, ``uv`` or ``auto`` (uv where it is installed and can express the target, else pip).
    resolver: str = "pip"
    # One deadline for the whole command: each pip or uv run gets what is left of it (and at most
    # ``timeout``).
    deadline: Deadline | None = None

    def remaining(self, step: str = "resolving") -> float:
        """Seconds the next pip or uv run may take: ``timeout``, or less where the command's deadline is
        nearer. Raises ``DeadlineExpired`` (naming ``step``) once the deadline has passed."""
        if self.deadline is None:
            return self.timeout
        self.deadline.check(step)
        return min(self.timeout, self.deadline.remaining())

    def pip_args(self) -> list[str]:
        args = ["--retries", "1", "--timeout", "15"]
        if self.index_url:
            args += ["--index-url", self.index_url]
        for url in self.extra_index_urls:
            args += ["--extra-index-url", url]
        for folder in self.find_links:
            args += ["--find-links", folder]
        return args


@dataclass(frozen=True, kw_only=True, slots=True)
class ResolvedWheel:
    """One wheel pip chose for the target: name and version as its metadata says, the URL and sha256 from
    the report, its requirements, and whether it was one of the pins (``requested``)."""

    name: str
    version: str
    url: str
    sha256: str | None
    filename: str
    # None where the resolver does not say (uv's lock): filled in from the source manifest or the wheel.
    requires: tuple[str, ...] | None
    requested: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class Resolution:
    """What pip resolved for one target, what it could not, and what was never asked."""

    target: PredictTarget
    wheels: tuple[ResolvedWheel, ...]
    unavailable: tuple[Unavailable, ...]
    left_out: tuple[LeftOut, ...]
    seconds: float
    roots: tuple[str, ...] = field(default=())


@dataclass(frozen=True, kw_only=True, slots=True)
class _Pip:
    returncode: int
    log: str
    report: dict[str, object] | None


def pip_inputs(manifest: Manifest) -> tuple[list[Distribution], list[Distribution], list[LeftOut]]:
    """``(roots, constraints, left_out)`` of the manifest's importable distributions. Roots are those no
    other one requires (a cycle with no way in from a root counts as roots too)."""
    keep: dict[str, Distribution] = {}
    left_out: list[LeftOut] = []
    for name, dist in sorted(index(manifest).items()):
        reason = _not_a_requirement(dist) or _not_from_an_index(dist)
        if reason is not None:
            left_out.append(LeftOut(name=dist.name, version=dist.version, reason=reason))
        else:
            keep[name] = dist
    g = graph(manifest)
    required = {n for n, by in g.required_by.items() if by & keep.keys() - {n}}
    roots = {n for n in keep if n not in required}
    reached: set[str] = set(roots)
    for root in roots:
        reached |= g.closure(root)
    roots |= {n for n in keep if n not in reached}
    ordered = sorted(keep, key=canon)
    return [keep[n] for n in ordered if n in roots], [keep[n] for n in ordered if n not in roots], left_out


_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?")


def _not_a_requirement(dist: Distribution) -> str | None:
    """Why the name or version cannot go to pip as ``name==version`` (None when it can). A manifest is
    untrusted: a "name" with a newline would put its own options into the constraints file pip reads."""
    if not _NAME.fullmatch(dist.name):
        return "not a valid distribution name (PEP 508): not passed to pip"
    if parse_version(dist.version) is None or not re.fullmatch(r"[A-Za-z0-9.+!_-]{1,100}", dist.version):
        return "not a valid version (PEP 440): not passed to pip"
    return None


def _not_from_an_index(dist: Distribution) -> str | None:
    """Why no index can serve this distribution (``direct_url.json``: a local folder, an editable
    checkout, a VCS, a local file), or None."""
    direct = dist.direct_url
    if not isinstance(direct, dict):
        return None
    url = direct.get("url")
    url = url if isinstance(url, str) else ""
    dir_info = direct.get("dir_info")
    if isinstance(dir_info, dict) and dir_info.get("editable"):
        return "installed editable from a local folder"
    if dir_info is not None:
        return "installed from a local folder"
    if direct.get("vcs_info") is not None:
        return "installed from a version control system"
    if url.startswith("file:"):
        return "installed from a local file"
    return None


def pin(version: str) -> str:
    """The public version to pin (``2.13.0`` of ``2.13.0+cpu``): an index serves a build for the target
    under its own label or none (the registry's Windows torch is the CPU build, unlabelled); whether the
    build variant stayed is the variant rule's question, not the resolver's."""
    return version.split("+", 1)[0]


def resolve(manifest: Manifest, target: PredictTarget, options: IndexOptions, *, workdir: Path) -> Resolution:
    """Resolve ``manifest``'s environment for ``target``. Pins without a wheel for the target are dropped
    one resolution at a time (each named, with what exists); the rest is resolved.

    Raises ``UsageError`` when an index cannot be reached, when pip is missing or fails for another
    reason, or when it runs past ``options.timeout``.
    """
    roots, constraints, left_out = pip_inputs(manifest)
    pinned = {canon(d.name): (d.name, pin(d.version)) for d in roots}
    constrained = {canon(d.name): (d.name, pin(d.version)) for d in constraints}
    unavailable: list[Unavailable] = []
    g = graph(manifest)
    closures = {name: g.closure(name) for name in pinned}
    start = time.perf_counter()
    result: _Pip | None = None
    # Each failed resolution drops at least one pin: bounded by the number of distributions.
    for attempt in range(len(pinned) + len(constrained) + 1):
        if not pinned:
            break
        result = _dry_run(target, options, pinned, constrained, workdir / f"attempt-{attempt}")
        if result.returncode == 0 and result.report is not None:
            break
        failing = _failing_name(result.log, pinned, constrained)
        if failing is not None:
            is_root = failing in pinned
            name, version = (pinned if is_root else constrained).pop(failing)
            unavailable.append(
                Unavailable(name=name, version=version, root=is_root, reason=_last_error(result.log))
            )
            continue
        # A requirement no version satisfies for the target, of a distribution already dropped (or never
        # pinned): the roots that need it cannot be installed there, and go.
        needed = _unsatisfiable(result.log)
        needing = [r for r in pinned if needed is not None and needed in closures.get(r, ())]
        if not needing:
            tool = resolver_for(target, options)
            raise UsageError(
                f"{tool} could not resolve the environment for {target.platform}: {_last_error(result.log)}",
                tip="Run the same `pip install --dry-run` with -v to see why."
                if tool == "pip"
                else "Run it again with --resolver pip, or with uv's own `uv pip compile -v`.",
            )
        for r in needing:
            name, version = pinned.pop(r)
            why = f"needs {needed}, which has no wheel for {target.platform}: {_last_error(result.log)}"
            unavailable.append(Unavailable(name=name, version=version, root=True, reason=why))
    seconds = time.perf_counter() - start
    wheels = _wheels(result.report if result is not None and result.returncode == 0 else None)
    unavailable = _what_exists(unavailable, target, options)
    return Resolution(
        target=target,
        wheels=wheels,
        unavailable=tuple(unavailable),
        left_out=tuple(left_out),
        seconds=seconds,
        roots=tuple(sorted(n for n, _ in pinned.values())),
    )


def _dry_run(
    target: PredictTarget,
    options: IndexOptions,
    pinned: dict[str, tuple[str, str]],
    constrained: dict[str, tuple[str, str]],
    folder: Path,
) -> _Pip:
    if resolver_for(target, options) == "uv":
        return _uv_compile(target, options, pinned, constrained, folder)
    argv = pip_argv(target, options, pinned.values(), constrained.values(), folder)
    return run_pip(
        target,
        argv,
        folder,
        report=folder / "report.json",
        timeout=options.remaining(f"resolving for {target.platform}"),
        deadline=options.deadline,
    )


def resolver_for(target: PredictTarget, options: IndexOptions) -> str:
    """``pip`` or ``uv`` for ``target``: ``auto`` takes uv where it is installed and can name the target's
    platform, else pip. Raises ``UsageError`` for ``uv`` when uv is missing or cannot name the target."""
    if options.resolver == "pip":
        return "pip"
    found = uv_tools.uv_binary() is not None and uv_tools.uv_platform(target) is not None
    if options.resolver == "auto":
        return "uv" if found else "pip"
    if uv_tools.uv_binary() is None:
        raise UsageError(
            "--resolver uv: uv is not installed", tip="pip install 'envcheck[uv]', or use --resolver pip"
        )
    if not found:
        raise UsageError(
            f"--resolver uv: uv cannot resolve for {target.platform} ({target.implementation})",
            tip="Use --resolver pip (or auto) for this target.",
        )
    return "uv"


def _uv_compile(
    target: PredictTarget,
    options: IndexOptions,
    pinned: dict[str, tuple[str, str]],
    constrained: dict[str, tuple[str, str]],
    folder: Path,
) -> _Pip:
    """One ``uv pip compile`` in place of pip's dry run: the same pins and constraints, its lock read back
    as pip's report (``envcheck.predict.uv``). Its messages name a failing pin as pip's do."""
    uv, platform = uv_tools.uv_binary(), uv_tools.uv_platform(target)
    assert uv is not None and platform is not None
    argv = _uv_compile_argv(
        uv, target, platform[0], options, sorted(pinned.values()), sorted(constrained.values()), folder
    )
    lock = folder / "pylock.toml"
    log_path = folder / "uv.log"
    timeout = options.remaining(f"resolving for {target.platform}")
    env = uv_tools.uv_environment({**platform[1], **own_temp(folder)})
    try:
        returncode = sessions.run_logged(argv, log_path, timeout=timeout, env=env)
    except OSError as e:
        raise UsageError(f"cannot run uv: {e.strerror or e}") from e
    if returncode is None and options.deadline is not None and options.deadline.expired():
        raise DeadlineExpired(f"uv ran for {target.platform}", options.deadline)
    if returncode is None:
        raise UsageError(
            f"uv did not finish within {timeout:.0f} s for {target.platform}",
            tip="Check the indexes, or raise --timeout.",
        )
    text = sessions.log_tail(log_path)
    _raise_if_uv_unreachable(text)
    report = None
    if returncode == 0:
        report = uv_tools.lock_report(lock, target, [n for n, _ in pinned.values()], MAX_REPORT_BYTES)
    return _Pip(returncode=returncode, log=_as_pip_log(text), report=report)


_INDEX_TIP = "Check --index-url / --extra-index-url and pip's configuration (`pip config list`)."
_UV_FETCH = re.compile(r"Failed to fetch: `?(\S+?)`?$", re.M)


def _raise_if_uv_unreachable(log: str) -> None:
    """uv's ``Failed to fetch: INDEX/PROJECT/`` with its causes, as pip's unreachable index reads."""
    found = _UV_FETCH.search(log)
    if found is None or ("Request failed" not in log and "error sending request" not in log):
        return
    index = found.group(1).rstrip("/").rsplit("/", 1)[0] + "/"
    causes = [line.strip().removeprefix("cause: ") for line in log.splitlines() if "cause: " in line]
    raise UsageError(
        f"the index {index} cannot be reached: {(causes or ['no answer'])[-1][:300]}", tip=_INDEX_TIP
    )


# uv's explanation of a failed resolution names the culprit first: ``Because X==1 has no wheels with a
# matching platform tag``, ``Because there is no version of X==1``, ``Because only X<=1 is available``.
_UV_BECAUSE = re.compile(
    r"Because (?:there is no version of |there are no versions of |only )?([A-Za-z0-9][A-Za-z0-9._-]*)"
)


def _as_pip_log(text: str) -> str:
    """uv's messages, with an ``ERROR:`` line and pip's ``No matching distribution found for X`` for the
    distribution uv's explanation starts from, so one reading of the log serves both resolvers."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    found = _UV_BECAUSE.search(text)
    cause = next((line.removeprefix("cause: ") for line in lines if "Because" in line), None)
    out = [text]
    errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    if errors:  # uv's own error, with its innermost cause
        causes = [line.removeprefix("cause: ") for line in lines if line.startswith("cause: ")]
        out.append(f"ERROR: {errors[0]}" + (f": {causes[-1]}" if causes else ""))
    if found is not None:
        out.append(f"ERROR: No matching distribution found for {found.group(1)}")
    if cause is not None:
        out.append(f"ERROR: {cause}")
    return "\n".join(out)


def pip_argv(
    target: PredictTarget,
    options: IndexOptions,
    pins: Iterable[tuple[str, str]],
    constraints: Iterable[tuple[str, str]],
    folder: Path,
) -> list[str]:
    """pip's arguments for one resolution (``install --dry-run --report folder/report.json``), the
    constraints written to ``folder/constraints.txt``. ``ci/bench.py`` times the same command as the
    anchor of predict's budget."""
    folder.mkdir(parents=True, exist_ok=True)
    constraint_file = folder / "constraints.txt"
    constraint_file.write_text("".join(f"{n}=={v}\n" for n, v in sorted(constraints)), encoding="utf-8")
    return [
        "install",
        "--dry-run",
        "--ignore-installed",
        "--no-input",
        "--disable-pip-version-check",
        "--target",
        str(folder / "target"),
        "--report",
        str(folder / "report.json"),
        *target.pip_options(),
        *options.pip_args(),
        "-c",
        str(constraint_file),
        *(f"{n}=={v}" for n, v in sorted(pins)),
    ]


def pip_command(manifest: Manifest, target: PredictTarget, options: IndexOptions, folder: Path) -> list[str]:
    """The whole command line of the first resolution ``resolve`` runs for ``manifest`` (the pins and
    constraints of its requirement graph): ``python pip_entry.py MARKERS install --dry-run ...``."""
    roots, constraints, _ = pip_inputs(manifest)
    argv = pip_argv(
        target,
        options,
        [(d.name, pin(d.version)) for d in roots],
        [(d.name, pin(d.version)) for d in constraints],
        folder,
    )
    return [sys.executable, str(_PIP_ENTRY), json.dumps(target.markers()), *argv]


def uv_command(manifest: Manifest, target: PredictTarget, options: IndexOptions, folder: Path) -> list[str]:
    """The ``uv pip compile`` command line of the first resolution ``resolve`` runs with uv for ``manifest``
    (``ci/bench.py`` times it beside pip's dry run); its environment needs ``uv_platform(target)[1]``."""
    uv, platform = uv_tools.uv_binary(), uv_tools.uv_platform(target)
    if uv is None or platform is None:
        raise UsageError(f"uv is not installed or cannot resolve for {target.platform}")
    roots, constraints, _ = pip_inputs(manifest)
    pinned = [(d.name, pin(d.version)) for d in roots]
    return _uv_compile_argv(
        uv, target, platform[0], options, pinned, [(d.name, pin(d.version)) for d in constraints], folder
    )


def _uv_compile_argv(
    uv: str,
    target: PredictTarget,
    platform: str,
    options: IndexOptions,
    pinned: Iterable[tuple[str, str]],
    constrained: Iterable[tuple[str, str]],
    folder: Path,
) -> list[str]:
    """``uv pip compile`` of ``pinned`` with ``constrained`` as constraints: both files written in
    ``folder``, the lock to ``folder / "pylock.toml"``, the indexes of ``options``."""
    folder.mkdir(parents=True, exist_ok=True)
    pins, constraints = folder / "pins.txt", folder / "constraints.txt"
    pins.write_text("".join(f"{n}=={v}\n" for n, v in pinned), encoding="utf-8")
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in constrained), encoding="utf-8")
    return uv_tools.uv_argv(
        uv,
        target,
        platform,
        index_url=options.index_url,
        extra_index_urls=options.extra_index_urls,
        find_links=options.find_links,
        pins=pins,
        constraints=constraints,
        lock=folder / "pylock.toml",
    )


def run_pip(
    target: PredictTarget,
    args: Sequence[str],
    folder: Path,
    *,
    report: Path | None,
    timeout: float,
    deadline: Deadline | None = None,
) -> _Pip:
    """One pip run in a session of its own, its log in a file (read back capped), killed at ``timeout``.
    Its temporary files (partial downloads, unpacked metadata) go in ``folder/tmp``: ``folder`` lies in a
    folder envcheck removes on every exit, an interrupt or a kill at the deadline included."""
    log_path = folder / "pip.log"
    env = {**os.environ, "PIP_NO_INPUT": "1", **own_temp(folder)}
    argv = [sys.executable, str(_PIP_ENTRY), json.dumps(target.markers()), *args]
    try:
        returncode = sessions.run_logged(argv, log_path, timeout=timeout, env=env)
    except OSError as e:
        raise UsageError(f"cannot run pip: {e.strerror or e}") from e
    if returncode is None and deadline is not None and deadline.expired():
        raise DeadlineExpired(f"pip ran for {target.platform}", deadline)
    if returncode is None:
        raise UsageError(
            f"pip did not finish within {timeout:.0f} s for {target.platform}",
            tip="Check the indexes, or raise --timeout.",
        )
    text = sessions.log_tail(log_path)
    _raise_if_unreachable(text)
    if "No module named pip" in text:
        raise UsageError(
            "pip is not installed in envcheck's interpreter", tip=f"{sys.executable} -m ensurepip"
        )
    data = None
    if report is not None and returncode == 0:
        data = _read_report(report)
    return _Pip(returncode=returncode, log=text, report=data)


def own_temp(folder: Path) -> dict[str, str]:
    """``TMPDIR`` (and Windows' ``TEMP`` / ``TMP``) in ``folder/tmp``, made here: where pip and uv put
    their temporary files, removed with ``folder``."""
    tmp = folder / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {"TMPDIR": str(tmp), "TEMP": str(tmp), "TMP": str(tmp)}


def _raise_if_unreachable(log: str) -> None:
    for line in log.splitlines():
        if line.startswith(_UNREACHABLE):
            url, _, why = line[len(_UNREACHABLE) :].partition("\t")
            raise UsageError(
                f"the index {url} cannot be reached: {why}",
                tip="Check --index-url / --extra-index-url and pip's configuration (`pip config list`).",
            )


def _read_report(path: Path) -> dict[str, object]:
    raw = uv_tools.read_output(path, MAX_REPORT_BYTES, "pip's report")
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise UsageError(f"pip wrote a report that is not JSON: {e}") from e
    if not isinstance(data, dict):
        raise UsageError("pip wrote a report that is not a JSON object")
    return data


def _failing_name(
    log: str, pinned: dict[str, tuple[str, str]], constrained: dict[str, tuple[str, str]]
) -> str | None:
    """The canonical name of the pin pip could not satisfy, from its messages: ``No matching
    distribution found for X``, ``(constraint) X==v`` in a conflict, ``Cannot install X``."""
    candidates = [*_NO_MATCH.findall(log), *_NO_VERSION.findall(log), *_CONSTRAINT.findall(log)]
    candidates += _CANNOT_INSTALL.findall(log)
    for raw in candidates:
        name = canon(raw)
        if name in pinned or name in constrained:
            return name
    return None


def _unsatisfiable(log: str) -> str | None:
    """The canonical name in pip's ``No matching distribution found for X`` (any requirement), or None."""
    found = _NO_MATCH.findall(log) or _NO_VERSION.findall(log)
    return canon(found[-1]) if found else None


def _last_error(log: str) -> str:
    errors = [line[len("ERROR: ") :] for line in log.splitlines() if line.startswith("ERROR: ")]
    useful = [e for e in errors if not e.startswith(("ResolutionImpossible", "Ignored the following"))]
    text = (useful or errors or ["pip failed"])[-1]
    return text[:300]


def _wheels(report: dict[str, object] | None) -> tuple[ResolvedWheel, ...]:
    if report is None:
        return ()
    out = []
    install = report.get("install")
    for item in install if isinstance(install, list) else []:
        if not isinstance(item, dict):
            continue
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        info = item.get("download_info") if isinstance(item.get("download_info"), dict) else {}
        assert isinstance(meta, dict) and isinstance(info, dict)
        url = str(info.get("url") or "")
        archive = info.get("archive_info") if isinstance(info.get("archive_info"), dict) else {}
        assert isinstance(archive, dict)
        hashes = archive.get("hashes") if isinstance(archive.get("hashes"), dict) else {}
        assert isinstance(hashes, dict)
        sha = hashes.get("sha256")
        if sha is None and isinstance(archive.get("hash"), str) and archive["hash"].startswith("sha256="):
            sha = archive["hash"].split("=", 1)[1]
        requires = meta.get("requires_dist") if isinstance(meta.get("requires_dist"), list) else []
        if meta.get("requires_unknown") is True:  # uv's lock: filled in later
            requires = None
        from urllib.parse import unquote, urlsplit

        out.append(
            ResolvedWheel(
                name=str(meta.get("name") or ""),
                version=str(meta.get("version") or ""),
                url=url,
                sha256=str(sha).lower()
                if isinstance(sha, str) and re.fullmatch(r"[0-9a-fA-F]{64}", sha)
                else None,
                filename=unquote(urlsplit(url).path.rsplit("/", 1)[-1]),
                requires=None if requires is None else tuple(str(r) for r in requires),
                requested=bool(item.get("requested")),
            )
        )
    return tuple(sorted(out, key=lambda w: canon(w.name)))


def _what_exists(
    unavailable: list[Unavailable], target: PredictTarget, options: IndexOptions
) -> list[Unavailable]:
    """Each unavailable pin with the versions that do have a wheel for the target, and the platforms the
    pinned version's wheels exist for, as the indexes answer ``pip index versions`` (run in parallel)."""
    if not unavailable:
        return []
    platforms = [p for p in OTHER_PLATFORMS if p != target.platform]
    jobs = [(u.name, target.platform) for u in unavailable]
    jobs += [(u.name, p) for u in unavailable for p in platforms]
    with awake.Pool(4) as pool:
        answers = dict(
            zip(
                jobs,
                pool.map(lambda job: _index_versions(job[0], job[1], target, options), jobs),
                strict=True,
            )
        )
    out = []
    for u in unavailable:
        versions = answers[(u.name, target.platform)]
        where = [p for p in platforms if u.version in answers[(u.name, p)]]
        out.append(
            Unavailable(
                name=u.name,
                version=u.version,
                root=u.root,
                reason=u.reason,
                available=versions[:MAX_VERSIONS_SHOWN],
                platforms=where,
            )
        )
    return out


def _index_versions(name: str, platform: str, target: PredictTarget, options: IndexOptions) -> list[str]:
    """The versions of ``name`` with a wheel for ``platform`` (and the target's Python), newest first, as
    ``pip index versions`` reads them from the indexes; empty when there are none."""
    other = PredictTarget(
        platform=platform, python_version=target.python_version, implementation=target.implementation
    )
    with sessions.temporary_folder("envcheck-predict-index-") as tmp:
        try:
            result = run_pip(
                other,
                ["index", "versions", name, *other.pip_options(), *options.pip_args()],
                tmp,
                report=None,
                timeout=min(options.remaining("asking the indexes what exists"), 120.0),
            )
        except DeadlineExpired:
            raise
        except UsageError:
            return []
    m = _AVAILABLE.search(result.log)
    if m is None:
        return []
    return [v.strip() for v in m.group(1).split(",") if v.strip()]
