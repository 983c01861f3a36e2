"""The installation invariants' remedies, run for real: each test breaks a clone of the test environment the
way users break theirs, takes ``envcheck doctor``'s report, runs its ``--remedies`` script in bash against
the clone's own interpreter (``tests/remedyrun.py``), and runs envcheck again: nothing of the installation
family is left, no other finding either (the clone was whole before), and what failed works.

What each remedy must cover is the whole cause: after a reinstall over a second NumPy dist-info, or over an
interrupted install, the other release's files that no RECORD lists stay importable; so each test also
looks at the files themselves (no ``numpy/core/*.so`` of NumPy 1, no ``~`` stash).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_torch
from remedyrun import roots, run_script
from test_install_invariants import build_wheel, interrupt
from venvs import clone_site_packages, installed_torch, make_venv
from wheels import wheel

from envcheck import api
from envcheck.core.findings import Finding
from envcheck.core.remedy import Install, Rebuild, RemoveFiles, Uninstall
from envcheck.diff.causes import INSTALL_ROOTS
from envcheck.diff.policy import Policy
from envcheck.manifest.remedy import pytorch_index
from envcheck.report import Report

pytestmark = [needs_torch, pytest.mark.slow]

NUMPY = importlib.metadata.version("numpy")


def clone(tmp_path: Path) -> tuple[Path, Path]:
    """A venv whose site-packages is a hard-linked copy of the test environment's: its python and site."""
    python = make_venv(tmp_path / "venv")
    return python, clone_site_packages(python)


def pip(python: Path, *args: str) -> None:
    """The test environment's pip acting on the clone (a real install, as the user's was)."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), *args]
    subprocess.run(argv, check=True, capture_output=True, text=True, timeout=600)


def doctor(python: Path) -> Report:
    return api.doctor(python=str(python), policy=Policy(disabled=True), timeout=300)


def root(report: Report, rule: str) -> list[Finding]:
    """The report's root causes of ``rule`` (what its ``--remedies`` script runs)."""
    return [f for f in roots(report) if f.rule == rule]


def remedied(python: Path, tmp_path: Path, rule: str, *, env: dict[str, str] | None = None) -> Report:
    """Run the ``--remedies`` script of the clone's report, which must hold a root of ``rule``, and report
    again: no finding of the installation family, and nothing else but notes (the clone was whole)."""
    before = doctor(python)
    assert root(before, rule), [(f.rule, f.subject, f.caused_by) for f in before.findings]
    run_script(before, tmp_path, env=env)
    after = doctor(python)
    left = [f"{f.rule}:{f.subject}: {f.message}" for f in after.findings if f.rule in INSTALL_ROOTS]
    assert not left, left
    assert not [f.key for f in after.findings if f.severity != "info"]
    return before


def run(python: Path, code: str) -> str:
    """``code`` run by the clone's interpreter (the symptom the remedy must have fixed); its output."""
    done = subprocess.run([str(python), "-c", code], check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def numpy_files(site: Path) -> set[str]:
    """Every file under ``numpy/`` and ``numpy.libs/`` (byte-code left out), relative to ``site``."""
    return {
        str(p.relative_to(site))
        for top in ("numpy", "numpy.libs")
        for p in (site / top).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts
    }


@pytest.mark.remedy("ENV-DIST-DUPLICATE")
def test_a_second_numpy_dist_info_is_removed_with_every_file_of_both(tmp_path: Path) -> None:
    """``pip install --ignore-installed`` of NumPy 1.26.4 over NumPy 2: two dist-info folders, and NumPy 1's
    C extensions under ``numpy/core`` beside NumPy 2's. The remedy uninstalls each copy with its own RECORD
    before installing one: a reinstall over both leaves NumPy 1's extensions, owned by no RECORD."""
    python, site = clone(tmp_path)
    whole = numpy_files(site)
    pip(python, "install", "-q", "--no-deps", "--no-index", "--ignore-installed", str(wheel("numpy==1.26.4")))
    assert len(list(site.glob("numpy-*.dist-info"))) == 2
    assert list((site / "numpy" / "core").glob("_multiarray_umath*.so"))

    report = remedied(python, tmp_path, "ENV-DIST-DUPLICATE")
    (finding,) = root(report, "ENV-DIST-DUPLICATE")
    assert [type(a) for a in finding.actions] == [Uninstall, Uninstall, Install]

    assert [p.name for p in site.glob("numpy-*.dist-info")] == [f"numpy-{NUMPY}.dist-info"]
    assert not list((site / "numpy" / "core").glob("*.so")), "NumPy 1's extensions stayed"
    assert numpy_files(site) == whole
    assert run(python, "import numpy; print(numpy.__version__, numpy.arange(4).sum())") == f"{NUMPY} 6"


@pytest.mark.remedy("ENV-INSTALL-INTERRUPTED")
@pytest.mark.parametrize("then", ["left", "reinstalled over"])
def test_an_interrupted_numpy_install_leaves_no_stash_and_no_partial_tree(tmp_path: Path, then: str) -> None:
    """A real ``pip install --force-reinstall`` of NumPy 1.26.4 over NumPy 2, killed mid-install: pip's
    stash of NumPy 2 beside a partial NumPy 1 tree that no RECORD lists; left so, or with NumPy 2 installed
    over it (the stash stays, and so do the files of NumPy 1 that NumPy 2's RECORD does not list). The
    remedy deletes the stash and the partial tree, then installs the build again."""
    python, site = clone(tmp_path)
    whole = numpy_files(site)
    interrupt(python, site, str(wheel("numpy==1.26.4")), top="numpy", files=200)
    if then == "reinstalled over":
        pip(python, "install", "-q", "--no-deps", "--force-reinstall", f"numpy=={NUMPY}")
        assert numpy_files(site) > whole, "NumPy 1's files that NumPy 2's RECORD does not list stay"
    assert [p.name for p in site.iterdir() if p.name.startswith("~")]

    report = remedied(python, tmp_path, "ENV-INSTALL-INTERRUPTED")
    (finding,) = root(report, "ENV-INSTALL-INTERRUPTED")
    removed = next(a for a in finding.actions if isinstance(a, RemoveFiles))
    assert str(site / "numpy") in removed.paths, "the partial tree is deleted, not reinstalled over"
    assert finding.actions[-1] == Install(pins=(("numpy", NUMPY),), force=True, no_deps=True)
    # The partial tree's orphans fold under the interrupted install and are fixed by its remedy.
    orphans = [f.caused_by for f in report.findings if f.rule == "ENV-FILE-ORPHAN"]
    assert orphans and set(orphans) == {finding.key}

    assert not [p.name for p in site.iterdir() if p.name.startswith("~")]
    assert numpy_files(site) == whole
    assert run(python, "import numpy; print(numpy.__version__, numpy.arange(4).sum())") == f"{NUMPY} 6"


@pytest.mark.remedy("ENV-FILE-ORPHAN")
def test_numpy_1_extensions_left_under_numpy_2_are_deleted_with_the_folder(tmp_path: Path) -> None:
    """NumPy 1.26.4's dist-info lost, NumPy 2 installed over it: ``numpy/core``'s extension modules of
    NumPy 1 stay, listed by no RECORD, and ``pip install --force-reinstall`` alone never removes them."""
    python, site = clone(tmp_path)
    whole = numpy_files(site)
    pip(python, "install", "-q", "--no-deps", "--no-index", "--force-reinstall", str(wheel("numpy==1.26.4")))
    shutil.rmtree(next(site.glob("numpy-1.26.4.dist-info")))
    pip(python, "install", "-q", "--no-deps", "--force-reinstall", f"numpy=={NUMPY}")
    assert list((site / "numpy" / "core").glob("*.so"))

    report = remedied(python, tmp_path, "ENV-FILE-ORPHAN")
    (finding,) = root(report, "ENV-FILE-ORPHAN")
    removed = finding.actions[0]
    assert isinstance(removed, RemoveFiles) and str(site / "numpy") in removed.paths
    assert finding.actions[1:] == (Install(pins=(("numpy", NUMPY),), force=True, no_deps=True),)

    assert not list((site / "numpy" / "core").glob("*.so"))
    assert numpy_files(site) == whole
    assert run(python, "import numpy; print(numpy.__version__)") == NUMPY


@pytest.mark.remedy("ENV-FILE-SHARED")
def test_a_fork_over_the_original_is_uninstalled_with_it_and_one_reinstalled_from_its_wheel(
    tmp_path: Path,
) -> None:
    """``acme-fast`` ships ``acme/core.py`` as ``acme`` does, with other content. The remedy uninstalls
    both and installs one again from the wheel its ``direct_url.json`` names (no index serves it)."""
    original = build_wheel(tmp_path, "acme", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 1\n"})
    fork = build_wheel(tmp_path, "acme-fast", "1.0", {"acme/__init__.py": "", "acme/core.py": "SPEED = 10\n"})
    python, site = clone(tmp_path)
    pip(python, "install", "-q", "--no-deps", "--no-index", str(original))
    pip(python, "install", "-q", "--no-deps", "--no-index", str(fork))

    report = remedied(python, tmp_path, "ENV-FILE-SHARED")
    (finding,) = root(report, "ENV-FILE-SHARED")
    reinstall = finding.actions[-1]
    assert isinstance(reinstall, Install) and reinstall.wheel_url == fork.as_uri()

    assert [p.name for p in site.glob("acme*.dist-info")] == ["acme_fast-1.0.dist-info"]
    assert run(python, "import acme.core; print(acme.core.SPEED)") == "10"


@pytest.mark.remedy("ENV-FILE-GONE")
def test_modules_a_cleanup_deleted_are_installed_again(tmp_path: Path) -> None:
    python, site = clone(tmp_path)
    for name in ("codec.py", "idnadata.py"):
        (site / "idna" / name).unlink()
    assert (
        subprocess.run([str(python), "-c", "import idna"], check=False, capture_output=True).returncode != 0
    )

    remedied(python, tmp_path, "ENV-FILE-GONE")
    assert run(python, "import idna; print(idna.encode('example.com').decode())") == "example.com"


@pytest.mark.remedy("ENV-FILE-GONE")
def test_a_module_gone_from_a_build_of_a_local_folder_is_built_again_from_it(tmp_path: Path) -> None:
    """A project installed from its folder (no index serves that build): the remedy builds it again from
    the folder its ``direct_url.json`` names, never a lookup of its name on an index."""
    project = tmp_path / "localcodec"
    (project / "localcodec").mkdir(parents=True)
    (project / "localcodec" / "__init__.py").write_text("from .table import TABLE\n", encoding="utf-8")
    (project / "localcodec" / "table.py").write_text("TABLE = 'local'\n", encoding="utf-8")
    (project / "setup.py").write_text(
        "from setuptools import setup\nsetup(name='localcodec', version='0.3.0', packages=['localcodec'])\n",
        encoding="utf-8",
    )
    python, site = clone(tmp_path)
    pip(python, "install", "-q", "--no-deps", "--no-build-isolation", str(project))
    (site / "localcodec" / "table.py").unlink()

    report = remedied(python, tmp_path, "ENV-FILE-GONE")
    (finding,) = root(report, "ENV-FILE-GONE")
    assert finding.actions == (Rebuild(name="localcodec", version="0.3.0", source=str(project)),)
    assert run(python, "import localcodec; print(localcodec.TABLE)") == "local"


def torch_installable(version: str) -> dict[str, str]:
    """The environment a remedy's install of ``torch==version`` runs with here, once a dry run of it (by the
    test environment's pip, configured as the clones' is) found the build: PyTorch's index for its label, or
    the wheel store pip is configured with (find-links). The test skips when nothing serves it. An index
    this machine cannot reach fails at once, without retries."""
    env = {**os.environ, "PIP_RETRIES": "0"}
    if not _served(version):
        pytest.skip(f"torch=={version} cannot be installed here (no index or wheel store serves it)")
    return env


@functools.cache
def _served(version: str) -> bool:
    dry = [sys.executable, "-m", "pip", "install", "--dry-run", "-q", "--no-deps", "--force-reinstall"]
    dry += [f"torch=={version}"]
    dry += ["--index-url", pytorch_index(version.split("+")[1])] if "+" in version else []
    env = {**os.environ, "PIP_RETRIES": "0"}
    return subprocess.run(dry, check=False, capture_output=True, timeout=300, env=env).returncode == 0


@pytest.mark.remedy("ENV-FILE-ORPHAN")
def test_a_torch_tree_without_its_dist_info_is_replaced_by_the_build_its_version_file_names(
    tmp_path: Path,
) -> None:
    """An uninstall that died after deleting torch's dist-info: the tree imports, and no RECORD lists any of
    its files. The root's remedy deletes the tree and installs the build its version file names, from the
    index of its label."""
    version, _ = installed_torch()
    python, site = clone(tmp_path)
    env = torch_installable(version)
    shutil.rmtree(next(site.glob("torch-*.dist-info")))  # hard links: the test environment keeps its own

    report = remedied(python, tmp_path, "ENV-FILE-ORPHAN", env=env)
    (finding,) = [f for f in root(report, "ENV-FILE-ORPHAN") if f.subject == str(site / "torch")]
    removed, install = finding.actions
    assert removed == RemoveFiles(paths=(str(site / "torch"),))
    assert isinstance(install, Install) and install.pins == (("torch", version),)
    if "+" in version:
        assert install.index_url == pytorch_index(version.split("+")[1])
    assert [p.name for p in site.glob("torch-*.dist-info")] == [f"torch-{version}.dist-info"]
    assert run(python, "import torch; print(torch.__version__)") == version


@pytest.mark.remedy("ENV-VERSION-FILE")
def test_a_torch_tree_of_another_release_is_replaced_by_the_build_its_dist_info_names(
    tmp_path: Path,
) -> None:
    """torch's files of another release under this release's dist-info (its version file stands for the
    tree): the remedy deletes the tree and installs the exact build from the index its label names."""
    version, _ = installed_torch()
    python, site = clone(tmp_path)
    env = torch_installable(version)
    version_py = site / "torch" / "version.py"
    text = version_py.read_text(encoding="utf-8")
    version_py.unlink()  # a hard link to the test environment's file: replaced, never written through
    version_py.write_text(text.replace(f"'{version.split('+')[0]}", "'2.12.1"), encoding="utf-8")
    stray = site / "torch" / "_from_another_build.py"
    stray.write_text("RELEASE = '2.12.1'\n", encoding="utf-8")

    report = remedied(python, tmp_path, "ENV-VERSION-FILE", env=env)
    (finding,) = root(report, "ENV-VERSION-FILE")
    assert finding.actions[0] == RemoveFiles(paths=(str(site / "torch"),))
    install = finding.actions[1]
    assert isinstance(install, Install) and install.pins == (("torch", version),)
    assert not stray.exists()
    assert run(python, "import torch; print(torch.__version__)") == version
