"""Where each copy comes from: real installs (an editable checkout against the wheel built from the same
source), real venvs with the same folder twice on sys.path, a healthy ``--system-site-packages`` venv, a
.pth file and PYTHONPATH putting another torch tree first, and hostile .pth files and sys.path entries.

The tiny package is built and installed offline: ``pip wheel`` / ``pip install -e`` with
``--no-build-isolation``, the test environment's setuptools and wheel hard-linked into the editable venv.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from venvs import _link_or_copy, clone_site_packages, needs_torch, site_packages, venv_site

TIMEOUT = 600
PYPROJECT = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyprov"
version = "1.0.0"

[tool.setuptools]
packages = ["tinyprov"]
"""
BUILD_TOOLS = ("setuptools", "wheel", "_distutils_hack", "pkg_resources", "packaging")

pytestmark = pytest.mark.slow  # real venvs, real pip installs, the real CLI in subprocesses


def run(*args: str | Path, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a user runs it (``env``: variables to set, or to unset with None)."""
    merged = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={k: v for k, v in merged.items() if v is not None},
        check=False,
    )


def pip(python: Path | None, *args: str | Path) -> None:
    """pip of the test environment, run for ``python`` (None: for the test environment itself)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", *(("--python", str(python)) if python else ()), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def venv(root: Path, *options: str) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *options, str(root)], check=True)
    return root / "bin" / "python"


def snapshot(
    python: Path, out: Path, *, env: dict[str, str | None] | None = None, probe: bool = True
) -> Path:
    done = run(
        "snapshot",
        "--python",
        python,
        "--no-verify",
        *(() if probe else ("--no-probe",)),
        "-q",
        "-o",
        out,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return out


def findings(*args: str | Path) -> tuple[int, list[dict[str, Any]]]:
    done = run(*args, "--format", "json")
    assert done.returncode in (0, 1), done.stderr
    found: list[dict[str, Any]] = json.loads(done.stdout)["findings"]
    return done.returncode, found


def of(found: list[dict[str, Any]], rule: str) -> list[dict[str, Any]]:
    return [f for f in found if f["rule"] == rule]


def fake_torch(folder: Path, version: str) -> Path:
    """A torch tree with its dist-info (what tests/venvs.py's fault_torch makes, plus pip's metadata)."""
    (folder / "torch").mkdir(parents=True)
    (folder / "torch" / "__init__.py").write_text("", encoding="utf-8")
    (folder / "torch" / "version.py").write_text(
        f"__version__ = '{version}'\ncuda = None\n", encoding="utf-8"
    )
    info = folder / f"torch-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n", encoding="utf-8"
    )
    (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    return folder


# --- an editable checkout against the wheel of the same source -------------------------------------------


class Pair:
    def __init__(self, root: Path) -> None:
        self.src = root / "src"
        (self.src / "tinyprov").mkdir(parents=True)
        (self.src / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")
        (self.src / "tinyprov" / "__init__.py").write_text("VALUE = 1\n", encoding="utf-8")
        self.dist = dist = root / "dist"
        self.released = venv(root / "released")
        pip(None, "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, self.src)
        pip(self.released, "install", "--no-index", "--find-links", dist, "--no-deps", "tinyprov==1.0.0")
        self.editable = venv(root / "editable")
        target = venv_site(self.editable)
        for entry in site_packages().iterdir():
            if entry.name.split("-")[0] in BUILD_TOOLS:
                if entry.is_dir():
                    shutil.copytree(entry, target / entry.name, copy_function=_link_or_copy, symlinks=True)
                else:
                    _link_or_copy(str(entry), str(target / entry.name))
        pip(self.editable, "install", "--no-index", "--no-deps", "--no-build-isolation", "-e", self.src)
        # The checkout is patched after the install: same version number, other code.
        (self.src / "tinyprov" / "__init__.py").write_text("VALUE = 2  # patched\n", encoding="utf-8")
        self.released_json = snapshot(self.released, root / "released.json")
        self.editable_json = snapshot(self.editable, root / "editable.json")


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Pair:
    return Pair(tmp_path_factory.mktemp("provenance"))


def test_an_editable_install_of_the_released_version_fails_the_diff(pair: Pair) -> None:
    code, found = findings("diff", pair.released_json, pair.editable_json)
    assert code == 1
    (f,) = of(found, "ENV-PKG-SOURCE")
    assert (f["severity"], f["subject"]) == ("error", "tinyprov")
    assert f["base"] == "a release from an index" and f["target"] == f"editable: {pair.src}"
    assert "`pip install --force-reinstall --no-deps 'tinyprov==1.0.0'`" in f["remedy"]
    # doctor's listing of editable installs (ENV-PKG-DIRECT) does not repeat the difference beside a base.
    assert of(found, "ENV-PKG-DIRECT") == []


def test_the_other_way_round_is_a_warning(pair: Pair) -> None:
    _, found = findings("diff", pair.editable_json, pair.released_json)
    (f,) = of(found, "ENV-PKG-SOURCE")
    assert f["severity"] == "warning" and "the base ran code no index serves" in f["message"]
    assert "--force-reinstall" not in f["remedy"]


def test_the_same_source_on_both_sides_is_no_finding(pair: Pair) -> None:
    for manifest in (pair.released_json, pair.editable_json):
        _, found = findings("diff", manifest, manifest)
        assert of(found, "ENV-PKG-SOURCE") == []


def test_doctor_lists_an_editable_install_without_failing(pair: Pair) -> None:
    code, found = findings("doctor", pair.editable_json)
    assert code == 0
    (f,) = of(found, "ENV-PKG-DIRECT")
    assert f["severity"] == "info" and f["target"] == f"editable: {pair.src}"
    assert of(findings("doctor", pair.released_json)[1], "ENV-PKG-DIRECT") == []


def test_lock_check_fails_on_the_editable_install(pair: Pair, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("tinyprov==1.0.0\n", encoding="utf-8")
    done = run("lock", "--check", lock, "--python", pair.released)
    assert done.returncode == 0, done.stdout + done.stderr
    done = run("lock", "--check", lock, "--python", pair.editable, "--format", "json")
    assert done.returncode == 1, done.stderr
    (f,) = of(json.loads(done.stdout)["findings"], "LOCK-SOURCE")
    assert (f["rule"], f["severity"], f["target"]) == ("LOCK-SOURCE", "error", f"editable: {pair.src}")
    assert shlex.split(f["remedy"].strip("`"))[-4:] == [
        "install",
        "--force-reinstall",
        "--no-deps",
        "tinyprov==1.0.0",
    ]
    # A lock that pins the checkout itself (a direct reference) is not compared by source.
    lock.write_text(f"tinyprov @ file://{pair.src}\n", encoding="utf-8")
    done = run("lock", "--check", lock, "--python", pair.editable, "--format", "json")
    assert of(json.loads(done.stdout)["findings"], "LOCK-SOURCE") == []


@needs_torch
def test_the_gate_fails_on_a_patched_editable_install(pair: Pair, tmp_path: Path) -> None:
    # The test environment's torch (hard-linked) with the released tinyprov, recorded with its goldens;
    # then the same version from the patched checkout, editable: the gate fails on that alone.
    python = venv(tmp_path / "venv")
    clone_site_packages(python)
    pip(python, "install", "--no-index", "--find-links", pair.dist, "--no-deps", "tinyprov==1.0.0")
    manifest = tmp_path / "m.json"
    done = run("snapshot", "--python", python, "-q", "-o", manifest)
    assert done.returncode == 0, done.stderr
    pip(python, "uninstall", "-y", "tinyprov")
    pip(python, "install", "--no-index", "--no-deps", "--no-build-isolation", "-e", pair.src)
    code, found = findings("gate", manifest, "--python", python)
    assert code == 1
    errors = [(f["rule"], f["subject"], f["target"]) for f in found if f["severity"] == "error"]
    assert errors == [("ENV-PKG-SOURCE", "tinyprov", f"editable: {pair.src}")]


# --- one folder twice on sys.path --------------------------------------------------------------------------


def test_one_folder_twice_on_sys_path_is_not_shadowing(pair: Pair, tmp_path: Path) -> None:
    site = venv_site(pair.released)
    alias = tmp_path / "alias"
    alias.symlink_to(site, target_is_directory=True)
    # Through PYTHONPATH (a link to the venv's own site-packages) ...
    manifest = snapshot(pair.released, tmp_path / "pythonpath.json", env={"PYTHONPATH": str(alias)})
    data = json.loads(manifest.read_text(encoding="utf-8"))
    assert [p["name"] for p in data["packages"]] == ["tinyprov"]  # listed once, not shadowed
    origins = {o["path"]: o["origin"] for o in data["python"]["path_origins"]}
    assert origins[str(alias)] == "pythonpath" and origins[str(site)] == "site"
    code, found = findings("doctor", manifest)
    assert code == 0 and of(found, "ENV-TORCH-SHADOWED") == []
    # ... and through a .pth file naming it (site.py adds the other spelling).
    pth = site / "twice.pth"
    pth.write_text(f"{alias}\n", encoding="utf-8")
    try:
        manifest = snapshot(pair.released, tmp_path / "pth.json")
    finally:
        pth.unlink()
    data = json.loads(manifest.read_text(encoding="utf-8"))
    assert {"path": str(alias), "origin": "pth", "pth": str(pth)} in data["python"]["path_origins"]
    assert [p["name"] for p in data["packages"]] == ["tinyprov"]
    assert of(findings("doctor", manifest)[1], "ENV-TORCH-SHADOWED") == []


def test_a_torch_tree_reached_twice_is_one_tree(tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    site = fake_torch(venv_site(python), "2.13.0+cpu")
    alias = tmp_path / "alias"
    alias.symlink_to(site, target_is_directory=True)
    manifest = snapshot(python, tmp_path / "m.json", env={"PYTHONPATH": f"{alias}/"}, probe=False)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    assert data["torch"]["trees"] == [f"{alias}/torch"]
    _, found = findings("doctor", manifest)
    assert of(found, "ENV-TORCH-TREES") == [] and of(found, "ENV-TORCH-SHADOWED") == []


# --- a healthy --system-site-packages venv ------------------------------------------------------------------


@needs_torch
def test_a_healthy_system_site_packages_venv_gives_nothing_about_its_own_copies(tmp_path: Path) -> None:
    # The venv has its own torch, pip and setuptools (the test environment's) over the base interpreter's.
    python = venv(tmp_path / "venv", "--system-site-packages")
    clone_site_packages(python)
    manifest = snapshot(python, tmp_path / "m.json")
    data = json.loads(manifest.read_text(encoding="utf-8"))
    shadowed = {p["name"].lower() for p in data["packages"] if p["shadowed"]}
    if not shadowed:
        pytest.skip("the base interpreter has none of the venv's distributions: nothing is overridden")
    assert any(o["origin"] == "base-site" for o in data["python"]["path_origins"])
    for args in (("doctor", "--python", python), ("gate", manifest, "--python", python)):
        _, found = findings(*args)
        loud = [f for f in found if f["severity"] in ("error", "warning")]
        # (ENV-NATIVE-SHADOWED: the base's numpy.libs stood for the venv's numpy's, which the process loads)
        shadow_rules = ("ENV-TORCH-SHADOWED", "ENV-TORCH-TREES", "ENV-NATIVE-SHADOWED")
        assert [f for f in loud if f["rule"] in shadow_rules] == [], args
        assert [f for f in loud if f["subject"].lower() in ("pip", "setuptools")] == [], args
        assert not any("uninstall" in f["remedy"] and f["subject"].lower() in shadowed for f in found)


# --- another copy first: a .pth file, PYTHONPATH -----------------------------------------------------------


def test_a_pth_file_that_puts_another_torch_first_is_named_and_edited(tmp_path: Path) -> None:
    # A .pth line of code that inserts a folder at the front of sys.path (path lines only append): site.py
    # runs it at every start; the probe reads the path it names without running it.
    python = venv(tmp_path / "venv")
    own = fake_torch(venv_site(python), "2.13.0+cpu")
    other = fake_torch(tmp_path / "other", "2.12.0+cpu")
    pth = own / "other-torch.pth"
    pth.write_text(f"# an extra torch\nimport sys; sys.path.insert(0, {str(other)!r})\n", encoding="utf-8")
    manifest = snapshot(python, tmp_path / "m.json", probe=False)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    assert data["python"]["path_origins"][0] == {"path": str(other), "origin": "pth", "pth": str(pth)}
    _, found = findings("doctor", manifest)
    (trees,) = of(found, "ENV-TORCH-TREES")
    assert trees["severity"] == "error"
    assert str(pth) in trees["message"] and str(other) in trees["message"] and str(own) in trees["message"]
    assert str(pth) in trees["remedy"] and "uninstall" not in trees["remedy"].lower()
    (shadow,) = of(found, "ENV-TORCH-SHADOWED")
    assert shadow["severity"] == "error" and "is not the one imported" in shadow["message"]
    assert str(pth) in shadow["message"] and str(other) in shadow["message"] and str(own) in shadow["message"]
    # The other tree is the root: the shadowed copy's remedy is the tree's (the .pth line deleted).
    assert shadow["remedy"].startswith("Follows from ENV-TORCH-TREES") and not shadow["actions"]


@pytest.mark.remedy("ENV-TORCH-TREES")
def test_another_torch_tree_is_taken_off_by_its_remedy_and_the_tree_finding_goes(tmp_path: Path) -> None:
    # Two ways another torch tree gets on sys.path, each fixed by running what the report says: a path line
    # of the environment's own .pth file (the line deleted by the --remedies script), and PYTHONPATH (set
    # where the application runs: the variable step applied to the next run).
    python = venv(tmp_path / "venv")
    site = venv_site(python)
    fake_torch(site, "2.13.0+cpu")
    leftover = fake_torch(tmp_path / "leftover", "2.12.0+cpu")
    pth = site / "leftover.pth"
    pth.write_text(f"# kept by an old install\n{leftover}\n", encoding="utf-8")
    manifest = snapshot(python, tmp_path / "m.json", probe=False)
    script = tmp_path / "fix.sh"
    done = run("doctor", manifest, "--format", "json", "--remedies", script)
    (trees,) = of(json.loads(done.stdout)["findings"], "ENV-TORCH-TREES")
    assert [a["kind"] for a in trees["actions"]] == ["edit"] and trees["actions"][0]["path"] == str(pth)
    subprocess.run(["sh", str(script)], check=True, capture_output=True, timeout=60)
    assert pth.read_text(encoding="utf-8") == "# kept by an old install\n"
    assert (leftover / "torch" / "version.py").is_file()  # the other folder itself is never touched
    again = snapshot(python, tmp_path / "again.json", probe=False)
    assert not of(findings("doctor", again)[1], "ENV-TORCH-TREES")

    env: dict[str, str | None] = {"PYTHONPATH": str(leftover)}
    manifest = snapshot(python, tmp_path / "pp.json", env=env, probe=False)
    (trees,) = of(findings("doctor", manifest)[1], "ENV-TORCH-TREES")
    assert trees["severity"] == "error"
    assert trees["actions"] == [{"kind": "variable", "name": "PYTHONPATH", "value": None}]
    fixed = snapshot(python, tmp_path / "pp-fixed.json", env={"PYTHONPATH": None}, probe=False)
    assert not of(findings("doctor", fixed)[1], "ENV-TORCH-TREES")


def test_the_user_site_after_the_venvs_own_copy_is_named(tmp_path: Path) -> None:
    # A --system-site-packages venv keeps the user site (after its own site-packages), and the .pth
    # files there: the copy they add is not imported, and the remedy edits that .pth.
    python = venv(tmp_path / "venv", "--system-site-packages")
    fake_torch(venv_site(python), "2.13.0+cpu")
    other = fake_torch(tmp_path / "other", "2.12.0+cpu")
    env: dict[str, str | None] = {"PYTHONUSERBASE": str(tmp_path / "userbase"), "PYTHONNOUSERSITE": None}
    user_site = subprocess.run(
        [str(python), "-c", "import site; print(site.getusersitepackages())"],
        capture_output=True,
        text=True,
        check=True,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
    ).stdout.strip()
    Path(user_site).mkdir(parents=True)
    pth = Path(user_site) / "other-torch.pth"
    pth.write_text(f"{other}\n", encoding="utf-8")
    manifest = snapshot(python, tmp_path / "m.json", env=env, probe=False)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    origins = {o["path"]: (o["origin"], o["pth"]) for o in data["python"]["path_origins"]}
    assert origins[user_site] == ("user-site", None) and origins[str(other)] == ("pth", str(pth))
    found = findings("doctor", manifest)[1]
    (shadow,) = of(found, "ENV-TORCH-SHADOWED")
    assert shadow["severity"] == "warning" and shadow["remedy"].startswith("Follows from ENV-TORCH-TREES")
    (trees,) = of(found, "ENV-TORCH-TREES")
    # A .pth file of the user site: the user site kept off this environment, never edited for all of them.
    assert str(pth) in trees["remedy"] and "`export PYTHONNOUSERSITE='1'`" in trees["remedy"]


def test_a_pythonpath_copy_is_dropped_from_pythonpath_not_uninstalled(tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    own = fake_torch(venv_site(python), "2.13.0+cpu")
    other = fake_torch(tmp_path / "pp", "2.12.0+cpu")
    keep = tmp_path / "lib"
    keep.mkdir()
    manifest = snapshot(python, tmp_path / "m.json", env={"PYTHONPATH": f"{other}:{keep}"}, probe=False)
    _, found = findings("doctor", manifest)
    (shadow,) = of(found, "ENV-TORCH-SHADOWED")
    assert f"{other} (PYTHONPATH)" in shadow["message"] and str(own) in shadow["message"]
    assert shadow["remedy"].startswith("Follows from ENV-TORCH-TREES")
    (trees,) = of(found, "ENV-TORCH-TREES")
    assert trees["remedy"].startswith(f"`export PYTHONPATH='{keep}'`")
    assert "uninstall" not in trees["remedy"].lower()
    # The only entry: nothing is left to export.
    manifest = snapshot(python, tmp_path / "m1.json", env={"PYTHONPATH": str(other)}, probe=False)
    (trees,) = of(findings("doctor", manifest)[1], "ENV-TORCH-TREES")
    assert trees["remedy"].startswith("`unset PYTHONPATH`")


def test_a_copy_behind_the_environments_own_is_a_warning(tmp_path: Path) -> None:
    # A .pth in the venv's site-packages appends its folder after site-packages: the venv's torch wins.
    python = venv(tmp_path / "venv")
    site = fake_torch(venv_site(python), "2.13.0+cpu")
    other = fake_torch(tmp_path / "other", "2.12.0+cpu")
    pth = site / "late.pth"
    pth.write_text(f"{other}\n", encoding="utf-8")
    manifest = snapshot(python, tmp_path / "m.json", probe=False)
    _, found = findings("doctor", manifest)
    (shadow,) = of(found, "ENV-TORCH-SHADOWED")
    assert shadow["severity"] == "warning" and "the environment's own copy is imported" in shadow["message"]
    assert shadow["remedy"].startswith("Follows from ENV-TORCH-TREES")
    (trees,) = of(found, "ENV-TORCH-TREES")
    assert trees["severity"] == "warning" and str(pth) in trees["remedy"]


# --- hostile .pth files and sys.path entries ---------------------------------------------------------------


def _hostile_pth_files(folder: Path, marker: Path, good: Path) -> None:
    (folder / "a-million-lines.pth").write_bytes(b"# nothing\n" * 1_000_000)
    (folder / "b-huge-line.pth").write_bytes(b"x" * (3 << 20))
    # Control characters and NULs, still UTF-8: site.py itself dies on a .pth it cannot decode.
    (folder / "c-garbage.pth").write_bytes(bytes(range(1, 128)) * 64 + b"\n\x00\x1b[2J/etc\n\xc3\xa9\n")
    (folder / "d-code.pth").write_text(
        f"import pathlib; pathlib.Path({str(marker)!r}).write_text('ran')\n", encoding="utf-8"
    )
    (folder / "e-good.pth").write_text(f"{good}\n", encoding="utf-8")


def test_a_hostile_site_and_a_link_loop_on_sys_path_still_snapshot(tmp_path: Path) -> None:
    python = venv(tmp_path / "venv")
    site = fake_torch(venv_site(python), "2.13.0+cpu")
    marker, good = tmp_path / "ran", tmp_path / "good"
    good.mkdir()
    _hostile_pth_files(site, marker, good)
    loop_a, loop_b = tmp_path / "loop-a", tmp_path / "loop-b"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    manifest = snapshot(python, tmp_path / "m.json", env={"PYTHONPATH": str(loop_a)}, probe=False)
    data = json.loads(manifest.read_text(encoding="utf-8"))
    origins = {o["path"]: (o["origin"], o["pth"]) for o in data["python"]["path_origins"]}
    assert origins[str(loop_a)] == ("pythonpath", None)
    assert origins[str(good)] == ("pth", str(site / "e-good.pth"))
    assert data["torch"]["trees"] == [str(site / "torch")]
    done = run("doctor", manifest)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stdout + done.stderr
    # A .pth that site.py cannot decode stops the interpreter itself: one line, exit 2.
    (site / "z-undecodable.pth").write_bytes(b"\xff\xfe\x80\n")
    done = run("snapshot", "--python", python, "--no-probe", "--no-verify", "-q", "-o", tmp_path / "x.json")
    assert done.returncode == 2 and done.stderr.startswith("error: ") and "Traceback" not in done.stderr
