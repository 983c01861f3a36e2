"""Facts about the interpreter itself: version, prefixes, venv or conda, sys.path, wheel tags."""

import os
import platform
import sys


def python_facts():
    # type: () -> dict
    implementation = platform.python_implementation()
    prefix = sys.prefix
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        environment = "conda"
    elif sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        environment = "venv"
    else:
        environment = "system"
    try:
        import site

        user_site = site.getusersitepackages()
        user_site_enabled = bool(site.ENABLE_USER_SITE)
    except Exception:
        user_site, user_site_enabled = None, False
    # The platform default (importing multiprocessing costs more than the rest of this function):
    # spawn on Windows and macOS (3.8+), forkserver on POSIX from 3.14, fork before.
    if os.name == "nt" or sys.platform == "darwin":
        start_method = "spawn"
    elif sys.version_info >= (3, 14):
        start_method = "forkserver"
    else:
        start_method = "fork"
    import sysconfig

    shared = None
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        name = sysconfig.get_config_var("LDLIBRARY") or ""
        if libdir and name:
            shared = os.path.join(libdir, name)
    elif os.name == "nt":
        candidate = os.path.join(sys.base_exec_prefix, "python%d%d.dll" % sys.version_info[:2])
        shared = candidate if os.path.exists(candidate) else None
    return {
        "implementation": implementation,
        "version": platform.python_version(),
        "abi_flags": getattr(sys, "abiflags", ""),
        "pointer_bits": 64 if sys.maxsize > 2**32 else 32,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "base_exec_prefix": getattr(sys, "base_exec_prefix", sys.exec_prefix),
        "environment": environment,
        "user_site_enabled": user_site_enabled,
        "user_site": user_site,
        "sys_path": [p for p in sys.path if p],
        "path_origins": path_origins([p for p in sys.path if p]),
        "wheel_tags": wheel_tags(),
        "mp_start_method": start_method,
        "shared_library": shared,
        "path_aliases": folder_aliases(
            [
                sys.prefix,
                sys.exec_prefix,
                getattr(sys, "base_prefix", ""),
                getattr(sys, "base_exec_prefix", ""),
            ]
            + list(sys.path)
        ),
    }


# Bounds of the .pth reading (site.py reads them whole at every start; a hostile one must not make the
# probe slow or large): files per site folder, bytes per file and in all, lines per file (any), path or
# code lines per file and in all. Real .pth files hold a few short lines.
MAX_PTH_FILES = 500
MAX_PTH_BYTES = 1 << 20
MAX_PTH_TOTAL = 4 << 20
MAX_PTH_READ_LINES = 100000
MAX_PTH_LINES = 1000
MAX_PTH_TOTAL_LINES = 20000


def _key(path):
    """A sys.path entry as site.py compares them (``makepath``: absolute, case-folded where the system
    folds case), or None for one that is not a path."""
    try:
        return os.path.normcase(os.path.abspath(path))
    except (OSError, ValueError, TypeError):
        return None


def path_origins(entries):
    """How each ``sys.path`` entry got there, in order: ``[{"path", "origin", "pth"}]``.

    ``origin``: ``pythonpath`` (the PYTHONPATH variable), ``user-site`` (the user's site-packages),
    ``site`` (the environment's own site-packages), ``base-site`` (the base interpreter's site-packages,
    in a venv made with ``--system-site-packages``), ``pth`` (a path line of the ``.pth`` file named by
    ``pth``, in a site folder), ``stdlib`` (the standard library), ``other`` (code that ran at start-up: an
    ``import`` line of a .pth that names no path, sitecustomize; or the program). The .pth files are parsed
    as site.py parses them, never executed: an ``import`` line counts for the absolute paths its string
    literals name (``import sys; sys.path.insert(0, "/opt/x")``)."""
    import site

    pythonpath = set()
    if not sys.flags.ignore_environment:
        for part in (os.environ.get("PYTHONPATH") or "").split(os.pathsep):
            key = _key(part) if part else None
            if key:
                pythonpath.add(key)
    user = None
    try:
        if site.ENABLE_USER_SITE:
            user = _key(site.getusersitepackages())
    except Exception:
        user = None
    try:
        site_dirs = [d for d in site.getsitepackages() if isinstance(d, str)]
    except Exception:  # an old virtualenv's site.py has no getsitepackages
        site_dirs = []
    own = [k for k in (_key(sys.prefix), _key(sys.exec_prefix)) if k]
    venv = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
    kinds = {}
    for folder in site_dirs:
        key = _key(folder)
        if key and key not in kinds:
            inside = any(key == o or key.startswith(o.rstrip(os.sep) + os.sep) for o in own)
            kinds[key] = "base-site" if venv and not inside else "site"
    kinds.update(pth_file_kinds(os.path.dirname(sys.executable or "")))
    wanted = {k for k in (_key(e) for e in entries) if k}
    scanned = ([site.getusersitepackages()] if user else []) + site_dirs
    added_by = pth_entries(scanned, wanted)
    stdlib = [
        k for k in (_key(getattr(sys, "base_prefix", "")), _key(getattr(sys, "base_exec_prefix", ""))) if k
    ]
    out = []
    for entry in entries:
        key = _key(entry)
        pth = None
        if key is None:
            origin = "other"
        elif key in pythonpath:
            origin = "pythonpath"
        elif user is not None and key == user:
            origin = "user-site"
        elif key in kinds:
            origin = kinds[key]
        elif key in added_by:
            origin, pth = "pth", added_by[key]
        elif any(key.startswith(b.rstrip(os.sep) + os.sep) for b in stdlib):
            origin = "stdlib"
        else:
            origin = "other"
        out.append({"path": entry, "origin": origin, "pth": pth})
    return out


def pth_file_kinds(home):
    """``{entry key: "stdlib" | "site"}`` for the paths a ``._pth`` file beside the interpreter lists (the
    embeddable CPython for Windows: such a file replaces the whole computed ``sys.path``). Its zip and its
    own folder (``.``) hold the standard library; every other folder it lists is where packages are put.
    ``{}`` without one. Read as ``pth_entries`` reads a .pth: a regular file, capped, never run."""
    import stat

    kinds = {}
    try:
        names = sorted(n for n in os.listdir(home) if n.endswith("._pth"))
    except (OSError, ValueError, TypeError):
        return kinds
    for name in names[:2]:  # CPython reads python3XY._pth (beside the DLL) or python._pth (beside the exe)
        path = os.path.join(home, name)
        try:
            # Non-blocking, and checked on the descriptor: a FIFO or a device is never read.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    continue
                text = f.read(MAX_PTH_BYTES).decode("utf-8", "replace")
        except OSError:
            continue
        for raw in text.splitlines()[:1000]:
            line = raw.strip()
            if not line or line.startswith(("#", "import ")):
                continue
            key = _key(os.path.join(home, line))
            if key and key not in kinds:
                stdlib = line == "." or line.lower().endswith(".zip")
                kinds[key] = "stdlib" if stdlib else "site"
        break
    return kinds


def pth_entries(site_dirs, wanted):
    """``{entry key: .pth file}`` for the entries of ``wanted`` that a path line of a .pth file in
    ``site_dirs`` names (the first file that names one, in site.py's order: folders in order, files sorted
    by name). Only regular files are read, each up to ``MAX_PTH_BYTES``; lines are parsed, not run
    (``code_paths``)."""
    import io
    import stat

    found = {}
    budget = MAX_PTH_TOTAL
    lines_left = MAX_PTH_TOTAL_LINES
    done = set()
    for folder in site_dirs:
        if not folder or folder in done:
            continue
        done.add(folder)
        try:
            names = sorted(n for n in os.listdir(folder) if n.endswith(".pth") and not n.startswith("."))
        except (OSError, ValueError, TypeError):
            continue
        for name in names[:MAX_PTH_FILES]:
            if budget <= 0 or lines_left <= 0:
                return found
            path = os.path.join(folder, name)
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue  # a fifo or a device would block or never end
                with open(path, "rb") as f:
                    data = f.read(min(MAX_PTH_BYTES, budget))
            except (OSError, ValueError):
                continue
            budget -= len(data)
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError:
                continue  # site.py cannot read it either (it stops the interpreter, or skips the file)
            read = 0
            # Universal newlines, as site.py's text-mode read splits them; lazily, within the bounds.
            for number, raw in enumerate(io.StringIO(text, newline=None)):
                if number >= MAX_PTH_READ_LINES:
                    break
                line = raw.rstrip("\n")
                if line.startswith("#") or not line.strip():
                    continue
                if read >= MAX_PTH_LINES or lines_left <= 0:
                    break
                read += 1
                lines_left -= 1
                if line.startswith(("import ", "import\t")):
                    named = code_paths(line)  # site.py runs it; here it is only parsed
                else:
                    named = [os.path.join(folder, line.rstrip())]
                for candidate in named:
                    key = _key(candidate)
                    if key is not None and key in wanted and key not in found:
                        found[key] = path
    return found


MAX_CODE_LINE = 4096


def code_paths(line):
    """The absolute paths an ``import`` line of a .pth file names as string literals (``import sys;
    sys.path.insert(0, "/opt/x")``): parsed with ``ast``, never run. A long line is not parsed."""
    import ast

    if len(line) > MAX_CODE_LINE:
        return []
    try:
        tree = ast.parse(line)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    out = []
    for node in ast.walk(tree):
        value = getattr(node, "value", None) if isinstance(node, ast.Constant) else None
        if isinstance(value, str) and os.path.isabs(value):
            out.append(value)
    return out


def wheel_tags(limit=12):
    """The first tags this interpreter accepts, via packaging (or pip's vendored copy) when present."""
    for module in ("packaging.tags", "pip._vendor.packaging.tags"):
        try:
            tags = __import__(module, fromlist=["sys_tags"])
        except Exception:
            continue
        out = []
        for tag in tags.sys_tags():
            out.append(str(tag))
            if len(out) >= limit:
                break
        return out
    return []


def folder_aliases(folders):
    """Folders that are reached through a symbolic link, mapped to where they really are: a venv opened
    through a linked folder lists its files under the link while the loader maps their real paths, and a
    diff must know both name one file (``{"/srv/app": "/data/app"}``)."""
    out = {}
    for folder in folders:
        if not folder or not os.path.isabs(folder):
            continue
        try:
            real = os.path.realpath(folder)
        except (OSError, ValueError):
            continue
        normal = os.path.normpath(folder)
        if real == normal:
            continue
        # The shortest linked ancestor is the alias: /srv/app/lib/site-packages -> /srv/app when only
        # /srv/app is a link, so one entry covers every file below it.
        parts = normal.split(os.sep)
        for i in range(2, len(parts) + 1):
            head = os.sep.join(parts[:i]) or os.sep
            if os.path.islink(head):
                out[head] = os.path.realpath(head)
                break
        else:
            out[normal] = real
    return dict(sorted(out.items()))


# Extension modules of the standard library that link the interpreter's own symbols (and, for some, a
# system library): importing them is how a libpython of another build shows (``undefined symbol:
# _PyModule_Add`` when LD_LIBRARY_PATH puts a distribution's libpython 3.11.2 under a 3.11.7 install).
# A few, cheap to import; a module this build lacks (ModuleNotFoundError) is not a failure.
STDLIB_EXTENSIONS = ("_ssl", "_hashlib", "_ctypes", "_sqlite3", "_decimal", "_lzma", "_bz2")


def libpython_facts():
    """The interpreter's own shared library against the one mapped into this process.

    ``own_library``: the real path of the installation's libpython (``LIBDIR``/``INSTSONAME``);
    ``loaded_library``: the real path of the libpython mapped into the process (Linux: /proc/self/maps),
    None when none is (a static build) or where it cannot be told; ``build_version``: the version the
    installation's headers declare (``patchlevel.h``), which the executable was built with, None when the
    headers are absent. Static: nothing is imported (the runtime probe adds ``stdlib_errors``).
    """
    import sysconfig

    own = None
    libdir = sysconfig.get_config_var("LIBDIR")
    soname = sysconfig.get_config_var("INSTSONAME")
    if sysconfig.get_config_var("Py_ENABLE_SHARED") and libdir and soname:
        candidate = os.path.join(libdir, soname)
        if os.path.exists(candidate):
            own = os.path.realpath(candidate)
    return {
        "own_library": own,
        "loaded_library": mapped_libpython(),
        "build_version": header_version(),
    }


def mapped_libpython():
    if not sys.platform.startswith("linux"):
        return None
    from .system import read_text

    for line in (read_text("/proc/self/maps", 1 << 24) or "").splitlines():
        path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
        name = os.path.basename(path)
        if path.startswith("/") and name.startswith("libpython") and ".so" in name:
            return os.path.realpath(path)
    return None


def header_version():
    import re
    import sysconfig

    from .system import read_text

    include = sysconfig.get_paths().get("include") or ""
    text = read_text(os.path.join(include, "patchlevel.h"), 1 << 16) if include else None
    found = re.search(r'#define\s+PY_VERSION\s+"([^"]+)"', text or "")
    return found.group(1) if found else None


# The child that imports them: one line per module before trying it, so that a module that kills the
# process (a libpython of another build can segfault as well as fail to link) is named by the last line.
_TRY_IMPORTS = """
import sys
for name in sys.argv[1:]:
    print("try " + name, flush=True)
    try:
        __import__(name)
    except ModuleNotFoundError:
        pass
    except BaseException as e:
        text = (type(e).__name__ + ": " + str(e)).replace(chr(10), " ")[:300]
        print("error " + name + " " + text, flush=True)
    print("done " + name, flush=True)
"""


def start_stdlib_check():
    """Start the child that imports ``STDLIB_EXTENSIONS`` (it runs while the other facts are read);
    ``stdlib_errors(child)`` collects it. None when it cannot start."""
    import subprocess

    try:
        return subprocess.Popen(
            [sys.executable, "-c", _TRY_IMPORTS] + list(STDLIB_EXTENSIONS),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, ValueError):
        return None


def stdlib_errors(child=None, timeout=20):
    """``{module: error}`` for the stdlib extension modules that fail to import in a fresh process of this
    interpreter (same environment): a child, because a mismatched libpython may crash rather than raise,
    and the facts probe must survive it. ``child``: from ``start_stdlib_check`` (started now if None)."""
    import subprocess

    child = child or start_stdlib_check()
    if child is None:
        return {"(interpreter)": "could not run it"}
    try:
        stdout, _ = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        stdout, _ = child.communicate()
    errors = {}
    trying = None
    for line in stdout.decode("utf-8", "replace").splitlines():
        word, _, rest = line.partition(" ")
        if word == "try":
            trying = rest
        elif word == "error":
            name, _, text = rest.partition(" ")
            errors[name] = text
        elif word == "done":
            trying = None
    if trying is not None:  # the child died (or hung) inside this import
        errors[trying] = "the interpreter died importing it (exit status %s)" % child.returncode
    return errors
