"""The hash cache cannot be raced: a file whose bytes change while its stamp stays is never served from it.

The attack, for real: a process maps a native file a RECORD lists ``MAP_SHARED``/``PROT_WRITE`` and writes
through the mapping. The kernel stamps mtime and ctime at the first write fault only; later writes through
the same mapping change the bytes and no stamp while the page stays dirty. Before the fix a warm walk served
the digest cached under the old stamp ("verified") while a cold one found the file ``modified``.

A fake distribution in an empty venv: one small ELF shared library (a copy of one of the interpreter's own
extension modules), listed with its sha256 in RECORD. The walk is ``scan_for_snapshot`` with integrity on,
the code a live snapshot of ``gate`` and ``doctor`` runs (tests/native/test_integrity.py)."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from venvs import make_venv, venv_site

from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.manifest.model import Manifest
from envcheck.manifest.native import NativeSection
from envcheck.native import hashing, scan_for_snapshot
from envcheck.native.hashing import CACHE_NAME, Hasher

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="shared mappings and read leases as Linux has them"
)

DIST = "sealedpkg"
LIB = f"{DIST}/libsealed.so"

# Holds one MAP_SHARED, PROT_WRITE mapping of a file for its whole life; each line on stdin "offset value"
# writes one byte through it and answers "ok".
_WRITER = r"""
import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
m = mmap.mmap(fd, os.fstat(fd).st_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
os.close(fd)
print("mapped", flush=True)
for line in sys.stdin:
    offset, value = map(int, line.split())
    m[offset] = value
    print("ok", flush=True)
"""


def _small_elf() -> Path:
    """The smallest ELF extension module of the running interpreter."""
    folder = Path(sysconfig.get_config_var("DESTSHARED") or "")
    found = sorted(
        (p for p in folder.glob("*.so") if p.is_file() and p.read_bytes()[:4] == b"\x7fELF"),
        key=lambda p: p.stat().st_size,
    )
    if not found:
        pytest.skip(f"no ELF extension module in {folder}")
    return found[0]


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Manifest:
    """The manifest of a venv holding one distribution whose RECORD lists one ELF library."""
    python = make_venv(tmp_path_factory.mktemp("sealed") / "venv")
    site = venv_site(python)
    (site / DIST).mkdir()
    shutil.copyfile(_small_elf(), site / LIB)
    (site / DIST / "__init__.py").write_text("")
    info = site / f"{DIST}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {DIST}\nVersion: 1.0\n")
    (info / "WHEEL").write_text("Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: cp3-none-linux_x86_64\n")
    rows = [
        f"{name},{_record_hash((site / name).read_bytes())},{(site / name).stat().st_size}"
        for name in (LIB, f"{DIST}/__init__.py", f"{info.name}/METADATA", f"{info.name}/WHEEL")
    ]
    (info / "RECORD").write_text("\n".join([*rows, f"{info.name}/RECORD,,"]) + "\n")
    full = take_snapshot(SnapshotOptions(python=str(python), probe=False, verify=False))
    [dist] = [d for d in full.packages if d.name == DIST]
    assert [f.path for f in dist.native_files] == [LIB], dist.native_files
    return full.replace(packages=[dist])


def _lib(manifest: Manifest) -> Path:
    [dist] = manifest.packages
    return Path(dist.location) / LIB


def _verdict(manifest: Manifest) -> str | None:
    section = scan_for_snapshot(manifest, SnapshotOptions(probe=False, integrity=True))
    assert isinstance(section, NativeSection) and section.skipped is None, section
    [node] = [n for n in section.nodes or [] if n.key == f"{DIST}:{LIB}"]
    return node.integrity


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(folder))
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


class _Mapping:
    """A child process holding a shared writable mapping of ``path``."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._answer() == "mapped"

    def _answer(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline().strip()

    def write(self, offset: int, value: int) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{offset} {value}\n")
        self.proc.stdin.flush()
        assert self._answer() == "ok"

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


@pytest.fixture
def restored(sealed: Manifest) -> Iterator[Path]:
    """The library, put back as RECORD has it after the test (a fresh inode: renamed over)."""
    lib = _lib(sealed)
    data = lib.read_bytes()
    yield lib
    tmp = lib.with_name(lib.name + ".restore")
    tmp.write_bytes(data)
    tmp.replace(lib)


def _times(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_ctime_ns


def test_a_write_through_a_held_shared_mapping_is_never_served_from_the_cache(
    sealed: Manifest, restored: Path, cache: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    lib = restored
    offset = lib.stat().st_size // 2
    original = lib.read_bytes()[offset]
    writer = _Mapping(lib)
    try:
        # First write fault: the same byte written back, so the file still matches RECORD, but its page
        # is now dirty in the mapping and its mtime and ctime are stamped.
        writer.write(offset, original)
        # Past the racy margin, so the stamp is old enough for the cache to believe it: this is what
        # the racy rule alone cannot catch, since the writer may wait as long as it likes.
        time.sleep(hashing.RACY_NS / 1e9 + 0.3)
        assert _verdict(sealed) == "verified"
        assert reads.count(str(lib)) == 1
        stamped = _times(lib)
        writer.write(offset, original ^ 0xFF)  # through the same mapping: no fault, no new stamp
        if _times(lib) != stamped:
            pytest.skip("this kernel stamped the second write through the mapping: the attack does not apply")
        assert lib.read_bytes()[offset] == original ^ 0xFF
        reads.clear()
        # Warm: before the fix the digest cached under the unchanged stamp said "verified".
        assert _verdict(sealed) == "modified"
        assert reads.count(str(lib)) == 1
        monkeypatch.setenv("ENVCHECK_CACHE_DIR", "off")
        assert _verdict(sealed) == "modified"
        monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(cache))
    finally:
        writer.close()
    stored = json.loads((cache / CACHE_NAME).read_text())["entries"] if (cache / CACHE_NAME).exists() else {}
    assert str(lib) not in stored, "nothing is cached while a writer holds the file"
    # The writer gone, the file is cached again, and the cache still serves it: the flip stays "modified".
    reads.clear()
    assert _verdict(sealed) == "modified"
    assert _verdict(sealed) == "modified"
    assert reads.count(str(lib)) == 1


def test_an_entry_hashed_within_the_racy_margin_of_the_files_stamp_is_hashed_again(
    sealed: Manifest, restored: Path, cache: Path, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Git's racily clean rule: an entry counts only while the file's mtime and ctime are older than the
    entry's hashing time by ``RACY_NS``; a racy one (here planted with the file's current stamp, as a run
    hashing in the same clock tick as a change would have stored it) is hashed again."""
    lib = restored
    monkeypatch.setattr(hashing, "RACY_NS", 200_000_000)
    time.sleep(0.3)
    key = hashing.stamp(str(lib))
    assert key is not None
    mtime, ctime = _times(lib)
    wrong = "sha256:" + "0" * 64
    cache.mkdir()
    (cache / CACHE_NAME).write_text(
        json.dumps(
            {"format": "envcheck-file-hashes/2", "entries": {str(lib): [key, wrong, max(mtime, ctime) + 1]}}
        )
    )
    (cache / CACHE_NAME).chmod(0o600)
    hasher = Hasher()
    digest = hasher.result(str(lib))
    hasher.close()
    assert digest == "sha256:" + hashlib.sha256(lib.read_bytes()).hexdigest()
    assert reads.count(str(lib)) == 1
    # Hashed now, long after its stamp: stored with its hashing time, and served next time.
    [entry] = json.loads((cache / CACHE_NAME).read_text())["entries"].values()
    assert entry[:2] == [key, digest] and entry[2] > max(mtime, ctime) + hashing.RACY_NS
    reads.clear()
    assert _verdict(sealed) == "verified"
    assert str(lib) not in reads
    # An entry without its hashing time (the shape before the rule) is not believed either.
    (cache / CACHE_NAME).write_text(
        json.dumps({"format": "envcheck-file-hashes/2", "entries": {str(lib): [key, wrong]}})
    )
    hasher = Hasher()
    assert hasher.result(str(lib)) == digest
    hasher.close()
    assert reads.count(str(lib)) == 1


def test_a_file_open_for_writing_is_not_cached_and_is_once_closed(
    restored: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open for writing without a mapping (a ``pwrite`` in the same clock tick as the stamp would keep it):
    not cached either; once closed, cached."""
    monkeypatch.setattr(hashing, "RACY_NS", 0)
    lib = restored
    fd = os.open(lib, os.O_RDWR)
    try:
        assert hashing.stamp(str(lib)) is None
    finally:
        os.close(fd)
    assert hashing.stamp(str(lib)) is not None
