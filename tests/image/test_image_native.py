"""The native tree of a container image, resolved as the image's own ld.so would resolve it: its libc, its
``/etc/ld.so.cache``, its default folders, the RPATH / RUNPATH of its files and the ``LD_LIBRARY_PATH`` of
its config, each taken inside the image; never this machine's libraries, whatever the image's files name.

The class: a library an extension module needs that the image does not provide where its loader looks,
though the machine that builds or checks the image has it (``import cv2`` in a slim image: "libGL.so.1:
cannot open shared object file"). Each case is a real extension module gcc builds now, linked against a
real ``libfoo.so.1`` that exists on this machine, in a python:3.11-style image built by hand to the OCI
spec; the healthy controls provide the library in the unusual but legal ways (only the image's ld.so.cache
knows its folder, only the config's ``LD_LIBRARY_PATH`` names it, an absolute RUNPATH), the broken ones
drop it, and the hostile ones point the cache and RUNPATH out of the image at this machine's copy.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import ocibuild as ob
import pytest
from clirun import run
from test_image_static import PYENV_LIB, _copy, image_venv, python_org_base
from wheels import wheel

from envcheck.native.ldcache import MAX_CACHE_BYTES, read_ld_cache

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (PYENV_LIB / "site.py").is_file(), reason="needs a python.org-style 3.11 to copy"),
    pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc builds the extension modules"),
]
SITE = "app/.venv/lib/python3.11/site-packages"
EXT = "_probe.cpython-311-x86_64-linux-gnu.so"
PATH = "PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _cc(out: Path, source: str, *flags: str) -> Path:
    src = out.parent / f"{out.name}.c"
    out.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(source, encoding="utf-8")
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *flags], check=True, capture_output=True
    )
    src.unlink()
    return out


class Built:
    """gcc's output: ``hostlib`` (a folder of this machine holding a real ``libfoo.so.1``), and the
    extension module linked against it three ways: no search path of its own (``plain``), an absolute
    RUNPATH naming ``hostlib`` (``runpath``), and a RUNPATH of ``$ORIGIN`` climbing far above any root to
    ``hostlib`` (``escape``)."""

    def __init__(self, folder: Path) -> None:
        self.hostlib = folder / "hostlib"
        foo = _cc(self.hostlib / "libfoo.so.1", "int foo(void) { return 7; }", "-Wl,-soname,libfoo.so.1")
        # getenv: the module needs libc.so.6 (and a GLIBC_ symbol version) for real, as every one does.
        source = '#include <stdlib.h>\nint foo(void); int probe(void) { return foo() + (getenv("X") != 0); }'
        link = (f"-L{self.hostlib}", "-l:libfoo.so.1")
        self.plain = _cc(folder / "plain" / EXT, source, *link)
        self.runpath = _cc(
            folder / "runpath" / EXT, source, *link, f"-Wl,--enable-new-dtags,-rpath,{self.hostlib}"
        )
        climb = "$ORIGIN/" + "../" * 40 + str(self.hostlib).lstrip("/")
        self.escape = _cc(folder / "escape" / EXT, source, *link, f"-Wl,--enable-new-dtags,-rpath,{climb}")
        self.foo = foo


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    return Built(tmp_path_factory.mktemp("gcc"))


@pytest.fixture(scope="module")
def base_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A python:3.11-style root (glibc copied from this machine) with an empty venv at /app/.venv."""
    root = tmp_path_factory.mktemp("native-image") / "root"
    root.mkdir()
    python_org_base(root)
    image_venv(root, ())
    return root


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _install_acme(root: Path, extension: Path) -> None:
    """acme-native 1.0, as pip installs a wheel: its package with ``extension`` in it, and a dist-info
    whose RECORD lists every file with its digest."""
    site = root / SITE
    files = {
        "acme/__init__.py": b"from acme._probe import probe\n",
        f"acme/{EXT}": extension.read_bytes(),
        "acme_native-1.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: acme-native\nVersion: 1.0\n",
        "acme_native-1.0.dist-info/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: gcc\nRoot-Is-Purelib: false\n"
            b"Tag: cp311-cp311-manylinux_2_17_x86_64\n"
        ),
        "acme_native-1.0.dist-info/INSTALLER": b"pip\n",
    }
    record = [f"{name},sha256={_b64(data)},{len(data)}" for name, data in files.items()]
    files["acme_native-1.0.dist-info/RECORD"] = (
        "\n".join([*record, "acme_native-1.0.dist-info/RECORD,,"]) + "\n"
    ).encode()
    for name, data in files.items():
        path = site / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    (site / "acme" / EXT).chmod(0o755)


def _root(base_root: Path, dest: Path, extension: Path) -> Path:
    shutil.copytree(base_root, dest, symlinks=True, copy_function=os.link)
    _install_acme(dest, extension)
    return dest


def _put_lib(root: Path, folder: str, built: Built) -> None:
    _copy(built.foo, root, f"{folder}/libfoo.so.1")


def _image(root: Path, dest: Path, *, env: tuple[str, ...] = (PATH,)) -> Path:
    blob = ob.layer(ob.entries_from_folder(root))
    return ob.oci_image([blob], ob.image_config([blob], env=env, cmd=["python", "-m", "acme"])).write_folder(
        dest
    )


def _snapshot(image: Path, out: Path) -> dict[str, Any]:
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(out))
    assert code == 0, err
    return json.loads(out.read_text())


def _dependency(manifest: dict[str, Any], name: str = "libfoo.so.1") -> dict[str, Any]:
    node = next(n for n in manifest["native"]["nodes"] if n["key"] == f"acme-native:acme/{EXT}")
    return next(d for d in node["dependencies"] if d["name"] == name)


def _ldconfig(root: Path, folder: str) -> None:
    """The image's own ld.so.cache, made by this machine's ldconfig run on the image's root (``-r``: it
    chroots there and reads the image's ld.so.conf), knowing ``folder``."""
    (root / "etc" / "ld.so.conf.d").mkdir(parents=True, exist_ok=True)
    (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n", encoding="utf-8")
    (root / "etc" / "ld.so.conf.d" / "foo.conf").write_text(folder + "\n", encoding="utf-8")
    done = subprocess.run(["ldconfig", "-r", str(root)], capture_output=True, text=True, check=False)
    if done.returncode != 0 or "libfoo.so.1" not in read_ld_cache(str(root / "etc" / "ld.so.cache")):
        pytest.skip(f"ldconfig -r could not make the image's cache here: {done.stderr[-200:]}")


def _cache_file(entries: list[tuple[str, str]]) -> bytes:
    """An ld.so.cache in glibc's new format (``sysdeps/generic/dl-cache.h``): the header, one entry per
    (name, path) flagged ELF libc6 x86-64, then the strings, whose offsets count from the header."""
    header = 48
    strings = b""
    rows = []
    at = header + 24 * len(entries)
    for name, path in entries:
        key = at + len(strings)
        strings += name.encode() + b"\0"
        value = at + len(strings)
        strings += path.encode() + b"\0"
        rows.append(struct.pack("<iIIIQ", 0x0303, key, value, 0, 0))
    head = b"glibc-ld.so.cache1.1" + struct.pack("<II", len(entries), len(strings)) + b"\0" * 4 + b"\0" * 16
    assert len(head) == header
    return head + b"".join(rows) + strings


# ----------------------------------------------------------------------------------- healthy controls


def test_an_absolute_runpath_resolves_inside_the_image(base_root: Path, built: Built, tmp_path: Path) -> None:
    root = _root(base_root, tmp_path / "root", built.runpath)
    _put_lib(root, str(built.hostlib), built)
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    dep = _dependency(manifest)
    assert (dep["how"], dep["target"]) == ("runpath", f"{built.hostlib}/libfoo.so.1")
    # The image's libc, and no path of the folder it was unpacked to anywhere in the tree.
    assert manifest["native"]["glibc_provided"] is not None
    assert "envcheck-image-" not in json.dumps(manifest["native"])


def test_a_folder_only_the_images_ld_so_cache_knows_resolves(
    base_root: Path, built: Built, tmp_path: Path
) -> None:
    root = _root(base_root, tmp_path / "root", built.plain)
    _put_lib(root, "/opt/foo/lib", built)
    _ldconfig(root, "/opt/foo/lib")
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    dep = _dependency(manifest)
    assert (dep["how"], dep["target"]) == ("ld-so-cache", "/opt/foo/lib/libfoo.so.1")
    _code, out, err = run("doctor", str(tmp_path / "m.json"), "--format", "json")
    assert not [f for f in json.loads(out)["findings"] if f["rule"] == "ENV-NATIVE-MISSING"], err


def test_the_configs_ld_library_path_resolves(base_root: Path, built: Built, tmp_path: Path) -> None:
    root = _root(base_root, tmp_path / "root", built.plain)
    _put_lib(root, "/opt/foo/lib", built)
    image = _image(root, tmp_path / "image", env=(PATH, "LD_LIBRARY_PATH=/opt/foo/lib"))
    dep = _dependency(_snapshot(image, tmp_path / "m.json"))
    assert (dep["how"], dep["target"]) == ("ld-library-path", "/opt/foo/lib/libfoo.so.1")


# ------------------------------------------------------------------------------------------ broken


def test_a_library_the_image_lacks_is_missing_though_this_machine_has_it(
    base_root: Path, built: Built, tmp_path: Path
) -> None:
    """The extension's RUNPATH names a folder of this machine that holds libfoo.so.1: this machine's
    loader would find it, the image's cannot. Against the healthy image's manifest the gate fails, the
    import's missing library first."""
    healthy = _root(base_root, tmp_path / "healthy", built.runpath)
    _put_lib(healthy, str(built.hostlib), built)
    reference = tmp_path / "ref.json"
    _snapshot(_image(healthy, tmp_path / "healthy-image"), reference)

    broken = _root(base_root, tmp_path / "broken", built.runpath)
    assert (built.hostlib / "libfoo.so.1").is_file()  # this machine has it
    image = _image(broken, tmp_path / "broken-image")
    code, out, err = run("gate", str(reference), "--image", str(image), "--format", "json")
    assert code == 1, err
    roots = [f for f in json.loads(out)["findings"] if f["caused_by"] is None and f["severity"] == "error"]
    assert (roots[0]["rule"], roots[0]["subject"]) == ("ENV-NATIVE-MISSING", EXT), roots
    assert "libfoo.so.1 cannot be found" in roots[0]["message"]


def test_a_folder_no_cache_and_no_variable_names_is_missing(
    base_root: Path, built: Built, tmp_path: Path
) -> None:
    """The library is in the image, in a folder only an ``ldconfig`` the Dockerfile forgot would make
    known: the loader never looks there."""
    root = _root(base_root, tmp_path / "root", built.plain)
    _put_lib(root, "/opt/foo/lib", built)
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    assert _dependency(manifest)["how"] == "missing"
    assert [c["missing"] for c in manifest["native"]["missing"]] == ["libfoo.so.1"]


def test_opencv_in_a_slim_image_misses_libgl_though_this_machine_has_it(
    base_root: Path, tmp_path: Path
) -> None:
    """The real opencv-python wheel: its bundled Qt needs the OS's libGL.so.1 and GLib, which a slim
    image lacks; ``import cv2`` fails there with "libGL.so.1: cannot open shared object file"."""
    root = tmp_path / "root"
    shutil.copytree(base_root, root, symlinks=True, copy_function=os.link)
    stdcxx = Path("/lib/x86_64-linux-gnu/libstdc++.so.6")
    if not stdcxx.exists():
        pytest.skip("this machine has no libstdc++.so.6 to put in the image")
    _copy(stdcxx.resolve(), root, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6")
    wheels = [wheel("opencv-python==4.10.0.84"), wheel("numpy==2.2.6")]
    target = ["--target", str(root / SITE)]
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", *target]
    subprocess.run([*pip, *map(str, wheels)], check=True, capture_output=True)
    image = _image(root, tmp_path / "image")
    reference = tmp_path / "m.json"
    manifest = _snapshot(image, reference)
    missing = {c["missing"] for c in manifest["native"]["missing"] if c["from_extension"]}
    assert {"libGL.so.1", "libglib-2.0.so.0", "libgthread-2.0.so.0"} <= missing

    code, out, err = run("gate", str(reference), "--image", str(image), "--format", "json")
    assert code == 1, err
    roots = [f for f in json.loads(out)["findings"] if f["caused_by"] is None and f["severity"] == "error"]
    assert (roots[0]["rule"], roots[0]["subject"]) == ("ENV-NATIVE-MISSING", "cv2.abi3.so"), roots
    assert "libGL.so.1" in roots[0]["message"]
    # The image is Debian's: the packages that ship them, as a line of its Dockerfile.
    assert (
        "`RUN apt-get update && apt-get install -y --no-install-recommends libgl1 libglib2.0-0`"
        in roots[0]["remedy"]
    )
    if "libGL.so.1" in read_ld_cache():  # this machine's loader would have found it
        assert "libGL.so.1" not in json.dumps([n["key"] for n in manifest["native"]["nodes"]])


# ------------------------------------------------------------------------------------------ hostile


def test_a_cache_entry_pointing_out_of_the_image_stays_inside(
    base_root: Path, built: Built, tmp_path: Path
) -> None:
    """An ld.so.cache whose entry names this machine's copy through ``..``: ld.so in the container reads
    it inside the container's root, and so does envcheck; nothing outside is read."""
    root = _root(base_root, tmp_path / "root", built.plain)
    climb = "/" + "../" * 40 + str(built.foo).lstrip("/")
    cache = root / "etc" / "ld.so.cache"
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(_cache_file([("libfoo.so.1", climb)]))
    if shutil.which("ldconfig"):  # glibc's own reader agrees that this is a cache with that entry
        listed = subprocess.run(
            ["ldconfig", "-p", "-C", str(cache)], capture_output=True, text=True, check=False
        )
        assert climb in listed.stdout, listed.stdout + listed.stderr
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    assert _dependency(manifest)["how"] == "missing"


def test_an_origin_runpath_climbing_out_of_the_image_stays_inside(
    base_root: Path, built: Built, tmp_path: Path
) -> None:
    root = _root(base_root, tmp_path / "root", built.escape)
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    assert _dependency(manifest)["how"] == "missing"
    # Clamped at the image's root, the same RUNPATH finds the copy the image has there.
    _put_lib(root, str(built.hostlib), built)
    again = _snapshot(_image(root, tmp_path / "image2"), tmp_path / "m2.json")
    dep = _dependency(again)
    assert (dep["how"], dep["target"]) == ("runpath", f"{built.hostlib}/libfoo.so.1")


def test_an_oversized_cache_is_read_as_none(base_root: Path, built: Built, tmp_path: Path) -> None:
    root = _root(base_root, tmp_path / "root", built.plain)
    _put_lib(root, "/opt/foo/lib", built)
    _ldconfig(root, "/opt/foo/lib")
    cache = root / "etc" / "ld.so.cache"
    real = cache.read_bytes()
    cache.unlink()
    cache.write_bytes(real + b"\0" * (MAX_CACHE_BYTES + 1 - len(real)))
    assert read_ld_cache(str(cache)) == {}
    manifest = _snapshot(_image(root, tmp_path / "image"), tmp_path / "m.json")
    assert _dependency(manifest)["how"] == "missing"
