"""Real environments for the deployment-gate kit (ci/gate.sh) and the pytest plugin.

``KitEnvs.matching`` is a hard-linked clone of the test environment (minus envcheck itself, see
``venvs.clone_site_packages``) and ``manifest`` its snapshot with the smoke suite's goldens, taken once by
the real ``envcheck snapshot``. ``drifting`` is the same clone with one distribution removed that another
one requires (mdurl, which markdown-it-py needs): the gate must fail on it and name it.
"""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from venvs import HAS_TORCH, clone_site_packages, make_venv, venv_site

REPO = Path(__file__).resolve().parents[2]
# The distribution taken out of the drifting clone, and the installed one that requires it.
DRIFT_PACKAGE = "mdurl"
DRIFT_REQUIRER = "markdown-it-py"


@dataclass(frozen=True)
class KitEnvs:
    matching: Path  # interpreter of an environment that matches the manifest
    drifting: Path  # interpreter of the same environment without DRIFT_PACKAGE
    manifest: Path  # snapshot of `matching`, with goldens


def _drift_possible() -> str | None:
    if not HAS_TORCH:
        return "torch is not installed in the test environment"
    try:
        importlib.metadata.version(DRIFT_PACKAGE)
        requires = importlib.metadata.requires(DRIFT_REQUIRER) or []
    except importlib.metadata.PackageNotFoundError as e:
        return f"{e} is not installed in the test environment"
    if not any(r.split(";")[0].strip().startswith(DRIFT_PACKAGE) and ";" not in r for r in requires):
        return f"{DRIFT_REQUIRER} no longer requires {DRIFT_PACKAGE}"
    return None


@pytest.fixture(scope="package")
def kit_envs(tmp_path_factory: pytest.TempPathFactory) -> KitEnvs:
    reason = _drift_possible()
    if reason is not None:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("kit")
    matching = make_venv(root / "matching")
    clone_site_packages(matching)
    drifting = make_venv(root / "drifting")
    site = clone_site_packages(drifting)
    # The clone's entries are hard links: removing them leaves the test environment's files alone.
    removed = [p for p in site.iterdir() if p.name == DRIFT_PACKAGE or p.name.startswith(f"{DRIFT_PACKAGE}-")]
    assert len(removed) == 2, removed  # the package and its .dist-info
    for path in removed:
        shutil.rmtree(path)
    assert not (venv_site(drifting) / DRIFT_PACKAGE).exists()
    manifest = root / "manifest.json"
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "snapshot", "--python", str(matching), "-o", str(manifest), "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return KitEnvs(matching=matching, drifting=drifting, manifest=manifest)
