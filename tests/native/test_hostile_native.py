"""The native layer under hostile files: each reproduction from the issues runs the real CLI in a child
bounded by ``tests/hostile.py`` (timeout + RLIMIT_AS, peak RSS), then the report is checked for what it
says was refused and why. The bombs are generated here; the ELF ones start from gcc-built libraries."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded

from envcheck.native.binary import BinaryError, read_binary
from envcheck.native.elf import read_elf_reference
from envcheck.native.macho import MAX_FAT_ARCHS
from envcheck.native.scan import MAX_RATIO

from .conftest import ElfTree

TIMEOUT = 30.0
SHADOW = Path("/etc/shadow")


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _scan(target: Path, *extra: str) -> tuple[int, str, str]:
    result = run_bounded(envcheck_argv("scan", str(target), *extra), timeout=TIMEOUT)
    assert_bounded(result, timeout=TIMEOUT)
    return result.returncode, result.stdout, result.stderr


def _scan_json(target: Path) -> tuple[int, dict[str, Any], str]:
    code, out, _err = _scan(target, "--format", "json")
    return code, json.loads(out), out


def _refused(section: dict[str, Any], root: Path | None = None) -> dict[str, tuple[str, str]]:
    """Refused entries by path (relative to ``root`` for a folder scan, which shows absolute paths)."""
    prefix = f"{root}/" if root is not None else ""
    return {r["path"].removeprefix(prefix): (r["kind"], r["reason"]) for r in section.get("refused") or []}


# ----------------------------------------------------------------------------- FIFOs, devices, links


@pytest.fixture
def hostile_folder(elf_tree: ElfTree, tmp_path: Path) -> tuple[Path, Path]:
    """A scanned folder holding a good library beside a FIFO, a /dev/zero-like device, links to
    /dev/zero, /dev/urandom, /etc/shadow, a real library outside the tree, and a link loop — all named like
    libraries so the scanner wants them. Returns the folder and the outside library."""
    pkg = tmp_path / "pkg"
    (pkg / "lib").mkdir(parents=True)
    (pkg / "libgood.so").write_bytes((elf_tree / "libuser_runpath.so").read_bytes())
    (pkg / "lib/libdep.so").write_bytes((elf_tree / "lib/libdep.so").read_bytes())
    make_fifo(pkg / "libfifo.so")
    make_char_device(pkg / "libzero.so", 1, 5)
    (pkg / "libdevzero.so").symlink_to("/dev/zero")
    (pkg / "liburandom.so").symlink_to("/dev/urandom")
    (pkg / "libshadow.so").symlink_to(str(SHADOW))
    outside = tmp_path / "outside" / "libsecret.so"
    outside.parent.mkdir()
    outside.write_bytes((elf_tree / "lib/libleaf.so").read_bytes())
    (pkg / "libsecret.so").symlink_to(outside)
    (pkg / "libloop_a.so").symlink_to(pkg / "libloop_b.so")
    (pkg / "libloop_b.so").symlink_to(pkg / "libloop_a.so")
    return pkg, outside


@pytest.mark.slow
def test_scan_of_fifo_devices_and_links_ends_and_opens_none_of_them(
    hostile_folder: tuple[Path, Path],
) -> None:
    pkg, outside = hostile_folder
    code, section, raw = _scan_json(pkg)
    assert code == 1
    refused = _refused(section, pkg)
    assert refused["libfifo.so"] == ("not-regular", "is a FIFO, not a regular file: not opened")
    assert refused["libzero.so"] == ("not-regular", "is a character device, not a regular file: not opened")
    assert refused["libdevzero.so"][0] == "link-outside" and "/dev/zero" in refused["libdevzero.so"][1]
    assert refused["liburandom.so"][0] == "link-outside" and "/dev/urandom" in refused["liburandom.so"][1]
    assert refused["libsecret.so"] == (
        "link-outside",
        f"leads to {outside.resolve()}, outside the scanned tree: not opened",
    )
    assert refused["libloop_a.so"] == ("link-loop", "a symbolic link loop: not opened")
    # Neither the bytes nor the hash nor the headers of a file outside the tree reach the report.
    assert _sha(outside) not in raw and "libleaf.so" not in raw
    if SHADOW.exists():
        assert refused["libshadow.so"][0] == "link-outside"
        assert _sha(SHADOW) not in raw
    nodes = {n["key"]: n for n in section["nodes"]}
    assert nodes["tree:libgood.so"]["error"] is None
    assert nodes["tree:libsecret.so"]["identity"] is None and nodes["tree:libsecret.so"]["size"] is None
    code, text, _ = _scan(pkg)
    assert "files that could not be read:" in text
    assert "    tree:libfifo.so: is a FIFO, not a regular file: not opened\n" in text


@pytest.mark.slow
def test_program_candidates_in_bin_are_held_to_the_same_rules(elf_tree: ElfTree, tmp_path: Path) -> None:
    """Programs (``bin/<name>``, ``*.exe``) are candidates of a scan too: a FIFO, a device or a link out of
    the tree named like one is refused unopened, a script is dropped, a real program is a node."""
    pkg = tmp_path / "pkg"
    (pkg / "bin").mkdir(parents=True)
    (pkg / "lib").mkdir()
    (pkg / "lib/libdep.so").write_bytes((elf_tree / "lib/libdep.so").read_bytes())
    make_fifo(pkg / "bin/fifo")
    make_char_device(pkg / "bin/zero", 1, 5)
    (pkg / "bin/shadow").symlink_to(str(SHADOW))
    (pkg / "tool.exe").symlink_to("/dev/urandom")
    (pkg / "bin/script").write_text("#!/bin/sh\n")
    (pkg / "bin/prog").write_bytes((elf_tree / "libuser_runpath.so").read_bytes())
    code, section, raw = _scan_json(pkg)
    refused = _refused(section, pkg)
    assert refused["bin/fifo"] == ("not-regular", "is a FIFO, not a regular file: not opened")
    assert refused["bin/zero"][0] == "not-regular"
    assert refused["tool.exe"][0] == "link-outside"
    if SHADOW.exists():
        assert refused["bin/shadow"][0] == "link-outside" and _sha(SHADOW) not in raw
    nodes = {n["key"]: n for n in section["nodes"]}
    assert "tree:bin/script" not in nodes
    assert (nodes["tree:bin/prog"]["role"], nodes["tree:bin/prog"]["error"]) == ("executable", None)
    assert code == 1  # refused files make the tree not what it claims


@pytest.mark.slow
def test_record_that_is_a_link_to_dev_zero_is_not_read(elf_tree: ElfTree, tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "pkg-1.0.dist-info").mkdir(parents=True)
    (site / "pkg").mkdir()
    (site / "pkg/libgood.so").write_bytes((elf_tree / "lib/libleaf.so").read_bytes())
    (site / "pkg-1.0.dist-info/RECORD").symlink_to("/dev/zero")
    make_fifo(site / "other-2.0.dist-info")  # a FIFO where a folder is expected: listed, never opened
    code, section, _raw = _scan_json(site)
    assert code == 1
    kind, reason = _refused(section, site)["pkg-1.0.dist-info/RECORD"]
    assert kind == "link-outside" and "/dev/zero" in reason
    code, text, _ = _scan(site)
    assert f"files not opened:\n    {site}/pkg-1.0.dist-info/RECORD: leads to /dev/zero" in text


def test_loaded_library_reported_as_a_device_or_fifo_is_never_hashed(tmp_path: Path) -> None:
    """``collect.snapshot._identities`` hashes every loaded file a target reports with ``file_sha256``: a
    target reporting /dev/zero (or a FIFO) must not make it read for ever."""
    fifo = make_fifo(tmp_path / "fifo.so")
    zero = make_char_device(tmp_path / "zero.so", 1, 5)
    link = tmp_path / "libz.so"
    link.symlink_to("/dev/zero")
    good = tmp_path / "good.so"
    good.write_bytes(b"data")
    code = (
        "import sys; from envcheck.native.hashing import file_sha256 as h; "
        "print([h(p) for p in sys.argv[1:]])"
    )
    argv = [envcheck_argv()[0], "-c", code, str(fifo), str(zero), str(link), str(good)]
    result = run_bounded(argv, timeout=TIMEOUT)
    assert_bounded(result, timeout=TIMEOUT)
    expected = [None, None, None, "sha256:" + hashlib.sha256(b"data").hexdigest()]
    assert result.stdout.strip() == repr(expected)


# ------------------------------------------------------------------------------------------- ELF bombs


def _version_needs_bomb(entries: int) -> bytes:
    """A minimal ELF64 shared object: one PT_LOAD mapping the whole file, a PT_DYNAMIC, and ``entries``
    Verneed records that all point at one shared chain of ``entries`` Vernaux records — every record is
    valid, so a walk that follows the offsets does entries² steps."""
    strtab = b"\0libc.so.6\0GLIBC_2.2.5\0"
    dyn_off = 64 + 2 * 56
    dynamic_len = 6 * 16
    str_off = dyn_off + dynamic_len
    vn_off = str_off + len(strtab)
    aux_off = vn_off + entries * 16
    size = aux_off + entries * 16
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, size, size, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", 2, 4, dyn_off, dyn_off, dyn_off, dynamic_len, dynamic_len, 8)
    dynamic = struct.pack(
        "<" + "qQ" * 6,
        1, 1,  # DT_NEEDED libc.so.6
        5, str_off,  # DT_STRTAB
        10, len(strtab),  # DT_STRSZ
        0x6FFFFFFE, vn_off,  # DT_VERNEED
        0x6FFFFFFF, entries,  # DT_VERNEEDNUM
        0, 0,
    )  # fmt: skip
    verneeds = b"".join(
        struct.pack("<HHIII", 1, entries, 1, aux_off - (vn_off + i * 16), 16) for i in range(entries)
    )
    auxes = b"".join(struct.pack("<IHHII", 0, 0, 2, 11, 16 if i < entries - 1 else 0) for i in range(entries))
    data = header + phdrs + dynamic + strtab + verneeds + auxes
    assert len(data) == size
    return data


def test_version_needs_bomb_is_refused_in_linear_time(tmp_path: Path) -> None:
    """1.6 MB: 50 000 Verneed x 50 000 Vernaux, hours for the quadratic walk."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    bomb = pkg / "libbomb.so"
    bomb.write_bytes(_version_needs_bomb(50_000))
    assert bomb.stat().st_size > 1_500_000
    with pytest.raises(BinaryError, match="more symbol version entries than the file's size can hold"):
        read_binary(str(bomb))
    code, section, _raw = _scan_json(pkg)
    (node,) = section["nodes"]
    assert code == 1
    assert node["error"] == "corrupt ELF: more symbol version entries than the file's size can hold"


def _needed_bomb(entries: int) -> bytes:
    """A minimal ELF64 shared object whose dynamic segment holds ``entries`` DT_NEEDED entries (issue 18:
    1 M of them took 40 s and 1.36 GB to scan)."""
    strtab = b"\0libx.so\0"
    dyn_off = 64 + 2 * 56
    dynamic_len = (entries + 3) * 16
    str_off = dyn_off + dynamic_len
    size = str_off + len(strtab)
    header = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    header += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 64, 0, 0, 64, 56, 2, 64, 0, 0)
    phdrs = struct.pack("<IIQQQQQQ", 1, 4, 0, 0, 0, size, size, 0x1000)
    phdrs += struct.pack("<IIQQQQQQ", 2, 4, dyn_off, dyn_off, dyn_off, dynamic_len, dynamic_len, 8)
    dynamic = struct.pack("<qQ", 1, 1) * entries + struct.pack("<qQqQqQ", 5, str_off, 10, len(strtab), 0, 0)
    return header + phdrs + dynamic + strtab


def _import_bomb(entries: int) -> bytes:
    """A PE32+ DLL (one section) whose import table holds ``entries`` descriptors, each naming a.dll with a
    valid empty thunk list (issue 18: 1.5 M of them took 20 s and 1.4 GB to scan)."""
    table = 0x1000  # RVA of the section = of the import table
    name_rva = table + (entries + 1) * 20
    thunk_rva = name_rva + 8
    body = struct.pack("<IIIII", thunk_rva, 0, 0, name_rva, thunk_rva) * entries + bytes(20)
    body += b"a.dll\0\0\0" + bytes(8)
    raw = (len(body) + 0x1FF) & ~0x1FF
    body += bytes(raw - len(body))
    dos = b"MZ" + bytes(58) + struct.pack("<I", 64)
    coff = b"PE\0\0" + struct.pack("<HHIIIHH", 0x8664, 1, 0, 0, 0, 240, 0x2022)
    opt = struct.pack("<HBBIIIII", 0x20B, 14, 42, raw, 0, 0, 0, 0x1000)
    opt += struct.pack(
        "<QIIHHHHHHIIIIHHQQQQII",
        0x180000000,
        0x1000,
        0x200,
        6,
        0,
        0,
        0,
        6,
        0,
        0,
        0x1000 + raw,
        0x400,
        0,
        3,
        0,
        0x100000,
        0x1000,
        0x100000,
        0x1000,
        0,
        16,
    )
    directories = [(0, 0)] * 16
    directories[1] = (table, (entries + 1) * 20)
    opt += b"".join(struct.pack("<II", *d) for d in directories)
    section = b".idata\0\0" + struct.pack("<IIIIIIHHI", raw, 0x1000, raw, 0x400, 0, 0, 0, 0, 0xC0000040)
    head = dos + coff + opt + section
    return head + bytes(0x400 - len(head)) + body  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "make", "what"),
    [
        ("libmany.so", _needed_bomb, "DT_NEEDED entries"),
        ("many.dll", _import_bomb, "import descriptors"),
    ],
)
def test_a_binary_asking_for_a_million_libraries_is_refused_unread(
    tmp_path: Path, name: str, make: Callable[[int], bytes], what: str
) -> None:
    """Imports per binary have a named limit (``MAX_NEEDED_PER_BINARY``): past it the file is one line of
    the report, in bounded time and memory, where each entry became a record of the tree before."""
    from envcheck.native.records import MAX_NEEDED_PER_BINARY

    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / name).write_bytes(make(1_000_000))
    (pkg / f"ok{name}").write_bytes(make(3))  # a few entries: read as before
    reason = f"more than {MAX_NEEDED_PER_BINARY} {what}, over the limit of {MAX_NEEDED_PER_BINARY}"
    with pytest.raises(BinaryError, match=reason):
        read_binary(str(pkg / name))
    assert {n.name for n in read_binary(str(pkg / f"ok{name}")).needed} <= {"libx.so", "a.dll"}
    code, section, _raw = _scan_json(pkg)
    errors = {Path(n["path"]).name: n["error"] for n in section["nodes"] if n.get("error")}
    assert code == 1
    assert errors[name].startswith(reason) and errors[name].endswith(
        "libraries one binary may need: not read"
    )
    assert f"ok{name}" not in errors


def test_small_version_needs_chain_still_parses(tmp_path: Path) -> None:
    """The budget refuses revisits, not real files: 3 x 3 shared entries fit in the file's bytes."""
    lib = tmp_path / "libsmall.so"
    lib.write_bytes(_version_needs_bomb(3))
    info = read_binary(str(lib))
    assert info.version_needs == {"GLIBC": "2.2.5"}
    assert [n.name for n in info.needed] == ["libc.so.6"]


def test_pyelftools_fallback_is_bounded_too(tmp_path: Path) -> None:
    """No program headers: the reference reader runs, after its section table is checked against the size
    (e_shnum 0 and section 0 claiming 2^32 sections, all in a 200-byte file)."""
    data = bytearray(_version_needs_bomb(1)[:64])
    struct.pack_into("<QHH", data, 40, 64, 64, 0)  # e_shoff 64, e_flags..; e_ehsize 64 (unchanged)
    struct.pack_into("<HHHHHH", data, 52, 64, 56, 0, 64, 0, 0)  # e_phnum 0, e_shentsize 64, e_shnum 0
    data += struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 2**32, 0, 0, 0, 0)  # sh_size: the real count
    lib = tmp_path / "libnophdr.so"
    lib.write_bytes(bytes(data) + b"\0" * 72)
    with pytest.raises(BinaryError, match="section header table runs past the end"):
        read_binary(str(lib))
    with pytest.raises(BinaryError, match="section header table runs past the end"):
        read_elf_reference(str(lib))


# -------------------------------------------------------------------------------------- Mach-O fat bomb


def test_fat_macho_claiming_a_million_architectures(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    # A real fat header (FAT_MAGIC, 10^6 architectures) and one real-looking fat_arch entry after it.
    (pkg / "libfat.dylib").write_bytes(
        struct.pack(">II", 0xCAFEBABE, 1_000_000) + struct.pack(">iiIII", 0x01000007, 3, 4096, 4096, 12)
    )
    code, section, _raw = _scan_json(pkg)
    (node,) = section["nodes"]
    assert code == 1
    assert node["error"] == (
        "not a valid Mach-O file: a fat header claiming 1000000 architectures (20000008 bytes of table) "
        f"in a file of 28 bytes (at most {MAX_FAT_ARCHS})"
    )


@pytest.mark.slow
def test_macho_load_command_and_overlap_bombs(tmp_path: Path) -> None:
    """A thin image claiming 10^8 load commands in 32 bytes, and a fat file whose two architectures both
    claim the same bytes (each would be parsed again: the count times the size)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    thin = struct.pack("<IiiIIII", 0xFEEDFACF, 0x01000007, 3, 6, 100_000_000, 64, 0) + b"\0" * 4
    (pkg / "libthin.dylib").write_bytes(thin)
    arch = struct.pack(">iiIII", 0x01000007, 3, 64, len(thin), 3)
    overlapping = struct.pack(">II", 0xCAFEBABE, 2) + arch + arch
    (pkg / "libtwice.dylib").write_bytes(overlapping + b"\0" * (64 - len(overlapping)) + thin)
    code, section, _raw = _scan_json(pkg)
    assert code == 1
    errors = {n["key"]: n["error"] for n in section["nodes"]}
    assert errors["tree:libthin.dylib"] == (
        "not a valid Mach-O file: 100000000 load commands in 64 bytes of a 32-byte image"
    )
    assert errors["tree:libtwice.dylib"] == (
        "not a valid Mach-O file: fat architectures overlap or run past the end"
    )


# ------------------------------------------------------------------------------------------ wheels


def _deflated_zeros(total: int) -> tuple[bytes, int]:
    """Raw deflate of ``total`` zero bytes (a multiple of 1 MiB) and their CRC-32. One MiB is deflated with
    a full flush (byte-aligned, no history), so its block can be repeated as is: seconds, not minutes."""
    chunk = b"\0" * (1 << 20)
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = squeeze.compress(chunk) + squeeze.flush(zlib.Z_FULL_FLUSH)
    final = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # an empty last block (BFINAL)
    count = total // len(chunk)
    crc = 0
    for _ in range(count):
        crc = zlib.crc32(chunk, crc)
    return block * count + final, crc


def _zip_with_raw_member(
    path: Path, name: str, raw: bytes, crc: int, size: int, extra: dict[str, bytes]
) -> None:
    """A zip whose member ``name`` holds the ready deflated ``raw`` (zipfile cannot store pre-compressed
    data, so this one is written by hand: local header, data, central directory, zip64 records)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for other, data in extra.items():
            zf.writestr(other, data)
    body = path.read_bytes()
    cd_start = struct.unpack_from("<I", body, len(body) - 22 + 16)[0]
    entries = struct.unpack_from("<H", body, len(body) - 22 + 10)[0]
    head, central = body[:cd_start], body[cd_start : len(body) - 22]
    local_off = len(head)
    fname = name.encode()
    zip64 = struct.pack("<HHQQ", 1, 16, size, len(raw))
    local = struct.pack(
        "<IHHHHHIIIHH", 0x04034B50, 45, 0, 8, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF, len(fname), len(zip64)
    )
    local += fname + zip64
    zip64_cd = struct.pack("<HHQQQ", 1, 24, size, len(raw), local_off)
    entry = struct.pack(
        "<IHHHHHHIIIHHHHHII",
        0x02014B50, 45, 45, 0, 8, 0, 0, crc, 0xFFFFFFFF, 0xFFFFFFFF,
        len(fname), len(zip64_cd), 0, 0, 0, 0, 0xFFFFFFFF,
    )  # fmt: skip
    entry += fname + zip64_cd
    new_central = central + entry
    cd_off = local_off + len(local) + len(raw)
    end64_off = cd_off + len(new_central)
    count = entries + 1
    end64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(new_central), cd_off)
    locator = struct.pack("<IIQI", 0x07064B50, 0, end64_off, 1)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, count, count, len(new_central), cd_off, 0)
    path.write_bytes(head + local + raw + new_central + end64 + locator + end)


@pytest.fixture(scope="module")
def zip_bomb_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~3 MB wheel whose one native member expands to 3 GiB of zeros."""
    size = 3 * 1024**3
    raw, crc = _deflated_zeros(size)
    wheel = tmp_path_factory.mktemp("bomb") / "bomb-1.0-py3-none-any.whl"
    record = "bomb/libbomb.so,,\nbomb-1.0.dist-info/RECORD,,\n"
    _zip_with_raw_member(
        wheel, "bomb/libbomb.so", raw, crc, size, {"bomb-1.0.dist-info/RECORD": record.encode()}
    )
    return wheel


@pytest.mark.slow
def test_zip_bomb_wheel_is_not_expanded(zip_bomb_wheel: Path) -> None:
    assert zip_bomb_wheel.stat().st_size < 4 * 1024**2
    with zipfile.ZipFile(zip_bomb_wheel) as zf:  # the bomb is a valid zip: the sizes are honest
        assert zf.getinfo("bomb/libbomb.so").file_size == 3 * 1024**3
    code, section, _raw = _scan_json(zip_bomb_wheel)
    assert code == 1
    kind, reason = _refused(section)["bomb/libbomb.so"]
    assert kind == "member-cap"
    assert reason.startswith(f"expands to {3 * 1024**3} bytes from ")
    assert reason.endswith(f"over the {MAX_RATIO}:1 ratio cap")
    assert not section["nodes"]
    code, text, _ = _scan(zip_bomb_wheel)
    assert "wheel members not extracted:\n    bomb/libbomb.so: expands to 3221225472 bytes" in text


@pytest.mark.slow
def test_wheel_with_escaping_member_names_and_record(elf_tree: ElfTree, tmp_path: Path) -> None:
    wheel = tmp_path / "evil-1.0-py3-none-any.whl"
    lib = (elf_tree / "lib/libleaf.so").read_bytes()
    record = "evil/libok.so,,\n../../etc/shadow,,\n../../../tmp/libplanted.so,,\n/etc/passwd,,\n"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("evil/libok.so", lib)
        zf.writestr("../../libslip.so", lib)
        zf.writestr("/tmp/libabsolute.so", lib)
        zf.writestr("evil-1.0.dist-info/RECORD", record)
    code, section, raw = _scan_json(wheel)
    assert code == 1
    refused = _refused(section)
    assert refused["../../libslip.so"] == (
        "member-name",
        "a member name that leaves the wheel (..): not extracted",
    )
    assert refused["/tmp/libabsolute.so"] == ("member-name", "an absolute member name: not extracted")
    for row in ("../../etc/shadow", "../../../tmp/libplanted.so", "/etc/passwd"):
        assert refused[row] == ("record-escape", "RECORD names a path outside the wheel: not read")
    assert [n["key"] for n in section["nodes"]] == ["evil:evil/libok.so"]
    assert not (tmp_path.parent / "libslip.so").exists() and not Path("/tmp/libabsolute.so").exists()
    if SHADOW.exists():
        assert _sha(SHADOW) not in raw
    code, text, _ = _scan(wheel)
    escapes = text.split("RECORD entries that leave the tree (never read):\n", 1)[1].split("\n\n")[0]
    assert escapes.splitlines() == [
        "    evil: ../../../tmp/libplanted.so",
        "    evil: ../../etc/shadow",
        "    evil: /etc/passwd",
    ]


def test_not_a_wheel_is_one_line_and_exit_2(tmp_path: Path) -> None:
    fake = tmp_path / "fake-1.0-py3-none-any.whl"
    fake.write_bytes(b"\0" * 4096)
    code, out, err = _scan(fake)
    assert code == 2 and out == ""
    assert err.startswith(f"error: {fake} is not a readable wheel: ")
    assert err.count("\n") <= 2  # the error line and at most a tip


# --------------------------------------------------------------------- snapshot of a hostile RECORD


@pytest.mark.slow
def test_snapshot_no_probe_refuses_a_record_path_outside_the_environment(
    elf_tree: ElfTree, venv_factory: Callable[[str], Path], tmp_path: Path
) -> None:
    from venvs import venv_site

    python = venv_factory("escape")
    site = venv_site(python)
    secret = tmp_path / "outside" / "libsecret.so"
    secret.parent.mkdir()
    secret.write_bytes((elf_tree / "lib/libleaf.so").read_bytes())
    (site / "evil").mkdir()
    (site / "evil/libok.so").write_bytes((elf_tree / "lib/libdep.so").read_bytes())
    info = site / "evil-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: evil\nVersion: 1.0\n")
    escape = os.path.relpath(secret, site)
    (info / "RECORD").write_text(f"evil/libok.so,,\n{escape},,\nevil-1.0.dist-info/RECORD,,\n")
    out = tmp_path / "m.json"
    argv = envcheck_argv("snapshot", "--no-probe", "--python", str(python), "-o", str(out))
    result = run_bounded(argv, timeout=60.0)
    assert_bounded(result, timeout=60.0)
    assert result.returncode == 0, result.stderr
    text = out.read_text()
    manifest = json.loads(text)
    (entry,) = manifest["native"]["refused"]
    assert (entry["owner"], entry["path"], entry["kind"]) == ("evil", escape, "record-escape")
    assert entry["reason"] == f"RECORD names {secret}, outside the environment: not read"
    keys = [n["key"] for n in manifest["native"]["nodes"]]
    assert "evil:evil/libok.so" in keys and not any("libsecret" in k for k in keys)
    assert _sha(secret) not in text
    from envcheck.diff.engine import doctor
    from envcheck.manifest.io import load

    (finding,) = [f for f in doctor(load(out)) if f.rule == "ENV-NATIVE-RECORD-ESCAPE"]
    assert (finding.severity, finding.subject, finding.target) == ("error", f"evil:{escape}", escape)


# ------------------------------------------------------------------------------ names and escapes


def test_library_names_with_version_suffixes_are_native(tmp_path: Path) -> None:
    from envcheck.native.tree import NATIVE_SUFFIX

    for name in ("libMLIRDialectPlugin.so.23.0git", "libfoo.so.1.2.3", "libbar.so.4.0rc1", "x.so", "y.dll"):
        assert NATIVE_SUFFIX.search(name), name
    for name in ("notes.so.bak", "libfoo.so.txt", "readme.md"):
        assert not NATIVE_SUFFIX.search(name), name


def test_scan_text_escapes_names_from_binaries_and_files(elf_tree: ElfTree, tmp_path: Path) -> None:
    """A DT_NEEDED name and a file name carrying terminal escapes print as visible ``\\x1b``."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    data = (elf_tree / "libuser_runpath.so").read_bytes()
    assert data.count(b"libdep.so\0") == 1
    (pkg / "libevil.so").write_bytes(data.replace(b"libdep.so\0", b"l\x1b[2Jx.so\0"))
    (pkg / "lib\x1b]0;pwned\x07.so").write_bytes(b"not a library")
    _code, text, _ = _scan(pkg)
    assert "\x1b" not in text and "\x07" not in text
    assert "l\\x1b[2Jx.so -> MISSING" in text
    assert "tree:lib\\x1b]0;pwned\\x07.so: not an ELF, PE or Mach-O file" in text


@pytest.mark.slow
def test_member_whose_data_outgrows_its_declared_size_is_cut_off(tmp_path: Path) -> None:
    """The central directory says 1 MiB and a ratio under the cap; the data inflates to 64 MiB. Extraction
    stops at the declared size instead of trusting the stream."""
    raw, _crc = _deflated_zeros(64 * 1024**2)
    wheel = tmp_path / "liar-1.0-py3-none-any.whl"
    _zip_with_raw_member(
        wheel, "liar/libliar.so", raw, 0, 1024**2, {"liar-1.0.dist-info/RECORD": b"liar/libliar.so,,\n"}
    )
    code, section, _raw = _scan_json(wheel)
    assert code == 1
    kind, reason = _refused(section)["liar/libliar.so"]
    assert kind == "member-corrupt"
    # zipfile itself stops at the declared size and then finds the CRC wrong; either way nothing past the
    # declared size is written.
    assert reason in ("holds more than the 1048576 bytes its header declares",) or reason.startswith(
        "cannot be extracted: Bad CRC-32"
    )
    assert not section["nodes"]  # reported once, as not extracted, not again as "not on disk"


# ------------------------------------------------------------------------------ the command's deadline


def test_scan_takes_one_deadline_for_the_whole_command(elf_tree: ElfTree, tmp_path: Path) -> None:
    """``scan --timeout`` bounds the listing and the reading of the tree (a tree of many thousands of
    libraries, or a slow file system): past it, one line naming the step and what was done, exit 2. Here the
    deadline has already passed, so the stop is certain on any machine; the CLI's own option is checked on
    the same tree within the hostile-input bounds."""
    from envcheck.core.deadline import Deadline, DeadlineExpired
    from envcheck.native import scan_path

    tree = tmp_path / "many"
    (tree / "lib").mkdir(parents=True)
    for i in range(200):  # hard links: 200 libraries for the price of one
        os.link(elf_tree / "lib/libleaf.so", tree / "lib" / f"libleaf{i}.so")
    passed = Deadline(at=0.0, seconds=1.0)
    with pytest.raises(DeadlineExpired, match=r"passed while listing the tree \(0 native files found\)"):
        scan_path(str(tree), deadline=passed)
    code, out, err = _scan(tree, "--timeout", "5")
    assert code == 0, err
    assert "libleaf199.so" in out
