"""Reading real images in the three formats, choosing among platforms, and flattening their layers with
OCI / overlay semantics (whiteouts, opaque folders, links rewritten to stay inside)."""

from __future__ import annotations

import os
import stat
import tarfile
from pathlib import Path

import ocibuild as ob
import pytest

from envcheck.core.deadline import Deadline
from envcheck.core.errors import ImageError, UsageError
from envcheck.image import Flattened, Image, contained_target, flatten, open_image, resolve_in_root
from envcheck.image.archive import DOCKER_LAYER_TAR, zstd_available

NO_DEADLINE = Deadline.never()


def _open(path: Path, platform: str | None = None) -> Image:
    return open_image(path, deadline=Deadline.after(30), platform=platform)


def _flatten(image: Image, dest: Path) -> Flattened:
    dest.mkdir()
    return flatten(image, dest, deadline=Deadline.after(30))


BASE = [
    ob.folder("usr"),
    ob.folder("usr/bin"),
    ob.file("usr/bin/python3", b"#!python\n", 0o755),
    ob.folder("etc"),
    ob.file("etc/os-release", "ID=debian\n"),
]
APP = [ob.folder("app"), ob.file("app/main.py", "print('hi')\n"), ob.symlink("usr/bin/python", "python3")]
CONFIG_KW = {
    "env": ("PATH=/usr/bin:/bin", "LD_LIBRARY_PATH=/opt/a=b", "EMPTY=", "BARE"),
    "entrypoint": ("/usr/bin/python3",),
    "cmd": ("/app/main.py",),
    "working_dir": "/app",
    "user": "1000:1000",
}


def _three_formats(tmp_path: Path) -> dict[str, Path]:
    gz = [ob.layer(BASE), ob.layer(APP)]
    plain = [ob.layer(BASE, compress=False), ob.layer(APP, compress=False)]
    layout = ob.oci_image(gz, ob.image_config(gz, **CONFIG_KW))  # type: ignore[arg-type]
    return {
        "oci-layout": layout.write_folder(tmp_path / "layout"),
        "oci-archive": layout.write_tar(tmp_path / "image.oci.tar"),
        "docker-save": ob.docker_save(plain, ob.image_config(plain, **CONFIG_KW)).write_tar(  # type: ignore[arg-type]
            tmp_path / "saved.tar"
        ),
    }


def test_the_three_formats_give_the_same_image(tmp_path: Path) -> None:
    images = {fmt: _open(path) for fmt, path in _three_formats(tmp_path).items()}
    for fmt, image in images.items():
        assert image.source_format == fmt
        assert image.env == {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": "/opt/a=b", "EMPTY": "", "BARE": ""}
        assert image.entrypoint == ["/usr/bin/python3"]
        assert image.cmd == ["/app/main.py"]
        assert (image.working_dir, image.user) == ("/app", "1000:1000")
        assert (image.os, image.architecture, image.variant) == ("linux", "amd64", None)
        assert len(image.layers) == 2
        assert image.config_digest.startswith("sha256:")
    layout, archive, saved = images["oci-layout"], images["oci-archive"], images["docker-save"]
    assert layout.digest == archive.digest and layout.digest_kind == "manifest"
    assert layout.layers == archive.layers
    assert [entry.compression for entry in layout.layers] == ["gzip", "gzip"]
    # docker save without an index: the image is named by its config, the layers by their diff_ids
    assert saved.digest_kind == "config" and saved.digest == saved.config_digest
    assert [entry.media_type for entry in saved.layers] == [DOCKER_LAYER_TAR] * 2
    assert [entry.digest for entry in saved.layers] == [ob.layer(BASE).diff_id, ob.layer(APP).diff_id]
    trees = {fmt: _flatten(image, tmp_path / f"root-{fmt}") for fmt, image in images.items()}
    for tree in trees.values():
        assert (tree.root / "usr/bin/python3").read_bytes() == b"#!python\n"
        assert (tree.root / "app/main.py").read_text() == "print('hi')\n"
        assert tree.link_targets == {"usr/bin/python": "python3"}
        assert tree.layers == 2


def test_docker_save_with_an_oci_index_is_read_through_it(tmp_path: Path) -> None:
    plain = [ob.layer(BASE, compress=False)]
    config = ob.image_config(plain, cmd=["bash"])
    path = ob.docker_save(plain, config, oci_index=True).write_tar(tmp_path / "new-docker.tar")
    image = _open(path)
    assert (image.source_format, image.digest_kind) == ("docker-save", "manifest")
    assert image.digest != image.config_digest
    assert image.config_digest == ob.sha256(ob.json_bytes(config))
    assert image.cmd == ["bash"]
    assert (_flatten(image, tmp_path / "root").root / "etc/os-release").read_text() == "ID=debian\n"


def test_docker_save_layer_shared_through_a_link(tmp_path: Path) -> None:
    plain = [ob.layer(BASE, compress=False), ob.layer(APP, compress=False), ob.layer(BASE, compress=False)]
    saved = ob.docker_save(plain, ob.image_config(plain), shared_layer_link=True)
    image = _open(saved.write_tar(tmp_path / "saved.tar"))
    assert image.layers[2].size == image.layers[0].size
    assert (_flatten(image, tmp_path / "root").root / "usr/bin/python3").is_file()


def _multi_platform(tmp_path: Path, *, nested: bool = True) -> Path:
    layout = ob.OciLayout()
    manifests = []
    for platform in ("linux/amd64", "linux/arm64/v8", "linux/arm/v7"):
        arch = platform.split("/")
        blobs = [ob.layer([ob.file("arch", platform)])]
        config = ob.image_config(
            blobs, os_name=arch[0], architecture=arch[1], variant=arch[2] if len(arch) > 2 else None
        )
        manifests.append(layout.manifest(blobs, config, platform=platform))
    manifests.append(ob.attestation(layout, manifests[0]))
    top = [layout.index(manifests)] if nested else manifests
    return layout.finish(top, ref="multi:1").write_folder(tmp_path / "multi")


@pytest.mark.parametrize("nested", [True, False])
def test_the_platform_chooses_the_manifest(tmp_path: Path, nested: bool) -> None:
    path = _multi_platform(tmp_path, nested=nested)
    assert _open(path).architecture == "amd64"  # linux/amd64 by default
    arm64 = _open(path, "linux/arm64")
    assert (arm64.architecture, arm64.variant) == ("arm64", "v8")
    assert _open(path, "linux/arm64/v8").digest == arm64.digest
    assert _open(path, "linux/aarch64").digest == arm64.digest
    assert _open(path, "linux/arm/v7").variant == "v7"
    root = _flatten(arm64, tmp_path / "root").root
    assert (root / "arch").read_text() == "linux/arm64/v8"
    with pytest.raises(ImageError, match=r"no image for linux/s390x among 3") as info:
        _open(path, "linux/s390x")
    assert "\n" not in str(info.value)
    assert "Choose one with --platform" in (info.value.tip or "")


def test_a_malformed_platform_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="not a platform"):
        _open(_multi_platform(tmp_path), "linux")


def test_two_images_for_one_platform_are_refused_by_name(tmp_path: Path) -> None:
    layout = ob.OciLayout()
    descs = []
    for tag in ("one", "two"):
        blobs = [ob.layer([ob.file("tag", tag)])]
        desc = layout.manifest(blobs, ob.image_config(blobs), platform="linux/amd64")
        desc["annotations"] = {ob.REF_NAME: f"repo:{tag}"}
        descs.append(desc)
    path = layout.finish(descs).write_folder(tmp_path / "two")
    with pytest.raises(ImageError, match=r"2 images fit linux/amd64, cannot choose: repo:one .*repo:two"):
        _open(path)


def test_one_image_of_another_platform(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x")])]
    path = ob.oci_image(blobs, ob.image_config(blobs, architecture="arm64")).write_folder(tmp_path / "l")
    assert _open(path).architecture == "arm64"  # the only image, no platform asked for
    with pytest.raises(ImageError, match="the image is linux/arm64, not linux/amd64"):
        _open(path, "linux/amd64")


def test_two_images_in_one_docker_save_choose_by_platform(tmp_path: Path) -> None:
    files = ob.Files()
    entries = []
    for arch in ("amd64", "arm64"):
        plain = [ob.layer([ob.file("arch", arch)], compress=False)]
        one = ob.docker_save(plain, ob.image_config(plain, architecture=arch), repo_tags=[f"img:{arch}"])
        manifest = one.files.pop("manifest.json")
        assert isinstance(manifest, bytes)
        entries.extend(__import__("json").loads(manifest))
        files.files.update(one.files)
    files.files["manifest.json"] = ob.json_bytes(entries)
    path = files.write_tar(tmp_path / "two.tar")
    assert _open(path).architecture == "amd64"
    assert _open(path, "linux/arm64").architecture == "arm64"


@pytest.mark.skipif(zstd_available(), reason="zstandard is installed: zstd layers are read")
def test_a_zstd_layer_without_zstandard_is_refused_clearly(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x")], compress=False, media_type=ob.OCI_LAYER_ZSTD)]
    path = ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp_path / "l")
    with pytest.raises(ImageError, match=r"zstd-compressed layer .* zstandard module is missing") as info:
        _open(path)
    assert info.value.tip == "pip install zstandard"


def test_a_compressed_outer_archive_is_refused_with_a_tip(tmp_path: Path) -> None:
    blobs = [ob.layer([ob.file("x")])]
    tar = ob.oci_image(blobs, ob.image_config(blobs)).write_tar(tmp_path / "i.tar")
    gz = tmp_path / "i.tar.gz"
    gz.write_bytes(__import__("gzip").compress(tar.read_bytes()))
    with pytest.raises(ImageError, match="a compressed archive") as info:
        _open(gz)
    assert "gunzip" in (info.value.tip or "")


def test_not_an_image(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ImageError, match=r"without index\.json"):
        _open(tmp_path / "empty")
    (tmp_path / "junk.tar").write_bytes(b"not a tar at all" * 100)
    with pytest.raises(ImageError, match=r"not a readable tar|neither an OCI archive"):
        _open(tmp_path / "junk.tar")
    with pytest.raises(ImageError, match="cannot read"):
        _open(tmp_path / "missing")


# ----------------------------------------------------------------------------- flattening


def _image_of(tmp_path: Path, *layers: list[ob.Entry], name: str = "layout") -> Image:
    blobs = [ob.layer(entries) for entries in layers]
    return _open(ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp_path / name))


def test_whiteouts_and_opaque_folders(tmp_path: Path) -> None:
    lower = [
        ob.file("etc/a", "a"),
        ob.file("etc/b", "b"),
        ob.file("opt/x/old", "old"),
        ob.file("opt/x/sub/deep", "deep"),
        ob.file("var/gone/f", "f"),
    ]
    upper = [
        ob.whiteout("etc/a"),
        ob.file("opt/x/new", "new"),  # written before the opaque marker: the same layer's, kept
        ob.opaque("opt/x"),
        ob.file("opt/x/after", "after"),
        ob.whiteout("var/gone"),
        ob.whiteout("etc/never-there"),
    ]
    tree = _flatten(_image_of(tmp_path, lower, upper), tmp_path / "root")
    root = tree.root
    assert not (root / "etc/a").exists() and (root / "etc/b").read_text() == "b"
    assert sorted(p.name for p in (root / "opt/x").iterdir()) == ["after", "new"]
    assert not (root / "var/gone").exists() and (root / "var").is_dir()
    assert not list(root.rglob(".wh.*"))
    assert tree.whiteouts == 4


def test_a_file_deleted_by_a_later_layer_and_written_again(tmp_path: Path) -> None:
    image = _image_of(
        tmp_path,
        [ob.file("srv/data", "one"), ob.file("srv/keep", "k")],
        [ob.whiteout("srv/data")],
        [ob.file("srv/data", "three")],
        [ob.folder("srv/keep"), ob.file("srv/keep/inside", "i")],  # a folder replaces a file
        [ob.file("srv/keep", "file again")],  # and a file a folder
    )
    root = _flatten(image, tmp_path / "root").root
    assert (root / "srv/data").read_text() == "three"
    assert (root / "srv/keep").read_text() == "file again"


def test_symlinks_are_rewritten_to_stay_inside(tmp_path: Path) -> None:
    image = _image_of(
        tmp_path,
        [
            ob.file("usr/lib/libx.so.1", "ELF"),
            ob.symlink("usr/lib/libx.so", "libx.so.1"),
            ob.symlink("usr/bin/abs", "/usr/lib/libx.so"),
            ob.symlink("a/b/climb", "../../../../../usr/lib/libx.so.1"),
            ob.symlink("rootlink", "/"),
            ob.symlink("usr/bin/dot", "."),
        ],
    )
    tree = _flatten(image, tmp_path / "root")
    root = tree.root
    assert (root / "usr/bin/abs").readlink().as_posix() == "../lib/libx.so"
    assert (root / "a/b/climb").readlink().as_posix() == "../../usr/lib/libx.so.1"
    assert (root / "rootlink").readlink().as_posix() == "."
    for link in ("usr/bin/abs", "a/b/climb", "usr/lib/libx.so"):
        assert (root / link).read_text() == "ELF"
        assert Path(os.path.realpath(root / link)).is_relative_to(root.resolve())
    assert tree.link_targets == {
        "usr/lib/libx.so": "libx.so.1",
        "usr/bin/abs": "/usr/lib/libx.so",
        "a/b/climb": "../../../../../usr/lib/libx.so.1",
        "rootlink": "/",
        "usr/bin/dot": ".",
    }
    assert resolve_in_root(root, "/usr/bin/abs") == root / "usr/lib/libx.so.1"
    assert resolve_in_root(root, "rootlink/rootlink/usr/../usr/bin/dot/abs") == root / "usr/lib/libx.so.1"
    assert resolve_in_root(root, "/../../usr/lib") == root / "usr/lib"
    assert resolve_in_root(root, "/usr/lib/missing") is None
    assert resolve_in_root(root, "/usr/lib/libx.so.1/below") is None


@pytest.mark.parametrize(
    ("link", "target", "expected"),
    [
        ("a", "/etc/passwd", "etc/passwd"),
        ("x/y/z", "/x/y/w", "w"),
        ("x/y/z", "../../../../etc", "../../etc"),
        ("x/z", "/", ".."),
        ("z", "..", "."),
        ("x/y/z", "./../y/./w/", "w"),
    ],
)
def test_contained_target(link: str, target: str, expected: str) -> None:
    assert contained_target(link, target) == expected


def test_hard_links_share_the_file(tmp_path: Path) -> None:
    image = _image_of(
        tmp_path,
        [ob.file("bin/busybox", b"\x7fELF", 0o755), ob.hardlink("bin/sh", "bin/busybox")],
        [
            ob.hardlink("/usr/bin/ls", "/bin/busybox"),
            ob.symlink("bin/l", "busybox"),
            ob.hardlink("bin/l2", "bin/l"),
        ],
    )
    tree = _flatten(image, tmp_path / "root")
    root = tree.root
    assert (root / "bin/sh").stat().st_ino == (root / "bin/busybox").stat().st_ino
    assert (root / "usr/bin/ls").read_bytes() == b"\x7fELF"
    assert (root / "bin/l2").readlink().as_posix() == "busybox"
    assert tree.link_targets["bin/l2"] == "busybox"


def test_upper_folder_hides_a_lower_link(tmp_path: Path) -> None:
    image = _image_of(
        tmp_path,
        [ob.file("usr/lib/a", "a"), ob.symlink("lib", "usr/lib")],
        [ob.file("lib/b", "b")],
    )
    tree = _flatten(image, tmp_path / "root")
    root = tree.root
    assert (root / "lib").is_dir() and not (root / "lib").is_symlink()
    assert sorted(p.name for p in (root / "lib").iterdir()) == ["b"]
    assert sorted(p.name for p in (root / "usr/lib").iterdir()) == ["a"]
    assert tree.link_targets == {}


def test_specials_are_skipped_and_modes_made_safe(tmp_path: Path) -> None:
    image = _image_of(
        tmp_path,
        [
            ob.file("dev/null-was-here", "x"),
            ob.file("usr/bin/su", "su", 0o4755),
            ob.file("etc/shadow", "s", 0o000),
            ob.folder("tmp", 0o1777),
        ],
        [ob.device("dev/null-was-here", 1, 3), ob.device("dev/sda", 8, 0, char=False), ob.fifo("run/pipe")],
    )
    tree = _flatten(image, tmp_path / "root")
    root = tree.root
    assert tree.skipped_special == 3
    assert set(tree.special_examples) == {"dev/null-was-here", "dev/sda", "run/pipe"}
    assert not (root / "dev/null-was-here").exists() and not (root / "run/pipe").exists()
    for path in root.rglob("*"):
        mode = path.lstat().st_mode
        assert stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISLNK(mode), path
        assert not mode & (stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX), path
    assert stat.S_IMODE((root / "usr/bin/su").stat().st_mode) == 0o755
    assert stat.S_IMODE((root / "etc/shadow").stat().st_mode) == 0o600
    assert stat.S_IMODE((root / "tmp").stat().st_mode) == 0o777


def test_a_layer_from_a_host_folder(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "pkg/sub").mkdir(parents=True)
    (src / "pkg/sub/mod.py").write_text("x = 1\n")
    (src / "pkg/link").symlink_to("sub/mod.py")
    entries = ob.entries_from_folder(src)
    assert [e.kind for e in entries] == ["folder", "symlink", "folder", "file"]
    root = _flatten(_image_of(tmp_path, entries), tmp_path / "root").root
    assert (root / "pkg/link").read_text() == "x = 1\n"


def test_dest_must_be_an_empty_folder(tmp_path: Path) -> None:
    image = _image_of(tmp_path, [ob.file("a")])
    (tmp_path / "full").mkdir()
    (tmp_path / "full/x").write_text("")
    with pytest.raises(ValueError, match="not empty"):
        flatten(image, tmp_path / "full", deadline=NO_DEADLINE)
    (tmp_path / "link").symlink_to(tmp_path / "full")
    with pytest.raises(ValueError, match="not a folder"):
        flatten(image, tmp_path / "link", deadline=NO_DEADLINE)


def test_layer_streams_check_their_blob(tmp_path: Path) -> None:
    image = _image_of(tmp_path, [ob.file("a", "a" * 1000)])
    with image.open_layer(0) as stream:
        with tarfile.open(fileobj=stream, mode="r|*") as tf:  # type: ignore[call-overload]
            assert [m.name for m in tf] == ["a"]
        stream.finish()
        assert stream.sha256() == image.layers[0].digest
        assert stream.bytes_read == image.layers[0].size
