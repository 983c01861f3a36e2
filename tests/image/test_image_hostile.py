"""Hostile images: each is refused with one ``ImageError`` line (naming the layer and member, the blob or
the limit), within its deadline and with bounded memory, and nothing is ever created outside ``dest``."""

from __future__ import annotations

import hashlib
import io
import json
import os
import stat
import tarfile
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import ocibuild as ob
import pytest

from envcheck.core.deadline import Deadline, DeadlineExpired
from envcheck.core.errors import ImageError
from envcheck.image import Image, Limits, flatten, open_image, resolve_in_root
from envcheck.image.archive import MAX_DOCUMENT_BYTES, MAX_TAR_HEADER_BYTES

BIG_CONFIG = 100 * 1024**2


@pytest.fixture
def outside(tmp_path: Path) -> Iterator[Path]:
    """A folder beside every ``dest`` that nothing may touch: checked empty after the test."""
    folder = tmp_path / "outside"
    folder.mkdir()
    yield folder
    assert list(folder.iterdir()) == []


def _snapshot(tmp_path: Path, dest: Path) -> set[str]:
    """Every path under ``tmp_path`` outside ``dest`` (links not followed)."""
    return {
        str(Path(top, name))
        for top, dirs, files in os.walk(tmp_path)
        if not Path(top).is_relative_to(dest)
        for name in dirs + files
        if not Path(top, name).is_relative_to(dest)
    }


def _image(tmp_path: Path, *layers: list[ob.Entry] | ob.LayerBlob) -> Image:
    blobs = [blob if isinstance(blob, ob.LayerBlob) else ob.layer(blob) for blob in layers]
    layout = ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp_path / "layout")
    return open_image(layout, deadline=Deadline.after(30))


def _refused(tmp_path: Path, image: Image, match: str, limits: Limits | None = None) -> ImageError:
    """Flatten ``image`` into a fresh dest, expecting one ``ImageError`` line matching ``match``, quickly,
    with nothing new outside dest."""
    dest = tmp_path / "dest"
    dest.mkdir()
    before = _snapshot(tmp_path, dest)
    started = time.monotonic()
    with pytest.raises(ImageError, match=match) as info:
        flatten(image, dest, deadline=Deadline.after(20), limits=limits or Limits())
    assert time.monotonic() - started < 10
    assert "\n" not in str(info.value)
    assert _snapshot(tmp_path, dest) == before
    return info.value


def _open_refused(path: Path, match: str) -> ImageError:
    started = time.monotonic()
    with pytest.raises(ImageError, match=match) as info:
        open_image(path, deadline=Deadline.after(20))
    assert time.monotonic() - started < 5
    assert "\n" not in str(info.value)
    return info.value


# ----------------------------------------------------------------------------- member names


@pytest.mark.parametrize(
    "name",
    ["../escape", "a/../../escape", "/../escape", "./a/../../../outside/x", "a/b/../../.."],
)
def test_climbing_names_are_refused(tmp_path: Path, outside: Path, name: str) -> None:
    image = _image(tmp_path, [ob.file("ok", "fine"), ob.file(name, "pwned")])
    error = _refused(tmp_path, image, r"layer 1 of 1 \(sha256:[0-9a-f]{64}\): member .*climbs out")
    assert "'" + name.replace("\x00", "") in str(error)  # the member, as written


def test_absolute_names_are_kept_inside(tmp_path: Path) -> None:
    image = _image(tmp_path, [ob.file("/etc/hostile", "x"), ob.file("//./usr//bin/./y", "y")])
    dest = tmp_path / "dest"
    dest.mkdir()
    flatten(image, dest, deadline=Deadline.after(20))
    assert (dest / "etc/hostile").read_text() == "x"
    assert (dest / "usr/bin/y").read_text() == "y"


def test_a_nul_byte_in_a_name_is_refused(tmp_path: Path) -> None:
    image = _image(tmp_path, [ob.file("etc/pass\x00wd", "x")])
    error = _refused(tmp_path, image, "a NUL byte in a path")
    assert "\\x00" in str(error)  # shown escaped, never raw


@pytest.mark.parametrize("name", [".wh..", ".wh.", "etc/.wh.", "etc/.wh.."])
def test_a_whiteout_naming_outside_is_refused(tmp_path: Path, outside: Path, name: str) -> None:
    image = _image(tmp_path, [ob.file("etc/keep", "k")], [ob.file(name)])
    _refused(tmp_path, image, "a whiteout naming no file inside the root")


def test_a_whiteout_with_dotdot_is_refused(tmp_path: Path, outside: Path) -> None:
    image = _image(tmp_path, [ob.file("etc/keep", "k")], [ob.file("../outside/.wh.x")])
    _refused(tmp_path, image, "climbs out")


def test_a_whiteout_through_a_link_deletes_nothing_outside(tmp_path: Path, outside: Path) -> None:
    (outside / "precious").write_text("keep me")
    image = _image(
        tmp_path, [ob.symlink("etc", str(outside))], [ob.whiteout("etc/precious"), ob.opaque("etc")]
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    flatten(image, dest, deadline=Deadline.after(20))
    assert (outside / "precious").read_text() == "keep me"
    assert (dest / "etc").is_dir() and not (dest / "etc").is_symlink()
    (outside / "precious").unlink()


# ----------------------------------------------------------------------------- links


def test_a_member_written_through_a_link_lands_inside(tmp_path: Path, outside: Path) -> None:
    image = _image(
        tmp_path,
        [
            ob.symlink("evil", str(outside)),
            ob.symlink("evil2", "../../../../../../../../" + str(outside)),
            ob.file("evil/planted", "same layer"),
        ],
        [ob.file("evil2/planted", "next layer"), ob.folder("evil3"), ob.symlink("evil3/x", "/")],
        [ob.file("evil3/x/etc/passwd", "through a link to the root")],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    tree = flatten(image, dest, deadline=Deadline.after(20))
    assert (dest / "evil/planted").read_text() == "same layer"
    assert (dest / "evil2/planted").read_text() == "next layer"
    assert (dest / "evil3/x/etc/passwd").is_file() and not (dest / "evil3/x").is_symlink()
    assert tree.link_targets == {}  # every link was replaced by a folder


def test_links_never_resolve_outside(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [
            ob.symlink("a/abs", "/etc/passwd"),
            ob.symlink("a/rel", "../../../../../../etc/passwd"),
            ob.symlink("a/b/up", "../../.."),
            ob.symlink("root", ".."),
        ],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    flatten(image, dest, deadline=Deadline.after(20))
    for link in ("a/abs", "a/rel", "a/b/up", "root", "a/b/up/a/b/up/root"):
        assert Path(os.path.realpath(dest / link)).is_relative_to(dest.resolve()), link
    assert not (dest / "a/abs").exists()  # /etc/passwd of the image, not of the host
    assert resolve_in_root(dest, "/a/b/up/../../../a/abs") is None


def test_a_link_loop_resolves_to_none_quickly(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [ob.symlink("loop/a", "b"), ob.symlink("loop/b", "/loop/a"), ob.symlink("self", "self")],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    flatten(image, dest, deadline=Deadline.after(20))
    started = time.monotonic()
    assert resolve_in_root(dest, "/loop/a") is None
    assert resolve_in_root(dest, "/loop/b/x") is None
    assert resolve_in_root(dest, "self") is None
    assert resolve_in_root(dest, "/loop/a", max_links=10_000) is None
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("target", "problem"),
    [
        ("../outside/secret", "climbs out"),
        ("/etc/passwd", "which no earlier member wrote"),
        ("d/passwd", "which no earlier member wrote"),  # through a link to the host's /etc
        ("folder", "which is a folder"),
        ("", "a hard link to the root folder"),
        ("hl", "a hard link to itself"),
    ],
)
def test_hard_links_must_name_an_earlier_member_inside(
    tmp_path: Path, outside: Path, target: str, problem: str
) -> None:
    (outside / "secret").write_text("s")
    image = _image(tmp_path, [ob.symlink("d", "/etc"), ob.folder("folder"), ob.hardlink("hl", target)])
    _refused(tmp_path, image, problem)
    (outside / "secret").unlink()


# ----------------------------------------------------------------------------- specials


def test_devices_and_fifos_are_never_created(tmp_path: Path) -> None:
    image = _image(
        tmp_path,
        [ob.fifo("run/fifo"), ob.device("dev/zero", 1, 5), ob.device("dev/sda", 8, 0, char=False)],
    )
    dest = tmp_path / "dest"
    dest.mkdir()
    tree = flatten(image, dest, deadline=Deadline.after(20))
    assert tree.skipped_special == 3
    for top, dirs, files in os.walk(dest):
        for name in dirs + files:
            mode = Path(top, name).lstat().st_mode
            assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode)
    assert not (dest / "run/fifo").exists() and not (dest / "dev/zero").exists()


# ----------------------------------------------------------------------------- bombs and limits


@pytest.mark.slow
def test_a_gzip_bomb_is_refused_by_its_ratio_with_memory_bounded(tmp_path: Path) -> None:
    bomb = ob.zero_bomb(64 * 1024**2)
    assert len(bomb.data) < 1024**2
    image = _image(tmp_path, bomb)
    tracemalloc.start()
    try:
        error = _refused(tmp_path, image, r"member 'zeros': expands \d+x \(more than 200x, ratio\)")
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    # tarfile inflates 10 KiB of a stream at a time: at deflate's 1032:1 at most ~10 MiB, held in about
    # three copies while it is split; nothing grows with the bomb.
    assert peak < 48 * 1024**2
    assert "decompression bomb" in str(error)
    assert (tmp_path / "dest/zeros").stat().st_size <= 4 * 1024**2  # stopped early, not after 64 MiB


@pytest.mark.slow
def test_a_bomb_past_the_total_is_refused_before_it_is_read(tmp_path: Path) -> None:
    image = _image(tmp_path, ob.zero_bomb(64 * 1024**2))
    limits = Limits(total_bytes=16 * 1024**2, ratio=10**9)
    _refused(tmp_path, image, r"member 'zeros': past 16777216 bytes in all \(total_bytes\)", limits)
    assert (tmp_path / "dest/zeros").stat().st_size == 0


def test_total_bytes_counts_every_layer(tmp_path: Path) -> None:
    one = [ob.file(f"f{i}", b"x" * 1000) for i in range(5)]
    image = _image(tmp_path, one, one)
    _refused(tmp_path, image, r"layer 2 of 2 .*past 8000 bytes in all", Limits(total_bytes=8000))


@pytest.mark.parametrize(
    ("limits", "match"),
    [
        (Limits(file_bytes=100), r"member 'big': 101 bytes, more than 100 a file \(file_bytes\)"),
        (Limits(members=3), r"more than 3 members \(members\)"),
        (Limits(depth=3), r"4 folders deep, more than 3 \(depth\)"),
        (Limits(path_bytes=10), r"a path longer than 10 bytes \(path_bytes\)"),
    ],
)
def test_each_limit_is_named(tmp_path: Path, limits: Limits, match: str) -> None:
    image = _image(
        tmp_path,
        [
            ob.file("a"),
            ob.file("big", b"b" * 101),
            ob.file("c/d/e/f"),
            ob.file("g"),
            ob.file("long-name-here"),
        ],
    )
    _refused(tmp_path, image, match, limits)


def test_the_deadline_stops_a_flatten(tmp_path: Path) -> None:
    image = _image(tmp_path, [ob.file(f"f{i}") for i in range(10)])
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(DeadlineExpired, match="flattening layer 1 of 1"):
        flatten(image, dest, deadline=Deadline.after(0))


def test_an_extended_header_bomb_is_refused(tmp_path: Path) -> None:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
        info = tarfile.TarInfo("x")
        info.pax_headers = {"comment": "y" * (MAX_TAR_HEADER_BYTES + 10)}
        tf.addfile(info)
    tar = out.getvalue()
    image = _image(tmp_path, ob.LayerBlob(tar, ob.OCI_LAYER, ob.sha256(tar)))
    _refused(tmp_path, image, "a tar extended header of .* bytes")


# ----------------------------------------------------------------------------- documents and blobs


def _layout_with_config(config_desc_of: object) -> ob.OciLayout:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.OciLayout()
    desc = layout.manifest(blobs, {}, config_descriptor=config_desc_of(layout))  # type: ignore[operator]
    return layout.finish([desc])


@pytest.mark.parametrize("form", ["folder", "archive"])
def test_a_100_mb_config_is_refused_by_its_declared_size(tmp_path: Path, form: str) -> None:
    layout = _layout_with_config(lambda lay: lay.blob(ob.Zeros(BIG_CONFIG), ob.OCI_CONFIG))
    path = layout.write_folder(tmp_path / "l") if form == "folder" else layout.write_tar(tmp_path / "l.tar")
    assert path.stat().st_blocks * 512 < 10 * 1024**2 or form == "folder"  # sparse: costs no disk
    _open_refused(path, rf"{BIG_CONFIG} bytes, more than {MAX_DOCUMENT_BYTES}: refused unread")


@pytest.mark.parametrize("form", ["folder", "archive"])
def test_a_100_mb_config_with_a_lying_size_is_refused_unread(tmp_path: Path, form: str) -> None:
    layout = _layout_with_config(lambda lay: lay.blob(ob.Zeros(BIG_CONFIG), ob.OCI_CONFIG, size=1234))
    path = layout.write_folder(tmp_path / "l") if form == "folder" else layout.write_tar(tmp_path / "l.tar")
    _open_refused(path, rf"image config sha256:\w+: is {BIG_CONFIG} bytes, its descriptor says 1234")


def test_a_100_mb_docker_save_config_is_refused_unread(tmp_path: Path) -> None:
    plain = [ob.layer([ob.file("x")], compress=False)]
    files = ob.docker_save(plain, ob.image_config(plain))
    name = next(n for n in files.files if n.endswith(".json") and n != "manifest.json")
    files.files[name] = ob.Zeros(BIG_CONFIG)
    _open_refused(files.write_tar(tmp_path / "s.tar"), rf"{BIG_CONFIG} bytes, more than {MAX_DOCUMENT_BYTES}")


def test_a_manifest_that_does_not_match_its_digest(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.oci_image(blobs, ob.image_config(blobs))
    index = json.loads(layout.files["index.json"])  # type: ignore[arg-type]
    digest = index["manifests"][0]["digest"]
    name = f"blobs/sha256/{digest.removeprefix('sha256:')}"
    manifest = layout.files[name]
    assert isinstance(manifest, bytes)
    layout.files[name] = manifest.replace(b'"schemaVersion":2', b'"schemaVersion":3')  # same size
    error = _open_refused(layout.write_folder(tmp_path / "l"), "does not match its digest")
    assert f"image manifest {digest}" in str(error)


def test_a_layer_that_does_not_match_its_digest_is_refused_at_its_end(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x", "original")], compress=False)]
    layout = ob.oci_image(blobs, ob.image_config(blobs))
    name = f"blobs/sha256/{blobs[0].digest.removeprefix('sha256:')}"
    layout.files[name] = blobs[0].data.replace(b"original", b"tampered")
    image = open_image(layout.write_folder(tmp_path / "l"), deadline=Deadline.after(20))
    _refused(tmp_path, image, rf"layer 1 \({blobs[0].digest}\): its content does not match its digest")


def test_a_docker_save_layer_that_does_not_match_its_diff_id(tmp_path: Path) -> None:
    plain = [ob.layer([ob.file("x", "original")], compress=False)]
    files = ob.docker_save(plain, ob.image_config(plain))
    name = next(n for n in files.files if n.endswith("layer.tar"))
    files.files[name] = plain[0].data.replace(b"original", b"tampered")
    image = open_image(files.write_tar(tmp_path / "s.tar"), deadline=Deadline.after(20))
    _refused(tmp_path, image, "does not match its digest")


def test_a_docker_save_config_that_does_not_match_its_name(tmp_path: Path) -> None:
    plain = [ob.layer([ob.file("x")], compress=False)]
    files = ob.docker_save(plain, ob.image_config(plain))
    name = next(n for n in files.files if n.endswith(".json") and n != "manifest.json")
    files.files[name] = ob.json_bytes(ob.image_config(plain, cmd=["other"]))
    _open_refused(files.write_tar(tmp_path / "s.tar"), "does not match the digest its name carries")


@pytest.mark.parametrize(
    "digest",
    [
        "sha256:../../../../etc/passwd",
        "md5:d41d8cd98f00b204e9800998ecf8427e",
        "sha256:" + "A" * 64,
        "sha256:" + "0" * 63,
        "sha512:" + hashlib.sha512(b"").hexdigest(),
    ],
)
def test_a_blob_name_that_is_not_a_digest_is_refused(tmp_path: Path, digest: str) -> None:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.OciLayout()
    desc = layout.manifest(blobs, ob.image_config(blobs))
    manifest_name = f"blobs/sha256/{desc['digest'].removeprefix('sha256:')}"
    document = json.loads(layout.files[manifest_name])  # type: ignore[arg-type]
    document["layers"][0]["digest"] = digest
    layout.finish([layout.json_blob(document, ob.OCI_MANIFEST)])
    _open_refused(layout.write_folder(tmp_path / "l"), r"is not sha256:<64 hex digits>: refused")


def test_an_index_entry_that_is_not_a_digest_is_refused(tmp_path: Path) -> None:
    layout = ob.OciLayout().finish(
        [{"mediaType": ob.OCI_MANIFEST, "digest": "sha256:../index.json", "size": 2}]
    )
    _open_refused(layout.write_tar(tmp_path / "l.tar"), "is not sha256:<64 hex digits>")


def test_a_blob_linked_out_of_the_layout_is_refused(tmp_path: Path, outside: Path) -> None:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.oci_image(blobs, ob.image_config(blobs))
    path = layout.write_folder(tmp_path / "l")
    config = json.loads(layout.files["index.json"])  # type: ignore[arg-type]
    blob = path / "blobs/sha256" / config["manifests"][0]["digest"].removeprefix("sha256:")
    (outside / "m").write_bytes(blob.read_bytes())
    blob.unlink()
    blob.symlink_to(outside / "m")
    _open_refused(path, "outside the scanned tree")
    (outside / "m").unlink()


def test_a_link_loop_inside_a_docker_save_is_refused(tmp_path: Path) -> None:
    plain = [ob.layer([ob.file("x")], compress=False)]
    files = ob.docker_save(plain, ob.image_config(plain))
    name = next(n for n in files.files if n.endswith("layer.tar"))
    files.files[name] = ob.Link("../loop/layer.tar")
    files.files["loop/layer.tar"] = ob.Link(f"../{name}")
    _open_refused(files.write_tar(tmp_path / "s.tar"), "links deep")


def test_a_fifo_as_the_image_is_refused(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    _open_refused(tmp_path / "fifo", "neither a folder nor a regular file")


def test_nested_indexes_past_the_depth_are_refused(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.OciLayout()
    desc = layout.manifest(blobs, ob.image_config(blobs))
    for _ in range(6):
        desc = layout.index([desc])
    _open_refused(layout.finish([desc]).write_folder(tmp_path / "l"), "nested more than 4 deep")


def test_a_deeply_nested_json_document_is_refused(tmp_path: Path) -> None:
    layout = ob.OciLayout()
    layout.files["index.json"] = b"[" * 200_000 + b"]" * 200_000
    _open_refused(layout.write_folder(tmp_path / "l"), "index.json: not JSON")
