"""``envcheck lock --check``: an environment against a requirements lock, exactly.

The lock is read with ``packaging`` (PEP 508 requirements, markers evaluated for the checked interpreter),
as pip reads a requirements file: comments, line continuations, ``--hash`` options and index lines
(``--index-url``, ``--extra-index-url``, ``--find-links``, ``--trusted-host``...) are tolerated; a line that
includes another file or installs an editable checkout is refused, since it pins nothing this check can
compare. Every requirement must be one exact version (``==`` / ``===``); ``name @ URL`` is compared by
name, and by version when the URL names a wheel.

The comparison is exact: canonical names, full versions with local labels (``2.13.0+cpu`` is not
``2.13.0+cu130``), nothing missing, nothing extra, and a pin of an index release met by an index release
(not an editable checkout, a local path or a VCS install at the same version: ``LOCK-SOURCE``); installer
tooling is ignored on both sides, as in ``envcheck lock``.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.errors import EnvcheckError
from envcheck.findings import Finding
from envcheck.lock.inputs import INSTALLER_TOOLING
from envcheck.lock.rules import LOCK_EXTRA, LOCK_MISSING, LOCK_SOURCE, LOCK_VERSION

if TYPE_CHECKING:
    from envcheck.diff.rules._provenance import Source
    from envcheck.manifest.model import Distribution, Manifest

MAX_LOCK_BYTES = 16 * 1024 * 1024

# Options a requirements file may hold that choose where pip looks or what it accepts: tolerated.
_SOURCE_OPTIONS = frozenset(
    {
        "--index-url",
        "-i",
        "--extra-index-url",
        "--find-links",
        "-f",
        "--trusted-host",
        "--no-index",
        "--prefer-binary",
        "--only-binary",
        "--no-binary",
        "--pre",
        "--use-feature",
    }
)
# Options that pull in another file or a checkout: what they pin cannot be compared from this file.
_REFUSED_OPTIONS = frozenset(
    {"-r", "--requirement", "-c", "--constraint", "-e", "--editable", "--config-settings"}
)
_INDEX_OPTIONS = frozenset({"--index-url", "-i", "--extra-index-url", "--find-links", "-f"})
_COMMENT = re.compile(r"(^|\s+)#.*$")
_LOCAL_WHEEL = ": a wheel file from a local path is the release only if it is the released file"


class LockFileError(EnvcheckError):
    """A lock that cannot be read: not a regular file, too large, not UTF-8, or a line that is not a
    requirement, not an exact pin, or an option that cannot be compared."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LockedPin:
    """One requirement of the lock: ``name`` canonical, ``written`` as in the lock, ``version`` exact
    (None for a direct reference without a wheel name), ``marker`` its PEP 508 marker text, if any."""

    name: str
    written: str
    version: str | None
    line: int
    marker: str | None = None
    direct: bool = False  # ``name @ URL``: the lock pins a direct reference, not an index release


@dataclass(frozen=True, kw_only=True, slots=True)
class LockFile:
    """A parsed lock: its pins and its source options (the index and find-links lines, for the
    remedies). ``source`` names the file in messages."""

    pins: tuple[LockedPin, ...]
    sources: tuple[tuple[str, str], ...]
    source: str = "lock"

    def for_interpreter(self, markers: dict[str, str]) -> LockFile:
        """The pins whose markers hold in ``markers`` (PEP 508 variables of the checked interpreter).
        Raises ``LockFileError`` for a marker that cannot be evaluated there, and for a distribution two
        lines pin for the same interpreter."""
        from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName

        kept: dict[str, LockedPin] = {}
        for pin in self.pins:
            where = f"{self.source} line {pin.line}"
            if pin.marker is not None:
                try:
                    if not Marker(pin.marker).evaluate({**markers, "extra": ""}):
                        continue
                except (UndefinedComparison, UndefinedEnvironmentName) as e:
                    raise LockFileError(
                        f"{where}: a marker that cannot be evaluated: {pin.marker} ({e})"
                    ) from e
            if pin.name in kept:
                raise LockFileError(
                    f"{where}: {pin.written} is pinned twice (first on line {kept[pin.name].line})"
                )
            kept[pin.name] = pin
        return LockFile(pins=tuple(kept.values()), sources=self.sources, source=self.source)


def read_lock(path: str) -> bytes:
    """The bytes of the lock at ``path``. Raises ``LockFileError``."""
    from envcheck.files import NotOpened, read_capped

    try:
        data = read_capped(path, MAX_LOCK_BYTES)
    except NotOpened as e:
        from envcheck.manifest.io import is_environment_folder

        if e.kind == "directory" and is_environment_folder(path):
            raise LockFileError(
                f"{path}: a Python environment's folder, not a requirements lock",
                tip=f"To check that environment, pass its interpreter: --python {path}/bin/python",
            ) from e
        raise LockFileError(f"{path}: {e}") from e
    except OSError as e:
        raise LockFileError(f"{path}: cannot read the lock: {e.strerror or e}") from e
    if len(data) > MAX_LOCK_BYTES:
        raise LockFileError(f"{path}: larger than {MAX_LOCK_BYTES} bytes: not a requirements lock")
    return data


def parse_lock(data: bytes, source: str) -> LockFile:
    """Every pin and source option of a lock, markers not yet evaluated (``LockFile.for_interpreter``).
    Raises ``LockFileError`` naming the line of the first problem."""
    if data.lstrip(b"\xef\xbb\xbf \t\r\n").startswith(b"{") and b'"schema_version"' in data:
        raise LockFileError(
            f"{source}: an envcheck manifest (JSON), not a requirements lock",
            tip=f"`envcheck lock {source}` writes a requirements lock from it; `envcheck gate {source} "
            "--python PATH/bin/python` checks an environment against the manifest.",
        )
    from envcheck.manifest.io import what_else

    other = what_else(data)
    if other is not None and not other[0].startswith("a requirements lock"):
        raise LockFileError(
            f"{source}: {other[0]}, not a requirements lock", tip=other[1].replace("{path}", source)
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LockFileError(f"{source}: not UTF-8 text (byte {e.start}): not a requirements lock") from e
    pins: list[LockedPin] = []
    sources: list[tuple[str, str]] = []
    for number, line in _logical_lines(text):
        where = f"{source} line {number}"
        if line.startswith("-"):
            sources += _option(line, where)
        else:
            pins.append(_requirement(line, where, number))
    if not pins:
        raise LockFileError(f"{source}: no requirements: not a requirements lock")
    return LockFile(pins=tuple(pins), sources=tuple(sources), source=source)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: comments removed, ``\\`` continuations joined."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = _COMMENT.sub("", raw)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        joined = " ".join([*pending, line]).strip()
        pending = []
        if joined:
            out.append((start, joined))
    if pending and " ".join(pending).strip():
        out.append((start, " ".join(pending).strip()))
    return out


def _option(line: str, where: str) -> list[tuple[str, str]]:
    from envcheck.escape import one_line

    head, _, rest = line.partition(" ")
    name, eq, value = head.partition("=") if head.startswith("--") else (head, "", "")
    value = value if eq else rest
    if name in _REFUSED_OPTIONS:
        raise LockFileError(
            f"{where}: {one_line(name)} includes what this file does not pin: a lock for --check pins "
            "every distribution itself",
            tip="Check the lock that pip-compile or `envcheck lock` wrote.",
        )
    if name not in _SOURCE_OPTIONS:
        raise LockFileError(f"{where}: unknown option {one_line(name[:80])}")
    return [(name, value.strip())] if name in _INDEX_OPTIONS and value.strip() else []


def _requirement(line: str, where: str, number: int) -> LockedPin:
    from packaging.requirements import InvalidRequirement, Requirement

    from envcheck.diff.rules.base import canon
    from envcheck.escape import one_line

    text, options = _split_hashes(line, where)
    del options  # hashes are pip's to verify at install time
    try:
        req = Requirement(text)
    except InvalidRequirement as e:
        why = str(e).splitlines()[0] if str(e) else "invalid"  # packaging adds the line and a caret
        raise LockFileError(f"{where}: not a requirement: {one_line(text[:120])} ({why})") from e
    marker = str(req.marker) if req.marker is not None else None
    if req.url is not None:
        version = _wheel_version(req.url)
        return LockedPin(
            name=canon(req.name), written=req.name, version=version, line=number, marker=marker, direct=True
        )
    specs = list(req.specifier)
    if len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
        raise LockFileError(
            f"{where}: {one_line(text[:120])} is not one exact version (name==version): not a lock",
            tip="Write the lock with `envcheck lock` or pip-compile.",
        )
    version = specs[0].version
    return LockedPin(name=canon(req.name), written=req.name, version=version, line=number, marker=marker)


def _split_hashes(line: str, where: str) -> tuple[str, list[str]]:
    """The requirement before its ``--hash`` options, and those options; any other option is refused."""
    from envcheck.escape import one_line

    head, sep, tail = line.partition(" --")
    if not sep:
        return line, []
    options = ("--" + tail).split()
    for i, option in enumerate(options):
        if option.startswith("--hash=") or (option == "--hash" and i + 1 < len(options)):
            continue
        if i > 0 and options[i - 1] == "--hash":
            continue
        raise LockFileError(f"{where}: unsupported option on a requirement line: {one_line(option[:80])}")
    return head.strip(), options


def _wheel_version(url: str) -> str | None:
    from urllib.parse import unquote

    parts = unquote(url.rsplit("/", 1)[-1].split("#", 1)[0]).split("-")
    return parts[1] if url.split("#", 1)[0].endswith(".whl") and len(parts) >= 5 else None


def compare(lock: LockFile, live: Manifest, *, python: str | None) -> list[Finding]:
    """Each difference between ``lock`` and the environment of ``live``: missing, another version, extra.
    Pure. ``python`` names the checked interpreter in the remedies (``python -m pip ...``)."""
    from envcheck.diff.rules.base import canon, index

    installed = {n: d for n, d in index(live).items() if n not in INSTALLER_TOOLING}
    pip = f"{shlex.quote(python)} -m pip" if python else "python -m pip"
    found: list[Finding] = []
    locked = {p.name: p for p in lock.pins if p.name not in INSTALLER_TOOLING}
    for name, pin in sorted(locked.items()):
        dist = installed.get(name)
        wanted = f"{pin.written}=={pin.version}" if pin.version else pin.written
        if dist is None:
            found.append(
                LOCK_MISSING.finding(
                    pin.written,
                    f"{wanted} is in the lock (line {pin.line}) but not installed",
                    _install(pip, pin, lock.sources),
                    base=pin.version,
                )
            )
        elif pin.version is not None and not _same(pin.version, dist.version):
            found.append(
                LOCK_VERSION.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed; the lock pins {pin.version} (line {pin.line})",
                    _install(pip, pin, lock.sources),
                    base=pin.version,
                    target=dist.version,
                )
            )
        elif not pin.direct and (where := _unreleased(dist)) is not None:
            found.append(
                LOCK_SOURCE.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed from {where.shown}; the lock pins the index "
                    f"release {pin.version} (line {pin.line})" + ("" if where.built_here else _LOCAL_WHEEL),
                    _install(pip, pin, lock.sources, options="--force-reinstall --no-deps"),
                    base=pin.version,
                    target=where.shown,
                    severity=None if where.built_here else "warning",
                )
            )
    for name, dist in sorted(installed.items()):
        if canon(name) not in locked:
            found.append(
                LOCK_EXTRA.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed but not in the lock",
                    f"`{pip} uninstall -y {shlex.quote(dist.name)}`",
                    target=dist.version,
                )
            )
    return found


def _same(locked: str, installed: str) -> bool:
    """Equal as PEP 440 versions, local labels included (``1.0`` is ``1.0.0``; ``+cpu`` is not ``+cu130``)."""
    from envcheck.diff.rules.base import parse_version

    a, b = parse_version(locked), parse_version(installed)
    return a == b if a is not None and b is not None else locked == installed


def _unreleased(dist: Distribution) -> Source | None:
    """Where ``dist`` came from when no index serves it (``editable: /src/pkg``, ``vcs: git+… @ commit``,
    ``local: file:///…``, credentials redacted), None for an index release or an archive URL."""
    from envcheck.diff.rules._provenance import source

    if dist.direct_url is None:
        return None
    found = source(dist)
    return None if found.released else found


def _install(pip: str, pin: LockedPin, sources: Sequence[tuple[str, str]], *, options: str = "") -> str:
    """``pip install 'name==version'`` with the lock's ``--index-url``, and for a labelled torch build
    (``+cpu``) all its index and find-links lines, which is where that build comes from (credentials
    out: pip finds them in its keyring or netrc; ``${VAR}`` left for the shell to expand)."""
    from envcheck.diff.rules.base import torch_index_label
    from envcheck.lock.compile import _without_userinfo
    from envcheck.redact import redact_text

    wanted = f"{pin.written}=={pin.version}" if pin.version else pin.written
    command = f"{pip} install {options + ' ' if options else ''}{shlex.quote(wanted)}"
    labelled = torch_index_label(pin.version) is not None
    for option, value in sources:
        if not labelled and option not in ("--index-url", "-i"):
            continue
        url = _without_userinfo(value)
        shown = f'"{url}"' if "${" in url and '"' not in url else shlex.quote(url)
        command += f" {option} {shown}"
    return f"`{redact_text(command)}`"
