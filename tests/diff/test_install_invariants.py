"""The installation agrees with its own metadata: real venvs broken the way users break them, each gated with
the default ``envcheck gate REF --python ENV`` against a snapshot of the same venv taken while it was whole.

Each invariant (docs/failure-modes.md, FM-27) is broken at least twice, by different means, and held once
in an unusual but legal way:

- one dist-info per project in a folder: ``pip install --ignore-installed`` of another NumPy; another idna
  release's wheel unpacked over the installed one (what a multi-stage ``COPY`` of site-packages does).
  Legal: a pkgutil-style namespace package that two real wheels share.
- every file owned by one RECORD: NumPy 2 installed over NumPy 1 after the old dist-info was lost (its
  ``numpy/core`` extensions stay); a fork's wheel that installs the same module as the original.
  Legal: the namespace package again (the same bytes in both RECORDs).
- no interrupted install: a real ``pip install --force-reinstall`` of torch, killed mid-install; the same
  of NumPy. Legal: the same install left to finish.
- torch's version file agrees with its dist-info: ``torch/version.py`` of another release (ENV-VERSION-FILE).

The remedies are run where they are plain commands, and the gate passes after them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv, venv_site
from wheels import wheel

from envcheck.cli import app

pytestmark = [needs_torch, pytest.mark.slow]


def envcheck(*args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    """``envcheck ARGS --format json``: exit code and the report."""
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = result.stdout
    return result.exit_code, json.loads(out[out.index("{") :]) if "{" in out else {}


def roots(report: dict) -> list[dict]:  # type: ignore[type-arg]
    """The report's root causes, in the order it leads with them."""
    return [f for f in report["findings"] if f["caused_by"] is None]


def key(finding: dict) -> str:  # type: ignore[type-arg]
    return f"{finding['rule']}:{finding['subject']}"


def under(report: dict, root: dict) -> list[dict]:  # type: ignore[type-arg]
    return [f for f in report["findings"] if f["caused_by"] == key(root)]


def pip(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The test environment's pip, acting on the venv of ``python`` (which has none of its own)."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), *args]
    return subprocess.run(argv, capture_output=True, text=True, check=check, timeout=600)


def new_venv(root: Path) -> tuple[Path, Path]:
    python = make_venv(root)
    return python, clone_site_packages(python)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A snapshot of a whole clone of the test environment: the reference every broken copy is gated
    against (the clones are alike, byte for byte)."""
    python, _ = new_venv(tmp_path_factory.mktemp("whole") / "venv")
    out = tmp_path_factory.mktemp("ref") / "ref.json"
    result = CliRunner().invoke(app, ["snapshot", "--python", str(python), "-o", str(out), "--quiet"])
    assert result.exit_code == 0 and out.is_file(), result.stderr
    return out


def gate(reference: Path, python: Path) -> tuple[int, dict]:  # type: ignore[type-arg]
    return envcheck("gate", str(reference), "--python", str(python))


def doctor(python: Path) -> dict:  # type: ignore[type-arg]
    return envcheck("doctor", "--python", str(python))[1]


def remedy_command(finding: dict) -> str:  # type: ignore[type-arg]
    """The remedy's pasteable commands (each between backticks, in order) as one command line."""
    return " && ".join(re.findall(r"`([^`]+)`", finding["remedy"]))


def run_remedy(command: str, python: Path) -> None:
    """Run a remedy as a user would, in a shell whose ``pip`` is the environment's own (the clone has the
    test environment's pip, with its console scripts)."""
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    assert (python.parent / "pip").is_file()
    subprocess.run(["sh", "-c", command], check=True, env=env, capture_output=True, timeout=600)


# ------------------------------------------------------------------------------ built wheels (setuptools)


def build_wheel(
    tmp: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = ()
) -> Path:
    """A real wheel built by setuptools from a source tree of ``files`` (paths relative to the project),
    declaring ``requires``."""
    src = tmp / f"src-{name}-{version}"
    for relative, text in files.items():
        path = src / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    packages = sorted({r.rsplit("/", 1)[0].replace("/", ".") for r in files if "/" in r})
    (src / "setup.py").write_text(
        "from setuptools import setup\n"
        f"setup(name={name!r}, version={version!r}, packages={packages!r},"
        f" install_requires={list(requires)!r})\n",
        encoding="utf-8",
    )
    out = tmp / "wheels"
    argv = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        str(src),
        "-w",
        str(out),
    ]
    subprocess.run(argv, check=True, capture_output=True, timeout=300)
    return next(out.glob(f"{name.replace('-', '_')}-{version}-*.whl"))


NAMESPACE_INIT = "__path__ = __import__('pkgutil').extend_path(__path__, __name__)\n"


# ------------------------------------------------------------------------ one dist-info per project name


def test_ignore_installed_numpy_is_one_root_and_its_remedy_passes_the_gate(
    reference: Path, tmp_path: Path
) -> None:
    python, site = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel("numpy==1.26.4")))
    assert len(list(site.glob("numpy-*.dist-info"))) == 2

    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"], first["severity"]) == ("ENV-DIST-DUPLICATE", "numpy", "error")
    assert "1.26.4" in first["target"]
    # The files that no longer match the reported dist-info's RECORD are its consequences, not roots.
    tampered = [f for f in report["findings"] if f["rule"] == "ENV-NATIVE-TAMPERED"]
    assert tampered and all(f["caused_by"] == key(first) for f in tampered)
    assert not [f for f in roots(report) if f["severity"] == "error" and f is not first]
    assert any(f["rule"] == "ENV-DIST-DUPLICATE" for f in doctor(python)["findings"])

    run_remedy(remedy_command(first), python)
    assert len(list(site.glob("numpy-*.dist-info"))) == 1
    code, report = gate(reference, python)
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] != "info"]


def test_another_release_unpacked_over_the_installed_one_is_a_duplicate(
    reference: Path, tmp_path: Path
) -> None:
    """A multi-stage image's ``COPY`` merges folders and never deletes: another idna release's files and
    dist-info land over the installed one's."""
    python, site = new_venv(tmp_path / "venv")
    installed = sorted(site.glob("idna-*.dist-info"))
    assert installed, "the test environment has idna (a dependency of jsonschema's format checks)"
    with zipfile.ZipFile(wheel("idna==3.6")) as archive:
        archive.extractall(site)
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-DIST-DUPLICATE", "idna")
    assert "3.6" in first["target"]


def test_a_namespace_package_two_wheels_share_is_legal(reference: Path, tmp_path: Path) -> None:
    """Two real wheels install ``acme/__init__.py`` (pkgutil-style, the same bytes) beside their own
    modules: one file in two RECORDs with one hash, which is how such namespaces work."""
    one = build_wheel(
        tmp_path, "acme-one", "1.0", {"acme/__init__.py": NAMESPACE_INIT, "acme/one/__init__.py": "X = 1\n"}
    )
    two = build_wheel(
        tmp_path, "acme-two", "2.0", {"acme/__init__.py": NAMESPACE_INIT, "acme/two/__init__.py": "Y = 2\n"}
    )
    python, _ = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", str(one), str(two))
    subprocess.run([str(python), "-c", "import acme.one, acme.two"], check=True)
    code, report = gate(reference, python)
    rules = {f["rule"] for f in report["findings"]}
    assert not rules & {"ENV-DIST-DUPLICATE", "ENV-FILE-SHARED", "ENV-FILE-ORPHAN"}, rules
    # Two distributions added is a difference, not a breakage: nothing fails the gate.
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] == "error"]


# --------------------------------------------------------------------- every file owned by one RECORD


def test_numpy_1_extensions_left_under_numpy_2_are_orphans_that_fold_nothing_away(
    reference: Path, tmp_path: Path
) -> None:
    """NumPy 1.26.4 installed, its dist-info lost (an uninstall that died), NumPy 2 installed over it:
    pip knows nothing of the old files, and ``numpy/core``'s extension modules stay importable."""
    python, site = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", "--force-reinstall", str(wheel("numpy==1.26.4")))
    shutil.rmtree(next(site.glob("numpy-1.26.4.dist-info")))
    pip(python, "install", "-q", "--no-deps", "--force-reinstall", "numpy==" + _numpy_version())
    orphaned = sorted(p.name for p in (site / "numpy/core").glob("*.so"))
    assert orphaned, "NumPy 1's extension modules under numpy/core stay after NumPy 2 is installed"

    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["severity"]) == ("ENV-FILE-ORPHAN", "error")
    assert first["subject"] == "numpy"
    assert "numpy/core/" in first["message"]
    assert any(f["rule"] == "ENV-FILE-ORPHAN" for f in doctor(python)["findings"])

    run_remedy(remedy_command(first), python)
    assert not list((site / "numpy/core").glob("*.so"))
    code, report = gate(reference, python)
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] != "info"]


def _numpy_version() -> str:
    from importlib.metadata import version

    return version("numpy")


def test_a_fork_that_installs_the_originals_module_is_files_two_records_claim(
    reference: Path, tmp_path: Path
) -> None:
    """``acme-fast`` (a fork) ships ``acme/core.py`` as ``acme`` does, with other content: the last one
    installed wins, the other's RECORD no longer matches, and removing either breaks the other."""
    original = build_wheel(tmp_path, "acme", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 1\n"})
    fork = build_wheel(tmp_path, "acme-fast", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 10\n"})
    python, _ = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", str(original))
    pip(python, "install", "-q", "--no-deps", "--no-index", str(fork))
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-FILE-SHARED", "acme, acme-fast")
    assert "acme/core.py" in first["message"]

    run_remedy(remedy_command(first), python)
    code, report = gate(reference, python)
    assert not [f for f in report["findings"] if f["rule"].startswith(("ENV-FILE-", "ENV-DIST-"))]


def test_a_module_copied_by_hand_into_a_package_is_an_orphan(reference: Path, tmp_path: Path) -> None:
    python, site = new_venv(tmp_path / "venv")
    (site / "idna" / "patched_codec.py").write_text(
        "raise ImportError('from a hand copy')\n", encoding="utf-8"
    )
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-FILE-ORPHAN", "idna")
    assert "idna/patched_codec.py" in first["message"]


def test_a_data_file_written_into_a_package_is_a_warning_not_a_failure(
    reference: Path, tmp_path: Path
) -> None:
    python, site = new_venv(tmp_path / "venv")
    (site / "idna" / "cache.json").write_text("{}", encoding="utf-8")
    code, report = gate(reference, python)
    orphan = [f for f in report["findings"] if f["rule"] == "ENV-FILE-ORPHAN"]
    assert [f["severity"] for f in orphan] == ["warning"]
    assert code == 0


# ------------------------------------------------------------------------------ no interrupted install


def interrupt(python: Path, site: Path, requirement: str, *, top: str, files: int) -> None:
    """A real ``pip install --force-reinstall`` of ``requirement``, killed (SIGKILL: no rollback) once
    pip has stashed the old tree (``top`` renamed to its ``~`` stash) and written ``files`` files of the new
    one under ``top``. Any stash is not enough: the old ``top`` would still count its files."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps"]
    argv += ["--force-reinstall", requirement]
    proc = subprocess.Popen(
        argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 300
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            stashed = (site / ("~" + top[1:])).is_dir()
            if stashed and _python_files(site / top) >= files:
                os.killpg(proc.pid, signal.SIGKILL)
                break
            time.sleep(0.02)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if proc.returncode != -signal.SIGKILL:
        pytest.skip(f"pip finished before it could be interrupted (exit {proc.returncode})")


def _python_files(tree: Path) -> int:
    """How many ``.py`` files are under ``tree`` now; pip moves folders while this counts, so a folder
    that goes away mid-walk is skipped (os.walk ignores it) instead of failing the poll."""
    return sum(name.endswith(".py") for _, _, names in os.walk(tree) for name in names)


def test_an_interrupted_torch_upgrade_is_named_and_never_read_as_tampering(
    reference: Path, tmp_path: Path
) -> None:
    python, site = new_venv(tmp_path / "venv")
    interrupt(python, site, "torch==" + _torch_version(), top="torch", files=200)
    assert (site / "~orch").is_dir()

    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-INSTALL-INTERRUPTED", "torch")
    assert "~orch" in first["message"]
    rules = {f["rule"] for f in report["findings"]}
    assert "ENV-NATIVE-TAMPERED" not in rules  # the partial tree is another build, not a tampered one
    # The failed import and the partial tree fold under it.
    folded = {f["rule"] for f in under(report, first)}
    found = sorted(p.name for p in site.iterdir()), [(key(f), f["caused_by"]) for f in report["findings"]]
    assert {"ENV-FILE-ORPHAN", "ENV-PROBE-FAILED"} <= folded or {"ENV-FILE-ORPHAN"} <= folded, found
    assert any(f["rule"] == "ENV-INSTALL-INTERRUPTED" for f in doctor(python)["findings"])

    # The remedy's removal, then the reinstall from this machine's wheel store (its labelled build needs
    # the PyTorch index the remedy names, which CI does not reach).
    command = remedy_command(first)
    removal = command.split(" && ")[0]
    assert removal.startswith("rm -rf ") and "~orch" in removal
    run_remedy(removal, python)
    pip(python, "install", "-q", "--no-deps", "torch==" + _torch_version())
    assert not [p for p in site.iterdir() if p.name.startswith("~")]
    code, report = gate(reference, python)
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] != "info"]


def _torch_version() -> str:
    from importlib.metadata import version

    return version("torch").split("+", 1)[0]


def test_an_interrupted_numpy_reinstall_is_named(reference: Path, tmp_path: Path) -> None:
    python, site = new_venv(tmp_path / "venv")
    interrupt(python, site, str(wheel("numpy==1.26.4")), top="numpy", files=20)
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-INSTALL-INTERRUPTED", "numpy")


def test_a_reinstall_left_to_finish_leaves_nothing(reference: Path, tmp_path: Path) -> None:
    python, site = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--force-reinstall", "numpy==" + _numpy_version())
    assert not [p for p in site.iterdir() if p.name.startswith("~")]
    code, report = gate(reference, python)
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] != "info"]


# ------------------------------------------------------------ a version file that agrees with the dist-info


def test_a_version_file_of_another_release_is_named(reference: Path, tmp_path: Path) -> None:
    """torch's files of another release under this release's dist-info: a tree copied over another (the
    version file stands for the tree here; it is the one file both name)."""
    python, site = new_venv(tmp_path / "venv")
    version_py = site / "torch" / "version.py"
    text = version_py.read_text(encoding="utf-8")
    version_py.unlink()  # a hard link to the test environment's file: replaced, never written through
    version_py.write_text(text.replace(f"'{_torch_version()}", "'2.12.1"), encoding="utf-8")
    found = [f for f in doctor(python)["findings"] if f["rule"] == "ENV-VERSION-FILE"]
    assert [f["severity"] for f in found] == ["error"]
    assert "2.12.1" in found[0]["message"]
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-VERSION-FILE", "torch")
    # The reference's torch and this version file differ too: that is the same fact, under it.
    assert ("ENV-TORCH-VERSION", "torch") in {(f["rule"], f["subject"]) for f in under(report, first)}
    assert venv_site(python) == site


def test_an_application_import_that_fails_for_want_of_its_requirement_folds_under_it(
    reference: Path, tmp_path: Path
) -> None:
    """The application's own package requires idna>=99 (none is installed: 3.x is) and refuses to start
    without it, in words that never name idna: the unmet requirement is the root, the import under it."""
    app_wheel = build_wheel(
        tmp_path,
        "needs-new-codec",
        "1.0",
        {"needs_new_codec/__init__.py": "raise RuntimeError('this release needs the new codec tables')\n"},
        requires=("idna>=99",),
    )
    python, _ = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", str(app_wheel))
    code, report = envcheck("gate", str(reference), "--python", str(python), "--import", "needs_new_codec")
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-PKG-UNMET", "idna")
    folded = [f for f in under(report, first) if f["rule"] == "VERIFY-IMPORT"]
    assert [f["subject"] for f in folded] == ["import needs_new_codec"]


def test_a_package_whose_dist_info_was_deleted_is_code_no_record_owns(
    reference: Path, tmp_path: Path
) -> None:
    """Images are slimmed by deleting ``*.dist-info``; the package still imports, nothing says what it is:
    its folder is code no RECORD names, the root, and the distribution the reference had folds under it."""
    python, site = new_venv(tmp_path / "venv")
    for dist_info in site.glob("idna-*.dist-info"):
        shutil.rmtree(dist_info)
    subprocess.run([str(python), "-c", "import idna"], check=True)
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"], first["severity"]) == (
        "ENV-FILE-ORPHAN",
        str(site / "idna"),
        "error",
    )
    assert "no distribution" in first["message"]
    assert ("ENV-PKG-MISSING", "idna") in {(f["rule"], f["subject"]) for f in under(report, first)}


# ------------------------------------------------------------- every file a RECORD lists is on disk


def test_modules_a_cleanup_deleted_fail_the_gate(reference: Path, tmp_path: Path) -> None:
    python, site = new_venv(tmp_path / "venv")
    for name in ("codec.py", "idnadata.py"):
        (site / "idna" / name).unlink()
    code, report = gate(reference, python)
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"], first["severity"]) == ("ENV-FILE-GONE", "idna", "error")
    assert "idna/idnadata.py" in first["message"]
    run_remedy(remedy_command(first), python)
    subprocess.run([str(python), "-c", "import idna"], check=True)


def test_uninstalling_one_of_two_claimants_takes_the_others_files(reference: Path, tmp_path: Path) -> None:
    """``acme-fast`` and ``acme`` both install ``acme/core.py`` (as opencv-python and its headless twin do
    ``cv2/``); uninstalling the fork deletes the file the original's RECORD lists, and its import fails."""
    original = build_wheel(tmp_path, "acme", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 1\n"})
    fork = build_wheel(tmp_path, "acme-fast", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 10\n"})
    python, site = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-index", str(original))
    pip(python, "install", "-q", "--no-deps", "--no-index", str(fork))
    pip(python, "uninstall", "-y", "-q", "acme-fast")
    assert not (site / "acme" / "core.py").exists()
    code, report = envcheck("gate", str(reference), "--python", str(python), "--import", "acme.core")
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-FILE-GONE", "acme")
    assert ("VERIFY-IMPORT", "import acme.core") in {(f["rule"], f["subject"]) for f in under(report, first)}


def test_tests_dropped_and_sources_compiled_in_place_are_legal(reference: Path, tmp_path: Path) -> None:
    """What slimmed images do on purpose: a package's own tests deleted (a warning: nothing imports them),
    and modules compiled in place (``compileall -b``) with their sources dropped (they still import)."""
    python, site = new_venv(tmp_path / "venv")
    shutil.rmtree(site / "numpy" / "_core" / "tests")
    subprocess.run([str(python), "-m", "compileall", "-q", "-b", str(site / "idna")], check=True)
    for source in (site / "idna").glob("*.py"):
        source.unlink()
    subprocess.run([str(python), "-c", "import idna; idna.encode('example.com')"], check=True)
    code, report = gate(reference, python)
    gone = [f for f in report["findings"] if f["rule"] == "ENV-FILE-GONE"]
    assert [(f["subject"], f["severity"]) for f in gone] == [("numpy", "warning")]
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] == "error"]


# ---------------------------------------------------------------- an editable install's source exists


def mylib_checkout(checkout: Path) -> Path:
    """A project folder (``mylib`` 0.1.0, setuptools) to install editable from."""
    (checkout / "mylib").mkdir(parents=True)
    (checkout / "mylib" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
    (checkout / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='mylib', version='0.1.0', packages=['mylib'])\n",
        encoding="utf-8",
    )
    return checkout


@pytest.mark.parametrize("how", ["deleted", "moved"])
def test_an_editable_install_whose_checkout_is_gone(reference: Path, tmp_path: Path, how: str) -> None:
    checkout = mylib_checkout(tmp_path / "checkout")
    python, _ = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(checkout))
    subprocess.run([str(python), "-c", "import mylib"], check=True)
    if how == "deleted":
        shutil.rmtree(checkout)
    else:
        checkout.rename(tmp_path / "checkout-renamed")
    code, report = envcheck("gate", str(reference), "--python", str(python), "--import", "mylib")
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"]) == ("ENV-SOURCE-GONE", "mylib")
    assert ("VERIFY-IMPORT", "import mylib") in {(f["rule"], f["subject"]) for f in under(report, first)}


def test_an_editable_checkout_reached_through_a_link_is_legal(reference: Path, tmp_path: Path) -> None:
    real = mylib_checkout(tmp_path / "real-checkout")
    linked = tmp_path / "src"
    linked.symlink_to(real, target_is_directory=True)
    python, _ = new_venv(tmp_path / "venv")
    pip(python, "install", "-q", "--no-deps", "--no-build-isolation", "-e", str(linked))
    code, report = envcheck("gate", str(reference), "--python", str(python), "--import", "mylib")
    assert not [f for f in report["findings"] if f["rule"] in ("ENV-SOURCE-GONE", "ENV-FILE-GONE")]
    assert code == 0, [key(f) for f in report["findings"] if f["severity"] == "error"]
