"""Where a labelled build (``+cpu``) is locked from: ``--extra-index-url``, else the index the manifest's
pip was configured with for that label, else pip's own configuration, else ``${TORCH_INDEX_URL}``.

The index label rule keys on the local label, not on the name torch, so a small real wheel with a
``+cpu`` version, served by a local PEP 503 index folder named ``cpu`` (the PyTorch index's convention),
stands in for a multi-GB torch build. pip's own sources here may be a local wheel store: the tests
give pip only the indexes they name.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import Env, envcheck, pip, venv_with_pip
from .test_lock_hostile import _one_error, _wheel

NAME = "envchecklabelled"
VERSION = "1.0+cpu"


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """A PEP 503 index folder ``.../cpu`` serving only the labelled wheel."""
    project = tmp_path / "index" / "cpu" / NAME
    project.mkdir(parents=True)
    wheel = _wheel(project, NAME, VERSION, [])
    href = wheel.name.replace("+", "%2B")
    (project / "index.html").write_text(f'<html><body><a href="{href}">{wheel.name}</a></body></html>\n')
    return project.parent


def _manifest(env: Env, tmp_path: Path, extra_env: dict[str, str] | None = None) -> Path:
    data = json.loads(env.manifest.read_text(encoding="utf-8"))
    six = next(d for d in data["packages"] if d["name"] == "six")
    data["packages"].append({**six, "name": NAME, "version": VERSION, "requires": []})
    data["env"].update(extra_env or {})
    out = tmp_path / "labelled.json"
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def _lock(manifest: Path, out: Path, *args: str, env: dict[str, str]) -> str:
    done = envcheck("lock", manifest, "-o", out, *args, env=env)
    assert done.returncode == 0, done.stderr
    return out.read_text(encoding="utf-8")


def _configured_extra_indexes() -> list[str]:
    """The extra indexes pip is configured with here (files and PIP_* variables), in order."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    found: list[str] = []
    for line in done.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith(".extra-index-url"):
            found += value.strip("'\"").split()
    return list(dict.fromkeys(found))


@pytest.mark.slow
def test_an_extra_index_url_serves_the_labelled_build(small_env: Env, tmp_path: Path, index: Path) -> None:
    text = _lock(
        _manifest(small_env, tmp_path), tmp_path / "lock.txt", "--extra-index-url", index.as_uri(), env={}
    )
    assert f"--extra-index-url {index.as_uri()}\n" in text
    assert f"{NAME}=={VERSION}\n" in text


@pytest.mark.slow
def test_the_manifests_recorded_index_serves_it_only_when_trusted(
    small_env: Env, tmp_path: Path, index: Path
) -> None:
    manifest = _manifest(small_env, tmp_path, {"PIP_EXTRA_INDEX_URL": index.as_uri()})
    # Untrusted (the default): the manifest's index is named on stderr, never contacted or written.
    done = envcheck("lock", manifest, env={"TORCH_INDEX_URL": ""})
    _one_error(done, f"{NAME}=={VERSION}")
    assert f"the manifest names an index for +cpu builds ({index.as_uri()})" in done.stderr
    assert "--trust-manifest-index" in done.stderr and index.as_uri() not in done.stdout

    text = _lock(manifest, tmp_path / "lock.txt", "--trust-manifest-index", env={})
    assert f"--extra-index-url {index.as_uri()}\n" in text
    assert f"# --extra-index-url {index.as_uri()}: the index the\n# manifest's pip was configured" in text
    assert f"{NAME}=={VERSION}\n" in text


@pytest.mark.slow
def test_pips_own_configuration_serves_it(small_env: Env, tmp_path: Path, index: Path) -> None:
    # pip's configuration names one more extra index, the one that serves the labelled build.
    extra = " ".join([*_configured_extra_indexes(), index.as_uri()])
    env = {"PIP_EXTRA_INDEX_URL": extra, "TORCH_INDEX_URL": ""}
    text = _lock(_manifest(small_env, tmp_path), tmp_path / "lock.txt", env=env)
    assert f"{NAME}=={VERSION}\n" in text
    assert "${TORCH_INDEX_URL}" not in text


@pytest.mark.slow
def test_else_the_lock_names_torch_index_url_and_pip_expands_it(
    small_env: Env, tmp_path: Path, index: Path
) -> None:
    manifest = _manifest(small_env, tmp_path)
    _one_error(envcheck("lock", manifest, env={"TORCH_INDEX_URL": ""}), f"{NAME}=={VERSION}")

    lock = tmp_path / "lock.txt"
    text = _lock(manifest, lock, env={"TORCH_INDEX_URL": index.as_uri()})
    assert "--extra-index-url ${TORCH_INDEX_URL}\n" in text
    assert index.as_uri() not in text  # the lock names the variable, never this machine's value
    assert "# TORCH_INDEX_URL: set it to the PyTorch wheel index" in text
    assert f"{NAME}=={VERSION}\n" in text

    python = venv_with_pip(tmp_path / "venv")
    os.environ["TORCH_INDEX_URL"] = index.as_uri()
    try:
        pip(python, "install", "--no-compile", "-r", str(lock))
    finally:
        del os.environ["TORCH_INDEX_URL"]
    done = envcheck("lock", "--check", lock, "--python", python, env={"TORCH_INDEX_URL": ""})
    assert done.returncode == 0, done.stdout + done.stderr
