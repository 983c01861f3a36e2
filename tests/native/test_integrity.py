"""Integrity by default: the live snapshot of gate and doctor checks every native file a RECORD lists against
its RECORD sha256, through a hash cache (envcheck.native.hashing) that a warm run reads instead of the files.

Real venvs cloned from the test environment (tests/venvs.py: hard links), real byte flips. A clone's file is
a hard link to the test venv's own: it is copied and renamed over first (``_private_copy``), never written
through. Hashes are counted through ``Hasher.read``, the one place a file is read for its digest."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from venvs import HAS_TORCH, clone_site_packages, installed_torch, make_venv

from envcheck.cli import app
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.diff.engine import doctor
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest
from envcheck.manifest.native import NativeSection
from envcheck.native import hashing, scan_for_snapshot, tree
from envcheck.native.hashing import CACHE_NAME, MAX_CACHE_BYTES, Hasher

pytestmark = [
    pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment"),
    pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="the files flipped and deleted are the Linux wheel's"
    ),
]

DATA = Path(__file__).resolve().parents[1] / "data" / "manifests"
LDCONFIG = shutil.which("ldconfig") or ("/sbin/ldconfig" if Path("/sbin/ldconfig").exists() else None)
# The loader cache's libraries (Linux): where the loader finds a libgomp.so.1 of the OS, if any.
OS_GOMP = (
    subprocess.run([LDCONFIG, "-p"], capture_output=True, text=True, check=False).stdout if LDCONFIG else ""
)
HAS_OS_GOMP = "libgomp.so.1 " in OS_GOMP


# --------------------------------------------------------------------------------------------- helpers


def _private_copy(path: Path) -> os.stat_result:
    """Replace the clone's hard link by a copy of its own (same bytes, same mtime); the stat before."""
    before = path.stat()
    tmp = path.with_name(path.name + ".envcheck-copy")
    shutil.copy2(path, tmp)
    tmp.replace(path)
    return before


def _flip(path: Path, offset: int) -> None:
    """Three bytes inverted in place, the mtime put back: same size, same mtime, same inode."""
    st = path.stat()
    assert st.st_nlink == 1, "never write through a hard link to the test venv's file"
    with path.open("r+b") as f:
        f.seek(offset)
        data = f.read(3)
        f.seek(offset)
        f.write(bytes(b ^ 0xFF for b in data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (st.st_size, st.st_mtime_ns, st.st_ino)


def _site(python: Path) -> Path:
    [site] = (python.parent.parent / "lib").glob("python3*/site-packages")
    return site


@pytest.fixture(scope="module")
def clones(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Interpreters of three clones of the test venv: ``healthy``; ``flipped`` (torch/lib/libtorch_cpu.so
    copied, 3 bytes flipped, mtime restored); ``nogomp`` (torch's bundled libgomp.so.1 unlinked)."""
    out = {}
    for name in ("healthy", "flipped", "nogomp"):
        python = make_venv(tmp_path_factory.mktemp(name) / "venv")
        clone_site_packages(python)
        out[name] = python
    lib = _site(out["flipped"]) / "torch/lib/libtorch_cpu.so"
    before = _private_copy(lib)
    _flip(lib, before.st_size // 2)
    (_site(out["nogomp"]) / "torch/lib/libgomp.so.1").unlink()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The test venv's manifest (no goldens: the gate still runs the suite)."""
    out = tmp_path_factory.mktemp("ref") / "ref.json"
    result = CliRunner().invoke(
        app, ["snapshot", "--no-verify", "--python", sys.executable, "-o", str(out), "--quiet"]
    )
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh cache folder for this test; files written a moment ago may be cached (``RACY_NS``)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(folder))
    monkeypatch.setattr(hashing, "RACY_NS", 0)
    return folder


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every path hashed for real (a cache miss), in order."""
    seen: list[str] = []
    real = Hasher.read

    def counting(self: Hasher, path: str, limit: int) -> str | None:
        seen.append(path)
        return real(self, path, limit)

    monkeypatch.setattr(Hasher, "read", counting)
    return seen


def _report(args: list[str]) -> tuple[int, list[dict[str, Any]], str]:
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"])
    assert result.exit_code in (0, 1), result.output
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)["findings"], result.stderr


def _integrity(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f["rule"] in ("ENV-NATIVE-TAMPERED", "ENV-NATIVE-FILE-MISSING")]


def _exact_torch_install() -> str:
    version = installed_torch()[0]
    return f"pip install --force-reinstall --no-deps 'torch=={version}'"


# ------------------------------------------------------------------------------------- gate and doctor


@pytest.mark.slow
def test_gate_and_doctor_catch_a_byte_flip_with_its_mtime_restored(
    clones: dict[str, Path], reference: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = str(clones["flipped"])
    code, findings, _ = _report(["gate", str(reference), "--python", python])
    assert code == 1
    roots = [f for f in findings if f["caused_by"] is None and f["severity"] == "error"]
    assert roots, findings
    first = roots[0]
    assert (first["rule"], first["subject"]) == ("ENV-NATIVE-TAMPERED", "torch:torch/lib/libtorch_cpu.so")
    assert "torch/lib/libtorch_cpu.so differs from the sha256 its RECORD promises" in first["message"]
    assert _exact_torch_install() in first["remedy"]
    if "+" in installed_torch()[0]:  # a labelled build comes from the index of its label, named
        assert "--index-url" in first["remedy"]
    # The diff of the file against the reference folds under it.
    changed = [f for f in findings if f["rule"] == "ENV-NATIVE-CHANGED"]
    assert all(f["caused_by"] == first["id"] for f in changed)

    code, findings, _ = _report(["doctor", "--python", python])
    assert code == 1
    assert [(f["rule"], f["subject"]) for f in _integrity(findings)] == [
        ("ENV-NATIVE-TAMPERED", "torch:torch/lib/libtorch_cpu.so")
    ]
    # ENVCHECK_INTEGRITY=0 is the way out of the check (RECORD's word is taken, as by envcheck snapshot).
    monkeypatch.setenv("ENVCHECK_INTEGRITY", "0")
    code, findings, _ = _report(["doctor", "--python", python])
    assert (code, _integrity(findings)) == (0, [])


@pytest.mark.slow
def test_doctor_of_a_manifest_recorded_with_verify_files_names_the_flip(
    clones: dict[str, Path], tmp_path: Path, cache: Path
) -> None:
    out = tmp_path / "flipped.json"
    result = CliRunner().invoke(
        app,
        ["snapshot", "--no-probe", "--verify-files", "--python", str(clones["flipped"]), "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    code, findings, _ = _report(["doctor", str(out)])
    assert code == 1
    [found] = [f for f in findings if f["rule"] == "ENV-NATIVE-TAMPERED"]
    assert found["subject"] == "torch:torch/lib/libtorch_cpu.so"
    assert _exact_torch_install() in found["remedy"]


@pytest.mark.slow
def test_gate_names_the_file_that_loads_instead_of_a_deleted_bundled_libgomp(
    clones: dict[str, Path], reference: Path, cache: Path
) -> None:
    python = str(clones["nogomp"])
    code, findings, _ = _report(["gate", str(reference), "--python", python])
    assert code == 1
    if not HAS_OS_GOMP:
        # Nothing replaces it: the import fails, and the finding that says so names the file.
        missing = [f for f in findings if f["rule"] == "ENV-NATIVE-MISSING" and f["caused_by"] is None]
        assert missing and "libgomp.so.1" in missing[0]["message"], findings
        assert _exact_torch_install() in missing[0]["remedy"]
        return
    os_gomp = next(
        line.rsplit("=> ", 1)[1].strip() for line in OS_GOMP.splitlines() if "libgomp.so.1 " in line
    )
    [found] = [f for f in findings if f["rule"] == "ENV-NATIVE-FILE-MISSING"]
    assert (found["severity"], found["subject"], found["caused_by"]) == (
        "error",
        "torch:torch/lib/libgomp.so.1",
        None,
    )
    assert found["message"].startswith(f"torch/lib/libgomp.so.1 is missing: {os_gomp} loads instead")
    assert "GNU OpenMP" in found["message"] and "The process loaded it." in found["message"]
    assert _exact_torch_install() in found["remedy"]
    roots = [f for f in findings if f["caused_by"] is None and f["severity"] == "error"]
    assert roots[0]["id"] == found["id"], roots
    # What the loader then does with the OS's copy is its consequence, never an LD_LIBRARY_PATH to remove.
    for f in findings:
        if "libgomp" in f["subject"] and f is not found and f["rule"].startswith("ENV-NATIVE"):
            assert f["caused_by"] == found["id"], f
            assert "LD_LIBRARY_PATH" not in f["remedy"], f

    code, findings, _ = _report(["doctor", "--python", python])
    assert code == 1
    assert [f["subject"] for f in findings if f["rule"] == "ENV-NATIVE-FILE-MISSING"] == [
        "torch:torch/lib/libgomp.so.1"
    ]


@pytest.mark.slow
def test_a_healthy_clone_has_no_integrity_finding_and_a_warm_doctor_hashes_nothing(
    clones: dict[str, Path], cache: Path, reads: list[str]
) -> None:
    python = str(clones["healthy"])
    code, findings, _ = _report(["doctor", "--python", python])
    assert (code, _integrity(findings)) == (0, [])
    site = str(_site(clones["healthy"]))
    cold = [p for p in reads if p.startswith(site)]
    assert any(p.endswith("torch/lib/libtorch_cpu.so") for p in cold)
    stored = json.loads((cache / CACHE_NAME).read_text())["entries"]
    assert any(p.endswith("torch/lib/libtorch_cpu.so") for p in stored)
    reads.clear()
    code, findings, _ = _report(["doctor", "--python", python])
    assert (code, _integrity(findings)) == (0, [])
    # Nothing is read again but a file whose stamp moved since: the clone's files are hard links that any
    # other clone of the test venv (a test run next door) relinks, which moves their ctime. On a quiet
    # machine this list is empty; the walk-level test below asserts that on files nobody relinks.
    assert [p for p in reads if hashing.stamp(p) == stored.get(p, [None])[0]] == []


# ------------------------------------------------------------------------ the cache, at the walk's level


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[], Manifest]]:
    """A clone whose manifest keeps torch alone with one RECORD native file, torch/lib/libgomp.so.1 (a private
    copy, not a hard link), so each walk reads a few files; yields a function giving that manifest."""
    python = make_venv(tmp_path_factory.mktemp("small") / "venv")
    clone_site_packages(python)
    gomp = _site(python) / "torch/lib/libgomp.so.1"
    _private_copy(gomp)
    full = take_snapshot(SnapshotOptions(python=str(python), probe=False, verify=False))
    [torch] = [d for d in full.packages if d.name == "torch"]
    natives = [f for f in torch.native_files if f.path == "torch/lib/libgomp.so.1"]
    manifest = full.replace(packages=[dataclasses.replace(torch, native_files=natives)])
    yield lambda: manifest


def _gomp(manifest: Manifest) -> Path:
    [torch] = manifest.packages
    return Path(torch.location) / "torch/lib/libgomp.so.1"


def _verdict(manifest: Manifest, **options: bool) -> str | None:
    section = scan_for_snapshot(manifest, SnapshotOptions(probe=False, **options))
    assert isinstance(section, NativeSection) and section.skipped is None, section
    [node] = [n for n in section.nodes or [] if n.key == "torch:torch/lib/libgomp.so.1"]
    return node.integrity


@pytest.fixture
def flipped_gomp(small: Callable[[], Manifest]) -> Iterator[Manifest]:
    """The small clone's libgomp.so.1 with 3 bytes flipped in place (mtime restored), put back after."""
    manifest = small()
    gomp = _gomp(manifest)
    data = gomp.read_bytes()
    _flip(gomp, 4096)
    yield manifest
    st = gomp.stat()
    gomp.write_bytes(data)
    os.utime(gomp, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_warm_walk_rehashes_nothing_and_still_sees_an_in_place_flip(
    small: Callable[[], Manifest], cache: Path, reads: list[str]
) -> None:
    manifest = small()
    gomp = _gomp(manifest)
    assert _verdict(manifest, integrity=True) == "verified"
    assert str(gomp) in reads
    reads.clear()
    assert _verdict(manifest, integrity=True) == "verified"
    assert reads == []
    # Default snapshots keep RECORD's word and read nothing of it.
    assert _verdict(manifest) == "record"
    data = gomp.read_bytes()
    _flip(gomp, 4096)  # same inode, size and mtime: only the ctime tells
    try:
        assert _verdict(manifest, integrity=True) == "modified"
        assert reads == [str(gomp)]
        reads.clear()
        assert _verdict(manifest, verify_files=True) == "modified"  # --verify-files reads every file again
        assert str(gomp) in reads
    finally:
        st = gomp.stat()
        gomp.write_bytes(data)
        os.utime(gomp, ns=(st.st_atime_ns, st.st_mtime_ns))
    reads.clear()
    assert _verdict(manifest, integrity=True) == "verified"
    assert reads == [str(gomp)]


def test_past_the_bounds_a_file_keeps_its_record_word_unread(
    small: Callable[[], Manifest], cache: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A forged RECORD listing sparse many-GB files must not stall a gate: past a wheel member's bound, or
    past the walk's total, a file is not read and keeps RECORD's digest (``unhashed``)."""
    manifest = small()
    monkeypatch.setattr(tree, "MAX_RECORD_HASH_TOTAL", 0)
    assert _verdict(manifest, integrity=True) == "unhashed"
    monkeypatch.setattr(tree, "MAX_RECORD_HASH_TOTAL", 1 << 40)
    monkeypatch.setattr(tree, "MAX_RECORD_HASH_BYTES", 1024)
    assert _verdict(manifest, integrity=True) == "unhashed"
    assert str(_gomp(manifest)) not in reads


def test_a_file_of_another_size_than_its_record_is_modified_unread(
    small: Callable[[], Manifest], cache: Path, reads: list[str]
) -> None:
    manifest = small()
    gomp = _gomp(manifest)
    data = gomp.read_bytes()
    gomp.write_bytes(data + b"\0")
    try:
        section = scan_for_snapshot(manifest, SnapshotOptions(probe=False, integrity=True))
        assert section is not None
        [node] = [n for n in section.nodes or [] if n.key == "torch:torch/lib/libgomp.so.1"]
        assert (node.integrity, node.identity, node.size) == ("modified", None, len(data) + 1)
        assert str(gomp) not in reads
        [found] = [f for f in doctor(manifest.replace(native=section)) if f.rule == "ENV-NATIVE-TAMPERED"]
        assert f"is {len(data) + 1:,} bytes where its RECORD says {len(data):,}" in found.message
    finally:
        gomp.write_bytes(data)


def _entry_file(entries: dict[str, list[str]]) -> str:
    return json.dumps({"format": "envcheck-file-hashes/2", "entries": entries})


def _lie(manifest: Manifest) -> dict[str, list[str]]:
    """A cache entry that says the (flipped) libgomp.so.1 matches its RECORD, with its current stamp."""
    gomp = _gomp(manifest)
    [torch] = manifest.packages
    stamp = hashing.stamp(str(gomp))
    assert stamp is not None
    return {str(gomp): [stamp, f"sha256:{torch.native_files[0].sha256}"]}


def _plant_symlink(folder: Path, manifest: Manifest) -> Path:
    """The cache file is a link to a file holding the lie: never read through, never written through."""
    elsewhere = folder.parent / "elsewhere.json"
    elsewhere.write_text(_entry_file(_lie(manifest)))
    elsewhere.chmod(0o600)
    (folder / CACHE_NAME).symlink_to(elsewhere)
    return elsewhere


def _plant_writable(folder: Path, manifest: Manifest) -> Path:
    """The lie in a cache file others may write: not believed."""
    path = folder / CACHE_NAME
    path.write_text(_entry_file(_lie(manifest)))
    path.chmod(0o666)
    return path


def _plant_elsewhere(folder: Path, manifest: Manifest) -> Path:
    """An entry for the flipped file carrying the stamp and RECORD digest of another file (the test venv's
    own libgomp.so.1): the stamp is not the file's, so it is hashed."""
    [torch] = manifest.packages
    original = Path(sys.prefix)
    other = next(original.glob("lib/python3*/site-packages/torch/lib/libgomp.so.1"))
    stamp = hashing.stamp(str(other))
    assert stamp is not None
    path = folder / CACHE_NAME
    path.write_text(_entry_file({str(_gomp(manifest)): [stamp, f"sha256:{torch.native_files[0].sha256}"]}))
    path.chmod(0o600)
    return path


def _plant_fifo(folder: Path, manifest: Manifest) -> Path:
    path = folder / CACHE_NAME
    os.mkfifo(path)
    return path


def _plant_huge(folder: Path, manifest: Manifest) -> Path:
    path = folder / CACHE_NAME
    with path.open("wb") as f:  # sparse: over the cap, nothing on disk
        f.seek(MAX_CACHE_BYTES + 1)
        f.write(b"}")
    path.chmod(0o600)
    return path


def _plant_garbage(folder: Path, manifest: Manifest) -> Path:
    path = folder / CACHE_NAME
    path.write_bytes(b'{"format": "envcheck-file-hashes/2", "entries": {"x": [1, 2]}, ' + b"[" * 100_000)
    path.chmod(0o600)
    return path


MALFORMED = ("relative/lib.so", "/nul\0lib.so", "/bad/stamp.so", "/bad/digest.so", "/bad/time.so", "/kind.so")


def _plant_malformed(folder: Path, manifest: Manifest) -> Path:
    """The lie without its hashing time, beside entries of every other wrong shape: each is judged when it
    is used (the cache checks no entry at load), none is believed, none is written back."""
    [(gomp, (stamp, digest))] = _lie(manifest).items()
    shapes: list[object] = [[stamp, digest, 1], [stamp, digest, 1], ["0:0", digest, 1], [stamp, "md5:00", 1]]
    shapes += [[stamp, digest, True], {"stamp": stamp}]
    entries = {gomp: [stamp, digest], **dict(zip(MALFORMED, shapes, strict=True))}
    path = folder / CACHE_NAME
    path.write_text(json.dumps({"format": "envcheck-file-hashes/2", "entries": entries}))
    path.chmod(0o600)
    return path


def _plant_old_format(folder: Path, manifest: Manifest) -> Path:
    """The format before this one (a bare mapping): ignored and rebuilt."""
    path = folder / CACHE_NAME
    path.write_text(json.dumps(_lie(manifest)))
    path.chmod(0o600)
    return path


@pytest.mark.parametrize(
    "plant",
    [
        _plant_symlink,
        _plant_writable,
        _plant_elsewhere,
        _plant_fifo,
        _plant_huge,
        _plant_garbage,
        _plant_old_format,
        _plant_malformed,
    ],
)
def test_a_hostile_cache_is_never_believed(
    plant: Callable[[Path, Manifest], Path], flipped_gomp: Manifest, cache: Path, reads: list[str]
) -> None:
    cache.mkdir()
    planted = plant(cache, flipped_gomp)
    planted_text = planted.read_bytes() if planted.is_file() and not planted.is_symlink() else None
    assert _verdict(flipped_gomp, integrity=True) == "modified"
    assert str(_gomp(flipped_gomp)) in reads
    # The cache file is now envcheck's own regular file; a link's target is untouched.
    written = cache / CACHE_NAME
    assert written.is_file() and not written.is_symlink()
    assert json.loads(written.read_text())["format"] == "envcheck-file-hashes/2"
    if plant is _plant_symlink:
        assert json.loads(planted.read_text()) == json.loads(_entry_file(_lie(flipped_gomp)))
    assert planted_text is None or written.read_bytes() != planted_text
    assert not set(MALFORMED) & set(json.loads(written.read_text())["entries"])


def test_a_cache_that_cannot_be_written_is_no_cache(
    flipped_gomp: Manifest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reads: list[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setattr(hashing, "RACY_NS", 0)
    # A folder under a regular file can be neither made nor written, even by root.
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(blocker / "cache"))
    assert _verdict(flipped_gomp, integrity=True) == "modified"
    assert _verdict(flipped_gomp, integrity=True) == "modified"
    assert reads.count(str(_gomp(flipped_gomp))) == 2
    if os.geteuid() != 0:  # permissions bind everyone but root
        folder = tmp_path / "read-only"
        folder.mkdir(mode=0o500)
        monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(folder))
        assert _verdict(flipped_gomp, integrity=True) == "modified"
        assert list(folder.iterdir()) == []
    # ENVCHECK_CACHE_DIR set to anything but an absolute folder turns the cache off.
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", "off")
    assert hashing.cache_dir() is None
    assert _verdict(flipped_gomp, integrity=True) == "modified"


@pytest.mark.slow
def test_doctor_with_a_hostile_cache_has_no_traceback(clones: dict[str, Path], cache: Path) -> None:
    cache.mkdir()
    (cache / CACHE_NAME).symlink_to("/dev/zero")
    code, findings, stderr = _report(["doctor", "--python", str(clones["flipped"])])
    assert code == 1 and "error" not in stderr
    assert [f["subject"] for f in _integrity(findings)] == ["torch:torch/lib/libtorch_cpu.so"]


def test_a_file_changed_a_moment_ago_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """File times tick coarsely: a change within the tick of the stamp would keep it, so a file whose ctime
    is recent is hashed every time and never stored."""
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(tmp_path / "cache"))
    lib = tmp_path / "libfresh.so"
    lib.write_bytes(b"fresh")
    assert hashing.stamp(str(lib)) is None
    hasher = Hasher()
    assert hasher.result(str(lib)) is not None
    hasher.close()
    assert not (tmp_path / "cache" / CACHE_NAME).exists()


# ------------------------------------------------------------------------------------------- remedies


def _dev_cpu(torch_version: str, edit: Callable[[dict[str, Any]], None]) -> Manifest:
    data = json.loads((DATA / "dev-cpu.json").read_text(encoding="utf-8"))
    data = copy.deepcopy(data)
    next(d for d in data["packages"] if d["name"] == "torch")["version"] = torch_version
    edit(data)
    return decode(Manifest, data, source="dev-cpu.json (edited)")


def _modified(data: dict[str, Any]) -> None:
    node = next(n for n in data["native"]["nodes"] if n["key"] == "torch:torch/lib/libtorch_cpu.so")
    node.update(integrity="modified", identity="sha256:" + "1" * 64)


def _deleted(data: dict[str, Any]) -> None:
    node = next(n for n in data["native"]["nodes"] if n["key"] == "torch:torch/lib/libgomp.so.1")
    node.update(error="listed in RECORD but not on disk", format=None)


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        (
            "2.13.0+cpu",
            "`pip install --force-reinstall --no-deps 'torch==2.13.0+cpu' "
            "--index-url 'https://download.pytorch.org/whl/cpu'`,",
        ),
        (
            "2.13.0+cu130",
            "`pip install --force-reinstall --no-deps 'torch==2.13.0+cu130' "
            "--index-url 'https://download.pytorch.org/whl/cu130'`,",
        ),
        ("2.13.0", "`pip install --force-reinstall --no-deps 'torch==2.13.0'`,"),
    ],
)
def test_remedies_reinstall_the_exact_build_from_its_index(version: str, expected: str) -> None:
    for edit, rule in ((_modified, "ENV-NATIVE-TAMPERED"), (_deleted, "ENV-NATIVE-FILE-MISSING")):
        [found] = [f for f in doctor(_dev_cpu(version, edit)) if f.rule == rule]
        assert expected in found.remedy, found.remedy
        assert found.severity == "error"


def test_a_deleted_file_nothing_replaces_is_the_failed_import_alone() -> None:
    """libc10.so deleted: no other copy exists, the import fails, and ENV-NATIVE-MISSING says so with the
    same reinstall; a second finding for the same file would only repeat it."""

    def libc10_deleted(data: dict[str, Any]) -> None:
        node = next(n for n in data["native"]["nodes"] if n["key"] == "torch:torch/lib/libc10.so")
        node.update(error="listed in RECORD but not on disk", format=None, dependencies=None)
        for n in data["native"]["nodes"]:
            for dep in n.get("dependencies") or []:
                if dep["name"] == "libc10.so":
                    dep.update(target=None, how="missing", kind="missing", via=None)
        data["native"]["missing"] = [
            {
                "root": "torch:torch/_C.cpython-311-x86_64-linux-gnu.so",
                "chain": [
                    "torch:torch/_C.cpython-311-x86_64-linux-gnu.so",
                    "torch:torch/lib/libtorch_python.so",
                ],
                "missing": "libc10.so",
                "text": "_C.cpython-311-x86_64-linux-gnu.so → libtorch_python.so → libc10.so: MISSING",
                "from_extension": True,
            }
        ]

    findings = doctor(_dev_cpu("2.13.0+cpu", libc10_deleted))
    assert [f for f in findings if f.rule == "ENV-NATIVE-FILE-MISSING"] == []
    [missing] = [f for f in findings if f.rule == "ENV-NATIVE-MISSING"]
    assert "'torch==2.13.0+cpu'" in missing.remedy and "--force-reinstall --no-deps" in missing.remedy


def test_a_deleted_file_no_other_file_links_is_named_without_a_replacement() -> None:
    def plugin_deleted(data: dict[str, Any]) -> None:
        node = next(
            n for n in data["native"]["nodes"] if n["key"] == "torch:torch/lib/libtorch_global_deps.so"
        )
        node.update(error="listed in RECORD but not on disk", format=None, dependencies=None)
        loaded = data["runtimes"]["loaded"]
        loaded[:] = [lib for lib in loaded if not lib["path"].endswith("/libtorch_global_deps.so")]

    [found] = [
        f for f in doctor(_dev_cpu("2.13.0+cpu", plugin_deleted)) if f.rule == "ENV-NATIVE-FILE-MISSING"
    ]
    assert found.message.startswith(
        "torch/lib/libtorch_global_deps.so is missing; no file of the tree links it"
    )
    assert "loads instead" not in found.message and found.target == "missing"
