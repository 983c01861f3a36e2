"""The real images of ``realimages.py`` are what they claim: each runs (or fails) under chroot as said, their
``pip list`` truth is the installed torch, and their OCI layouts and archives hold exactly the layers that
were verified. Plus ``build_images.apply_layer``'s own promises (whiteouts, opaque folders, never writing
through a hard link), on small layers, without root."""

from __future__ import annotations

import functools
import hashlib
import json
import re
import tarfile
from pathlib import Path
from typing import Any

import build_images
import ocibuild
import pytest
from build_images import SITE, VENV, Built, Image, run_in_root
from realimages import *  # noqa: F403 - the session fixtures of the real images, found by pytest here

RUNTIME_CONFIG = Path(__file__).resolve().parents[2] / "envcheck" / "data" / "runtime_config.json"
BROKEN = ("venv-moved", "numpy-cp312", "libgomp-whiteout", "env-weights-only")
# What each broken image's probe says when it fails: the failure is the one the image was built to have.
FAILS_WITH = {
    "venv-moved": re.compile(r"/app/\.venv/bin/pip.*No such file or directory"),
    "numpy-cp312": re.compile(r"No module named 'numpy\._core\._multiarray_umath'"),
    "libgomp-whiteout": re.compile(r"libgomp\.so\.1: cannot open shared object file"),
    "env-weights-only": re.compile(r"Weights only load failed|Unsupported global"),
}


def _sha256_file(path: Path) -> str:
    """The file's sha256, once per file (the layer tars and the layouts' blobs are hard links of them)."""
    st = path.stat()
    return _sha256_inode(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@functools.cache
def _sha256_inode(path: Path, *identity: int) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def _dist_info_version(root: Path, name: str) -> str:
    (metadata,) = (root / SITE.lstrip("/")).glob(f"{name}-*.dist-info/METADATA")
    found = re.search(r"^Version: (\S+)$", metadata.read_text(encoding="utf-8"), re.MULTILINE)
    assert found, metadata
    return found.group(1)


def _json(path: Path) -> Any:
    return json.loads(path.read_bytes())


def _blob(layout: Path, descriptor: dict[str, Any]) -> Path:
    path = layout / "blobs" / "sha256" / str(descriptor["digest"]).removeprefix("sha256:")
    assert path.stat().st_size == descriptor["size"]
    return path


# --- the images under chroot --------------------------------------------------------------------------


@pytest.mark.slow
def test_the_healthy_image_runs_its_entrypoint_under_chroot(healthy_image: Image) -> None:
    config = healthy_image.config
    assert healthy_image.broken is None
    assert healthy_image.probe.returncode == 0, healthy_image.probe.output
    again = run_in_root(healthy_image.root, config["Entrypoint"], healthy_image.env,
                        workdir=config["WorkingDir"])  # fmt: skip
    assert again.returncode == 0, again.output
    assert f"torch {_dist_info_version(healthy_image.root, 'torch')}" in again.output
    assert "[2.0, 2.0]" in again.output
    assert healthy_image.env["PATH"].startswith(f"{VENV}/bin:")


@pytest.mark.slow
def test_the_pip_list_truth_is_what_is_installed(healthy_image: Image) -> None:
    torch = healthy_image.version_of("torch")
    assert torch is not None and torch.startswith("2.13.0"), healthy_image.pip_list
    assert torch == _dist_info_version(healthy_image.root, "torch")
    assert healthy_image.version_of("numpy") == _dist_info_version(healthy_image.root, "numpy")
    listed = {name.lower() for name, _ in healthy_image.pip_list}
    assert {"torch", "numpy", "pip", "sympy", "filelock"} <= listed


@pytest.mark.slow
@pytest.mark.parametrize("name", BROKEN)
def test_each_broken_image_fails_its_probe_where_the_healthy_one_passes(
    real_images: Built, name: str
) -> None:
    image, healthy = real_images.images[name], real_images.images["healthy"]
    assert image.broken, name
    assert image.probe.returncode != 0 and FAILS_WITH[name].search(image.probe.output), image.probe.output
    assert image.control.returncode == 0, image.control.output
    # Again, now: the recorded outcome is the image's, not the build's.
    again = run_in_root(image.root, image.probe.argv, image.env, workdir=image.config["WorkingDir"])
    assert again.returncode != 0 and FAILS_WITH[name].search(again.output), again.output
    control_env = dict(healthy.env)
    passed = run_in_root(healthy.root, image.probe.argv, control_env, workdir="/app")
    assert passed.returncode == 0, passed.output


@pytest.mark.slow
def test_the_moved_venv_breaks_only_its_console_scripts(venv_moved_image: Image) -> None:
    root = venv_moved_image.root
    first = (root / VENV.lstrip("/") / "bin" / "pip").read_bytes().split(b"\n", 1)[0]
    assert first == f"#!{build_images.BUILD_VENV}/bin/python3".encode()
    assert not (root / "build").exists()
    works = run_in_root(root, [f"{VENV}/bin/python", "-c", "import torch, numpy"], venv_moved_image.env)
    assert works.returncode == 0, works.output
    assert venv_moved_image.version_of("torch") is not None  # ``python -m pip list`` still answers


@pytest.mark.slow
def test_the_cp312_numpy_says_so_in_its_wheel_tag(numpy_cp312_image: Image, healthy_image: Image) -> None:
    site = numpy_cp312_image.root / SITE.lstrip("/")
    (wheel,) = site.glob("numpy-*.dist-info/WHEEL")
    assert re.search(r"^Tag: cp312-cp312-manylinux", wheel.read_text(encoding="utf-8"), re.MULTILINE)
    assert list(site.glob("numpy/_core/_multiarray_umath.cpython-312-*.so"))
    assert not list(site.glob("numpy/_core/*cpython-311*"))  # the layer replaced numpy, not merged into it
    assert numpy_cp312_image.version_of("numpy") == healthy_image.version_of("numpy")


@pytest.mark.slow
def test_the_whiteout_layer_deletes_only_libgomp(libgomp_whiteout_image: Image, healthy_image: Image) -> None:
    with tarfile.open(libgomp_whiteout_image.layers[-1]) as tar:
        files = [m.name for m in tar.getmembers() if not m.isdir()]
    assert files == [f"{SITE.lstrip('/')}/torch/lib/.wh.libgomp.so.1"]
    gomp = Path(SITE.lstrip("/")) / "torch" / "lib" / "libgomp.so.1"
    assert (healthy_image.root / gomp).is_file()
    assert not (libgomp_whiteout_image.root / gomp).exists()
    assert libgomp_whiteout_image.layers[:-1] == healthy_image.layers


@pytest.mark.slow
def test_the_env_image_sets_a_variable_envcheck_knows_fails_calls(env_weights_only_image: Image) -> None:
    assert env_weights_only_image.env["TORCH_FORCE_WEIGHTS_ONLY_LOAD"] == "1"
    known = {e["name"]: e for e in _json(RUNTIME_CONFIG)["entries"]}
    assert known["TORCH_FORCE_WEIGHTS_ONLY_LOAD"]["consequence"] == "call-fails"
    assert "TORCH_FORCE_WEIGHTS_ONLY_LOAD" not in env_weights_only_image.control.env


@pytest.mark.slow
def test_the_base_bump_image_runs_the_new_python_under_the_old_venv(
    base_bump_image: Image, healthy_image: Image
) -> None:
    root = base_bump_image.root
    assert base_bump_image.probe.returncode != 0, base_bump_image.probe.output
    assert "No module named 'torch'" in base_bump_image.probe.output
    assert base_bump_image.control.returncode == 0, base_bump_image.control.output
    assert re.search(r"^version = 3\.11\.", (root / "app/.venv/pyvenv.cfg").read_text(), re.MULTILINE)
    assert list((root / "usr/lib").glob("python3.13")) and not list((root / "usr/lib").glob("python3.11"))
    assert base_bump_image.layers[1].samefile(healthy_image.layers[1])  # the very same app layer
    assert base_bump_image.oci_layout is not None
    (descriptor,) = _json(base_bump_image.oci_layout / "index.json")["manifests"]
    config = _json(
        _blob(base_bump_image.oci_layout, _json(_blob(base_bump_image.oci_layout, descriptor))["config"])
    )
    assert config["rootfs"]["diff_ids"][1] == _sha256_file(healthy_image.layers[1])
    assert "trixie" in config["history"][0]["created_by"]


# --- the written images -------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ("healthy", *BROKEN))
def test_each_oci_layout_holds_the_verified_layers_and_config(real_images: Built, name: str) -> None:
    image = real_images.images[name]
    layout = image.oci_layout
    assert layout is not None and (layout / "oci-layout").is_file()
    (descriptor,) = _json(layout / "index.json")["manifests"]
    manifest = _json(_blob(layout, descriptor))
    config = _json(_blob(layout, manifest["config"]))
    assert config["config"]["Env"] == list(image.config["Env"])
    assert config["config"]["Entrypoint"] == list(image.config["Entrypoint"])
    assert config["rootfs"]["diff_ids"] == [_sha256_file(layer) for layer in image.layers]
    media = [layer["mediaType"] for layer in manifest["layers"]]
    assert media == [ocibuild.OCI_LAYER_GZIP] + [ocibuild.OCI_LAYER] * (len(image.layers) - 1)
    for layer in manifest["layers"]:
        assert _sha256_file(_blob(layout, layer)) == layer["digest"]
    assert len(config["history"]) == len(image.layers) + len(image.config["Env"]) + 1


@pytest.mark.slow
def test_the_healthy_archives_hold_the_same_image(healthy_image: Image) -> None:
    assert healthy_image.oci_archive is not None and healthy_image.docker_archive is not None
    assert healthy_image.oci_layout is not None
    with tarfile.open(healthy_image.oci_archive) as tar:
        names = set(tar.getnames())
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    assert index == _json(healthy_image.oci_layout / "index.json")
    in_layout = {
        p.relative_to(healthy_image.oci_layout).as_posix() for p in healthy_image.oci_layout.rglob("*")
    }
    assert {n for n in in_layout if n.startswith("blobs/sha256/")} <= names
    with tarfile.open(healthy_image.docker_archive) as tar:
        (saved,) = json.loads(tar.extractfile("manifest.json").read())  # type: ignore[union-attr]
        config = json.loads(tar.extractfile(saved["Config"]).read())  # type: ignore[union-attr]
        sizes = [tar.getmember(layer).size for layer in saved["Layers"]]
    assert config["rootfs"]["diff_ids"] == [_sha256_file(layer) for layer in healthy_image.layers]
    assert sizes == [layer.stat().st_size for layer in healthy_image.layers]


@pytest.mark.slow
def test_a_second_build_reuses_the_cache(real_images: Built) -> None:
    again = build_images.build()
    assert again.reused and again.folder == real_images.folder
    assert again.images["healthy"].pip_list == real_images.images["healthy"].pip_list


# --- apply_layer, on small layers ---------------------------------------------------------------------


def _tar(path: Path, entries: list[ocibuild.Entry]) -> Path:
    path.write_bytes(ocibuild.layer_tar(entries))
    return path


def test_apply_layer_applies_whiteouts_and_never_writes_through_a_hard_link(tmp_path: Path) -> None:
    lower = tmp_path / "lower"
    (lower / "keep").mkdir(parents=True)
    (lower / "opaque" / "old").mkdir(parents=True)
    (lower / "keep" / "same.txt").write_text("lower")
    (lower / "keep" / "replaced.txt").write_text("lower")
    (lower / "keep" / "gone.txt").write_text("lower")
    (lower / "opaque" / "old" / "file").write_text("lower")
    clone = tmp_path / "clone"
    build_images._clone(lower, clone)
    assert (clone / "keep" / "replaced.txt").stat().st_ino == (lower / "keep" / "replaced.txt").stat().st_ino
    layer = _tar(tmp_path / "layer.tar", [
        ocibuild.file("keep/replaced.txt", "upper", mode=0o600),
        ocibuild.whiteout("keep/gone.txt"),
        ocibuild.file("opaque/new", "upper"),  # before its marker: the marker hides only the lower layers
        ocibuild.opaque("opaque"),
        ocibuild.symlink("keep/link", "same.txt"),
        ocibuild.fifo("keep/fifo"),
    ])  # fmt: skip
    build_images.apply_layer(clone, layer)
    assert (clone / "keep" / "replaced.txt").read_text() == "upper"
    assert (clone / "keep" / "replaced.txt").stat().st_mode & 0o777 == 0o600
    assert (lower / "keep" / "replaced.txt").read_text() == "lower"  # the other tree is untouched
    assert not (clone / "keep" / "gone.txt").exists() and (lower / "keep" / "gone.txt").exists()
    assert sorted(p.name for p in (clone / "opaque").iterdir()) == ["new"]
    assert (lower / "opaque" / "old" / "file").is_file()
    assert (clone / "keep" / "link").readlink().as_posix() == "same.txt"
    assert not (clone / "keep" / "fifo").exists()  # never makes a FIFO or a device
    assert not list(clone.rglob(".wh.*"))


@pytest.mark.parametrize("name", ["../escape", "/abs/file", "keep/../../escape"])
def test_apply_layer_refuses_names_leaving_the_root(tmp_path: Path, name: str) -> None:
    root = tmp_path / "root"
    (root / "keep").mkdir(parents=True)
    layer = _tar(tmp_path / "layer.tar", [ocibuild.file(name, "x")])
    with pytest.raises(ValueError, match="outside the root"):
        build_images.apply_layer(root, layer)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["layer.tar", "root"]


def test_apply_layer_refuses_a_parent_that_links_out(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "out").symlink_to(outside)
    layer = _tar(tmp_path / "layer.tar", [ocibuild.file("out/planted", "x")])
    with pytest.raises(ValueError, match="link out of the root"):
        build_images.apply_layer(root, layer)
    assert not list(outside.iterdir())
