"""``envcheck lock``: pip-compile turns a manifest's pins into a requirements lock.

pip-compile runs as a subprocess (``python -m piptools compile``) of envcheck's own interpreter, not
through pip-tools' Python API: the command line is pip-tools' documented interface (its modules are
internal and change between releases), a subprocess can be given a hard timeout and killed with its whole
session (pip may run a build backend), and pip reads its own configuration there exactly as a user's
``pip-compile`` would: find-links, extra indexes, ``PIP_*`` variables, a local wheel store.

The inputs (``envcheck.lock.inputs``): the roots of the manifest's requirement graph as requirements, every
other distribution as a constraint (``-c``), all at exact full versions. pip-compile resolves them (which
checks that a reachable source serves each one) and writes ``# via`` and, with ``--hashes``,
``--generate-hashes``. envcheck then writes its own header, puts the markers the manifest's platform needs
on their lines, names the manifest where pip-compile named its temporary files, keeps credentials out of
index lines (every line passes the redactor), lists what ``--allow-unlocked`` left out (in the comment
block ``lock --check`` reads back) and what pip-compile added that the environment lacked.

A manifest is untrusted input: the index its pip was configured with is used, and written into the lock,
only with ``--trust-manifest-index``; the lock then says where that index came from.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck import __version__
from envcheck.core.deadline import Deadline
from envcheck.core.errors import EnvcheckError
from envcheck.core.escape import one_line
from envcheck.core.files import NotOpened, open_regular
from envcheck.core.redact import redact_text
from envcheck.lock.inputs import LEFT_OUT_HEADER, LockInputs, Unlocked, lock_inputs
from envcheck.manifest.query import canon, parse_version, torch_index_label, views
from envcheck.manifest.remedy import recorded_index
from envcheck.manifest.requirements import graph
from envcheck.process import awake, sessions

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.requirements import Graph

# The variable a lock names for a labelled torch build's index when no URL is known (pip expands
# ``${VAR}`` in requirement files, and so does pip-compile when it reads them).
TORCH_INDEX_VAR = "TORCH_INDEX_URL"
ROOTS_FILE = "manifest-roots.in"
PINS_FILE = "manifest-pins.txt"
# pip-compile stops at the first distribution it cannot find: each try drops one (--allow-unlocked).
MAX_TRIES = 12
REACH_TIMEOUT = 5.0

_NOT_FOUND = re.compile(
    r"(?:No matching distribution found for|Could not find a version that satisfies the requirement)\s+"
    r"(?P<req>[^\s(]+)"
)
_OPTION_URL = re.compile(
    r"^(?P<opt>--index-url|--extra-index-url|--find-links|-i|-f)(?P<sep>[ =])(?P<url>\S+)"
)
# A pin line of pip-compile's output: ``name==version``, `` \`` before its hashes with --generate-hashes.
_PIN_LINE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)(?P<rest>\s*\\)?$")


class LockError(EnvcheckError):
    """The manifest cannot be locked: nothing to lock, a distribution no reachable source serves, one
    installed from a local path or a VCS, pip-compile failing or running past its timeout."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LockOptions:
    """What ``envcheck lock`` was asked for. ``index_url`` / ``extra_index_urls`` / ``find_links`` are
    passed to pip-compile (and written into the lock by it) on top of pip's own configuration."""

    hashes: bool = False
    index_url: str | None = None
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    allow_unlocked: bool = False
    trust_manifest_index: bool = False
    timeout: float = 600.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Added:
    """A distribution pip-compile added that the manifest's environment lacks: ``via`` names what
    requires it (pip-compile's ``# via``)."""

    name: str
    version: str
    via: tuple[str, ...]

    @property
    def why(self) -> str:
        required = ", ".join(self.via) if self.via else "a requirement pip-compile resolved"
        return f"the environment lacks it; required by {required}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Lock:
    """A compiled lock: its ``text``, what was left out (``--allow-unlocked``) and what was added."""

    text: str
    unlocked: tuple[Unlocked, ...]
    added: tuple[Added, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class _Compiled:
    returncode: int
    output: str
    log: str


def lock(manifest: Manifest, name: str, options: LockOptions, *, warn: Callable[[str], None]) -> Lock:
    """Compile ``manifest`` (shown as ``name``) into a lock. ``warn`` is told each problem that does not
    stop the lock (an index that cannot be reached, a manifest from another platform), before an error
    it may explain. Raises ``LockError`` (exit 2) for a manifest with nothing to lock, for what cannot be
    locked unless ``options.allow_unlocked``, and for pip-compile failing; ``DeadlineExpired`` once
    ``options.timeout``, one deadline for the whole command (every pip-compile run together), passes."""
    deadline = Deadline.after(options.timeout)
    _require_pip_tools()
    inputs = lock_inputs(manifest)
    _refuse_what_is_no_pin(inputs, name)
    if not inputs.roots and not inputs.unlocked:
        raise LockError(f"{name} holds no distributions to lock", tip="Snapshot an environment first.")
    if inputs.unlocked and not options.allow_unlocked:
        raise LockError(_unlocked_message(inputs.unlocked), tip=_UNLOCKED_TIP)
    with views(manifest):
        g = graph(manifest)
    for warning in _platform_warnings(manifest):
        warn(warning)
    torch_index = _torch_index(manifest, inputs, options, warn)
    # The sources are checked while pip-compile runs, in a daemon thread: neither an interrupt nor the
    # deadline waits for it.
    reach = _Background(_unreachable_sources, options, torch_index)
    try:
        compiled, inputs, placeholder = _compile_until_locked(inputs, g, options, torch_index, deadline)
    except EnvcheckError:
        for warning in reach.result(deadline):  # an unreachable index explains the error
            warn(warning)
        raise
    for warning in reach.result(deadline):
        warn(warning)
    if compiled is None:
        raise LockError(f"nothing of {name} could be locked", tip="Check the sources named above.")
    added = _added(compiled.output, inputs)
    text = _finish(compiled.output, manifest, name, inputs, placeholder, added, torch_index)
    return Lock(text=text, unlocked=inputs.unlocked, added=added)


_UNLOCKED_TIP = (
    "Install it from an index, or pass --allow-unlocked to lock the rest and list what was left out."
)


# PEP 508's name: whatever else a manifest holds (it comes from another machine) never reaches a line of
# pip-compile's input or of the lock, where a newline or an option would be read as one.
_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


def _refuse_what_is_no_pin(inputs: LockInputs, name: str) -> None:
    """Raise ``LockError`` for a distribution whose name is not a PEP 508 name or whose version is not
    a PEP 440 version: neither can be written as ``name==version``."""
    pairs = [(p.name, p.version) for p in (*inputs.roots, *inputs.constraints)]
    for dist, version in pairs + [(u.name, u.version) for u in inputs.unlocked]:
        if not _is_pin(dist, version):
            raise LockError(
                f"{name}: {one_line(dist[:80])} {one_line(version[:80])} is not a distribution name "
                "and version that a lock can pin",
                tip="Record the manifest again with `envcheck snapshot`.",
            )


def _is_pin(dist: str, version: str) -> bool:
    """Whether ``dist==version`` is one line pip-compile reads as that pin and nothing else: the name a
    PEP 508 name (``canonicalize_name(validate=True)``; ``$`` would let a trailing newline through), the
    version a PEP 440 version exactly as written (``Version`` strips the whitespace a newline is)."""
    from packaging.utils import InvalidName, canonicalize_name

    try:
        canonicalize_name(dist, validate=True)
    except InvalidName:
        return False
    if not _NAME.fullmatch(dist) or not re.fullmatch(r"[A-Za-z0-9.+!_-]{1,100}", version):
        return False
    return parse_version(version) is not None


def _unlocked_message(unlocked: Sequence[Unlocked]) -> str:
    first = unlocked[0]
    more = f" (and {len(unlocked) - 1} more)" if len(unlocked) > 1 else ""
    return f"{first.name}=={first.version} cannot be locked: {first.reason}{more}"


def _require_pip_tools() -> None:
    import importlib.util

    if importlib.util.find_spec("piptools") is None:
        raise LockError(
            "pip-tools is not installed beside envcheck", tip=f"{sys.executable} -m pip install pip-tools"
        )


def _platform_warnings(m: Manifest) -> list[str]:
    """pip-compile resolves for the interpreter it runs under: say so when the manifest's machine is
    another (wheels for this one were checked, markers were evaluated for the manifest's)."""
    import platform

    here = (platform.system(), ".".join(platform.python_version_tuple()[:2]))
    there = (m.platform.system if m.platform else "", ".".join(m.python.version.split(".")[:2]))
    if here == there:
        return []
    return [
        f"the manifest was recorded on {there[0] or 'an unknown system'} with Python {there[1]}; pip-compile "
        f"resolved on {here[0]} with Python {here[1]}: check the lock on the manifest's machine "
        "(`envcheck lock --check`)"
    ]


def _torch_index(
    m: Manifest, inputs: LockInputs, options: LockOptions, warn: Callable[[str], None]
) -> str | None:
    """The index to add for a labelled torch build (``+cpu``, ``+cu130``): none when ``--index-url`` /
    ``--extra-index-url`` were given (they are meant to serve it), else with ``--trust-manifest-index``
    the URL the manifest's pip was configured with for that label, else none for now: pip's own
    configuration may serve the build, and ``_compile_until_locked`` falls back to ``${TORCH_INDEX_URL}``
    when it does not. An untrusted manifest's index is never contacted: ``warn`` names it."""
    if not inputs.labels or options.index_url or options.extra_index_urls:
        return None
    for label in inputs.labels:
        url = recorded_index(m, label)
        if url is None:
            continue
        if options.trust_manifest_index:
            return url
        warn(
            f"the manifest names an index for +{label} builds ({redact_text(without_userinfo(url))}); "
            "a manifest is untrusted input, so it is not used: pass --trust-manifest-index to use it, or "
            "name the index with --extra-index-url"
        )
        return None
    return None


def _compile_until_locked(
    inputs: LockInputs,
    g: Graph,
    options: LockOptions,
    torch_index: str | None,
    deadline: Deadline | None = None,
) -> tuple[_Compiled | None, LockInputs, bool]:
    """pip-compile, again after each distribution no source serves: a labelled torch build first gets
    ``$TORCH_INDEX_URL`` (when set), anything else is an error unless ``--allow-unlocked`` drops it.
    Every run gets what is left of ``deadline`` (``DeadlineExpired`` once none is).
    Returns the compile (None when nothing was left to lock), the inputs it locked, and whether the lock
    must name ``${TORCH_INDEX_URL}``."""
    deadline = deadline or Deadline.after(options.timeout)
    placeholder = False
    for tries in range(MAX_TRIES):
        if not inputs.roots:
            return None, inputs, placeholder
        deadline.check("running pip-compile", done=f"{tries} runs finished" if tries else None)
        index = os.environ.get(TORCH_INDEX_VAR) if placeholder else torch_index
        compiled = _run_compile(inputs, options, index, deadline)
        if compiled.returncode == 0:
            missing = sorted(set(_locked_names(inputs)) - set(_pins_in(compiled.output)))
            if not missing:
                return compiled, inputs, placeholder
            # Markers that hold on the manifest's machine but not on this one kept pip from them.
            raise LockError(
                f"pip-compile left out {', '.join(missing[:5])}: their requirers' markers do not hold on "
                "this machine",
                tip="Lock on a machine like the manifest's (same platform and Python).",
            )
        failed = _not_found(compiled.log, inputs)
        if failed is None:
            raise LockError(f"pip-compile could not lock the manifest: {_last_error(compiled.log)}")
        version = inputs.pinned[failed].version
        labelled = failed in _labelled(inputs)
        if labelled and not placeholder and torch_index is None and not _given(options):
            placeholder = True  # pip's configuration does not serve it: the lock names the variable
            if os.environ.get(TORCH_INDEX_VAR):
                continue
        if not options.allow_unlocked:
            raise LockError(
                f"no reachable source serves {failed}=={version}", tip=_not_found_tip(labelled, options)
            )
        inputs = inputs.without({failed: "no reachable source serves it"}, g)
    raise LockError(
        f"more than {MAX_TRIES - 1} distributions could not be locked; stopped",
        tip="Check the indexes named above and pip's configuration (`pip config list`).",
    )


def _given(options: LockOptions) -> bool:
    return bool(options.index_url or options.extra_index_urls)


def _labelled(inputs: LockInputs) -> set[str]:
    return {n for n, p in inputs.pinned.items() if torch_index_label(p.version)}


def _not_found_tip(labelled: bool, options: LockOptions) -> str:
    if labelled and not _given(options):
        return (
            f"It is a PyTorch build: set {TORCH_INDEX_VAR} to the PyTorch wheel index for its label (the URL "
            "ends in /<label>, e.g. /cpu) or pass --extra-index-url; --allow-unlocked locks the rest."
        )
    return "Check the indexes and pip's configuration (`pip config list`); --allow-unlocked locks the rest."


def _locked_names(inputs: LockInputs) -> list[str]:
    return [n for n in inputs.pinned if n not in inputs.tooling]


def _pins_in(output: str) -> dict[str, str]:
    """``{canonical name: version}`` of pip-compile's pin lines."""
    return {canon(m["name"]): m["version"] for line in output.splitlines() if (m := _PIN_LINE.match(line))}


def _not_found(log: str, inputs: LockInputs) -> str | None:
    """The canonical name of the pinned distribution pip-compile could not find, or None."""
    from packaging.requirements import InvalidRequirement, Requirement

    for match in _NOT_FOUND.finditer(log):
        try:
            name = canon(Requirement(match["req"]).name)
        except InvalidRequirement:
            continue
        if name in inputs.pinned:
            return name
    return None


def _last_error(log: str) -> str:
    lines = [ln.strip() for ln in log.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("ERROR", "pip._internal", "piptools"))] or lines[-1:]
    return one_line(redact_text(errors[-1][:500])) if errors else "no output"


def _run_compile(
    inputs: LockInputs, options: LockOptions, torch_index: str | None, deadline: Deadline
) -> _Compiled:
    """One pip-compile run in a session of its own, in a temporary folder, killed at the deadline."""
    with sessions.temporary_folder("envcheck-lock-") as folder:
        (folder / ROOTS_FILE).write_text("".join(f"{p.requirement}\n" for p in inputs.roots), "utf-8")
        (folder / PINS_FILE).write_text("".join(f"{p.requirement}\n" for p in inputs.constraints), "utf-8")
        argv = [sys.executable, "-m", "piptools", "compile", *_compile_args(inputs, options, torch_index)]
        env = {**os.environ, "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
        log_path = folder / "pip-compile.log"
        try:
            returncode = sessions.run_logged(
                argv, log_path, timeout=deadline.remaining(), env=env, cwd=folder
            )
        except OSError as e:
            raise LockError(f"cannot run pip-compile: {e.strerror or e}") from e
        if returncode is None:
            raise LockError(
                f"pip-compile did not finish within the command's --timeout ({options.timeout:.0f} s)",
                tip="Check the indexes (an unreachable one waits for pip's timeout), or raise --timeout.",
            )
        output = _read_output(folder / "lock.txt") if returncode == 0 else ""
        return _Compiled(returncode=returncode, output=output, log=sessions.log_tail(log_path))


# The most of pip-compile's output envcheck reads back (a lock of MAX_LOCK_PINS pins with hashes is far less).
MAX_OUTPUT_BYTES = 64 * 1024**2


def _read_output(path: Path) -> str:
    """pip-compile's lock, read as untrusted: opened non-blocking, only as a regular file inside its
    folder (a FIFO, a device or a link out of the folder is never read: ``open_regular``), capped."""
    try:
        fd = open_regular(str(path), inside=[os.path.realpath(path.parent)])
    except FileNotFoundError as e:
        raise LockError("pip-compile exited 0 without writing its lock", tip=_PIP_COMPILE_TIP) from e
    except NotOpened as e:
        why = "is a symbolic link out of its folder" if e.kind == "link-outside" else e.reason
        raise LockError(f"pip-compile's lock {why}: not read", tip=_PIP_COMPILE_TIP) from e
    except OSError as e:
        raise LockError(f"cannot read pip-compile's lock: {e.strerror or e}") from e
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_OUTPUT_BYTES + 1)
    if len(raw) > MAX_OUTPUT_BYTES:
        raise LockError(f"pip-compile's lock is over the {MAX_OUTPUT_BYTES}-byte cap")
    return raw.decode("utf-8", errors="replace")


_PIP_COMPILE_TIP = f"Check the pip-tools beside envcheck: {sys.executable} -m piptools compile --version"


def _compile_args(inputs: LockInputs, options: LockOptions, torch_index: str | None) -> list[str]:
    args = [
        "--quiet",
        "--no-header",
        "--no-config",
        "--strip-extras",
        "--no-allow-unsafe",
        "--annotation-style=split",
        "--output-file=lock.txt",
        f"--constraint={PINS_FILE}",
    ]
    for name in sorted(inputs.tooling):
        args += ["--unsafe-package", name]
    if options.hashes:
        args.append("--generate-hashes")
    if options.index_url:
        args += ["--index-url", options.index_url]
    for url in (*options.extra_index_urls, *([torch_index] if torch_index else [])):
        args += ["--extra-index-url", url]
    for where in options.find_links:
        args += ["--find-links", where]
    return [*args, ROOTS_FILE]


# --- the lock's text --------------------------------------------------------------------------------------


def _added(output: str, inputs: LockInputs) -> tuple[Added, ...]:
    """The pins of pip-compile's ``output`` that are not the manifest's (a requirement the environment
    did not meet: torch requires fsspec, which was not installed), each with its ``# via`` requirers."""
    pinned = inputs.pinned
    found: list[Added] = []
    lines = output.splitlines()
    for i, line in enumerate(lines):
        pin = _PIN_LINE.match(line)
        if pin is None or canon(pin["name"]) in pinned or canon(pin["name"]) in inputs.tooling:
            continue
        via: list[str] = []
        for j in range(i + 1, len(lines)):
            follow = lines[j]
            text = follow.strip()
            if follow == text:  # the next pin, or the end of its annotation
                break
            if text.startswith("--hash"):
                continue
            if text.startswith("# via"):
                via += [text[len("# via") :].strip()] if text != "# via" else []
            elif text.startswith("#   "):
                via.append(text[len("#   ") :].strip())
            else:
                break
        kept = tuple(v for v in via if v and not v.startswith(("-c ", "-r ")))
        found.append(Added(name=canon(pin["name"]), version=pin["version"], via=kept))
    return tuple(found)


def _finish(
    output: str,
    m: Manifest,
    name: str,
    inputs: LockInputs,
    placeholder: bool,
    added: Sequence[Added] = (),
    torch_index: str | None = None,
) -> str:
    """pip-compile's output as the lock: envcheck's header, the manifest named where pip-compile named
    its temporary files, markers added, credentials out of index lines, ``${TORCH_INDEX_URL}`` kept as
    the variable, a trusted manifest's index named as such, what was left out and what was added listed
    at the end; every line through the redactor."""
    shown = one_line(redact_text(name))
    index_value = os.environ.get(TORCH_INDEX_VAR) if placeholder else None
    lines = _header(m, shown, placeholder and bool(index_value))
    if torch_index is not None:
        lines[-1:] = [
            "#",
            f"# --extra-index-url {one_line(redact_text(without_userinfo(torch_index)))}: the index the",
            "# manifest's pip was configured with for the torch build pinned below, used because",
            "# `envcheck lock --trust-manifest-index` was asked to trust it.",
            "#",
        ]
    for raw in _merge_via(output.splitlines(), shown):
        option = _OPTION_URL.match(raw)
        if option is not None:
            # A lock is shared, credentials are not: pip finds them in its keyring or netrc.
            url = without_userinfo(option["url"])
            if index_value and url.rstrip("/") == without_userinfo(index_value).rstrip("/"):
                url = "${" + TORCH_INDEX_VAR + "}"
            lines.append(f"{option['opt']}{option['sep']}{redact_text(url)}")
            continue
        lines.append(_with_marker(raw, inputs))
    if placeholder and not index_value:
        lines += [
            "",
            "# No source here serves the labelled torch build: set TORCH_INDEX_URL to the PyTorch wheel",
            "# index for its label (the URL ends in /<label>, e.g. /cpu) and run envcheck lock again.",
        ]
    if inputs.unlocked:
        lines += ["", LEFT_OUT_HEADER]
        lines += [f"#   {u.name}=={u.version}: {one_line(redact_text(u.reason))}" for u in inputs.unlocked]
    if added:
        lines += ["", "# Added: the environment lacked these; pip-compile resolved them for their requirers."]
        lines += [f"#   {a.name}=={a.version}: {one_line(a.why)}" for a in added]
    return "\n".join(redact_text(line) for line in lines).rstrip("\n") + "\n"


def _with_marker(line: str, inputs: LockInputs) -> str:
    """A pin line with the marker the manifest's platform needs (``envcheck.lock.inputs``), if any."""
    pin = _PIN_LINE.match(line)
    marker = inputs.markers.get(canon(pin["name"])) if pin is not None else None
    if pin is None or not marker:
        return line
    return f"{pin['name']}=={pin['version']} ; {marker}{pin['rest'] or ''}"


def _header(m: Manifest, shown: str, placeholder: bool) -> list[str]:
    from importlib.metadata import version

    system = m.platform.system if m.platform else "an unknown system"
    machine = f" {m.platform.machine}" if m.platform and m.platform.machine else ""
    lines = [
        "#",
        f"# This file was written by envcheck {__version__} with pip-compile {version('pip-tools')}:",
        "#",
        f"#    envcheck lock {shown}",
        "#",
        f"# It rebuilds the environment of {shown} ({m.python.implementation} {m.python.version} on "
        f"{system}{machine}): every",
        "# distribution at its exact version. Install with `pip install -r` or `pip-sync`; check an",
        "# environment against it with `envcheck lock --check`.",
        "#",
    ]
    if placeholder:
        lines[-1:] = [
            "#",
            f"# {TORCH_INDEX_VAR}: set it to the PyTorch wheel index for the torch build pinned below (its",
            "# URL ends in the build's label, e.g. /cpu or /cu130). pip expands it when it reads this file.",
            "#",
        ]
    return lines


def _merge_via(lines: list[str], shown: str) -> list[str]:
    """pip-compile's ``# via`` blocks without the temporary files' names: the constraints file is
    dropped (every pin comes from it), the roots file becomes the manifest."""
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("# via"):
            indent = line[: len(line) - len(line.lstrip())]
            sources = [stripped[len("# via") :].strip()] if stripped != "# via" else []
            i += 1
            while i < len(lines) and lines[i].strip().startswith("#   "):
                sources.append(lines[i].strip()[len("#   ") :].strip())
                i += 1
            kept = [_source(s, shown) for s in sources if s and s != f"-c {PINS_FILE}"]
            if len(kept) == 1:
                out.append(f"{indent}# via {kept[0]}")
            elif kept:
                out.append(f"{indent}# via")
                out += [f"{indent}#   {s}" for s in kept]
            continue
        out.append(line)
        i += 1
    return out


def _source(source: str, shown: str) -> str:
    return f"{shown} (required by nothing else)" if source == f"-r {ROOTS_FILE}" else source


def without_userinfo(url: str) -> str:
    """``https://user:token@host/simple`` → ``https://host/simple``: a lock is shared, credentials are
    not (pip finds them in its keyring or netrc)."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.username is None and parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=host))


# --- reachability -----------------------------------------------------------------------------------------


class _Background:
    """``work(*args)`` in a daemon thread: the process never waits for it at exit, so a slow index check
    cannot carry the command past its deadline."""

    def __init__(self, work: Callable[..., list[str]], *args: object) -> None:
        self._found: list[list[str]] = []
        self._thread = threading.Thread(target=self._run, args=(work, args), daemon=True)
        self._thread.start()

    def _run(self, work: Callable[..., list[str]], args: tuple[object, ...]) -> None:
        try:
            self._found.append(work(*args))
        except Exception:  # a check of the indexes must never hide the lock itself
            self._found.append([])

    def result(self, deadline: Deadline) -> list[str]:
        """What it found, waiting at most ``REACH_TIMEOUT * 4`` and never past ``deadline``."""
        awake.join(self._thread, min(REACH_TIMEOUT * 4, deadline.remaining()))
        return self._found[0] if self._found else []


def _unreachable_sources(options: LockOptions, torch_index: str | None) -> list[str]:
    """A warning for every index or find-links source pip would use that does not answer: the options,
    the torch index, and pip's own configuration (``pip config list``). pip-compile only says it found
    nothing; this names where it could not look."""
    sources = [
        *([options.index_url] if options.index_url else []),
        *options.extra_index_urls,
        *options.find_links,
        *([torch_index] if torch_index else []),
        *_pip_config_sources(),
    ]
    warnings = []
    for source in dict.fromkeys(sources):
        why = _unreachable(source)
        if why is not None:
            warnings.append(one_line(redact_text(f"the package source {source} cannot be reached: {why}")))
    return warnings


def _pip_config_sources() -> list[str]:
    """index-url, extra-index-url and find-links values of pip's configuration (files and ``PIP_*``)."""
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pip", "config", "list"],
            capture_output=True,
            text=True,
            timeout=30,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    found = []
    for line in done.stdout.splitlines()[:1000]:
        key, _, value = line.partition("=")
        if key.rsplit(".", 1)[-1] in ("index-url", "extra-index-url", "find-links"):
            found += value.strip().strip("'\"").split()
    return found


def _unreachable(source: str) -> str | None:
    """Why ``source`` (a URL or a folder) cannot be read, or None. Any HTTP answer counts as reachable
    (a 401 is the index's to explain); only a refused, unresolved or timed-out connection does not."""
    import urllib.error
    import urllib.request
    from urllib.parse import urlsplit

    if "${" in source:
        return None
    parts = urlsplit(source)
    if parts.scheme in ("", "file"):
        from urllib.request import url2pathname

        path = url2pathname(parts.path) if parts.scheme == "file" else source
        return None if Path(path).exists() else "no such file or folder"
    if parts.scheme not in ("http", "https"):
        return None
    request = urllib.request.Request(without_userinfo(source), method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=REACH_TIMEOUT):
            return None
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return str(reason) or type(e).__name__
