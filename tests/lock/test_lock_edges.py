"""The edges of ``lock`` and ``lock --check`` that independent tools got right and envcheck did not:

- a local-label mismatch (the lock pins ``torch==2.13.0``, ``2.13.0+cpu`` is installed, or the reverse):
  the remedy, run in a real venv, installs the exact build (pip alone answers "already satisfied");
- a lock written with ``--allow-unlocked`` passes ``lock --check`` on the environment it came from;
- ``lock`` names what pip-compile added that the environment lacked, and what requires it.

The remedies are run as a person pastes them: by bash, with pip given only the sources the lock names.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from venvs import clone_site_packages, needs_torch

from envcheck.lock.check import LeftOut, LockedPin, LockFile, compare, parse_lock
from envcheck.lock.inputs import INSTALLER_TOOLING
from envcheck.manifest.io import load

from .conftest import envcheck, installed, pip, snapshot, venv_with_pip
from .test_lock_hostile import ISOLATED_PIP, _wheel

CPU_EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"


def _index(root: Path, name: str, *versions: str) -> Path:
    """A PEP 503 index folder at ``root`` serving small real wheels of ``name`` at ``versions``."""
    project = root / name
    project.mkdir(parents=True)
    links = []
    for version in versions:
        wheel = _wheel(project, name, version, [])
        links.append(f'<a href="{wheel.name.replace("+", "%2B")}">{wheel.name}</a>')
    (project / "index.html").write_text(f"<html><body>{''.join(links)}</body></html>\n", encoding="utf-8")
    return root


def _torch(lock: Path, python: Path) -> list[tuple[str, str]]:
    """(rule, remedy command) of each finding of ``lock --check`` about torch (the test environment may
    hold other distributions a lock cannot pin: a wheel installed from a path)."""
    done = envcheck("lock", "--check", lock, "--python", python, "--format", "json")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    findings = json.loads(done.stdout)["findings"] if done.stdout.strip() else []
    return [(f["rule"], f["remedy"]) for f in findings if f["subject"] == "torch"]


def _paste(remedy: str) -> subprocess.CompletedProcess[str]:
    """The command between the remedy's backticks, run by bash as a person pastes it."""
    assert remedy.startswith("`") and remedy.endswith("`"), remedy
    command = remedy[1:-1]
    return subprocess.run(
        ["bash", "-c", command],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, **ISOLATED_PIP, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )


@pytest.mark.slow
@needs_torch
def test_a_local_label_mismatch_remedy_installs_the_exact_build(
    venv_factory: Callable[[str], Path], tmp_path: Path
) -> None:
    # The test environment as a venv of hard links (pip's uninstall moves and unlinks them, never writes
    # one in place): its real torch with a local label, and everything torch requires.
    python = venv_factory("label-mismatch")
    clone_site_packages(python)
    pins = {n: v for n, v in installed(python).items() if n not in INSTALLER_TOOLING}
    version = pins["torch"]
    public, _, label = version.partition("+")
    if not label:
        pytest.skip(f"the test environment's torch {version} has no local label")
    others = "".join(f"{n}=={v}\n" for n, v in sorted(pins.items()) if n != "torch")
    # The plain build, served by the lock's index (a small real wheel stands in for the GB one).
    plain = _index(tmp_path / "plain", "torch", public).as_uri()
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"--index-url {plain}\n{others}torch=={public}\n", encoding="utf-8")

    # What the remedy used to be does nothing: pip takes the +label build as meeting ==public.
    naive = _paste(f"`{python} -m pip install 'torch=={public}' --index-url {plain}`")
    assert "Requirement already satisfied" in naive.stdout, naive.stdout + naive.stderr
    assert installed(python)["torch"] == version

    (finding,) = _torch(lock, python)
    assert finding[0] == "LOCK-VERSION"
    assert f"install --force-reinstall --no-deps 'torch==={public}' --index-url '{plain}'" in finding[1]
    done = _paste(finding[1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed(python)["torch"] == public
    assert _torch(lock, python) == []

    # The reverse: the lock pins the labelled build, the plain one is installed.
    labelled = _index(tmp_path / "index" / label, "torch", version).as_uri()
    sources = f"--index-url {plain}\n--extra-index-url {labelled}\n"
    lock.write_text(f"{sources}{others}torch=={version}\n", encoding="utf-8")
    (finding,) = _torch(lock, python)
    assert finding[0] == "LOCK-VERSION"
    # The lock's index named after the build's label is where that build comes from.
    assert f"'torch=={version}' --index-url '{labelled}'" in finding[1]
    done = _paste(finding[1])
    assert done.returncode == 0, done.stdout + done.stderr
    assert installed(python)["torch"] == version
    assert _torch(lock, python) == []


def test_pip_would_be_satisfied_only_where_the_remedy_forces() -> None:
    manifest = load(CPU_EXAMPLE)
    torch = next(d for d in manifest.packages if d.name == "torch")
    public = torch.version.partition("+")[0]
    lock = LockFile(pins=(LockedPin(name="torch", written="torch", version=public, line=1),), sources=())
    (finding,) = [f for f in compare(lock, manifest, python=None) if f.subject == "torch"]
    assert finding.rule == "LOCK-VERSION" and "Requirement already satisfied" in finding.message
    assert finding.remedy == f"`python -m pip install --force-reinstall --no-deps 'torch==={public}'`"

    plain = manifest.replace(
        packages=tuple(dataclasses.replace(d, version=public) if d is torch else d for d in manifest.packages)
    )
    pins = (LockedPin(name="torch", written="torch", version=torch.version, line=2),)
    lock = LockFile(pins=pins, sources=(("--index-url", "https://pypi.example/simple"),))
    (finding,) = [f for f in compare(lock, plain, python="/x/py") if f.subject == "torch"]
    assert "already satisfied" not in finding.message  # pip installs the labelled pin as asked
    assert finding.remedy == (
        f"`'/x/py' -m pip install 'torch=={torch.version}' --index-url 'https://pypi.example/simple'`"
    )


def test_a_left_out_distribution_is_no_extra_at_its_version() -> None:
    manifest = load(CPU_EXAMPLE)
    dists = [d for d in manifest.packages if not d.shadowed]
    # envcheck itself, an editable checkout there: what --allow-unlocked leaves out.
    (first,) = [d for d in dists if d.direct_url is not None]
    rest = [d for d in dists if d is not first]
    text = "".join(f"{d.name}=={d.version}\n" for d in rest) + (
        "\n# Left out (--allow-unlocked): install these by other means.\n"
        f"#   {first.name}=={first.version}: installed from a VCS checkout (direct_url.json)\n"
    )
    lock = parse_lock(text.encode(), "lock")
    assert lock.left_out == (LeftOut(name=first.name, version=first.version, line=len(rest) + 3),)
    assert compare(lock, manifest, python=None) == []
    # Another version than the lock left out: named, as a version difference.
    other = parse_lock(
        text.replace(f"{first.name}=={first.version}", f"{first.name}==0.0.1").encode(), "lock"
    )
    (finding,) = compare(other, manifest, python=None)
    assert (finding.rule, finding.subject, finding.base) == ("LOCK-VERSION", first.name, "0.0.1")
    # The same comment anywhere else exempts nothing.
    loose = "".join(f"{d.name}=={d.version}\n" for d in rest) + f"#   {first.name}=={first.version}: x\n"
    assert [f.rule for f in compare(parse_lock(loose.encode(), "lock"), manifest, python=None)] == [
        "LOCK-EXTRA"
    ]


@pytest.mark.slow
def test_a_lock_written_with_allow_unlocked_passes_its_own_check(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    wheel = _wheel(tmp_path, "envchecklocal", "0.1", ["six"])
    pip(python, "install", "--no-compile", "six", str(wheel))
    manifest = snapshot(python, tmp_path / "manifest.json")
    lock = tmp_path / "lock.txt"
    done = envcheck("lock", manifest, "--allow-unlocked", "-o", lock)
    assert done.returncode == 0, done.stderr
    assert "#   envchecklocal==0.1: installed from a local path" in lock.read_text(encoding="utf-8")
    done = envcheck("lock", "--check", lock, "--python", python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The environment matches the lock." in done.stdout


@pytest.mark.slow
def test_lock_names_what_it_added_and_why(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-compile", "--no-deps", "python-dateutil")  # requires six: not installed
    assert "six" not in installed(python)
    manifest = snapshot(python, tmp_path / "manifest.json")
    lock = tmp_path / "lock.txt"
    done = envcheck("lock", manifest, "-o", lock)
    assert done.returncode == 0, done.stderr
    # What python-dateutil requires here (six, tzdata: whichever its release names) and pip-compile added.
    added = re.findall(
        r"^added: (\S+)==\S+: the environment lacks it; required by python-dateutil$", done.stderr, re.M
    )
    assert added, done.stderr
    assert not set(added) & set(installed(python))
    text = lock.read_text(encoding="utf-8")
    assert "# Added: the environment lacked these" in text
    for name in added:
        assert re.search(
            rf"^#   {name}==\S+: the environment lacks it; required by python-dateutil$", text, re.M
        )
    # The lock is right to pin them; the environment it came from lacks them, and --check says so.
    done = envcheck("lock", "--check", lock, "--python", python, "--format", "json")
    assert done.returncode == 1
    missing = {f["subject"] for f in json.loads(done.stdout)["findings"] if f["rule"] == "LOCK-MISSING"}
    assert missing == set(added)
