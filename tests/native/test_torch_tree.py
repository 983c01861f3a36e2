"""The native tree of a real torch venv (the test interpreter's), of a copy of it with libc10.so deleted, and
static-vs-loaded with the real runtime probe."""

# ruff: noqa: PTH119, PTH207
# Paths are compared as the strings the native tree records.

from __future__ import annotations

import dataclasses
import glob
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.model import LoadedLibrary, Manifest, Runtimes
from envcheck.manifest.native import NativeSection
from envcheck.native import reconcile_loaded, scan_for_snapshot

from .conftest import ElfTree, dep, node

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed in the test interpreter"
)

ROOT_HOWS = {"rpath", "runpath", "ld-so-cache", "default-dirs", "already-loaded"}


def _snapshot(python: str, *, verify_files: bool = False, probe: bool = False) -> Manifest:
    return take_snapshot(
        SnapshotOptions(python=python, probe=probe, verify_files=verify_files), native=scan_for_snapshot
    )


@pytest.fixture(scope="module")
def manifest() -> Manifest:
    return _snapshot(sys.executable)


def _torch_c(section: NativeSection) -> str:
    [key] = [
        n.key for n in section.nodes or [] if n.key.startswith("torch:torch/_C.") and n.role == "extension"
    ]
    return key


def _closure(section: NativeSection, start: str) -> list[str]:
    by_key = {n.key: n for n in section.nodes or []}
    seen, todo = [start], [start]
    while todo:
        for d in by_key[todo.pop()].dependencies or []:
            if d.target and d.target not in seen:
                seen.append(d.target)
                todo.append(d.target)
    return seen


def test_every_edge_from_torch_C_resolves(manifest: Manifest) -> None:
    section = manifest.native
    assert section is not None and section.skipped is None, section
    assert section.loader == "ld.so"
    start = _torch_c(section)
    closure = _closure(section, start)
    by_key = {n.key: n for n in section.nodes or []}
    for key in closure:
        n = by_key[key]
        assert n.error is None, (key, n.error)
        for d in n.dependencies or []:
            assert d.target is not None, (key, d)
            assert d.how in ROOT_HOWS, (key, d)
            if d.kind == "bundled":  # torch finds its own libraries next to itself
                assert d.how in ("rpath", "runpath") and (d.via or "").startswith("$ORIGIN"), (key, d)
    c = by_key[start]
    python = dep(c, "libtorch_python.so")
    assert (python.target, python.kind) == ("torch:torch/lib/libtorch_python.so", "bundled")
    assert (
        dep(by_key["torch:torch/lib/libtorch_python.so"], "libc10.so").target == "torch:torch/lib/libc10.so"
    )
    assert dep(c, "libc.so.6").kind == "os"
    assert c.integrity == "record" and (c.identity or "").startswith("sha256:")
    assert section.missing == []
    assert [(o.family, o.key) for o in section.openmp or []] == [("gnu", "torch:torch/lib/libgomp.so.1")]
    assert section.glibc_required is not None and section.glibc_provided is not None
    interpreter = [n for n in section.nodes or [] if n.role == "interpreter"]
    if manifest.python.shared_library:
        assert interpreter and interpreter[0].key.startswith("interpreter:libpython")


def test_the_snapshot_records_the_glibc_hwcaps_levels_ldso_searches(manifest: Manifest) -> None:
    """The machine's CPU level is a fact of the tree: the levels ld.so lists as searched here."""
    import re

    ldso = next(
        (p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-x86-64.so.2") if Path(p).exists()), None
    )
    if ldso is None:
        pytest.skip("no x86-64 ld.so here")
    text = subprocess.run([ldso, "--help"], capture_output=True, text=True, check=False, timeout=60).stdout
    levels = re.findall(r"^\s+(x86-64-v\d) \(supported, searched\)", text, re.M)
    assert manifest.native is not None
    assert manifest.native.hwcaps == (levels or None)


def test_deterministic_and_round_trips(manifest: Manifest) -> None:
    again = scan_for_snapshot(manifest, SnapshotOptions(probe=False))
    assert again == manifest.native
    assert decode(NativeSection, encode(again), source="t") == again
    text = json.dumps(encode(again), sort_keys=True)
    assert text == json.dumps(encode(manifest.native), sort_keys=True)


@pytest.fixture(scope="module")
def broken_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new venv whose site-packages holds a hard-linked copy of torch (and its .dist-info), minus
    torch/lib/libc10.so. Files are only ever unlinked or replaced in the copy, never written through a
    link."""
    import torch  # noqa: F401 - only to find it; the test interpreter has it

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    torch_dir = Path(spec.origin).parent
    site_src = torch_dir.parent
    venv = tmp_path_factory.mktemp("broken") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    [site] = glob.glob(str(venv / "lib/python3*/site-packages"))
    copy = subprocess.run(["cp", "-al", str(torch_dir), site], capture_output=True, check=False)
    if copy.returncode != 0:  # another file system: copy for real
        shutil.copytree(torch_dir, Path(site) / "torch", symlinks=True)
    for info in site_src.glob("torch-*.dist-info"):
        shutil.copytree(info, Path(site) / info.name)
    (Path(site) / "torch/lib/libc10.so").unlink()
    return venv


@pytest.mark.slow
def test_missing_libc10_chain_in_snapshot_and_scan(broken_venv: Path, manifest: Manifest) -> None:
    python = str(broken_venv / "bin/python")
    broken = _snapshot(python)
    section = broken.native
    assert section is not None and section.skipped is None
    c = _torch_c(section)
    texts = {ch.text for ch in section.missing or [] if ch.root == c}
    assert (
        "_C.cpython-311-x86_64-linux-gnu.so → libtorch_python.so → libc10.so: MISSING".replace(
            "_C.cpython-311-x86_64-linux-gnu.so", os.path.basename(node(section, c).path)
        )
        in texts
    )
    assert all(ch.from_extension for ch in section.missing or [] if ch.root == c)
    assert node(section, "torch:torch/lib/libc10.so").error == "listed in RECORD but not on disk"
    # Location-independent keys: the copy's torch nodes are the original's, minus nothing but identity.
    original = {n.key for n in manifest.native.nodes or [] if n.owner == "torch"}  # type: ignore[union-attr]
    assert {n.key for n in section.nodes or [] if n.owner == "torch"} == original

    runner = CliRunner()
    out = broken_venv / "m.json"
    snap = runner.invoke(app, ["snapshot", "--no-probe", "--python", python, "-o", str(out)])
    assert snap.exit_code == 0, snap.output
    assert json.loads(out.read_text())["native"]["missing"]
    [site] = glob.glob(str(broken_venv / "lib/python3*/site-packages"))
    scan = runner.invoke(app, ["scan", site])
    assert scan.exit_code == 1, scan.output
    assert "libtorch_python.so → libc10.so: MISSING" in scan.output


@pytest.mark.slow
def test_verify_files_flags_modified_and_foreign(broken_venv: Path) -> None:
    [site] = glob.glob(str(broken_venv / "lib/python3*/site-packages"))
    lib = Path(site) / "torch/lib"
    shm = lib / "libshm.so"
    data = shm.read_bytes()
    shm.unlink()  # break the hard link first: the original torch must stay untouched
    shm.write_bytes(data + b"\0")
    shutil.copyfile(lib / "libgomp.so.1", lib / "libgomp-a34b3233.so.1")  # a hand-copied, renamed runtime
    try:
        section = _snapshot(str(broken_venv / "bin/python"), verify_files=True).native
        assert section is not None
        assert node(section, "torch:torch/lib/libshm.so").integrity == "modified"
        assert node(section, "torch:torch/lib/libtorch_cpu.so").integrity == "verified"
        foreign = node(section, "unowned:torch/lib/libgomp-a34b3233.so.1")
        assert (foreign.owner, foreign.integrity) == ("unowned", "foreign")
        families = [(o.family, o.key) for o in section.openmp or []]
        assert ("gnu", "unowned:torch/lib/libgomp-a34b3233.so.1") in families
        assert ("gnu", "torch:torch/lib/libgomp.so.1") in families
    finally:
        (lib / "libgomp-a34b3233.so.1").unlink()
        shm.unlink()
        shm.write_bytes(data)


@pytest.mark.slow
def test_static_vs_loaded_with_the_real_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, elf_tree: ElfTree
) -> None:
    """LD_LIBRARY_PATH shadowing torch's libgomp is predicted statically and confirmed by the live process;
    a loaded file elsewhere than predicted is reported."""
    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    shutil.copyfile(Path(spec.origin).parent / "lib/libgomp.so.1", shadow / "libgomp.so.1")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(shadow))
    m = _snapshot(sys.executable, probe=True)
    if m.meta.probe.status != "ok" or m.runtimes is None:
        pytest.fail(f"the runtime probe did not finish: {m.meta.probe}")
    section = m.native
    assert section is not None
    gomp = dep(node(section, "torch:torch/lib/libtorch_cpu.so"), "libgomp.so.1")
    assert (gomp.how, gomp.target) == ("ld-library-path", str(shadow / "libgomp.so.1"))
    loaded = {lib.path for lib in m.runtimes.loaded}
    assert str(shadow / "libgomp.so.1") in loaded
    reconciled = reconcile_loaded(section, m.runtimes)
    # Everything mapped is in the tree or a static dependency of the interpreter's own modules.
    assert reconciled.loaded == []

    # Fault injected: the process reports libc10.so mapped from another folder than the tree predicts.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    c10 = next(p for p in loaded if p.endswith("/libc10.so"))
    shutil.copyfile(c10, elsewhere / "libc10.so")
    swapped = [
        LoadedLibrary(path=str(elsewhere / "libc10.so"), owner="system", identity=None)
        if lib.path == c10
        else lib
        for lib in m.runtimes.loaded
    ]
    result = reconcile_loaded(section, dataclasses.replace(m.runtimes, loaded=swapped))
    [finding] = [d for d in result.loaded or [] if d.kind != "dlopened"]
    assert (finding.kind, finding.name, finding.expected) == (
        "elsewhere",
        "libc10.so",
        "torch:torch/lib/libc10.so",
    )
    # A library no file of the tree or of the interpreter needs, yet mapped: opened with dlopen / ctypes.
    plugin = elf_tree / "lib/libdep.so"
    opened = [*m.runtimes.loaded, LoadedLibrary(path=str(plugin), owner="system", identity=None)]
    result = reconcile_loaded(section, dataclasses.replace(m.runtimes, loaded=opened))
    assert [(d.kind, d.loaded) for d in result.loaded or []] == [("dlopened", str(plugin))]
    unused = Runtimes(loaded=[], threadpools=[], threadpoolctl=False)
    assert reconcile_loaded(section, unused).loaded == []
