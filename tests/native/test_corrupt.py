"""Bad files are recorded per file with the reason, and the walk goes on."""

# ruff: noqa: PTH211
# Paths are compared as the strings the native tree records.

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.native import scan_path
from envcheck.native.binary import BinaryError, read_binary

from .conftest import ElfTree, dep, node


@pytest.fixture
def corrupt_tree(elf_tree: ElfTree, tmp_path: Path) -> Path:
    """A folder of broken native files beside a good one whose dependency is a zero-byte file."""
    pkg = tmp_path / "pkg"
    (pkg / "lib").mkdir(parents=True)
    shutil.copy(elf_tree / "libuser_runpath.so", pkg / "libgood.so")  # needs libdep.so via $ORIGIN/lib
    (pkg / "lib/libdep.so").write_bytes(b"")
    real = (elf_tree / "libuser_rpath.so").read_bytes()
    (pkg / "truncated_header.so").write_bytes(real[:40])
    (pkg / "truncated_phdrs.so").write_bytes(real[:100])
    (pkg / "truncated_dynamic.so").write_bytes(real[: len(real) // 3])
    (pkg / "empty.so").write_bytes(b"")
    (pkg / "notes.dll").write_text("this is not a DLL\n")
    (pkg / "fake.pyd").write_bytes(b"MZ" + b"\0" * 30)  # a DOS stub and nothing else
    os.symlink(pkg / "loop_b.so", pkg / "loop_a.so")
    os.symlink(pkg / "loop_a.so", pkg / "loop_b.so")
    (pkg / "folder.so").mkdir()
    return pkg


@pytest.mark.slow
def test_each_bad_file_has_its_reason(corrupt_tree: Path) -> None:
    section = scan_path(str(corrupt_tree))
    reasons = {n.key.split(":", 1)[1]: n.error for n in section.nodes or []}
    assert reasons["libgood.so"] is None
    assert "truncated ELF header" in str(reasons["truncated_header.so"])
    assert "truncated ELF" in str(reasons["truncated_phdrs.so"])
    assert "truncated" in str(reasons["truncated_dynamic.so"]) or "corrupt" in str(
        reasons["truncated_dynamic.so"]
    )
    assert reasons["empty.so"] == "empty file (0 bytes)"
    assert reasons["lib/libdep.so"] == "empty file (0 bytes)"
    assert reasons["notes.dll"] == "not an ELF, PE or Mach-O file"
    assert "not a valid PE file" in str(reasons["fake.pyd"])
    assert reasons["loop_a.so"] == "a symbolic link loop: not opened"
    good = node(section, "tree:libgood.so")
    assert dep(good, "libdep.so").target == "tree:lib/libdep.so"
    texts = [c.text for c in section.missing or []]
    assert "libgood.so → libdep.so: UNREADABLE (empty file (0 bytes))" in texts


def test_cli_scan_reports_and_does_not_crash(corrupt_tree: Path) -> None:
    result = CliRunner().invoke(app, ["scan", str(corrupt_tree)])
    assert result.exit_code == 1, result.output
    assert "files that could not be read:" in result.output
    assert "tree:notes.dll: not an ELF, PE or Mach-O file" in result.output


def test_directory_where_a_recorded_file_is_expected(corrupt_tree: Path) -> None:
    """Stands in for an unreadable file (tests run as root, and chmod 000 does not stop root)."""
    from envcheck.native.linux import LinuxResolver
    from envcheck.native.tree import Catalog, RootFile, Walker

    root = RootFile(path=str(corrupt_tree / "folder.so"), key="pkg:folder.so", owner="pkg", role="library")
    catalog = Catalog(site_dirs=[str(corrupt_tree)])
    catalog.add(root)
    walker = Walker(catalog, {}, host=True)
    walker.resolvers = {"elf": LinuxResolver(host=True, probe=walker.probe)}
    section = walker.walk([root], verify_files=True)
    assert node(section, "pkg:folder.so").error == "is a directory, not a regular file"


@pytest.mark.skipif(
    os.geteuid() == 0, reason="root reads a chmod 000 file anyway; the directory case covers it"
)
def test_unreadable_file(tmp_path: Path) -> None:
    f = tmp_path / "locked.so"
    f.write_bytes(b"\x7fELF" + b"\0" * 100)
    f.chmod(0)
    with pytest.raises(BinaryError, match="cannot read"):
        read_binary(str(f))
