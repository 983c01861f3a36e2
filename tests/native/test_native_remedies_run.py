"""The native tree's, the nvidia-* wheels' and the lock check's remedies, run for real: a clone of the test
environment (tests/venvs.py: hard links) broken the way users break it, envcheck's report of it, the
remedy's actions rendered for bash and run against the clone's own interpreter, then envcheck again and
the symptom itself (the import, the library the process maps).

- a byte flip in ``torch/lib/libtorch_cpu.so`` (ENV-NATIVE-TAMPERED): torch's exact build reinstalled;
- torch's bundled ``libgomp.so.1`` deleted, the OS's loading instead (ENV-NATIVE-FILE-MISSING, and the
  ENV-NATIVE-SHADOWED that follows from it): the same;
- ``torch/lib/libc10.so`` deleted, ``import torch`` failing (ENV-NATIVE-MISSING): the same;
- a NumPy extension patched and its RECORD line rewritten to match (ENV-NATIVE-CHANGED, against a snapshot
  taken before): NumPy's exact release reinstalled;
- torch pinning an nvidia-* wheel that is not installed, beside a wheel of another CUDA major
  (ENV-NVIDIA-PINS, ENV-NVIDIA-MIXED-CUDA): the pin installed, the other major's wheel uninstalled;
- a lock with one distribution missing, one at another version, one from a local wheel file and one extra
  (LOCK-MISSING, LOCK-VERSION, LOCK-SOURCE, LOCK-EXTRA).

A clone's file is a hard link to the test environment's own: it is copied and renamed over before it is
written (``_private_copy``), never written through; pip's uninstall only unlinks.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from remedyrun import BASH, commands, run_actions
from venvs import HAS_TORCH, clone_site_packages, installed_torch, make_venv, venv_site

from envcheck import api
from envcheck.api import Policy
from envcheck.app import flows
from envcheck.core.escape import shell_word
from envcheck.core.findings import Finding
from envcheck.core.remedy import Install
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest

# The tests that build a clone and run a remedy in it.
REAL = (
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="the files flipped and deleted are the Linux wheel's"
    ),
)
F = TypeVar("F", bound=Callable[..., None])


def real(test: F) -> F:
    for mark in REAL:
        test = mark(test)
    return test


LDCONFIG = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
HAS_OS_GOMP = LDCONFIG is not None and "libgomp.so.1 " in (
    subprocess.run([LDCONFIG, "-p"], capture_output=True, text=True, check=False).stdout
)
# What the torch tests import once the remedy ran: torch's kernels, its OpenMP pool included.
TORCH_WORKS = "import torch; assert int(torch.arange(100000).sum()) == 4999950000; print('ok')"


@pytest.fixture(autouse=True)
def _cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hash cache of this test's own (the integrity check hashes every RECORD-listed native file)."""
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(tmp_path / "cache"))


def _clone(root: Path) -> tuple[Path, Path]:
    python = make_venv(root / "venv")
    return python, clone_site_packages(python)


def _private_copy(path: Path) -> None:
    """Replace the clone's hard link by a copy of its own (same bytes, same mtime)."""
    tmp = path.with_name(path.name + ".envcheck-copy")
    shutil.copy2(path, tmp)
    tmp.replace(path)
    assert path.stat().st_nlink == 1


def _flip(path: Path) -> None:
    """Three bytes in the middle of the clone's own copy of ``path`` inverted, its mtime put back."""
    _private_copy(path)
    st = path.stat()
    with path.open("r+b") as f:
        f.seek(st.st_size // 2)
        data = f.read(3)
        f.seek(st.st_size // 2)
        f.write(bytes(b ^ 0xFF for b in data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _snapshot(python: Path) -> Manifest:
    """What doctor and gate read of a live environment: facts, the runtime probe, the integrity check."""
    return api.snapshot(api.SnapshotOptions(python=str(python), verify=False, integrity=True))


def _doctor(python: Path) -> list[Finding]:
    return list(flows.doctor("clone", _snapshot(python), Policy(disabled=True)).findings)


def _roots(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.caused_by is None and f.severity != "info"]


def _run(lines: Sequence[str], folder: Path) -> None:
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-e", "-c", "\n".join(lines)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, f"remedy failed:\n{lines}\n{done.stdout}\n{done.stderr}"


def _run_offline(findings: Sequence[Finding], python: Path, folder: Path) -> list[str]:
    """Run ``findings``' actions as rendered, but for the ``--index-url URL`` pair of an install: PyTorch's
    index cannot be reached from the machines this suite runs on, and their pip resolves torch's exact
    build from the wheel store it is configured with. The rest of each command runs exactly as rendered."""
    lines = commands(findings, str(python))
    assert lines, "no runnable remedy"
    urls = {a.index_url for f in findings for a in f.actions if isinstance(a, Install) and a.index_url}
    offline = []
    for line in lines:
        for url in urls:
            pair = f" --index-url {shell_word(url, windows=False)}"
            if pair in line:
                line = line.replace(pair, "", 1)  # noqa: PLW2901
        offline.append(line)
    _run(offline, folder)
    return offline


def _python(python: Path, code: str) -> subprocess.CompletedProcess[str]:
    # Run from the venv's own folder: a checkout in the current folder would be importable too.
    return subprocess.run(
        [str(python), "-c", code], capture_output=True, text=True, timeout=300, check=False, cwd=python.parent
    )


def _torch_install(findings: Sequence[Finding]) -> Install:
    """The one install of the findings' remedies: torch's exact build, forced, its dependencies untouched."""
    [install] = [a for f in findings for a in f.actions if isinstance(a, Install)]
    version = installed_torch()[0]
    assert (install.pins, install.force, install.no_deps) == ((("torch", version),), True, True)
    if "+" in version:  # a labelled build comes from the index of its label, named
        assert install.index_url == f"https://download.pytorch.org/whl/{version.split('+', 1)[1]}"
    return install


# --------------------------------------------------------------------------------------------- torch


@real
@pytest.mark.remedy("ENV-NATIVE-TAMPERED")
def test_a_flipped_torch_library_is_put_back_by_reinstalling_the_exact_build(tmp_path: Path) -> None:
    python, site = _clone(tmp_path)
    _flip(site / "torch/lib/libtorch_cpu.so")
    roots = _roots(_doctor(python))
    assert [(f.rule, f.subject) for f in roots] == [
        ("ENV-NATIVE-TAMPERED", "torch:torch/lib/libtorch_cpu.so")
    ]
    _torch_install(roots)
    assert "`pip install --force-reinstall --no-deps 'torch==" in roots[0].remedy

    _run_offline(roots, python, tmp_path)
    assert _roots(_doctor(python)) == []
    done = _python(python, TORCH_WORKS)
    assert done.stdout.strip() == "ok", done.stderr


@real
@pytest.mark.remedy("ENV-NATIVE-FILE-MISSING", "ENV-NATIVE-SHADOWED")
def test_a_deleted_bundled_libgomp_is_put_back_and_loads_again(tmp_path: Path) -> None:
    if not HAS_OS_GOMP:
        pytest.skip("no libgomp.so.1 of the OS: nothing loads instead, the import fails (ENV-NATIVE-MISSING)")
    python, site = _clone(tmp_path)
    own = site / "torch/lib/libgomp.so.1"
    own.unlink()
    # The symptom: torch runs with the OS's OpenMP runtime, not the one its wheel ships.
    maps = "import torch; torch.ones(10).sum(); print(open('/proc/self/maps').read())"
    assert str(own) not in _python(python, maps).stdout
    findings = _doctor(python)
    roots = _roots(findings)
    assert [(f.rule, f.subject) for f in roots] == [
        ("ENV-NATIVE-FILE-MISSING", "torch:torch/lib/libgomp.so.1")
    ]
    [shadowed] = [f for f in findings if f.rule == "ENV-NATIVE-SHADOWED"]
    assert shadowed.caused_by == roots[0].key and shadowed.actions == ()  # the root's remedy fixes it
    _torch_install(roots)

    _run_offline(roots, python, tmp_path)
    after = _doctor(python)
    assert _roots(after) == []
    assert not [f for f in after if f.rule in ("ENV-NATIVE-FILE-MISSING", "ENV-NATIVE-SHADOWED")]
    done = _python(python, maps)
    assert str(own) in done.stdout, done.stderr


@real
@pytest.mark.remedy("ENV-NATIVE-MISSING")
def test_a_deleted_libc10_that_fails_the_import_is_put_back(tmp_path: Path) -> None:
    python, site = _clone(tmp_path)
    (site / "torch/lib/libc10.so").unlink()
    assert "libc10.so" in _python(python, "import torch").stderr
    findings = _doctor(python)
    roots = _roots(findings)
    assert [(f.rule, f.target) for f in roots] == [("ENV-NATIVE-MISSING", "missing: libc10.so")]
    # The failed import follows from it, and defers to its remedy.
    [failed] = [f for f in findings if f.rule == "ENV-PROBE-FAILED"]
    assert failed.caused_by == roots[0].key and failed.actions == ()
    assert "operating system" not in roots[0].remedy
    _torch_install(roots)

    _run_offline(roots, python, tmp_path)
    assert _roots(_doctor(python)) == []
    done = _python(python, TORCH_WORKS)
    assert done.stdout.strip() == "ok", done.stderr


# --------------------------------------------------------------------------------------------- NumPy


def _record_hash(path: Path) -> str:
    digest = hashlib.sha256(path.read_bytes()).digest()
    return "sha256=" + base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


@real
@pytest.mark.remedy("ENV-NATIVE-CHANGED")
def test_a_patched_numpy_extension_whose_record_was_rewritten_is_reinstalled(tmp_path: Path) -> None:
    """Patched and its RECORD line rewritten to match (what a "fix" script that updates RECORD does): no
    integrity finding, only the difference from a snapshot taken before, whose remedy reinstalls the same
    release (a small wheel: NumPy, not torch)."""
    import numpy

    python, site = _clone(tmp_path)
    before = _snapshot(python)
    rel = "numpy/linalg/lapack_lite.cpython-311-x86_64-linux-gnu.so"
    if not (site / rel).is_file():
        pytest.skip(f"NumPy {numpy.__version__} has no {rel}")
    _flip(site / rel)
    [record] = site.glob("numpy-*.dist-info/RECORD")
    _private_copy(record)
    lines = record.read_text(encoding="utf-8").splitlines()
    size = (site / rel).stat().st_size
    lines = [
        f"{rel},{_record_hash(site / rel)},{size}" if line.startswith(rel + ",") else line for line in lines
    ]
    record.write_text("\n".join(lines) + "\n", encoding="utf-8")

    report = api.diff(before, _snapshot(python))
    roots = _roots(report.findings)
    assert [(f.rule, f.subject) for f in roots] == [("ENV-NATIVE-CHANGED", f"numpy:{rel}")]
    [install] = roots[0].actions
    assert isinstance(install, Install)
    assert (install.pins, install.force, install.no_deps) == ((("numpy", numpy.__version__),), True, True)

    run_actions(roots, str(python), tmp_path)
    report = api.diff(before, _snapshot(python))
    assert _roots(report.findings) == []
    done = _python(python, "import numpy.linalg.lapack_lite, numpy; print(numpy.linalg.det(numpy.eye(3)))")
    assert done.stdout.strip() == "1.0", done.stderr


# ------------------------------------------------------------------------------------------ nvidia-*


def _wheel(folder: Path, name: str, version: str) -> Path:
    """A real wheel of ``name`` holding one data file under ``nvidia/`` (as the nvidia-* wheels do)."""
    stem = f"{name.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {
        f"nvidia/{name.replace('-', '_')}/README": b"a small stand-in for the CUDA 12 wheel\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
    }
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},"
        f"{len(data)}\n"
        for path, data in files.items()
    )
    out = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, data in files.items():
            z.writestr(path, data)
        z.writestr(f"{info}/RECORD", record + f"{info}/RECORD,,\n")
    return out


def _pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@real
@pytest.mark.remedy("ENV-NVIDIA-PINS", "ENV-NVIDIA-MIXED-CUDA")
def test_torchs_missing_nvidia_pin_is_installed_and_the_other_majors_wheel_uninstalled(
    tmp_path: Path,
) -> None:
    """torch pins two CUDA 13 wheels (its METADATA says so, as a CUDA build's does): one is installed, the
    other is not, and a wheel of CUDA 12 sits beside them. The small real nvidia-* wheels of this machine's
    index stand in for the GB ones."""
    python, site = _clone(tmp_path)
    [metadata] = site.glob("torch-*.dist-info/METADATA")
    _private_copy(metadata)
    text = metadata.read_text(encoding="utf-8")
    head, sep, body = text.partition("\n\n")
    pins = 'Requires-Dist: nvidia-cuda-runtime==13.0.96; platform_system == "Linux"\n'
    pins += 'Requires-Dist: nvidia-nvtx==13.0.85; platform_system == "Linux"'
    metadata.write_text(f"{head}\n{pins}{sep}{body}", encoding="utf-8")
    _pip(python, "--no-deps", "nvidia-cuda-runtime==13.0.96")
    _pip(python, "--no-deps", str(_wheel(tmp_path, "nvidia-cuda-nvrtc-cu12", "12.8.93")))

    findings = _doctor(python)
    mine = {(f.rule, f.subject): f for f in findings if f.rule.startswith("ENV-NVIDIA-")}
    assert set(mine) == {("ENV-NVIDIA-PINS", "nvidia-nvtx"), ("ENV-NVIDIA-MIXED-CUDA", "nvidia-* wheels")}
    assert all(f.caused_by is None and f.severity == "error" for f in mine.values())
    assert mine[("ENV-NVIDIA-PINS", "nvidia-nvtx")].remedy.startswith("`pip install 'nvidia-nvtx==13.0.85'`")
    mixed = mine[("ENV-NVIDIA-MIXED-CUDA", "nvidia-* wheels")]
    assert mixed.remedy.startswith("`pip uninstall -y 'nvidia-cuda-nvrtc-cu12'`"), mixed.remedy

    run_actions(list(mine.values()), str(python), tmp_path)
    after = _doctor(python)
    assert not [f for f in after if f.rule.startswith("ENV-NVIDIA-")]
    assert _roots(after) == [], [(f.rule, f.subject, f.message) for f in _roots(after)]
    installed = _python(
        python, "import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))"
    )
    assert "nvidia-nvtx" in installed.stdout and "nvidia-cuda-nvrtc-cu12" not in installed.stdout


# ------------------------------------------------------------------------------------------------ lock


def _installed(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json; "
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions()}))"
    )
    done = _python(python, code)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _index_file(name: str, version: str = "") -> Path | None:
    """The wheel of ``name==version`` (any version without one) in this machine's local index, the one its
    pip is configured with."""
    stem = f"{name.replace('-', '_').lower()}-{version + '-' if version else ''}"
    for folder in (Path("/opt/pypi/files"), Path("/opt/pypi-more/files")):
        found = sorted(folder.glob("*.whl")) if folder.is_dir() else []
        for wheel in found:
            if wheel.name.lower().startswith(stem):
                return wheel
    return None


@real
@pytest.mark.remedy("LOCK-MISSING", "LOCK-VERSION", "LOCK-SOURCE", "LOCK-EXTRA")
def test_a_lock_check_is_clean_once_its_remedies_ran(tmp_path: Path) -> None:
    python, _ = _clone(tmp_path)
    pins = _installed(python)
    wanted = {"six": pins.get("six"), "idna": pins.get("idna"), "MarkupSafe": "3.0.3", "termcolor": None}
    wheels = {name: _index_file(name, version) for name, version in wanted.items() if version}
    if any(w is None for w in wheels.values()) or _index_file("termcolor") is None or "termcolor" in pins:
        pytest.skip(f"the wheels this case installs are not all in this machine's index: {wheels}")
    lock = tmp_path / "requirements.txt"
    pinned = {**pins, "MarkupSafe": "3.0.3"}
    lock.write_text("".join(f"{n}=={v}\n" for n, v in sorted(pinned.items())), encoding="utf-8")
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "-q", "-y", "six"], check=True, capture_output=True
    )
    _pip(python, "--no-deps", "termcolor")  # not in the lock
    _pip(python, "--no-deps", "--force-reinstall", str(wheels["idna"]))  # the release, from a local path

    check = api.check_lock(lock, python=str(python))
    by_rule = {f.rule: f for f in check.report.findings}
    assert {(r, f.subject) for r, f in by_rule.items()} == {
        ("LOCK-MISSING", "six"),
        ("LOCK-VERSION", "MarkupSafe"),
        ("LOCK-SOURCE", "idna"),
        ("LOCK-EXTRA", "termcolor"),
    }
    assert by_rule["LOCK-SOURCE"].remedy.startswith(
        f"`{shell_word(str(python), windows=False)} -m pip install --force-reinstall --no-deps 'idna=="
    )

    run_actions(check.report.findings, str(python), tmp_path)
    assert api.check_lock(lock, python=str(python)).report.findings == ()
    after = _installed(python)
    assert after["MarkupSafe"] == "3.0.3" and after["six"] == pins["six"] and "termcolor" not in after
    assert not (venv_site(python) / f"idna-{pins['idna']}.dist-info" / "direct_url.json").exists()


# ------------------------------------------------------------------------------- another torch imported


def _cuda_manifest(edit: Callable[[dict[str, Any]], None]) -> Manifest:
    """tests/data/manifests/cuda.json (a real CUDA 13 torch environment) with ``edit`` applied."""
    data = json.loads((Path(__file__).resolve().parents[1] / "data/manifests/cuda.json").read_text("utf-8"))
    edit(data)
    return decode(Manifest, data, source="cuda.json (edited)")


def _dist(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in data["packages"] if d["name"].lower() == name)


def test_cuda_remedies_for_a_torch_that_is_not_the_environments_are_not_offered() -> None:
    """The user site's torch (another CUDA build, pinning another cuDNN) shadows the environment's own: the
    pin it misses follows from that copy being imported (ENV-TORCH-SHADOWED), and installs nothing for it."""
    user = "/root/.local/lib/python3.11/site-packages"

    def user_first(d: dict[str, Any]) -> None:
        own = _dist(d, "torch")
        own["shadowed"] = True
        requires = [
            "nvidia-cudnn-cu13==9.99.0.1" if r.startswith("nvidia-cudnn") else r for r in own["requires"]
        ]
        d["packages"].append(
            dict(own, version="2.12.0", location=user, shadowed=False, requires=requires)
            | {"metadata_dir": f"{user}/torch-2.12.0.dist-info"}
        )
        d["python"]["path_origins"] = [
            {"path": user, "origin": "user-site", "pth": None},
            {"path": own["location"], "origin": "site", "pth": None},
        ]

    findings = flows.doctor("user site first", _cuda_manifest(user_first), Policy(disabled=True)).findings
    [pins] = [f for f in findings if f.rule == "ENV-NVIDIA-PINS"]
    assert pins.subject == "nvidia-cudnn-cu13" and pins.caused_by == "ENV-TORCH-SHADOWED:torch"
    assert pins.actions == () and "install" not in pins.remedy
    # The environment's own torch imported: the same kind of missing pin is a root, with its install.
    own_first = _cuda_manifest(lambda d: _dist(d, "nvidia-cudnn-cu13").update(version="9.20.0.48"))
    found = flows.doctor("own", own_first, Policy(disabled=True)).findings
    [pins] = [f for f in found if f.rule == "ENV-NVIDIA-PINS"]
    assert pins.caused_by is None and [a.kind for a in pins.actions] == ["install"]
