"""Whether the installation can run on its interpreter (PEP 425, 427, 405): the wheel tags each distribution
was installed with against the tags this interpreter takes, the extension-module suffixes it imports, the
venv's ``pyvenv.cfg`` and the console and GUI scripts that ``entry_points.txt`` files declare.

Facts only: nothing is imported (but ``packaging.tags`` or pip's vendored copy) and nothing is run. Reads
are bounded: ``pyvenv.cfg`` and each ``entry_points.txt`` up to ``MAX_TEXT``, at most ``MAX_SCRIPTS``
scripts, the first ``SCRIPT_HEAD`` bytes of each; a script that is a link out of the scripts folder, or
not a regular file, is not opened (a FIFO would block).
"""

import os
import stat
import sys

# At most this many declared scripts are looked at (a venv holds tens; hundreds is already unusual).
MAX_SCRIPTS = 2000
# How much of a script is read: the interpreter line (and pip's / uv's ``'''exec'`` second line).
SCRIPT_HEAD = 4096
# How much of pyvenv.cfg or one entry_points.txt is read.
MAX_TEXT = 256 * 1024
# At most this many broken scripts and unsupported wheels are recorded (all are counted).
MAX_RECORDED = 50
# How many of a wheel's tags an unsupported one records.
TAGS_SHOWN = 4
# uv's relocatable launcher: the interpreter is the script's own folder's (``uv venv --relocatable``).
RELOCATABLE_EXEC = b'"$(dirname -- "$(realpath -- "$0")")"/'
EXEC_LINE = b"'''exec' "


def venv_facts(packages):
    # type: (list) -> dict
    """The facts of the three checks, keyed as ``PythonInfo``'s fields; ``packages``: the probe's
    distributions (their ``wheel_tags``, ``metadata_dir``, ``location``, ``shadowed``)."""
    try:
        import importlib.machinery

        suffixes = list(importlib.machinery.EXTENSION_SUFFIXES)
    except Exception:
        suffixes = None
    return {
        "extension_suffixes": suffixes,
        "wheel_support": wheel_support(packages),
        "venv_config": venv_config(),
        "scripts": scripts_check(packages),
    }


# ------------------------------------------------------------------------------------------- wheel tags


def _tags_module():
    for module in ("packaging.tags", "pip._vendor.packaging.tags"):
        try:
            return module, __import__(module, fromlist=["sys_tags"])
        except Exception:
            continue
    return None, None


def _split_tag(text):
    """The tags a ``Tag:`` value stands for (a compressed ``py2.py3-none-any`` is several), as strings."""
    parts = text.split("-")
    if len(parts) != 3:
        return [text]
    return [
        "%s-%s-%s" % (i, a, p)
        for i in parts[0].split(".")
        for a in parts[1].split(".")
        for p in parts[2].split(".")
    ]


def stdlib_supported():
    """A conservative test of a tag, for a target without packaging and pip (a uv venv, a ``--without-pip``
    venv): only what certainly does not match is refused (another CPython minor's ABI, another
    implementation, another OS or CPU), never a glibc or macOS version. None off CPython."""
    import sysconfig

    if sys.implementation.name != "cpython":
        return None
    major, minor = sys.version_info[:2]
    platform = (sysconfig.get_platform() or "").replace("-", "_").replace(".", "_").lower()
    if platform.startswith("linux_"):
        family, arch = "linux", platform[len("linux_") :]
    elif platform.startswith("macosx"):
        family, arch = "macosx", None
    elif platform.startswith("win"):
        family, arch = "win", platform
    else:
        family, arch = None, None

    def interpreter_ok(interp, abi):
        if interp.startswith("py"):
            rest = interp[2:]
            if rest == str(major):
                return True
            return rest[:1] == str(major) and rest[1:].isdigit() and int(rest[1:]) <= minor
        if not (interp.startswith("cp") and interp[2:].isdigit() and interp[2:3] == str(major)):
            return False  # another implementation (pp, graalpy) or major
        version = int(interp[3:] or "0")
        if abi.startswith("cp"):
            return version == minor and abi.startswith("cp%d%d" % (major, minor))
        return version <= minor and abi in ("abi3", "none")

    def platform_ok(plat):
        plat = plat.lower()
        if plat == "any" or family is None:
            return True
        if family == "linux":
            if not plat.startswith(("linux_", "manylinux", "musllinux")):
                return False
            return plat.endswith("_" + arch)
        if family == "macosx":
            return plat.startswith("macosx")
        return plat == arch

    def supported(tag):
        parts = tag.split("-")
        if len(parts) != 3:
            return True  # not a tag this check can read: not refused
        interp, abi, plat = parts
        if abi.startswith("cp") and not interp.startswith("cp"):
            return False
        return interpreter_ok(interp.lower(), abi.lower()) and platform_ok(plat)

    return supported


def wheel_support(packages):
    # type: (list) -> dict
    """Each distribution installed from a wheel (its ``WHEEL`` ``Tag:`` lines) that has no tag this
    interpreter supports: ``sys_tags()``, the whole set, from packaging or pip's copy; without either, the
    conservative ``stdlib_supported`` (``source`` says which). None when neither can tell."""
    source, tags = _tags_module()
    if tags is None:
        test = stdlib_supported()
        if test is None:
            return None
        source = "stdlib (conservative)"
    else:
        try:
            known = {str(t) for t in tags.sys_tags()}
        except Exception:
            return None

        def test(tag):
            return tag in known

    checked = 0
    unsupported = []
    count = 0
    for dist in packages:
        wheel_tags = dist.get("wheel_tags") or []
        if not wheel_tags or dist.get("shadowed"):
            continue
        checked += 1
        ok = False
        for text in wheel_tags:
            if any(test(t) for t in _split_tag(text)):
                ok = True
                break
        if ok:
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


# ------------------------------------------------------------------------------------------- pyvenv.cfg


def _read_text(path, limit=MAX_TEXT):
    """The first ``limit`` bytes of the regular file ``path`` as text, or None."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as f:
            data = f.read(limit)
    except (OSError, ValueError):
        return None
    return data.decode("utf-8", "replace")


def _config_path():
    """Where ``site`` finds pyvenv.cfg: beside the executable or one folder up (PEP 405)."""
    candidates = []
    executable = sys.executable or ""
    if executable:
        folder = os.path.dirname(executable)
        candidates += [
            os.path.join(folder, "pyvenv.cfg"),
            os.path.join(os.path.dirname(folder), "pyvenv.cfg"),
        ]
    candidates.append(os.path.join(sys.prefix, "pyvenv.cfg"))
    for path in candidates:
        if os.path.isfile(path):
            return path
    return None


def parse_config(text):
    # type: (str) -> dict
    """``key = value`` lines as ``site.venv`` reads them (keys lower-cased; the first ``=`` splits)."""
    out = {}
    for line in text.splitlines():
        key, eq, value = line.partition("=")
        if eq:
            out[key.strip().lower()] = value.strip()
    return out


def venv_config():
    # type: () -> dict
    """``pyvenv.cfg`` of the running interpreter (None outside a venv): its ``home`` and whether that
    folder exists and holds a python, its ``version`` (``version_info`` as uv writes it), and which tool
    wrote it."""
    if sys.prefix == getattr(sys, "base_prefix", sys.prefix):
        return None
    path = _config_path()
    if path is None:
        return None
    text = _read_text(path)
    if text is None:
        return {"path": path, "read": False}
    cfg = parse_config(text)
    home = cfg.get("home")
    home_exists = bool(home) and os.path.isdir(home)
    home_python = None
    if home_exists:
        minor = "%d.%d" % sys.version_info[:2]
        for name in ("python" + minor, "python3", "python", "python.exe", "python" + minor + "t"):
            candidate = os.path.join(home, name)
            if os.path.isfile(candidate):
                home_python = candidate
                break
    creator = "venv"
    if "uv" in cfg:
        creator = "uv " + cfg["uv"]
    elif "virtualenv" in cfg:
        creator = "virtualenv " + cfg["virtualenv"]
    return {
        "path": path,
        "read": True,
        "home": home,
        "home_exists": home_exists,
        "home_python": home_python,
        "version": cfg.get("version") or cfg.get("version_info"),
        "include_system_site_packages": cfg.get("include-system-site-packages", "").lower() == "true",
        "relocatable": cfg.get("relocatable", "").lower() == "true",
        "creator": creator,
    }


# ----------------------------------------------------------------------------------------------- scripts


def _real(path):
    try:
        return os.path.normcase(os.path.realpath(path))
    except (OSError, ValueError):
        return os.path.normcase(os.path.abspath(path))


def _own_site_folders():
    """The real paths of this environment's own site-packages folders (not the base's nor the user's):
    the scripts of distributions elsewhere live in another scripts folder."""
    import sysconfig

    out = set()
    try:
        paths = sysconfig.get_paths()
    except Exception:
        return out
    for key in ("purelib", "platlib"):
        if paths.get(key):
            out.add(_real(paths[key]))
    return out


def declared_scripts(text):
    # type: (str) -> list
    """``(kind, name)`` of the ``console_scripts`` and ``gui_scripts`` an ``entry_points.txt`` declares."""
    out = []
    section = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
            continue
        if section not in ("console_scripts", "gui_scripts"):
            continue
        name = line.partition("=")[0].strip()
        # A name with a separator would point out of the scripts folder: no installer writes one.
        if not name or "/" in name or "\\" in name or name in (".", ".."):
            continue
        out.append(("console" if section == "console_scripts" else "gui", name))
    return out


def interpreter_line(head):
    # type: (bytes) -> tuple
    """``(kind, interpreter)`` from a script's first bytes: ``("path", "/x/bin/python")`` for a plain
    ``#!`` line or pip's ``#!/bin/sh`` + ``'''exec' /long/path/python`` form, ``("relocatable", "python")``
    for uv's launcher that runs the python beside the script, ``("env", name)`` for ``#!/usr/bin/env
    python`` (found on PATH: not checked), ``("none", None)`` without an interpreter line."""
    if not head.startswith(b"#!"):
        return "none", None
    lines = head.split(b"\n")
    first = lines[0].rstrip(b"\r")[2:].strip()
    words = first.split()
    if not words:
        return "none", None
    program = words[0]
    if os.path.basename(program) == b"env":
        rest = [w for w in words[1:] if not w.startswith(b"-")]
        return "env", os.fsdecode(rest[0]) if rest else None
    if os.path.basename(program) in (b"sh", b"bash", b"dash"):
        for raw in lines[1:4]:
            line = raw.rstrip(b"\r")
            if not line.startswith(EXEC_LINE):
                continue
            rest = line[len(EXEC_LINE) :]
            if rest.startswith(RELOCATABLE_EXEC):
                name = rest[len(RELOCATABLE_EXEC) :].split(b" ", 1)[0].strip(b"'\"")
                return "relocatable", os.fsdecode(name)
            if rest.startswith(b'"'):
                end = rest.find(b'"', 1)
                return "path", os.fsdecode(rest[1:end] if end > 0 else rest[1:])
            return "path", os.fsdecode(rest.split(b" ", 1)[0])
        return "path", os.fsdecode(program)
    if first.startswith(b'"'):
        end = first.find(b'"', 1)
        return "path", os.fsdecode(first[1:end] if end > 0 else first[1:])
    return "path", os.fsdecode(program)


def _belongs(interpreter, scripts_real, in_venv):
    """Whether ``interpreter`` is this environment's: in a venv, one in its scripts folder (the base's
    python would run without the venv's packages); elsewhere, also the running executable itself."""
    if _real(os.path.dirname(interpreter)) == scripts_real:
        return True
    return bool(not in_venv and sys.executable and _real(interpreter) == _real(sys.executable))


def _check_script(path, scripts_real, in_venv):
    """``(problem, interpreter)`` of one declared script (None when it runs here), or ``("skipped",
    None)`` for one not looked into."""
    try:
        st = os.lstat(path)
    except OSError:
        return "missing", None
    if stat.S_ISLNK(st.st_mode):
        if not os.path.exists(path):
            return "missing", None
        if os.path.dirname(_real(path)) != scripts_real:
            return "skipped", None  # a link out of the folder: not followed
        try:
            st = os.stat(path)
        except OSError:
            return "missing", None
    if not stat.S_ISREG(st.st_mode):
        return "skipped", None
    if os.name == "nt":
        return None, None  # a launcher .exe: its interpreter is in a zip appended to it
    try:
        with open(path, "rb") as f:
            head = f.read(SCRIPT_HEAD)
    except OSError:
        return "unreadable", None
    kind, interpreter = interpreter_line(head)
    if kind == "none":
        return "no-interpreter-line", None
    if kind == "env":
        return None, interpreter
    if kind == "relocatable":
        interpreter = os.path.join(os.path.dirname(os.path.realpath(path)), interpreter or "python")
    if not interpreter or not os.path.isabs(interpreter):
        return "interpreter-missing", interpreter
    if not os.path.isfile(interpreter):
        return "interpreter-missing", interpreter
    if not _belongs(interpreter, scripts_real, in_venv):
        return "foreign-interpreter", interpreter
    if not st.st_mode & 0o111:
        return "not-executable", interpreter
    return None, interpreter


def _script_file(folder, name):
    """The file the installers write for script ``name`` in ``folder``."""
    if os.name != "nt":
        return os.path.join(folder, name)
    for candidate in (name + ".exe", name + "-script.py", name):
        path = os.path.join(folder, candidate)
        if os.path.lexists(path):
            return path
    return os.path.join(folder, name + ".exe")


def scripts_check(packages):
    # type: (list) -> dict
    """The console and GUI scripts that this environment's own distributions declare, checked: each
    exists in the scripts folder (``sysconfig.get_path("scripts")``) and its ``#!`` line names an
    interpreter that exists and is this environment's. Only the broken ones are recorded."""
    import sysconfig

    try:
        folder = sysconfig.get_path("scripts")
    except Exception:
        return None
    if not folder:
        return None
    scripts_real = _real(folder)
    in_venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    own = _own_site_folders()
    declared = checked = skipped = count = 0
    truncated = False
    broken = []
    for dist in packages:
        if (
            dist.get("shadowed")
            or not dist.get("metadata_dir")
            or _real(dist.get("location") or "") not in own
        ):
            continue
        text = _read_text(os.path.join(dist["metadata_dir"], "entry_points.txt"))
        if not text:
            continue
        for kind, name in declared_scripts(text):
            declared += 1
            if checked + skipped >= MAX_SCRIPTS:
                truncated = True
                continue
            path = _script_file(folder, name)
            problem, interpreter = _check_script(path, scripts_real, in_venv)
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
