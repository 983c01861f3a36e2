"""Cheap live checks of what torch's configuration variables point at (a compiler, a folder).

The variables and what they name are those of ``envcheck/data/runtime_config.json`` with a ``check``
(``tests/diff/test_runtime_config.py`` holds the tables below equal to it). A compiler must exist (an
absolute path, or a name found on PATH) and answer ``--version``: each run has a short deadline, stdin
closed, its output read up to a bound, and its whole process group killed at the deadline; at most
``MAX_RUNS`` run. Nothing is ever compiled. A folder must exist and be writable, or be creatable under an
existing writable folder; a file's folder must exist and be writable. Only the checks made are recorded.

Runs in the target: standard library only, Python 3.8.
"""

import os
import shlex
import shutil
import signal
import subprocess
import threading
import time

COMPILERS = ("CC", "CXX", "CUDACXX", "TRITON_PTXAS_PATH")
FOLDERS = (
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "TORCH_EXTENSIONS_DIR",
    "TORCH_HOME",
    "TORCH_COMPILE_DEBUG_DIR",
)
FILES = ("TORCH_LOGS_OUT",)

MAX_RUNS = 4  # compilers run per probe
RUN_TIMEOUT = 2.0  # seconds for one `--version`
MAX_OUTPUT = 4096  # bytes of a `--version` answer read
MAX_VALUE = 4096  # a longer value is not checked
MAX_DEPTH = 64  # folders climbed to find an existing parent


def config_checks(env):
    # type: (dict) -> list
    """``[{"variable", "value", "kind", "ok", "detail"}]`` for the variables of ``env`` that name a
    compiler or a folder torch uses."""
    out = []
    runs = 0
    for name in sorted(env):
        value = env[name]
        upper = name.upper()
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_VALUE or "\0" in value:
            continue
        if upper in COMPILERS:
            if runs >= MAX_RUNS:
                continue
            runs += 1
            ok, detail = check_compiler(value)
            out.append(_record(name, value, "compiler", ok, detail))
        elif upper in FOLDERS:
            ok, detail = check_folder(value)
            out.append(_record(name, value, "folder", ok, detail))
        elif upper in FILES:
            ok, detail = check_file(value)
            out.append(_record(name, value, "folder", ok, detail))
    return out


def _record(name, value, kind, ok, detail):
    return {"variable": name, "value": value, "kind": kind, "ok": ok, "detail": detail}


# --- compilers --------------------------------------------------------------------------------------------


def check_compiler(value):
    # type: (str) -> tuple
    """(ok, detail): the command ``value`` names exists and ``value --version`` exits 0 in time."""
    try:
        words = shlex.split(value, posix=os.name != "nt")
    except ValueError as e:
        return False, "cannot be split into a command: %s" % e
    if not words:
        return False, "names no command"
    program = words[0]
    if os.sep in program or (os.altsep and os.altsep in program):
        if not os.path.exists(program):
            return False, "%s does not exist" % program
        if os.path.isdir(program) or not os.access(program, os.X_OK):
            return False, "%s is not an executable file" % program
        path = program
    else:
        path = shutil.which(program)
        if path is None:
            return False, "%s is not on PATH" % program
    return _answers_version([path] + words[1:] + ["--version"])


def _answers_version(argv):
    # type: (list) -> tuple
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=os.name != "nt",
        )
    except OSError as e:
        return False, "cannot be started: %s" % (e.strerror or e)
    chunks = []  # type: list

    def read():
        total = 0
        try:
            while total < MAX_OUTPUT:
                chunk = proc.stdout.read1(MAX_OUTPUT - total)  # type: ignore[union-attr]
                if not chunk:
                    return
                chunks.append(chunk)
                total += len(chunk)
        except (OSError, ValueError):
            return

    deadline = time.monotonic() + RUN_TIMEOUT
    reader = threading.Thread(target=read, name="envcheck-version-reader")
    reader.daemon = True
    reader.start()
    reader.join(RUN_TIMEOUT)
    code = None
    try:
        code = proc.wait(max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        if code is None:
            _kill(proc)
        reader.join(1.0)
        # A reader still blocked (a grandchild that left the group holds the pipe) keeps its pipe: closing
        # it under the reader would wait on the reader's lock. The daemon thread ends with the probe.
        if not reader.is_alive():
            try:
                proc.stdout.close()  # type: ignore[union-attr]
            except OSError:
                pass
    text = b"".join(chunks).decode("utf-8", "replace")
    first = text.strip().splitlines()[0][:200] if text.strip() else ""
    if code is None:
        return False, "did not answer --version within %g s (stopped)" % RUN_TIMEOUT
    if code != 0:
        return False, "--version exited with status %d%s" % (code, (": " + first) if first else "")
    return True, first or None


def _kill(proc):
    try:
        if os.name != "nt":
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass
    try:
        proc.wait(2.0)
    except subprocess.TimeoutExpired:
        pass


# --- folders and files ------------------------------------------------------------------------------------


def check_folder(value):
    # type: (str) -> tuple
    """(ok, detail): ``value`` is a writable folder, or can be created under an existing writable one."""
    path = os.path.abspath(os.path.expanduser(value))
    if os.path.isdir(path):
        if os.access(path, os.W_OK | os.X_OK):
            return True, None
        return False, "%s exists but is not writable" % path
    if os.path.lexists(path):
        return False, "%s exists and is not a folder" % path
    return _creatable(path)


def check_file(value):
    # type: (str) -> tuple
    """(ok, detail): ``value`` is a writable file, or can be created in an existing writable folder (the
    file is opened as it is, its folder never created)."""
    path = os.path.abspath(os.path.expanduser(value))
    if os.path.isdir(path):
        return False, "%s is a folder, not a file" % path
    if os.path.exists(path):
        if os.access(path, os.W_OK):
            return True, None
        return False, "%s exists but is not writable" % path
    folder = os.path.dirname(path)
    if not os.path.isdir(folder):
        return False, "its folder %s does not exist" % folder
    if not os.access(folder, os.W_OK | os.X_OK):
        return False, "its folder %s is not writable" % folder
    return True, None


def _creatable(path):
    # type: (str) -> tuple
    parent = path
    for _ in range(MAX_DEPTH):
        up = os.path.dirname(parent)
        if up == parent:
            break
        parent = up
        if os.path.isdir(parent):
            if os.access(parent, os.W_OK | os.X_OK):
                return True, "does not exist yet; %s is writable, so it can be created" % parent
            return False, "does not exist and cannot be created: %s is not writable" % parent
        if os.path.lexists(parent):
            return False, "cannot be created: %s is not a folder" % parent
    return False, "does not exist and no existing folder above it was found"
