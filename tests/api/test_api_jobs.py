"""The Python API's jobs, called directly: ``lock``, ``check_lock``, ``predict``, ``export``, ``scan`` and
``cluster_check``. Everything is local: the wheels lie in a ``--find-links`` folder next to an empty
index, pip's configuration is off, the caches are the test's own. Untrusted input (a missing file, one
that does not load, a bad option) ends in one ``EnvcheckError``, never another exception.
"""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

from envcheck import api
from envcheck.api._cluster import rank_of_job
from envcheck.api._export import ExportFormat
from envcheck.core.errors import EnvcheckError, ManifestError, UsageError
from envcheck.lock.check import LockFileError
from envcheck.manifest.io import load

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
PLATFORM = "manylinux_2_28_x86_64"
TAG = f"py3-none-{PLATFORM}"


def _manifest(tmp: Path, *dists: tuple[str, str], tags: tuple[str, ...] = (TAG,)) -> Path:
    """The example CPU manifest with only ``dists`` installed (nothing any index serves but these)."""
    data = json.loads(CPU.read_text(encoding="utf-8"))
    template = {**data["packages"][0], "requires": [], "native_files": [], "wheel_tags": list(tags)}
    data["packages"] = [{**template, "name": n, "version": v} for n, v in dists]
    path = tmp / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _wheel(folder: Path, name: str, version: str, tag: str = TAG) -> Path:
    """A pure wheel of one module, ``name``-``version``, tagged ``tag``."""
    folder.mkdir(exist_ok=True)
    info = f"{name}-{version}.dist-info"
    path = folder / f"{name}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{name}.py", "")
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n")
        z.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """pip and uv see no configuration and no index of their own; caches and temp files in ``tmp_path``."""
    for key in list(os.environ):
        if key.startswith(("PIP_", "UV_")):
            monkeypatch.delenv(key)
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    (tmp_path / "empty-index").mkdir()
    return tmp_path


# lock


@pytest.mark.slow
def test_lock_writes_the_pins_of_the_manifest(offline: Path) -> None:
    _wheel(offline / "wheels", "pkga", "1.0", "py3-none-any")
    manifest = _manifest(offline, ("pkga", "1.0"), tags=("py3-none-any",))
    warnings: list[str] = []
    steps: list[str] = []
    written = api.lock(
        manifest,
        index_url=(offline / "empty-index").as_uri(),
        find_links=[str(offline / "wheels")],
        timeout=300,
        warn=warnings.append,
        progress=steps.append,
    )
    assert "pkga==1.0" in written.text.splitlines()
    assert written.unlocked == ()
    assert written.added == ()
    assert steps == ["pip-compile"]


def test_lock_of_a_missing_manifest_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        api.lock(tmp_path / "absent.json")


def test_lock_of_a_manifest_that_does_not_load_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "packages": [', encoding="utf-8")
    with pytest.raises(EnvcheckError):
        api.lock(bad)


# check_lock


def test_check_lock_of_a_missing_lock_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(LockFileError):
        api.check_lock(tmp_path / "absent.txt", python=sys.executable)


def test_check_lock_refuses_what_is_not_a_lock_before_the_interpreter_starts(tmp_path: Path) -> None:
    loose = tmp_path / "requirements.txt"
    loose.write_text("six>=1.0\n", encoding="utf-8")
    with pytest.raises(LockFileError, match="not one exact version"):
        # The interpreter does not exist: the lock is refused first, or this would be another error.
        api.check_lock(loose, python=str(tmp_path / "no-python"))


def test_check_lock_of_a_manifest_given_as_a_lock_is_one_error() -> None:
    with pytest.raises(EnvcheckError):
        api.check_lock(CPU, python=sys.executable)


@pytest.mark.slow
def test_check_lock_counts_each_difference_by_rule(tmp_path: Path) -> None:
    path = tmp_path / "requirements.lock"
    path.write_text("pytest==0.0.1\nnot-installed-here==1.0\n", encoding="utf-8")
    policy = tmp_path / "policy.toml"
    policy.write_text('ignore = ["LOCK-EXTRA"]\n', encoding="utf-8")
    told: list[str] = []
    checked = api.check_lock(
        path, python=sys.executable, policy=api.load_policy(policy), timeout=120, tell=told.append
    )
    assert checked.counts["LOCK-VERSION"] == 1
    assert checked.counts["LOCK-MISSING"] == 1
    assert checked.counts["LOCK-EXTRA"] >= 1  # everything else this environment holds: counted...
    assert {f.rule for f in checked.report.findings} == {"LOCK-VERSION", "LOCK-MISSING"}  # ...then ignored
    assert checked.report.policy_changed
    assert not checked.matches
    assert checked.reference_torch is None
    assert told == []  # the lock has no torch: no slip to tell
    assert checked.report.title == f"envcheck lock --check: this machine ({sys.executable}) against {path}"


# predict


def test_predict_refuses_an_unknown_resolver_before_reading_anything(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--resolver"):
        api.predict(tmp_path / "absent.json", platforms=[PLATFORM], resolver="conda")


def test_predict_refuses_a_timeout_that_is_not_positive() -> None:
    with pytest.raises(UsageError, match="--timeout"):
        api.predict(CPU, platforms=[PLATFORM], timeout=0)


def test_predict_of_a_missing_manifest_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        api.predict(tmp_path / "absent.json", platforms=[PLATFORM])


def test_predict_refuses_an_unknown_platform_tag() -> None:
    with pytest.raises(UsageError):
        api.predict(CPU, platforms=["amiga_68k"])


@pytest.mark.slow
def test_predict_resolves_scans_saves_and_reports(offline: Path) -> None:
    _wheel(offline / "wheels", "pkga", "1.0")
    manifest = _manifest(offline, ("pkga", "1.0"))
    steps: list[str] = []
    predicted = api.predict(
        manifest,
        platforms=[PLATFORM],
        python_version="3.11",
        index_url=(offline / "empty-index").as_uri(),
        find_links=[str(offline / "wheels")],
        resolver="pip",
        save=offline / "predicted.json",
        timeout=120,
        policy=api.load_policy(disabled=True),
        progress=steps.append,
    )
    assert predicted.saved == (offline / "predicted.json",)
    [(platform, result)] = predicted.manifests
    assert platform == PLATFORM
    assert [(d.name, d.version) for d in result.packages] == [("pkga", "1.0")]
    saved = json.loads((offline / "predicted.json").read_text(encoding="utf-8"))
    assert [p["name"] for p in saved["packages"]] == ["pkga"]
    assert PLATFORM in predicted.report.title
    assert steps  # told each step


# export


@pytest.mark.slow
def test_export_gives_the_same_sbom_bytes_for_the_same_manifest() -> None:
    pytest.importorskip("cyclonedx")
    first = api.export(CPU)
    assert json.loads(first)["bomFormat"] == "CycloneDX"
    assert api.export(str(CPU), fmt=ExportFormat.cyclonedx) == first
    assert api.export(load(CPU)) == first  # a Manifest as well as its file


def test_export_of_a_missing_manifest_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError):
        api.export(tmp_path / "absent.json")


def test_export_of_a_manifest_that_does_not_load_is_one_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(b"\xff\xfe not json")
    with pytest.raises(EnvcheckError):
        api.export(bad)


# scan


def test_scan_of_a_pure_wheel_finds_nothing_missing(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "wheels", "pkga", "1.0")
    scanned = api.scan(str(wheel))
    assert scanned.path == str(wheel)
    assert not scanned.broken
    assert json.loads(scanned.as_json()) == json.loads(scanned.as_json())
    assert scanned.as_json().endswith("\n")
    assert isinstance(scanned.as_text(), str)


def test_scan_of_a_missing_path_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(EnvcheckError):
        api.scan(str(tmp_path / "absent.whl"))


def test_scan_of_a_file_that_is_not_a_wheel_is_one_error(tmp_path: Path) -> None:
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(EnvcheckError):
        api.scan(str(fake))


# cluster_check


def test_cluster_check_outside_a_distributed_job_is_one_error(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(key, raising=False)
    with pytest.raises(UsageError, match="not a rank of a distributed job"):
        api.cluster_check()


def test_rank_of_job_reads_the_launchers_variables() -> None:
    environ = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1"}
    assert rank_of_job({**environ, "MASTER_PORT": "29500"}) == 3
    with pytest.raises(UsageError):
        rank_of_job({**environ, "RANK": "four", "MASTER_PORT": "29500"})
