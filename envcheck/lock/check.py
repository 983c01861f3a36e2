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
tooling is ignored on both sides, as in ``envcheck lock``. What a lock written with ``--allow-unlocked``
lists as left out (its ``# Left out`` comment block) is compared by name and version, never reported as
extra.

Bounded: the lock is read whole only up to ``MAX_LOCK_BYTES`` and then walked line by line, refused at the
first pin past ``MAX_LOCK_PINS``. The remedies are actions (``envcheck.core.remedy``): every value of the
lock in them is checked (a name, a version, an index URL) and quoted for the shell of the checked machine,
and a value that fails its check, or an index URL holding a ``${VAR}`` that only pip expands in a
requirements file, makes a manual step that names it, never an argument.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from envcheck.core.errors import EnvcheckError
from envcheck.core.escape import one_line
from envcheck.core.files import NotOpened, read_capped
from envcheck.core.findings import Finding
from envcheck.core.redact import redact_text
from envcheck.core.remedy import (
    Action,
    Install,
    Manual,
    Shell,
    Uninstall,
    UnsafeValue,
    describe,
    make,
    render,
)
from envcheck.lock.compile import without_userinfo
from envcheck.lock.inputs import INSTALLER_TOOLING, LEFT_OUT_HEADER
from envcheck.lock.rules import LOCK_EXTRA, LOCK_MISSING, LOCK_SOURCE, LOCK_VERSION
from envcheck.manifest.io import is_environment_folder, what_else
from envcheck.manifest.provenance import source
from envcheck.manifest.query import canon, index, local_label, parse_version, torch_index_label, windows
from envcheck.manifest.remedy import pytorch_index

if TYPE_CHECKING:
    from packaging.markers import Marker

    from envcheck.manifest.model import Distribution, Manifest
    from envcheck.manifest.provenance import Source

MAX_LOCK_BYTES = 16 * 1024 * 1024
# Pins per lock: a CUDA torch environment pins about 60, a large monorepo a few thousand. Past this the
# lock is refused with one line as soon as the reader gets there (a 1.2 M-pin lock is never held whole).
MAX_LOCK_PINS = 20_000
# The entries of the comment block `envcheck lock --allow-unlocked` writes (``LEFT_OUT_HEADER``).
_LEFT_OUT = re.compile(r"^#   (?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==(?P<version>[^\s:]+): ")
# What pip expands in a requirements file (``${VAR}``: upper case, digits, underscore), and only there: an
# index URL holding one cannot be written as an argument (pip would take it literally).
_PIP_VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)\}")
# str.splitlines' line boundaries, matched one line at a time.
_BREAK = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_LINE = re.compile(f"([^{_BREAK}]*)(\r\n|[{_BREAK}]|$)")

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
    # The marker as ``packaging`` parsed it from the line (its text is not always parseable again).
    parsed_marker: Marker | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True, slots=True)
class LeftOut:
    """A distribution the lock lists as left out (``--allow-unlocked``): installed by other means."""

    name: str
    version: str
    line: int


@dataclass(frozen=True, kw_only=True, slots=True)
class LockFile:
    """A parsed lock: its pins and its source options (the index and find-links lines, for the
    remedies). ``source`` names the file in messages."""

    pins: tuple[LockedPin, ...]
    sources: tuple[tuple[str, str], ...]
    source: str = "lock"
    left_out: tuple[LeftOut, ...] = ()

    def for_interpreter(self, markers: dict[str, str]) -> LockFile:
        """The pins whose markers hold in ``markers`` (PEP 508 variables of the checked interpreter).
        Raises ``LockFileError`` for a marker that cannot be evaluated there, and for a distribution two
        lines pin for the same interpreter."""
        from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

        kept: dict[str, LockedPin] = {}
        for pin in self.pins:
            where = f"{self.source} line {pin.line}"
            if pin.marker is not None:
                try:
                    marker = pin.parsed_marker if pin.parsed_marker is not None else Marker(pin.marker)
                    if not marker.evaluate({**markers, "extra": ""}):
                        continue
                except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName, ValueError) as e:
                    raise LockFileError(
                        f"{where}: a marker that cannot be evaluated: {one_line(pin.marker[:200])} "
                        f"({one_line(str(e).splitlines()[0][:200] if str(e) else type(e).__name__)})"
                    ) from e
            if pin.name in kept:
                raise LockFileError(
                    f"{where}: {pin.written} is pinned twice (first on line {kept[pin.name].line})"
                )
            kept[pin.name] = pin
        return LockFile(
            pins=tuple(kept.values()), sources=self.sources, source=self.source, left_out=self.left_out
        )


def read_lock(path: str) -> bytes:
    """The bytes of the lock at ``path``. Raises ``LockFileError``."""
    try:
        data = read_capped(path, MAX_LOCK_BYTES)
    except NotOpened as e:
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
    left_out: list[LeftOut] = []
    for number, line in _logical_lines(text, left_out):
        where = f"{source} line {number}"
        if line.startswith("-"):
            sources += _option(line, where)
            continue
        if len(pins) >= MAX_LOCK_PINS:
            raise LockFileError(
                f"{where}: more than {MAX_LOCK_PINS:,} pins (MAX_LOCK_PINS): not a requirements lock this "
                "check reads",
                tip="Split the environment, or check a lock that pip-compile or `envcheck lock` wrote.",
            )
        pins.append(_requirement(line, where, number))
    if not pins:
        raise LockFileError(f"{source}: no requirements: not a requirements lock")
    return LockFile(pins=tuple(pins), sources=tuple(sources), source=source, left_out=tuple(left_out))


def _physical_lines(text: str) -> Iterator[str]:
    """The lines of ``text`` as ``str.splitlines`` cuts them, one at a time (no list of them all)."""
    end = len(text)
    for match in _LINE.finditer(text):
        if match.start() == end:
            return
        yield match.group(1)


def _logical_lines(text: str, left_out: list[LeftOut]) -> Iterator[tuple[int, str]]:
    """(first line number, text) of each logical line: comments removed, ``\\`` continuations joined.
    The entries of a ``# Left out`` block are appended to ``left_out`` on the way."""
    pending: list[str] = []
    start = 0
    in_left_out = False
    for number, raw in enumerate(_physical_lines(text), 1):
        if raw.rstrip() == LEFT_OUT_HEADER:
            in_left_out = True
            continue
        if in_left_out:
            entry = _LEFT_OUT.match(raw)
            if entry is not None:
                left_out.append(LeftOut(name=canon(entry["name"]), version=entry["version"], line=number))
                continue
            in_left_out = False
        line = _COMMENT.sub("", raw)
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        joined = " ".join([*pending, line]).strip()
        pending = []
        if joined:
            yield start, joined
    if pending and " ".join(pending).strip():
        yield start, " ".join(pending).strip()


def _option(line: str, where: str) -> list[tuple[str, str]]:
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

    text, options = _split_hashes(line, where)
    del options  # hashes are pip's to verify at install time
    try:
        req = Requirement(text)
        str(req.marker)  # packaging 26 reads a marker value holding both quotes, but cannot write it
    except (InvalidRequirement, ValueError) as e:
        why = str(e).splitlines()[0] if str(e) else "invalid"  # packaging adds the line and a caret
        raise LockFileError(f"{where}: not a requirement: {one_line(text[:120])} ({why})") from e
    direct = req.url is not None
    if req.url is not None:
        version = _wheel_version(req.url)
    else:
        specs = list(req.specifier)
        if len(specs) != 1 or specs[0].operator not in ("==", "===") or specs[0].version.endswith(".*"):
            raise LockFileError(
                f"{where}: {one_line(text[:120])} is not one exact version (name==version): not a lock",
                tip="Write the lock with `envcheck lock` or pip-compile.",
            )
        version = specs[0].version
    return LockedPin(
        name=canon(req.name),
        written=req.name,
        version=version,
        line=number,
        marker=str(req.marker) if req.marker is not None else None,
        direct=direct,
        parsed_marker=req.marker,
    )


def _split_hashes(line: str, where: str) -> tuple[str, list[str]]:
    """The requirement before its ``--hash`` options, and those options; any other option is refused."""
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
    Pure. The remedies are actions; their words name the checked interpreter ``python`` (``python -m pip
    ...``), quoted for the shell of ``live``'s machine (PowerShell on Windows)."""
    shell: Shell = "powershell" if windows(live) else "posix"
    installed = {n: d for n, d in index(live).items() if n not in INSTALLER_TOOLING}

    def say(action: Action) -> str:
        return _words([action], shell, python)

    found: list[Finding] = []
    locked = {p.name: p for p in lock.pins if p.name not in INSTALLER_TOOLING}
    left_out = {e.name: e for e in lock.left_out if e.name not in locked}
    for name, pin in sorted(locked.items()):
        dist = installed.get(name)
        wanted = f"{pin.written}=={pin.version}" if pin.version else pin.written
        if dist is None:
            action = _install(pin, lock.sources)
            found.append(
                LOCK_MISSING.finding(
                    pin.written,
                    f"{wanted} is in the lock (line {pin.line}) but not installed",
                    say(action),
                    base=pin.version,
                    actions=(action,),
                )
            )
        elif pin.version is not None and not _same(pin.version, dist.version):
            action = _install(pin, lock.sources, installed=dist.version)
            found.append(
                LOCK_VERSION.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed; the lock pins {pin.version} (line {pin.line})"
                    + _ALREADY_SATISFIED * _satisfied(pin.version, dist.version),
                    say(action),
                    base=pin.version,
                    target=dist.version,
                    actions=(action,),
                )
            )
        elif not pin.direct and (where := _unreleased(dist)) is not None:
            action = _install(pin, lock.sources, force=True)
            found.append(
                LOCK_SOURCE.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed from {where.shown}; the lock pins the index "
                    f"release {pin.version} (line {pin.line})" + ("" if where.built_here else _LOCAL_WHEEL),
                    say(action),
                    base=pin.version,
                    target=where.shown,
                    severity=None if where.built_here else "warning",
                    actions=(action,),
                )
            )
    for name, dist in sorted(installed.items()):
        if canon(name) in locked:
            continue
        entry = left_out.get(canon(name))
        if entry is not None and _same(entry.version, dist.version):
            continue  # listed as installed by other means, at this version
        if entry is not None:
            found.append(
                LOCK_VERSION.finding(
                    dist.name,
                    f"{dist.name} {dist.version} is installed; the lock left out {entry.version} (line "
                    f"{entry.line}: installed by other means)",
                    f"Install {dist.name} {entry.version} by the means line {entry.line} of the lock names.",
                    base=entry.version,
                    target=dist.version,
                )
            )
            continue
        action = _uninstall(dist.name)
        found.append(
            LOCK_EXTRA.finding(
                dist.name,
                f"{dist.name} {dist.version} is installed but not in the lock",
                say(action),
                target=dist.version,
                actions=(action,),
            )
        )
    return found


def _uninstall(name: str) -> Action:
    """``pip uninstall -y name`` (every file its RECORD lists), or a manual step for a name that fails its
    check."""
    return make(lambda: Uninstall(names=(name,)), f"uninstall {name}")


def _words(actions: Sequence[Action], shell: Shell, python: str | None) -> str:
    """``actions`` as a remedy's words for ``shell``: each command in backticks, run by the checked
    interpreter's pip (``python``; without one, by the ``python`` of the shell it is pasted into), manual
    steps as they are. A command that cannot be written safely is named, never written."""
    parts = []
    for action in actions:
        try:
            line = render(action, shell, python or "python", raw_python=python is None)
        except UnsafeValue as e:
            parts.append(f"(a {action.kind} envcheck does not write as a command: {e})")
            continue
        parts.append(f"`{line}`" if line is not None else describe(action))
    return ", then ".join(parts)


_ALREADY_SATISFIED = (
    " (the same version under PEP 440, another build: `pip install` of the pin alone answers "
    '"Requirement already satisfied")'
)


def _satisfied(locked: str, installed: str) -> bool:
    """True when pip takes ``installed`` as meeting ``==locked`` (``2.13.0+cpu`` meets ``==2.13.0``: PEP
    440 ignores a local label the specifier does not name) although the two differ."""
    from packaging.specifiers import InvalidSpecifier, Specifier
    from packaging.version import InvalidVersion, Version

    try:
        return Specifier(f"=={locked}").contains(Version(installed), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _same(locked: str, installed: str) -> bool:
    """Equal as PEP 440 versions, local labels included (``1.0`` is ``1.0.0``; ``+cpu`` is not ``+cu130``)."""
    a, b = parse_version(locked), parse_version(installed)
    return a == b if a is not None and b is not None else locked == installed


def _unreleased(dist: Distribution) -> Source | None:
    """Where ``dist`` came from when no index serves it (``editable: /src/pkg``, ``vcs: git+… @ commit``,
    ``local: file:///…``, credentials redacted), None for an index release or an archive URL."""
    if dist.direct_url is None:
        return None
    found = source(dist)
    return None if found.released else found


def _install(
    pin: LockedPin,
    sources: Sequence[tuple[str, str]],
    *,
    force: bool = False,
    installed: str | None = None,
) -> Action:
    """An ``Install`` of the pin from where the lock says it comes from (``_index``; credentials out: pip
    finds them in its keyring or netrc). A direct reference (``name @ URL``), whose URL the check keeps
    no copy of, and a pin whose name, version or index fails its check are manual steps.

    When ``installed`` meets the pin under PEP 440 but is another build (the pin ``2.13.0``, ``2.13.0+cpu``
    installed), pip would answer "already satisfied": the remedy forces the reinstall without touching
    the dependencies, and pins the plain version with ``===`` (pip would otherwise pick the labelled
    file, which sorts higher, from any source that serves both). ``force``: reinstall what is there (a
    checkout or a local wheel at the pinned version), dependencies untouched."""
    wanted = f"{pin.written}=={pin.version}" if pin.version else pin.written
    if pin.direct:
        return Manual(text=f"Install {wanted} from the URL that line {pin.line} of the lock names.")
    version = pin.version or ""
    exact = False
    if installed is not None and _satisfied(version, installed):
        force = True
        exact = local_label(version) is None
    url, problem = _index(version, sources)
    if problem is not None:
        return Manual(text=one_line(f"Install {wanted} {problem}").replace("`", "'"))
    requirements = (f"{pin.written}==={_normalised(version)}",) if exact else ()
    pins = () if exact else ((pin.written, version),)
    return make(
        lambda: Install(pins=pins, requirements=requirements, index_url=url, force=force, no_deps=force),
        f"install {wanted}",
    )


def _index(version: str, sources: Sequence[tuple[str, str]]) -> tuple[str | None, str | None]:
    """The index the pin of ``version`` comes from, and why none can be written (else None): for a
    labelled torch build (``+cpu``) the lock's index named after its label, else the lock's one index when
    it names no other source, else PyTorch's public index for that label; for any other pin the lock's
    ``--index-url`` (None: pip's default). An index holding a ``${VAR}`` is pip's to expand in a
    requirements file, never on its command line: it cannot be written."""
    indexes = [(o, redact_text(without_userinfo(v))) for o, v in sources if o not in ("-f", "--find-links")]
    main = [v for o, v in indexes if o in ("--index-url", "-i")]
    label = torch_index_label(version) if version else None
    chosen: str | None
    if label is not None:
        named = [v for _, v in indexes if v.rstrip("/").rsplit("/", 1)[-1] == label]
        only = main if len(main) == 1 and len(sources) == 1 else []
        chosen = (named or only or [pytorch_index(label)])[0]
    else:
        chosen = main[0] if main else None
    if chosen is not None and _PIP_VARIABLE.search(chosen):
        return None, (
            f"from the index the lock names ({chosen}) with its ${{VAR}} expanded: pip expands it in a "
            "requirements file, never on its command line"
        )
    return chosen, None


def _normalised(version: str) -> str:
    """The PEP 440 normal form of ``version`` (what ``===`` is compared with in pip), else as written."""
    from packaging.version import InvalidVersion, Version

    try:
        return str(Version(version))
    except InvalidVersion:
        return version
