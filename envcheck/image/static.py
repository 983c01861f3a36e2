"""The facts probe's answer for a container image, read from its files: nothing of the image runs.

``image_facts`` takes a flattened image root on the host (every link in it stays inside it:
``envcheck.image.rootfs.flatten``) and the image's config, and returns the dict the in-target facts probe
(``envcheck/inside/probe.py``, ``Probe.facts``) writes, redacted as ``result.emit`` redacts it, so that
``envcheck.collect.facts.static_facts`` turns it into a manifest's parts. Every path in it is the image's
(``/app/.venv/lib/python3.11/site-packages``), never the host folder it was unpacked to.

How the interpreter would start is worked out as CPython's ``getpath`` and ``site`` work it out, for the
common layouts: a python.org build (the ``python:`` images: ``/usr/local``), Debian's ``/usr/bin/python3``
(``dist-packages``), a venv (``pyvenv.cfg``) over either, a conda prefix. ``.pth`` path lines count;
``import`` lines are never run (named in ``image.pth_imports``). What only a running interpreter knows
(the libpython it maps, the stdlib modules that fail to import) is left out, never guessed.

Paths of the image are resolved here, component by component, inside the root (``ImageRoot``): an absolute
link target is taken from the image's root, ``..`` stops there, and a loop ends after ``MAX_LINKS`` links.
Every read is capped and opens regular files only.
"""

from __future__ import annotations

import ast
import json
import os
import posixpath
import re
import shlex
import stat
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Any, Protocol

from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.core.files import NotOpened, read_capped
from envcheck.core.redact import redact_json
from envcheck.inside.distributions import metadata_headers
from envcheck.inside.environment import ENV_NAMES, ENV_PREFIXES
from envcheck.inside.install_facts import MAX_EXAMPLES, editable_sources, install_facts
from envcheck.inside.interpreter import MAX_PTH_BYTES, MAX_PTH_FILES, MAX_PTH_LINES, MAX_PTH_TOTAL, code_paths
from envcheck.inside.names import canonical_name
from envcheck.inside.record import parse_record_natives
from envcheck.inside.startup import MAX_BYTES as CUSTOMIZE_BYTES
from envcheck.inside.startup import MAX_PRELOAD, MENTIONS
from envcheck.inside.torch_static import read_version_file, version_facts
from envcheck.inside.venv_facts import (
    MAX_RECORDED,
    MAX_SCRIPTS,
    MAX_TEXT,
    SCRIPT_HEAD,
    TAGS_SHOWN,
    declared_scripts,
    interpreter_line,
    parse_config,
)

# Links followed while resolving one path (Linux's own limit): a loop ends here, never hangs.
MAX_LINKS = 40
# Entries of one folder listed (a site folder holds hundreds; a hostile one may hold millions).
MAX_LISTED = 100_000
# Folders of PATH searched, and words of an entrypoint looked at.
MAX_PATH_DIRS = 64
# Distributions read: one more than a manifest may hold, so that its own limit names the excess.
MAX_DISTRIBUTIONS = 10_001
# Caps of the files read.
MAX_SMALL = 1 << 16  # os-release, passwd lines, patchlevel.h, pyvenv.cfg
MAX_METADATA = 1 << 20  # METADATA / PKG-INFO, WHEEL, direct_url.json, INSTALLER, requires.txt
MAX_RECORD = 64 << 20  # as install_facts reads a RECORD
MAX_SYSCONFIG = 2 << 20  # _sysconfigdata_*.py (~40 KiB)
MAX_LIBC = 16 << 20  # libc.so.6 (~2 MiB) and ld-musl (~1 MiB)
MAX_PACKAGE_DB = 16 << 20  # /var/lib/dpkg/status, /lib/apk/db/installed
MAX_SITE_PY = 256 << 10
# The PATH a container gets when its config sets none (Docker's and containerd's default).
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Top-level folders a merged-/usr image makes links (envcheck/inside/host.py's SYSTEM_LINKS).
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Wrappers an entrypoint runs the program through: the program is a later word.
WRAPPERS = frozenset({"env", "tini", "tini-static", "dumb-init", "catatonit"})
SHELLS = frozenset({"sh", "bash", "dash", "ash"})
PYTHON_NAME = re.compile(r"^(?:python|pypy)(?:3(?:\.(\d+))?)?(t?)$")

# OCI architecture (+ variant) -> (uname machine, wheel platform arch, the GNU multiarch triplet's head).
ARCHES: dict[str, tuple[str, str, str]] = {
    "amd64": ("x86_64", "x86_64", "x86_64"),
    "arm64": ("aarch64", "aarch64", "aarch64"),
    "arm": ("armv7l", "armv7l", "arm"),
    "386": ("i686", "i686", "i386"),
    "ppc64le": ("ppc64le", "ppc64le", "powerpc64le"),
    "s390x": ("s390x", "s390x", "s390x"),
    "riscv64": ("riscv64", "riscv64", "riscv64"),
    "loong64": ("loongarch64", "loongarch64", "loongarch64"),
}
BITS_32 = frozenset({"arm", "386"})
# The manylinux tags older than PEP 600, named after the glibc they stand for (packaging's own map).
LEGACY_MANYLINUX = {(2, 17): "manylinux2014", (2, 12): "manylinux2010", (2, 5): "manylinux1"}
WHEEL_TAGS_SHOWN = 12  # as envcheck/inside/interpreter.py's wheel_tags


class ImageConfig(Protocol):
    """What ``image_facts`` reads of an image's config (``envcheck.image.Image`` has it)."""

    @property
    def architecture(self) -> str: ...

    @property
    def variant(self) -> str | None: ...

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def entrypoint(self) -> Sequence[str] | None: ...

    @property
    def cmd(self) -> Sequence[str] | None: ...

    @property
    def working_dir(self) -> str | None: ...

    @property
    def user(self) -> str | None: ...


# ------------------------------------------------------------------------------------------- the root


class ImageRoot:
    """A flattened image on the host, read with the image's meaning of its paths."""

    def __init__(self, root: Path | str) -> None:
        self.root = os.path.abspath(os.fspath(root))  # noqa: PTH100 - a host path, never resolved

    def host(self, image_path: str) -> str:
        """The host path of an image path that ``resolve`` returned (no links left in it)."""
        return self.root + (image_path if image_path != "/" else "")

    def image(self, host_path: str) -> str:
        """The image path of a host path under the root (the root itself is ``/``)."""
        if host_path == self.root:
            return "/"
        if host_path.startswith(self.root + "/"):
            return host_path[len(self.root) :]
        return host_path

    def resolve(self, image_path: str, *, last: bool = True) -> str | None:
        """The image path ``image_path`` leads to with every link followed inside the root (``last``
        False: all but the final component), or None when a part of it is missing, a non-folder is
        walked through, or more than ``MAX_LINKS`` links are met (a loop)."""
        parts = deque(p for p in image_path.split("/") if p and p != ".")
        final = parts.pop() if not last and parts else None
        current: list[str] = []
        links = 0
        while parts:
            name = parts.popleft()
            if name == "..":
                if current:
                    current.pop()
                continue
            host = self.root + "/" + "/".join([*current, name])
            try:
                st = os.lstat(host)
            except (OSError, ValueError):
                return None
            if stat.S_ISLNK(st.st_mode):
                links += 1
                if links > MAX_LINKS:
                    return None
                try:
                    target = os.readlink(host)  # noqa: PTH115
                except (OSError, ValueError):
                    return None
                if target.startswith("/"):
                    current = []
                parts.extendleft(reversed([p for p in target.split("/") if p and p != "."]))
                continue
            if parts and not stat.S_ISDIR(st.st_mode):
                return None
            current.append(name)
        if final is not None:
            if final == "..":
                return "/" + "/".join(current[:-1])
            current.append(final)
        return "/" + "/".join(current)

    def mode(self, image_path: str) -> int | None:
        """``st_mode`` of what ``image_path`` leads to (links followed inside the root), or None."""
        resolved = self.resolve(image_path)
        if resolved is None:
            return None
        try:
            return os.lstat(self.host(resolved)).st_mode
        except (OSError, ValueError):
            return None

    def is_file(self, image_path: str) -> bool:
        mode = self.mode(image_path)
        return mode is not None and stat.S_ISREG(mode)

    def is_dir(self, image_path: str) -> bool:
        mode = self.mode(image_path)
        return mode is not None and stat.S_ISDIR(mode)

    def lexists(self, image_path: str) -> bool:
        """Whether the final component exists, a dangling link included."""
        parent = self.resolve(image_path, last=False)
        if parent is None:
            return False
        try:
            os.lstat(self.host(parent))
        except (OSError, ValueError):
            return False
        return True

    def is_link(self, image_path: str) -> bool:
        parent = self.resolve(image_path, last=False)
        if parent is None:
            return False
        try:
            return stat.S_ISLNK(os.lstat(self.host(parent)).st_mode)
        except (OSError, ValueError):
            return False

    def read(self, image_path: str, cap: int) -> bytes | None:
        """At most ``cap`` bytes of the regular file ``image_path`` leads to, or None (missing, not a
        regular file, unreadable)."""
        resolved = self.resolve(image_path)
        if resolved is None:
            return None
        try:
            return read_capped(self.host(resolved), cap)[:cap]
        except (NotOpened, OSError, ValueError):
            return None

    def text(self, image_path: str, cap: int) -> str | None:
        data = self.read(image_path, cap)
        return data.decode("utf-8", "replace") if data is not None else None

    def listdir(self, image_path: str, cap: int = MAX_LISTED) -> list[str]:
        """The names in the folder ``image_path`` leads to, sorted (at most ``cap``; [] when none)."""
        resolved = self.resolve(image_path)
        if resolved is None:
            return []
        names: list[str] = []
        try:
            with os.scandir(self.host(resolved)) as entries:
                for entry in entries:
                    if len(names) >= cap:
                        break
                    names.append(entry.name)
        except (OSError, ValueError):
            return []
        return sorted(names)


def _join(folder: str, *names: str) -> str:
    return posixpath.normpath(posixpath.join(folder, *names))


# ------------------------------------------------------------------------------------ the interpreter


def _search_path(rt: ImageRoot, name: str, path_value: str, accept: Callable[[str], bool]) -> str | None:
    """The first ``folder/name`` of PATH that ``accept`` takes (a relative or empty folder is skipped)."""
    for folder in path_value.split(":")[:MAX_PATH_DIRS]:
        if folder.startswith("/"):
            candidate = _join(folder, name)
            if accept(candidate):
                return candidate
    return None


def _is_venv_python(rt: ImageRoot, path: str) -> bool:
    """A venv's interpreter whose link dangles still names the venv (its pyvenv.cfg says where from)."""
    folder = posixpath.dirname(path)
    return rt.lexists(path) and (
        rt.is_file(_join(folder, "pyvenv.cfg")) or rt.is_file(_join(folder, "..", "pyvenv.cfg"))
    )


def _usable(rt: ImageRoot) -> Callable[[str], bool]:
    return lambda p: rt.is_file(p) or _is_venv_python(rt, p)


def _is_python_name(name: str) -> bool:
    return PYTHON_NAME.match(name) is not None


def _program_word(words: Sequence[str]) -> str | None:
    """The program an entrypoint (or cmd) runs: past ``env``/``tini`` wrappers and their options, and
    into ``sh -c "..."``'s command."""
    rest = [w for w in list(words)[:MAX_PATH_DIRS] if isinstance(w, str)]
    while rest:
        word = rest[0]
        base = posixpath.basename(word)
        if base in WRAPPERS:
            rest = rest[1:]
            while rest and (rest[0].startswith("-") or "=" in rest[0]):
                rest = rest[1:]
            continue
        if word == "exec" or re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            rest = rest[1:]  # a shell command's `exec` and its variable assignments
            continue
        if base in SHELLS and len(rest) >= 3 and rest[1] == "-c":
            try:
                inner = shlex.split(rest[2][:4096])
            except ValueError:
                return word
            return _program_word(inner) if inner else word
        return word or None
    return None


def _script_interpreter(rt: ImageRoot, script: str, path_value: str) -> str | None:
    """The python a script's ``#!`` line names, when it exists in the image."""
    head = rt.read(script, SCRIPT_HEAD)
    if not head:
        return None
    kind, raw = interpreter_line(head)
    named: str | None = raw if isinstance(raw, str) else None
    if not named:
        return None
    if kind == "env":
        if not _is_python_name(posixpath.basename(named)):
            return None
        return _search_path(rt, named, path_value, _usable(rt)) if "/" not in named else None
    if kind == "relocatable":
        resolved = rt.resolve(script)
        named = _join(posixpath.dirname(resolved or script), named)
    if kind in ("path", "relocatable") and named.startswith("/"):
        resolved = rt.resolve(named)
        names = {posixpath.basename(named), posixpath.basename(resolved or "")}
        if any(_is_python_name(n) for n in names) and _usable(rt)(named):
            return named
    return None


def find_interpreter(
    root: Path,
    config_env: Mapping[str, str],
    entrypoint: Sequence[str] | None,
    cmd: Sequence[str] | None,
    image_python: str | None,
) -> str:
    """The image path of the interpreter the image runs (unresolved, as a shell would name it).

    ``image_python`` when given (a path, or a name looked up on the config's PATH); else the program of
    the Entrypoint (else of Cmd) when it names a python, or is a script whose ``#!`` line names one that
    exists; else the first ``python3``, then ``python``, on the config's PATH (Docker's default PATH when
    it sets none). Links are followed inside ``root`` only. Raises ``UsageError`` when none is found."""
    rt = ImageRoot(root)
    path_value = config_env.get("PATH") or DEFAULT_PATH
    usable = _usable(rt)
    tip = "Name the image's interpreter with --image-python PATH (a path inside the image)."
    if image_python is not None:
        found = (
            (image_python if usable(image_python) else None)
            if image_python.startswith("/")
            else _search_path(rt, image_python, path_value, usable)
            if "/" not in image_python
            else None
        )
        if found is None:
            raise UsageError(f"--image-python {image_python}: no such interpreter in the image", tip=tip)
        return found
    for words in (entrypoint, cmd):
        if not words:
            continue
        program = _program_word(words)
        if program is None:
            break
        if "/" in program:
            location: str | None = program if program.startswith("/") else None
        else:
            location = _search_path(rt, program, path_value, usable)
        if location is not None and usable(location):
            resolved = rt.resolve(location)
            names = {posixpath.basename(location), posixpath.basename(resolved or "")}
            if any(_is_python_name(n) for n in names):
                return location
            from_script = _script_interpreter(rt, location, path_value)
            if from_script is not None:
                return from_script
        break  # Entrypoint runs and Cmd is its arguments: only the first given names the program
    for name in ("python3", "python"):
        found = _search_path(rt, name, path_value, usable)
        if found is not None:
            return found
    raise UsageError("no Python interpreter found in the image (entrypoint, cmd or PATH)", tip=tip)


# ------------------------------------------------------------------------------------------- the layout


@dataclass(frozen=True, kw_only=True, slots=True)
class Layout:
    """How the interpreter at ``executable`` starts, as worked out from the image's files."""

    executable: str
    version: tuple[int, int, int | None]
    version_source: str
    abi_thread: str  # "t" for a free-threaded build
    prefix: str
    base_prefix: str
    platlibdir: str
    environment: str  # venv | conda | system
    venv_cfg_path: str | None
    venv_cfg: dict[str, str] | None
    debian: bool  # Debian's site.py (dist-packages)
    sysconfig: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def minor_name(self) -> str:
        return f"python{self.version[0]}.{self.version[1]}{self.abi_thread}"

    @property
    def stdlib(self) -> str:
        return _join(self.base_prefix, self.platlibdir, self.minor_name)

    @property
    def include_system(self) -> bool:
        return bool(self.venv_cfg) and (self.venv_cfg or {}).get(
            "include-system-site-packages", ""
        ).lower() == ("true")


_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def _version_of(text: str | None) -> tuple[int, int, int | None] | None:
    found = _VERSION.match(text.strip()) if text else None
    if found is None:
        return None
    micro = int(found.group(3)) if found.group(3) is not None else None
    return int(found.group(1)), int(found.group(2)), micro


def _venv_config(rt: ImageRoot, executable: str) -> tuple[str | None, dict[str, str] | None]:
    """``(path, parsed)`` of the pyvenv.cfg beside the executable or one folder up (PEP 405)."""
    folder = posixpath.dirname(executable)
    for candidate in (_join(folder, "pyvenv.cfg"), _join(folder, "..", "pyvenv.cfg")):
        if rt.lexists(candidate):
            text = rt.text(candidate, MAX_TEXT)
            return candidate, (parse_config(text) if text is not None else None)
    return None, None


def _link_names(rt: ImageRoot, path: str) -> list[str]:
    """The file names ``path`` goes through as its links are followed (itself first), bounded."""
    names = [posixpath.basename(path)]
    current = path
    for _ in range(MAX_LINKS):
        parent = rt.resolve(current, last=False)
        if parent is None:
            break
        try:
            target = os.readlink(rt.host(parent))  # noqa: PTH115
        except (OSError, ValueError):
            break
        current = _join(posixpath.dirname(parent), target) if not target.startswith("/") else target
        names.append(posixpath.basename(current))
    return names


def _stdlib_prefix(rt: ImageRoot, start: str, minor: int | None, thread: str) -> tuple[str, str, int] | None:
    """``(prefix, platlibdir, minor)``: the first folder from ``start`` up whose ``lib/python3.X`` (or
    ``lib64``) holds ``os.py``, as getpath's landmark search goes; any minor when ``minor`` is None."""
    folder = posixpath.normpath(start) if start.startswith("/") else "/"
    while True:
        for libdir in ("lib", "lib64"):
            base = _join(folder, libdir)
            if minor is not None:
                options = [minor]
            else:
                options = sorted(
                    {
                        int(m.group(1))
                        for n in rt.listdir(base, 4096)
                        if (m := re.fullmatch(r"python3\.(\d{1,3})t?", n)) is not None
                    },
                    reverse=True,
                )
            for option in options:
                if rt.is_file(_join(base, f"python3.{option}{thread}", "os.py")):
                    return folder, libdir, option
        if folder == "/":
            return None
        folder = posixpath.dirname(folder)


def _sysconfig_vars(rt: ImageRoot, stdlib: str, triplet: str) -> dict[str, Any]:
    """The build variables of the stdlib's ``_sysconfigdata_*.py`` (its ``build_time_vars`` literal, parsed,
    never run): SOABI, ABIFLAGS, Py_ENABLE_SHARED, LIBDIR, LDLIBRARY, INSTSONAME, PLATLIBDIR. {} if none."""
    names = [n for n in rt.listdir(stdlib, 4096) if n.startswith("_sysconfigdata_") and n.endswith(".py")]
    names.sort(key=lambda n: (triplet not in n, n))
    for name in names[:4]:
        text = rt.text(_join(stdlib, name), MAX_SYSCONFIG)
        if not text:
            continue
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
        for node in tree.body:
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "build_time_vars"
            ):
                try:
                    values = ast.literal_eval(node.value)
                except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
                    continue
                if isinstance(values, dict):
                    wanted = ("SOABI", "ABIFLAGS", "Py_ENABLE_SHARED", "LIBDIR", "LDLIBRARY", "INSTSONAME")
                    return {k: values[k] for k in (*wanted, "PLATLIBDIR") if k in values}
    return {}


def _header_version(rt: ImageRoot, base_prefix: str, name: str) -> str | None:
    """``PY_VERSION`` of the installation's ``include/python3.X/patchlevel.h`` (what the probe's
    ``header_version`` reads)."""
    text = rt.text(_join(base_prefix, "include", name, "patchlevel.h"), MAX_SMALL)
    found = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', text or "")
    return found.group(1) if found else None


def _package_db_version(rt: ImageRoot, package: str) -> str | None:
    """The upstream version dpkg's status file records for ``package`` (``3.11.2`` of ``3.11.2-6``)."""
    text = rt.text("/var/lib/dpkg/status", MAX_PACKAGE_DB)
    if not text:
        return None
    for stanza in text.split("\n\n"):
        if not stanza.startswith(f"Package: {package}\n") and f"\nPackage: {package}\n" not in stanza:
            continue
        found = re.search(r"^Version: (?:\d+:)?([0-9][0-9.]*)", stanza, re.M)
        if found and "install ok installed" in stanza:
            return found.group(1).rstrip(".")
    return None


def _layout(rt: ImageRoot, executable: str, env: Mapping[str, str], triplet: str) -> Layout:
    notes: list[str] = []
    cfg_path, cfg = _venv_config(rt, executable)
    names = _link_names(rt, executable)
    thread = "t" if any(PYTHON_NAME.match(n) and n.endswith("t") for n in names) else ""
    named_minor = next(
        (int(m.group(1)) for n in names if (m := PYTHON_NAME.match(n)) is not None and m.group(1)), None
    )
    resolved = rt.resolve(executable)
    venv_prefix = posixpath.dirname(cfg_path) if cfg_path is not None else None
    home = (cfg or {}).get("home") if cfg is not None else None
    cfg_version = _version_of((cfg or {}).get("version") or (cfg or {}).get("version_info"))
    # getpath: a venv's home is where the base interpreter is; else the executable's real folder.
    if venv_prefix is not None and home:
        start = home
    elif resolved is not None:
        start = posixpath.dirname(resolved)
    else:
        start = posixpath.dirname(executable)
    minor = named_minor if named_minor is not None else (cfg_version[1] if cfg_version else None)
    found = _stdlib_prefix(rt, start, minor, thread)
    if found is None and minor is not None:
        found = _stdlib_prefix(rt, start, None, thread)  # another minor's stdlib: said below
    if found is not None:
        base_prefix, platlibdir, stdlib_minor = found
    else:
        base_prefix, platlibdir, stdlib_minor = posixpath.dirname(start), "lib", None
        notes.append(f"no standard library found from {start} up")
    if named_minor is not None:
        minor, source = named_minor, f"the interpreter's file name ({'/'.join(names[:4])})"
    elif cfg_version is not None:
        minor, source = cfg_version[1], f"{cfg_path} (version)"
    elif stdlib_minor is not None:
        minor, source = stdlib_minor, f"{_join(base_prefix, platlibdir)}/python3.{stdlib_minor}/os.py"
    else:
        raise UsageError(
            f"cannot tell the Python version of {executable} in the image from its files",
            tip="Name the image's interpreter with --image-python PATH (a path inside the image).",
        )
    if stdlib_minor is not None and stdlib_minor != minor:
        notes.append(f"the standard library found is python3.{stdlib_minor}'s, not python3.{minor}'s")
    name = f"python3.{minor}{thread}"
    micro: int | None = None
    micro_sources: list[tuple[str | None, str]] = [
        (_header_version(rt, base_prefix, name), f"{base_prefix}/include/{name}/patchlevel.h"),
        (_package_db_version(rt, f"python3.{minor}-minimal"), f"dpkg: python3.{minor}-minimal"),
        (
            f"{cfg_version[0]}.{cfg_version[1]}.{cfg_version[2]}"
            if cfg_version and cfg_version[2] is not None
            else None,
            f"{cfg_path} (version)",
        ),
        (env.get("PYTHON_VERSION"), "the config's PYTHON_VERSION"),
    ]
    for text, where in micro_sources:
        parsed = _version_of(text)
        if parsed is not None and parsed[:2] == (3, minor) and parsed[2] is not None:
            micro = parsed[2]
            source = f"{source}; micro from {where}"
            break
    stdlib = _join(base_prefix, platlibdir, name)
    sysconfig = _sysconfig_vars(rt, stdlib, triplet)
    if isinstance(sysconfig.get("PLATLIBDIR"), str) and sysconfig["PLATLIBDIR"] in ("lib", "lib64"):
        platlibdir = sysconfig["PLATLIBDIR"]
    site_py = rt.text(_join(stdlib, "site.py"), MAX_SITE_PY) or ""
    if venv_prefix is not None and home:
        prefix, environment = venv_prefix, "venv"
    else:
        prefix = base_prefix
        environment = "conda" if rt.is_dir(_join(prefix, "conda-meta")) else "system"
        if venv_prefix is not None:
            notes.append(f"{cfg_path} names no home: not a venv site.py would take")
    if env.get("PYTHONHOME"):
        notes.append("PYTHONHOME is set in the config: its prefix is not modelled here")
    return Layout(
        executable=executable,
        version=(3, minor, micro),
        version_source=source,
        abi_thread=thread,
        prefix=prefix,
        base_prefix=base_prefix,
        platlibdir=platlibdir,
        environment=environment,
        venv_cfg_path=cfg_path,
        venv_cfg=cfg,
        debian="dist-packages" in site_py,
        sysconfig=sysconfig,
        notes=notes,
    )


# ---------------------------------------------------------------------------------------- sys.path


@dataclass(kw_only=True, slots=True)
class _Paths:
    entries: list[dict[str, Any]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    pth_imports: list[dict[str, str]] = field(default_factory=list)
    site_dirs: list[str] = field(default_factory=list)

    def add(self, path: str, origin: str, pth: str | None = None) -> None:
        key = posixpath.normpath(path)
        if key in self.keys:
            return  # site.removeduppaths: the first one stands
        self.keys.add(key)
        self.entries.append({"path": path, "origin": origin, "pth": pth})


def _site_candidates(layout: Layout, prefix: str, in_venv: bool) -> list[str]:
    """The site folders ``site.getsitepackages`` lists for ``prefix`` (existing or not)."""
    ver = layout.minor_name
    if layout.debian:
        out = [_join(prefix, "lib", ver, "site-packages")] if in_venv else []
        return [
            *out,
            _join(prefix, "local/lib", ver, "dist-packages"),
            _join(prefix, "lib", "python3", "dist-packages"),
            _join(prefix, "lib", ver, "dist-packages"),
        ]
    libdirs = [layout.platlibdir] + (["lib"] if layout.platlibdir != "lib" else [])
    return [_join(prefix, libdir, ver, "site-packages") for libdir in libdirs]


def _user_home(rt: ImageRoot, env: Mapping[str, str], user: str | None) -> str | None:
    """The home folder of the user the image runs as: HOME from the config, else its /etc/passwd line."""
    if env.get("HOME"):
        return env["HOME"]
    who = (user or "root").split(":", 1)[0] or "root"
    for line in (rt.text("/etc/passwd", MAX_SMALL) or "").splitlines():
        parts = line.split(":")
        if len(parts) >= 6 and (parts[0] == who or parts[2] == who):
            return parts[5] or None
    return None


def _add_pth(rt: ImageRoot, folder: str, paths: _Paths, budget: list[int]) -> None:
    """The ``.pth`` files of the site folder ``folder`` as site.py reads them (sorted by name): a path line
    that exists is added; an ``import`` line is never run, only named in ``pth_imports``."""
    names = [n for n in rt.listdir(folder) if n.endswith(".pth") and not n.startswith(".")]
    for name in names[:MAX_PTH_FILES]:
        if budget[0] <= 0:
            return
        pth = _join(folder, name)
        data = rt.read(pth, min(MAX_PTH_BYTES, budget[0]))
        if data is None:
            continue
        budget[0] -= len(data)
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            continue  # site.py cannot read it either
        read = 0
        for raw in text.splitlines():
            line = raw.rstrip("\n")
            if line.startswith("#") or not line.strip():
                continue
            if read >= MAX_PTH_LINES:
                break
            read += 1
            if line.startswith(("import ", "import\t")):
                named = [p for p in code_paths(line) if rt.is_dir(p)]  # type: ignore[no-untyped-call]
                paths.pth_imports.append({"pth": pth, "line": line[:300], "paths": ", ".join(named)})
                continue
            entry = _join(folder, line.rstrip())
            if rt.lexists(entry) and rt.resolve(entry) is not None:
                paths.add(entry, "pth", pth)


def _sys_path(
    rt: ImageRoot, layout: Layout, env: Mapping[str, str], user: str | None
) -> tuple[_Paths, str | None]:
    """sys.path (image paths, in order, with their origins) and the user site folder."""
    paths = _Paths()
    workdir = "/"
    for part in (env.get("PYTHONPATH") or "").split(":"):
        if part:
            paths.add(_join(workdir, part), "pythonpath")
    base = layout.base_prefix
    version = layout.version
    paths.add(
        _join(base, layout.platlibdir, f"python{version[0]}{version[1]}{layout.abi_thread}.zip"), "stdlib"
    )
    paths.add(layout.stdlib, "stdlib")
    paths.add(_join(layout.stdlib, "lib-dynload"), "stdlib")
    in_venv = layout.environment == "venv"
    user_enabled = (not in_venv or layout.include_system) and not env.get("PYTHONNOUSERSITE")
    user_site: str | None = None
    if user_enabled:
        base_user = env.get("PYTHONUSERBASE") or (
            _join(home, ".local") if (home := _user_home(rt, env, user)) else None
        )
        if base_user:
            user_site = _join(base_user, "lib", layout.minor_name, "site-packages")
    budget = [MAX_PTH_TOTAL]
    folders: list[tuple[str, str]] = []
    if user_site is not None:
        folders.append((user_site, "user-site"))
    folders += [(f, "site") for f in _site_candidates(layout, layout.prefix, in_venv)]
    if in_venv and layout.include_system:
        folders += [(f, "base-site") for f in _site_candidates(layout, base, False)]
    for folder, origin in folders:
        if not rt.is_dir(folder):
            continue
        paths.add(folder, origin)
        paths.site_dirs.append(folder)
        _add_pth(rt, folder, paths, budget)
    return paths, user_site


# ----------------------------------------------------------------------------------- distributions


def _read_text(rt: ImageRoot, path: str, cap: int = MAX_METADATA) -> str | None:
    return rt.text(path, cap)


def _distributions(
    rt: ImageRoot, entries: Sequence[str], deadline: Deadline
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The probe's distribution dicts (image paths), in sys.path order, and ``{host folder: entry}`` of the
    folders they were read from (install_facts reads them there)."""
    out: list[dict[str, Any]] = []
    hosts: dict[str, str] = {}
    seen: set[str] = set()
    seen_dirs: set[str] = set()
    for entry in entries:
        deadline.check("reading the image's distributions", f"{len(out)} read")
        resolved = rt.resolve(entry)
        if resolved is None or not rt.is_dir(resolved):
            continue
        for name in rt.listdir(resolved):
            low = name.lower()
            if not low.endswith((".dist-info", ".egg-info")) or name.startswith("~"):
                continue
            if len(out) >= MAX_DISTRIBUTIONS:
                return out, hosts
            mdir = _join(entry, name)
            real = rt.resolve(_join(resolved, name))
            if real is None or real in seen_dirs:
                continue
            seen_dirs.add(real)
            is_dir = rt.is_dir(real)
            if is_dir:
                text = _read_text(rt, _join(real, "METADATA")) or _read_text(rt, _join(real, "PKG-INFO"))
            else:
                text = _read_text(rt, real)  # an egg-info file is the PKG-INFO itself
            if not text:
                continue
            dist_name, version, requires = metadata_headers(text)  # type: ignore[no-untyped-call]
            if not dist_name or version is None:
                continue

            def meta(file: str, real: str = real, is_dir: bool = is_dir) -> str | None:
                return _read_text(rt, _join(real, file)) if is_dir else None

            requires_txt = meta("requires.txt") if not requires else None
            if requires_txt and len(requires_txt.encode("utf-8", "replace")) < MAX_METADATA:
                requires = _egg_requires(rt.host(real))  # its sections become markers there
            direct_text = meta("direct_url.json")
            try:
                direct = json.loads(direct_text) if direct_text else None
            except ValueError:
                direct = None
            installer = meta("INSTALLER")
            canonical = canonical_name(dist_name)
            record = _read_text(rt, _join(real, "RECORD"), MAX_RECORD) if is_dir else None
            hosts[rt.host(resolved)] = entry
            out.append(
                {
                    "name": dist_name,
                    "version": version,
                    "installer": installer.strip() if installer else None,
                    "requires": requires,
                    "direct_url": direct,
                    "wheel_tags": [
                        line.split(":", 1)[1].strip()
                        for line in (meta("WHEEL") or "").splitlines()
                        if line.startswith("Tag:")
                    ],
                    "location": entry,
                    "metadata_dir": mdir,
                    "shadowed": canonical in seen,
                    "native_files": parse_record_natives(record or ""),
                }
            )
            seen.add(canonical)
    return out, hosts


def _egg_requires(host_mdir: str) -> list[str]:
    """An egg-info's ``requires.txt`` as importlib.metadata turns it into requirement lines (its sections
    become markers); the folder is inside the flattened root and the file was read capped already."""
    try:
        return list(PathDistribution(Path(host_mdir)).requires or [])
    except Exception:  # a malformed requires.txt: no requirements read, as the probe would fail to
        return []


# ------------------------------------------------------------------------------------ native facts


def _libc(rt: ImageRoot, triplet: str) -> tuple[str | None, str | None, str]:
    """``(name, version, source)`` of the image's C library: musl from its loader (``ld-musl-*``), glibc
    from ``libc.so.6``'s banner (``... release version 2.36.``), its old file name (``libc-2.31.so``) or,
    as a lower bound, its highest ``GLIBC_2.N`` symbol version."""
    musl = [n for n in rt.listdir("/lib", 4096) if n.startswith("ld-musl-") and ".so" in n]
    if musl:
        db = rt.text("/lib/apk/db/installed", MAX_PACKAGE_DB) or ""
        found = re.search(r"^P:musl\nV:(\d+\.\d+\.\d+)", db, re.M)
        if found:
            return "musl", found.group(1), "/lib/apk/db/installed"
        data = rt.read(_join("/lib", musl[0]), MAX_LIBC) or b""
        raw = re.search(rb"\x00(1\.\d+\.\d+)\x00", data)
        if raw:
            return "musl", raw.group(1).decode(), f"/lib/{musl[0]}"
        return "musl", None, f"/lib/{musl[0]}"
    heads = [triplet + "-linux-gnueabihf" if triplet == "arm" else triplet + "-linux-gnu"]
    candidates = [f"{d}/{h}/libc.so.6" for h in heads for d in ("/lib", "/usr/lib")]
    candidates += ["/lib64/libc.so.6", "/usr/lib64/libc.so.6", "/lib/libc.so.6", "/usr/lib/libc.so.6"]
    for candidate in candidates:
        resolved = rt.resolve(candidate)
        if resolved is None or not rt.is_file(resolved):
            continue
        data = rt.read(resolved, MAX_LIBC) or b""
        banner = re.search(rb"GNU C Library [^\n\x00]{0,200}?version (\d+)\.(\d+)", data)
        if banner:
            return "glibc", f"{int(banner.group(1))}.{int(banner.group(2))}", candidate
        named = re.fullmatch(r"libc-(\d+)\.(\d+)\.so", posixpath.basename(resolved))
        if named:
            return "glibc", f"{named.group(1)}.{named.group(2)}", resolved
        versions = [int(v) for v in re.findall(rb"GLIBC_2\.(\d+)", data)]
        if versions:
            return "glibc", f"2.{max(versions)}", f"{candidate} (symbol versions: a lower bound)"
        return "glibc", None, candidate
    return None, None, "no libc.so.6 or ld-musl found"


def _platform_tags(arch: str, libc: str | None, version: str | None) -> list[str]:
    """The platform tags of a Linux machine with this libc, as packaging's ``_linux_platforms`` yields
    them on one (most specific first), ``linux_<arch>`` last."""
    out: list[str] = []
    parsed = _version_of(version)
    if libc == "glibc" and parsed is not None:
        major, top = parsed[0], parsed[1]
        lowest = 5 if arch in ("x86_64", "i686") else 17
        for minor in range(top, lowest - 1, -1):
            out.append(f"manylinux_{major}_{minor}_{arch}")
            legacy = LEGACY_MANYLINUX.get((major, minor))
            if legacy is not None:
                out.append(f"{legacy}_{arch}")
    elif libc == "musl" and parsed is not None:
        out += [f"musllinux_{parsed[0]}_{minor}_{arch}" for minor in range(parsed[1], -1, -1)]
    out.append(f"linux_{arch}")
    return out


def _all_tags(layout: Layout, platforms: list[str], implementation: str) -> list[str]:
    """Every tag the image's interpreter takes, in preference order (cpython_tags, then compatible_tags)."""
    if implementation != "CPython":
        return []
    # Lazy: packaging is a heavy third-party import; only an image snapshot needs its tags.
    from packaging import tags

    version = (layout.version[0], layout.version[1])
    abi = f"cp{version[0]}{version[1]}{layout.abi_thread}"
    found = list(tags.cpython_tags(python_version=version, abis=[abi], platforms=platforms))
    found += tags.compatible_tags(
        python_version=version, interpreter=f"cp{version[0]}{version[1]}", platforms=platforms
    )
    return [str(t) for t in found]


def _extension_suffixes(layout: Layout, machine_triplet: str) -> list[str]:
    soabi = layout.sysconfig.get("SOABI")
    if not isinstance(soabi, str) or not soabi:
        soabi = f"cpython-{layout.version[0]}{layout.version[1]}{layout.abi_thread}-{machine_triplet}"
    suffixes = [f".{soabi}.so"]
    if not layout.abi_thread:
        suffixes.append(".abi3.so")
    return [*suffixes, ".so"]


def _split_tag(text: str) -> list[str]:
    """The tags a compressed ``Tag:`` value stands for (``py2.py3-none-any`` is two)."""
    parts = text.split("-")
    if len(parts) != 3:
        return [text]
    return [
        f"{i}-{a}-{p}" for i in parts[0].split(".") for a in parts[1].split(".") for p in parts[2].split(".")
    ]


def _wheel_support(packages: Sequence[Mapping[str, Any]], known: set[str], source: str) -> dict[str, Any]:
    """As ``venv_facts.wheel_support``, against the image interpreter's tags."""
    checked = count = 0
    unsupported: list[dict[str, Any]] = []
    for dist in packages:
        wheel_tags = dist.get("wheel_tags") or []
        if not wheel_tags or dist.get("shadowed"):
            continue
        checked += 1
        if any(t in known for text in wheel_tags for t in _split_tag(text)):
            continue
        count += 1
        if len(unsupported) < MAX_RECORDED:
            unsupported.append(
                {
                    "name": dist.get("name") or "",
                    "version": dist.get("version") or "",
                    "metadata_dir": dist.get("metadata_dir") or "",
                    "tags": list(wheel_tags[:TAGS_SHOWN]),
                }
            )
    return {"source": source, "checked": checked, "unsupported": unsupported, "count": count}


# ---------------------------------------------------------------------------------- venv and scripts


def _venv_config_facts(rt: ImageRoot, layout: Layout) -> dict[str, Any] | None:
    """As ``venv_facts.venv_config``, with ``home`` looked up in the image."""
    if layout.venv_cfg_path is None or layout.environment != "venv":
        return None
    cfg = layout.venv_cfg
    if cfg is None:
        return {"path": layout.venv_cfg_path, "read": False}
    home = cfg.get("home")
    home_exists = bool(home) and rt.is_dir(home or "")
    home_python = None
    if home and home_exists:
        minor = f"{layout.version[0]}.{layout.version[1]}"
        for name in (f"python{minor}", "python3", "python", f"python{minor}t"):
            if rt.is_file(_join(home, name)):
                home_python = _join(home, name)
                break
    creator = "venv"
    if "uv" in cfg:
        creator = "uv " + cfg["uv"]
    elif "virtualenv" in cfg:
        creator = "virtualenv " + cfg["virtualenv"]
    return {
        "path": layout.venv_cfg_path,
        "read": True,
        "home": home,
        "home_exists": home_exists,
        "home_python": home_python,
        "version": cfg.get("version") or cfg.get("version_info"),
        "include_system_site_packages": cfg.get("include-system-site-packages", "").lower() == "true",
        "relocatable": cfg.get("relocatable", "").lower() == "true",
        "creator": creator,
    }


def _scheme(layout: Layout) -> tuple[str, list[str]]:
    """The scripts folder and the own site folders of the interpreter's default install scheme."""
    ver = layout.minor_name
    if layout.environment != "venv" and layout.debian:
        local = _join(layout.prefix, "local")
        return _join(local, "bin"), [_join(local, "lib", ver, "dist-packages")]
    return _join(layout.prefix, "bin"), [_join(layout.prefix, layout.platlibdir, ver, "site-packages")]


def _check_script(
    rt: ImageRoot, path: str, scripts_real: str, layout: Layout, in_venv: bool
) -> tuple[str | None, str | None]:
    """As ``venv_facts._check_script``, every existence test made inside the image."""
    if not rt.lexists(path):
        return "missing", None
    resolved = rt.resolve(path)
    if rt.is_link(path):
        if resolved is None:
            return "missing", None
        if posixpath.dirname(resolved) != scripts_real:
            return "skipped", None
    mode = rt.mode(path)
    if mode is None or not stat.S_ISREG(mode):
        return "skipped", None
    head = rt.read(path, SCRIPT_HEAD)
    if head is None:
        return "unreadable", None
    kind, interpreter = interpreter_line(head)
    if kind == "none":
        return "no-interpreter-line", None
    if kind == "env":
        return None, interpreter
    if kind == "relocatable":
        interpreter = _join(posixpath.dirname(resolved or path), interpreter or "python")
    if not interpreter or not interpreter.startswith("/") or not rt.is_file(interpreter):
        return "interpreter-missing", interpreter
    folder_real = rt.resolve(posixpath.dirname(interpreter))
    belongs = folder_real == scripts_real or (
        not in_venv and rt.resolve(interpreter) == rt.resolve(layout.executable)
    )
    if not belongs:
        return "foreign-interpreter", interpreter
    if not mode & 0o111:
        return "not-executable", interpreter
    return None, interpreter


def _scripts(rt: ImageRoot, layout: Layout, packages: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """As ``venv_facts.scripts_check``: the scripts the environment's own distributions declare."""
    folder, own = _scheme(layout)
    scripts_real = rt.resolve(folder) or folder
    own_real = {rt.resolve(f) or f for f in own}
    in_venv = layout.environment == "venv"
    declared = checked = skipped = count = 0
    truncated = False
    broken: list[dict[str, Any]] = []
    for dist in packages:
        location = dist.get("location") or ""
        if (
            dist.get("shadowed")
            or not dist.get("metadata_dir")
            or (rt.resolve(location) or "") not in own_real
        ):
            continue
        text = rt.text(_join(dist["metadata_dir"], "entry_points.txt"), MAX_TEXT)
        if not text:
            continue
        for kind, name in declared_scripts(text):
            declared += 1
            if checked + skipped >= MAX_SCRIPTS:
                truncated = True
                continue
            path = _join(folder, name)
            problem, interpreter = _check_script(rt, path, scripts_real, layout, in_venv)
            if problem == "skipped":
                skipped += 1
                continue
            checked += 1
            if problem is None:
                continue
            count += 1
            if len(broken) < MAX_RECORDED:
                broken.append(
                    {
                        "name": name,
                        "kind": kind,
                        "distribution": dist.get("name") or "",
                        "version": dist.get("version") or "",
                        "path": path,
                        "problem": problem,
                        "interpreter": interpreter,
                    }
                )
    return {
        "folder": folder,
        "declared": declared,
        "checked": checked,
        "skipped": skipped,
        "broken": broken,
        "count": count,
        "truncated": truncated,
    }


# ----------------------------------------------------------------------------- start-up and torch


def _customize(
    rt: ImageRoot, sys_path: Sequence[str], suffixes: Sequence[str], user_site: bool
) -> list[dict[str, Any]]:
    """As ``startup.customize_files``: the first ``sitecustomize`` (and ``usercustomize`` where the user
    site is on) that the path finder would find on sys.path; its source read as text, never run."""
    out: list[dict[str, Any]] = []
    for name in ("sitecustomize", "usercustomize"):
        if name == "usercustomize" and not user_site:
            continue
        for entry in sys_path:
            if not rt.is_dir(entry):
                continue
            package = _join(entry, name, "__init__.py")
            if rt.is_dir(_join(entry, name)) and rt.is_file(package):
                origin: str | None = package
            else:
                origin = next(
                    (
                        _join(entry, name + s)
                        for s in (*suffixes, ".py", ".pyc")
                        if rt.is_file(_join(entry, name + s))
                    ),
                    None,
                )
            if origin is None:
                continue
            if origin.endswith(".py"):
                data = rt.read(origin, CUSTOMIZE_BYTES + 1)
                text = data[:CUSTOMIZE_BYTES].decode("utf-8", "replace") if data is not None else None
                out.append(
                    {
                        "name": name,
                        "path": origin,
                        "mentions": [m for m in MENTIONS if m in text] if text is not None else [],
                        "read": text is not None,
                        "truncated": data is not None and len(data) > CUSTOMIZE_BYTES,
                    }
                )
            break  # the first one found is the one imported (a compiled one has no source to read)
    return out


def _preload(rt: ImageRoot, env: Mapping[str, str]) -> dict[str, str]:
    """As ``startup.preload_targets``: each LD_PRELOAD path that resolves elsewhere in the image."""
    out: dict[str, str] = {}
    value = env.get("LD_PRELOAD") or ""
    for entry in [e for e in value.replace(":", " ").split() if e][:MAX_PRELOAD]:
        if not entry.startswith("/"):
            continue
        real = rt.resolve(entry)
        if real is not None and real != posixpath.normpath(entry):
            out[entry] = real
    return out


def _torch(rt: ImageRoot, sys_path: Sequence[str]) -> dict[str, Any]:
    """As ``torch_static.torch_static``: every torch tree on sys.path, the first one's version file."""
    trees: list[str] = []
    real_trees: set[str] = set()
    for entry in sys_path:
        candidate = _join(entry, "torch")
        if not rt.is_file(_join(candidate, "__init__.py")):
            continue
        real = rt.resolve(candidate) or candidate
        if real not in real_trees:
            real_trees.add(real)
            trees.append(candidate)
    static = None
    if trees:
        version_file = rt.resolve(_join(trees[0], "version.py"))
        values = (
            read_version_file(rt.host(version_file))  # type: ignore[no-untyped-call]
            if version_file is not None and rt.is_file(version_file)
            else {}
        )
        static = version_facts(trees[0], values)  # type: ignore[no-untyped-call]
    return {"trees": trees, "static": static}


def _folder_aliases(rt: ImageRoot, folders: Sequence[str]) -> dict[str, str]:
    """As ``interpreter.folder_aliases``, in the image: linked folders -> where they lead."""
    out: dict[str, str] = {}
    for folder in folders:
        if not folder or not folder.startswith("/"):
            continue
        normal = posixpath.normpath(folder)
        real = rt.resolve(normal)
        if real is None or real == normal:
            continue
        parts = normal.split("/")
        for i in range(2, len(parts) + 1):
            head = "/".join(parts[:i]) or "/"
            if rt.is_link(head):
                out[head] = rt.resolve(head) or head
                break
        else:
            out[normal] = real
    return dict(sorted(out.items()))


def _distro(rt: ImageRoot) -> str | None:
    for candidate in ("/etc/os-release", "/usr/lib/os-release"):
        for line in (rt.text(candidate, MAX_SMALL) or "").splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"').strip("'") or None
    return None


def _env(config_env: Mapping[str, str]) -> dict[str, str]:
    """The config's variables the live probe collects (``environment.collect_env``'s allowlist)."""
    out = {}
    for name, value in config_env.items():
        upper = name.upper()
        if isinstance(value, str) and (upper in ENV_NAMES or upper.startswith(ENV_PREFIXES)):
            out[name] = value
    return out


def _to_image(value: Any, rt: ImageRoot, hosts: Mapping[str, str]) -> Any:
    """``value`` with every host path under the root written as the image's (a read folder by the entry
    that named it, the rest by stripping the root)."""
    if isinstance(value, str):
        for host, entry in hosts.items():
            if value == host:
                return entry
            if value.startswith(host + "/"):
                return entry.rstrip("/") + value[len(host) :]
        return rt.image(value)
    if isinstance(value, list):
        return [_to_image(v, rt, hosts) for v in value]
    if isinstance(value, dict):
        return {k: _to_image(v, rt, hosts) for k, v in value.items()}
    return value


def _install(
    rt: ImageRoot, packages: Sequence[Mapping[str, Any]], hosts: Mapping[str, str]
) -> dict[str, Any]:
    """``install_facts`` run over the host copies of the site folders, its paths written back as the
    image's; editable sources are looked for in the image."""
    by_entry = {entry: host for host, entry in hosts.items()}
    host_packages = []
    for dist in packages:
        host = by_entry.get(dist["location"])
        if host is None:
            continue
        name = posixpath.basename(dist["metadata_dir"])
        host_packages.append(
            {**dist, "location": host, "metadata_dir": host + "/" + name, "direct_url": None}
        )
    ordered = dict(sorted(hosts.items(), key=lambda kv: -len(kv[0])))
    out: dict[str, Any] = _to_image(install_facts(host_packages), rt, ordered)
    out["sources_missing"] = editable_sources(packages, rt.is_dir)  # type: ignore[no-untyped-call]
    _natives_missing(rt, packages, out["missing"])
    return out


def _natives_missing(rt: ImageRoot, packages: Sequence[Mapping[str, Any]], missing: list[Any]) -> None:
    """The native files a RECORD lists that the image lacks (a later layer's whiteout, a COPY that missed
    them), added to ``missing`` by owner as ``natives``. A live snapshot leaves them to its native tree
    (ENV-NATIVE-FILE-MISSING); in an image a layer deleted what another installed, the cause that the
    native tree's findings (the import that fails, the copy found instead) fold under."""
    for dist in packages:
        location, owner = dist.get("location"), dist.get("metadata_dir")
        if not isinstance(location, str) or not isinstance(owner, str):
            continue
        gone = []
        for native in dist.get("native_files") or []:
            relative = native.get("path") if isinstance(native, dict) else None
            if not isinstance(relative, str) or ".." in relative.split("/") or relative.startswith("/"):
                continue  # a file RECORD places outside the site folder: not this check's
            if not rt.lexists(posixpath.join(location, relative)):
                gone.append(relative)
        if not gone:
            continue
        found = next((m for m in missing if m.get("owner") == owner), None)
        if found is None:
            found = {"owner": owner, "count": 0, "examples": [], "modules": 0}
            missing.append(found)
        found["count"] += len(gone)
        found["natives"] = found.get("natives", 0) + len(gone)
        found["examples"] = (gone + found["examples"])[:MAX_EXAMPLES]


# ---------------------------------------------------------------------------------------- the facts


def image_facts(
    root: Path, image: ImageConfig, *, image_python: str | None, deadline: Deadline | None = None
) -> dict[str, Any]:
    """The facts probe's result for the image unpacked at ``root``: the keys ``Probe.facts`` writes,
    ``done`` True and ``python_version`` ``[3, X, micro or 0]``, redacted as the probe's ``emit`` redacts
    (the config's allowlisted variables included), every path the image's. ``envcheck.collect.facts.
    static_facts`` accepts it. Facts only a run knows are None (``loaded_library``, the CPU, the kernel);
    ``config_checks`` (which runs compilers) and ``stdlib_errors`` are absent. ``image`` (extra, ignored by
    ``static_facts``) says where the interpreter and the version came from, the libc's source, the
    ``.pth`` import lines not run and what could not be modelled.

    Raises ``UsageError`` when no interpreter is found (or its version cannot be told), and
    ``DeadlineExpired`` once ``deadline`` passes."""
    deadline = deadline or Deadline.never()
    rt = ImageRoot(root)
    config_env = dict(image.env or {})
    arch = (image.architecture or "").lower()
    machine, tag_arch, gnu_head = ARCHES.get(arch, (arch or "unknown", arch or "unknown", arch or "unknown"))
    executable = find_interpreter(root, config_env, image.entrypoint, image.cmd, image_python)
    deadline.check("reading the image's interpreter")
    libc_name, libc_version, libc_source = _libc(rt, gnu_head)
    triplet = f"{gnu_head}-linux-{'musl' if libc_name == 'musl' else 'gnueabihf' if arch == 'arm' else 'gnu'}"
    layout = _layout(rt, executable, config_env, triplet)
    implementation = "PyPy" if posixpath.basename(executable).startswith("pypy") else "CPython"
    paths, user_site = _sys_path(rt, layout, config_env, image.user)
    sys_path = [e["path"] for e in paths.entries]
    deadline.check("reading the image's distributions")
    packages, hosts = _distributions(rt, sys_path, deadline)
    platforms = _platform_tags(tag_arch, libc_name, libc_version)
    tags = _all_tags(layout, platforms, implementation)
    suffixes = _extension_suffixes(layout, triplet)
    sysconfig = layout.sysconfig
    abiflags = sysconfig.get("ABIFLAGS") if isinstance(sysconfig.get("ABIFLAGS"), str) else layout.abi_thread
    shared = own = None
    if sysconfig.get("Py_ENABLE_SHARED") and isinstance(sysconfig.get("LIBDIR"), str):
        if isinstance(sysconfig.get("LDLIBRARY"), str):
            shared = _join(sysconfig["LIBDIR"], sysconfig["LDLIBRARY"])
        if isinstance(sysconfig.get("INSTSONAME"), str):
            own = rt.resolve(_join(sysconfig["LIBDIR"], sysconfig["INSTSONAME"]))
    user_enabled = user_site is not None
    python: dict[str, Any] = {
        "implementation": implementation,
        "version": ".".join(str(v) for v in layout.version if v is not None),
        "abi_flags": abiflags,
        "pointer_bits": 32 if arch in BITS_32 else 64,
        "executable": executable,
        "prefix": layout.prefix,
        "base_prefix": layout.base_prefix,
        "exec_prefix": layout.prefix,
        "base_exec_prefix": layout.base_prefix,
        "environment": layout.environment,
        "user_site_enabled": user_enabled,
        "user_site": user_site,
        "sys_path": sys_path,
        "path_origins": paths.entries,
        "wheel_tags": tags[:WHEEL_TAGS_SHOWN],
        # The platform default, as python_facts derives it (no multiprocessing import there either).
        "mp_start_method": "forkserver" if layout.version[1] >= 14 else "fork",
        "shared_library": shared,
        "path_aliases": _folder_aliases(rt, [layout.prefix, layout.base_prefix, *sys_path]),
        "own_library": own,
        "loaded_library": None,
        "build_version": _header_version(rt, layout.base_prefix, layout.minor_name),
        "extension_suffixes": suffixes,
        "wheel_support": (
            _wheel_support(
                packages, set(tags), f"packaging.tags (the image's {tag_arch}, {libc_name} {libc_version})"
            )
            if tags
            else None
        ),
        "venv_config": _venv_config_facts(rt, layout),
    }
    deadline.check("checking the image's scripts")
    python["scripts"] = _scripts(rt, layout, packages)
    env = _env(config_env)
    python["startup"] = {
        "customize": _customize(rt, sys_path, suffixes, user_enabled),
        "preload": _preload(rt, env),
    }
    platform: dict[str, Any] = {
        "system": "Linux",
        "release": "",
        "kernel": "",
        "machine": machine,
        "distro": _distro(rt),
        "libc": {"name": libc_name, "version": libc_version},
        "cpu": {
            "model": None,
            "isa_flags": [],
            "logical_cpus": None,
            "affinity_cpus": None,
            "cgroup_cpu_quota": None,
        },
        "container": ["image"],
        "shm_bytes": None,
        "path_aliases": {
            folder: target
            for folder in SYSTEM_LINKS
            if rt.is_link(folder) and (target := rt.resolve(folder)) is not None
        },
        "hostname": None,
    }
    deadline.check("reading the image's installation records")
    install = _install(rt, packages, hosts)
    result: dict[str, Any] = {
        "stage": None,
        "done": True,
        "python_version": [layout.version[0], layout.version[1], layout.version[2] or 0],
        "python": python,
        "platform": platform,
        "packages": packages,
        "packages_error": None,
        "torch": _torch(rt, sys_path),
        "env": env,
        "install": install,
        "image": {
            "interpreter": executable,
            "version_source": layout.version_source,
            "libc_source": libc_source,
            "pth_imports": paths.pth_imports,
            "notes": layout.notes,
        },
    }
    redacted = redact_json(result)
    assert isinstance(redacted, dict)
    return redacted
