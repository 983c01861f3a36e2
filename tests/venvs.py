"""Real venvs for the tests, built cheaply from the test environment's own torch.

The test environment is the one `.ci/run` builds from `pip install -e .[test]`, so it has torch 2.13.0 (CPU).
Copies of it are made with hard links (same filesystem) so a "venv with a broken torch" costs milliseconds
and never touches the original files.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment")


def installed_torch() -> tuple[str, str | None]:
    """The test environment's torch as installed: its full version (``2.13.0+cpu`` from the PyTorch CPU
    index or a local wheel store, ``2.13.0`` — a CUDA build — from the default index on Linux) and the CUDA
    release it was built for (None for a CPU build), read from its files without importing it."""
    import importlib.metadata
    import re

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.submodule_search_locations, "torch is not installed"
    text = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text(encoding="utf-8")
    cuda = re.search(r"^cuda(?:: [^=]+)? = '([^']+)'", text, re.MULTILINE)
    return importlib.metadata.version("torch"), cuda.group(1) if cuda else None


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def make_venv(root: Path) -> Path:
    """A real, empty venv (no pip) at ``root``; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def venv_with_pip(root: Path) -> Path:
    """A real, empty venv whose only distribution is the test environment's pip (hard-linked): its own
    ``python -m pip`` installs from pip's configured sources, as a remedy's command does, and it is the pip
    the test environment's pip-tools requires (pip-sync refuses a target whose pip is older than that; the
    pip that ``venv`` bundles can be)."""
    python = make_venv(root)
    site = venv_site(python)
    for entry in site_packages().iterdir():
        if entry.name == "pip" or (entry.name.startswith("pip-") and entry.name.endswith(".dist-info")):
            shutil.copytree(entry, site / entry.name, copy_function=_link_or_copy)
    write_scripts(python, site)  # pip's own console scripts, as its installer wrote them
    return python


def venv_site(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def write_scripts(python: Path, site: Path) -> None:
    """The console and GUI scripts the distributions in ``site`` declare (``entry_points.txt``), written
    into the scripts folder of ``python``'s venv as pip writes them: a real install has them, and a clone
    without them breaks the invariant that every declared entry point exists (ENV-SCRIPT-BROKEN)."""
    import configparser

    scripts = python.parent
    for entry_points in site.glob("*.dist-info/entry_points.txt"):
        parser = configparser.ConfigParser(delimiters=("=",), interpolation=None)
        parser.optionxform = str  # type: ignore[assignment,method-assign]
        try:
            parser.read_string(entry_points.read_text(encoding="utf-8"))
        except (configparser.Error, UnicodeDecodeError):
            continue
        for section in ("console_scripts", "gui_scripts"):
            if not parser.has_section(section):
                continue
            for name, value in parser.items(section):
                module, _, attr = value.strip().partition(":")
                target = scripts / name
                if target.exists() or not module or not attr:
                    continue
                top = attr.strip().split(".", 1)[0]
                target.write_text(
                    f"#!{python}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
                    f"from {module.strip()} import {top}\n"
                    "if __name__ == '__main__':\n"
                    "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
                    f"    sys.exit({attr.strip()}())\n",
                    encoding="utf-8",
                )
                target.chmod(0o755)


def clone_site_packages(python: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> Path:
    """Hard-link the test environment's site-packages into the venv of ``python`` (minus ``skip``), and
    write the console scripts its distributions declare, as pip would have."""
    src = site_packages()
    dst = venv_site(python)
    for entry in src.iterdir():
        if entry.name.startswith(("envcheck", "__editable__", "_envcheck")) or entry.name == "__pycache__":
            continue  # the venv under test must not contain envcheck itself
        target = dst / entry.name
        if entry.is_dir():
            shutil.copytree(
                entry,
                target,
                copy_function=_link_or_copy,
                ignore=lambda d, names: [n for n in names if skip(Path(d) / n)],
                symlinks=True,
            )
        elif not skip(entry):
            _link_or_copy(str(entry), str(target))
    write_scripts(python, dst)
    return dst


def fault_torch(venv_factory: Callable[[str], Path], name: str, body: str) -> Path:
    """A venv whose ``torch`` package runs ``body`` at import: injects a crash or a hang on purpose."""
    python = venv_factory(name)
    package = venv_site(python) / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(body, encoding="utf-8")
    (package / "version.py").write_text("__version__ = '9.9.9+fault'\ncuda = None\n", encoding="utf-8")
    return python


# A fake torch whose import does what ENVCHECK_TEST_FAULT names, in every target that imports it (the
# runtime probe, the suite's groups). The variable travels to the targets with the environment, so one
# venv serves every case. ENVCHECK_TEST_LOG names a folder where it records the pids it leaves behind.
HOSTILE_TORCH = r'''
import os
import signal
import subprocess
import sys
import time

fault = os.environ.get("ENVCHECK_TEST_FAULT", "")
log_dir = os.environ.get("ENVCHECK_TEST_LOG", "")


def log(name, line):
    if log_dir:
        with open(os.path.join(log_dir, name), "a") as f:
            f.write(line + "\n")


def sleeper():
    """A child in the target's own process group: killing only the target would orphan it."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    log("pids", "%d\n%d" % (os.getpid(), child.pid))


if fault == "hang":
    sleeper()
    time.sleep(600)
elif fault == "interrupt":
    sleeper()
    try:  # the first target to get here interrupts envcheck, its parent; the others just hang
        os.close(os.open(os.path.join(log_dir, "signalled"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        pass
    else:
        parent = os.getppid()
        # ENVCHECK_TEST_SIGNAL_THREAD: to a thread of envcheck other than its main one. A kill() naming
        # a thread's id is still sent to the whole process, but the kernel hands it to that thread first,
        # as it may hand any process's signal to any thread that does not block it.
        workers = []
        if "ENVCHECK_TEST_SIGNAL_THREAD" in os.environ:
            workers = sorted(int(t) for t in os.listdir("/proc/%d/task" % parent) if int(t) != parent)
        log("signalled", "thread %d" % workers[-1] if workers else "process")
        os.kill(workers[-1] if workers else parent, int(os.environ["ENVCHECK_TEST_SIGNAL"]))
    time.sleep(600)
elif fault == "daemon":
    # The classic daemon: double fork + setsid. It leaves the target's session and keeps fd 2, the
    # target's stderr pipe, open; the import itself then succeeds.
    first = os.fork()
    if first == 0:
        os.setsid()
        if os.fork() == 0:
            log("daemons", str(os.getpid()))
            time.sleep(600)
        os._exit(0)
    os.waitpid(first, 0)
elif fault == "endless-stderr":
    chunk = b"spam " * 13107 + b"\n"
    while True:
        os.write(2, chunk)
elif fault == "stderr-300mb":
    chunk = b"x" * (1024 * 1024 - 1) + b"\n"
    for _ in range(300):
        os.write(2, chunk)
    os._exit(3)  # ends on its own, right after: the tail must hold the end of all 300 MB
elif fault.startswith("result-"):
    out = sys.argv[1]  # the result file the target writes, replaced by something hostile
    tmp = out + ".hostile"
    if fault == "result-2gb":
        with open(tmp, "wb") as f:  # sparse: 2 GiB long, nothing on disk
            f.seek(2 ** 31)
            f.write(b"}")
    elif fault == "result-zero-link":
        os.symlink("/dev/zero", tmp)
    elif fault == "result-fifo":
        os.mkfifo(tmp)
    os.replace(tmp, out)
    os._exit(0)  # before the probe writes its own result over it
'''


def process_alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, dead but not yet reaped, does not count)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def processes_mentioning(text: str) -> dict[int, str]:
    """The live processes whose command line mentions ``text`` (e.g. a run's temp folder): pid to it."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmdline and process_alive(int(entry.name)):
            found[int(entry.name)] = cmdline
    return found
