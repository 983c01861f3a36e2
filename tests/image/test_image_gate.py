"""``envcheck gate REF --image IMAGE`` on images broken the ways images break while they are built, each an
example of a class: the gate exits 1 and the invariant the image violates is its first root cause, never
the failed import it leads to. The reference is the healthy image's own ``snapshot --image``, which gates
clean (exit 0).

The images are built by hand to the OCI spec (``ocibuild``) from a python:3.11-style root and a real venv
with real wheels installed by pip (``test_image_static``'s builders); ``test_real_images.py`` does the same
on a Debian rootfs made by mmdebstrap, where each breakage is first shown under ``chroot``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ocibuild as ob
import pytest
from clirun import run
from test_image_static import PYENV_LIB, _link, _put, image_venv, python_org_base
from wheels import _cache

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not (PYENV_LIB / "site.py").is_file(), reason="needs a python.org-style 3.11 to copy"),
]
WHEELS = ("tqdm==4.70.1", "MarkupSafe==3.0.2")
SPEEDUPS = "app/.venv/lib/python3.11/site-packages/markupsafe/_speedups.cpython-311-x86_64-linux-gnu.so"
PATH = "PATH=/app/.venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _cp312_wheel() -> Path:
    """MarkupSafe 3.0.2 for CPython 3.12: a real wheel from the registry, cached beside the test wheels."""
    folder = _cache()
    found = sorted(folder.glob("MarkupSafe-3.0.2-cp312-*.whl")) if folder.is_dir() else []
    if not found:
        done = subprocess.run(
            [
                *(sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"),
                *("--python-version", "3.12", "--platform", "manylinux2014_x86_64", "MarkupSafe==3.0.2"),
                *("-d", str(folder)),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        found = sorted(folder.glob("MarkupSafe-3.0.2-cp312-*.whl"))
        if done.returncode != 0 or not found:
            pytest.skip(f"registry not reachable: {done.stderr[-300:]}")
    return found[0]


@pytest.fixture(scope="module")
def base_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A python:3.11-style root with /app/.venv holding tqdm (a console script) and MarkupSafe (a C
    extension), as ``python -m venv /app/.venv && pip install`` leaves them."""
    root = tmp_path_factory.mktemp("image") / "root"
    root.mkdir()
    python_org_base(root)
    image_venv(root, WHEELS)
    return root


def _clone(root: Path, dest: Path) -> Path:
    shutil.copytree(root, dest, symlinks=True, copy_function=os.link)
    return dest


def _image(dest: Path, *layers: list[ob.Entry], env: tuple[str, ...] = (PATH,), fmt: str = "folder") -> Path:
    blobs = [ob.layer(entries) for entries in layers]
    config = ob.image_config(blobs, env=env, cmd=["python", "-m", "app"])
    layout = ob.oci_image(blobs, config)
    return layout.write_tar(dest) if fmt == "tar" else layout.write_folder(dest)


def _gate(ref: Path, image: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run("gate", str(ref), "--image", str(image), "--format", "json", *extra)
    assert code in (0, 1), err
    return code, json.loads(out)


def _roots(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    findings = report["findings"]
    return [(f["severity"], f["rule"], f["subject"]) for f in findings if f.get("caused_by") is None]


@pytest.fixture(scope="module")
def reference(base_root: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("ref")
    image = _image(folder / "healthy", ob.entries_from_folder(base_root))
    ref = folder / "healthy.json"
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(ref))
    assert code == 0, err
    return ref


def test_the_healthy_image_gates_clean_against_its_own_snapshot(base_root: Path, reference: Path) -> None:
    manifest = json.loads(reference.read_text())
    assert manifest["meta"]["kind"] == "image"
    assert {p["name"].lower(): p["version"] for p in manifest["packages"]} == {
        "tqdm": "4.70.1",
        "markupsafe": "3.0.2",
    }
    assert manifest["python"]["executable"] == "/app/.venv/bin/python"
    again = _image(reference.parent / "again.tar", ob.entries_from_folder(base_root), fmt="tar")
    code, report = _gate(reference, again)
    assert code == 0, _roots(report)
    assert [r for s, r, _ in _roots(report) if s != "info"] == []
    assert ("info", "VERIFY-NOT-RUN", "verify") in _roots(report)


def _wheel_for_3_12(root: Path) -> None:
    """A multi-stage COPY from a python:3.12 builder: MarkupSafe's cp312 wheel over the 3.11 venv's."""
    site = root / "app/.venv/lib/python3.11/site-packages"
    for old in site.glob("[Mm]arkup[Ss]afe*"):  # the package and its dist-info
        shutil.rmtree(old)
    with zipfile.ZipFile(_cp312_wheel()) as wheel:
        wheel.extractall(site)


def _venv_moved(root: Path) -> None:
    """Built at /build/.venv, copied to /app/.venv: every console script's #! names /build/.venv."""
    for script in (root / "app/.venv/bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            script.unlink()  # a hard link of the healthy tree: write a new file
            script.write_bytes(data.replace(b"/app/.venv", b"/build/.venv"))
            script.chmod(0o755)


def _base_bumped(root: Path) -> None:
    """The base image bumped to Python 3.12 under a venv made by 3.11 (pyvenv.cfg still says 3.11.7)."""
    local = root / "usr/local"
    (local / "bin/python3.11").unlink()
    _put(root, "/usr/local/bin/python3.12", "not an ELF\n", 0o755)
    _link(root, "/usr/local/bin/python3", "python3.12")
    old, new = local / "lib/python3.11", local / "lib/python3.12"
    new.mkdir()
    for name in ("os.py", "site.py", "lib-dynload", "site-packages"):
        (old / name).rename(new / name)
    for data in old.glob("_sysconfigdata_*"):
        data.rename(new / data.name)
    shutil.rmtree(old)
    header = local / "include/python3.11/patchlevel.h"
    text = header.read_text().replace('"3.11.', '"3.12.')
    text = text.replace("PY_MINOR_VERSION\t11", "PY_MINOR_VERSION\t12")
    header.unlink()
    shutil.rmtree(local / "include/python3.11")
    _put(root, "/usr/local/include/python3.12/patchlevel.h", text)


BROKEN: dict[str, tuple[Callable[[Path], None], set[str]]] = {
    "a wheel built for 3.12 copied into a 3.11 venv": (_wheel_for_3_12, {"ENV-WHEEL-TAG", "ENV-EXT-SUFFIX"}),
    "a venv copied to another path": (_venv_moved, {"ENV-SCRIPT-BROKEN"}),
    "a base image bumped to another Python under a kept venv": (_base_bumped, {"ENV-VENV-INTERPRETER"}),
}


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_image_fails_the_gate_with_its_invariant_first(
    base_root: Path, reference: Path, tmp_path: Path, case: str
) -> None:
    breaks, expected = BROKEN[case]
    root = _clone(base_root, tmp_path / "root")
    breaks(root)
    code, report = _gate(reference, _image(tmp_path / "broken", ob.entries_from_folder(root)))
    roots = _roots(report)
    assert code == 1, roots
    severity, rule, _subject = roots[0]
    assert severity == "error" and rule in expected, roots


def test_a_file_a_later_layer_deletes_fails_the_gate(
    base_root: Path, reference: Path, tmp_path: Path
) -> None:
    whiteout = [ob.whiteout(SPEEDUPS)]
    code, report = _gate(reference, _image(tmp_path / "deleted", ob.entries_from_folder(base_root), whiteout))
    roots = _roots(report)
    assert code == 1, roots
    assert roots[0][:2] == ("error", "ENV-FILE-GONE"), roots
    assert "markupsafe" in roots[0][2].lower()


def test_an_env_line_that_makes_a_torch_call_fail_is_an_error(
    base_root: Path, reference: Path, tmp_path: Path
) -> None:
    env = (PATH, "TORCH_FORCE_WEIGHTS_ONLY_LOAD=1")
    code, report = _gate(reference, _image(tmp_path / "env", ob.entries_from_folder(base_root), env=env))
    roots = _roots(report)
    assert code == 1, roots
    assert roots[0][1] == "ENV-VAR-CHANGED" and roots[0][2] == "TORCH_FORCE_WEIGHTS_ONLY_LOAD", roots


def test_the_three_formats_of_one_image_give_one_manifest(base_root: Path, tmp_path: Path) -> None:
    """An OCI layout, an OCI archive and a ``docker save`` tarball (both shapes) of the same layers and
    config: the same manifest, but for where it was read from (``image``'s digest and format, the title)."""
    plain = [ob.layer(ob.entries_from_folder(base_root), compress=False)]
    config = ob.image_config(plain, env=(PATH,), cmd=["python", "-m", "app"])
    paths = {
        "oci-layout": ob.oci_image(plain, config).write_folder(tmp_path / "layout"),
        "oci-archive": ob.oci_image(plain, config).write_tar(tmp_path / "archive.tar"),
        "docker-save": ob.docker_save(plain, config).write_tar(tmp_path / "saved.tar"),
        "docker-save with an OCI index": ob.docker_save(plain, config, oci_index=True).write_tar(
            tmp_path / "saved25.tar"
        ),
    }
    seen = {}
    for shape, path in paths.items():
        out = tmp_path / f"{path.name}.json"
        code, _out, err = run("snapshot", "--image", str(path), "-o", str(out))
        assert code == 0, (shape, err)
        manifest = json.loads(out.read_text())
        source = manifest.pop("image")
        assert source["config_digest"] == ob.sha256(ob.json_bytes(config)), shape
        for volatile in ("created", "duration_s", "target"):
            manifest["meta"].pop(volatile, None)
        seen[shape] = (manifest, source["source_format"], source["digest_kind"])
    first = seen["oci-layout"][0]
    assert all(manifest == first for manifest, _, _ in seen.values())
    assert {shape: (fmt, kind) for shape, (_, fmt, kind) in seen.items()} == {
        "oci-layout": ("oci-layout", "manifest"),
        "oci-archive": ("oci-archive", "manifest"),
        "docker-save": ("docker-save", "config"),
        "docker-save with an OCI index": ("docker-save", "manifest"),
    }


def test_a_prediction_for_linux_diffs_against_an_image_like_any_manifest(
    base_root: Path, tmp_path: Path
) -> None:
    """``predict`` of the image's manifest for manylinux x86-64 (pip's resolver, real wheels) is the
    reference: the image it came from gates clean against it, and the image with the cp312 wheel fails
    with ENV-WHEEL-TAG first."""
    root = _clone(base_root, tmp_path / "root")
    for recorded in root.glob("app/.venv/lib/python3.11/site-packages/*.dist-info/direct_url.json"):
        recorded.unlink()  # installed from an index, as in a real build: predict resolves them
    image = _image(tmp_path / "from-index", ob.entries_from_folder(root))
    manifest, predicted = tmp_path / "image.json", tmp_path / "predicted.json"
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(manifest))
    assert code == 0, err
    code, out, err = run(
        "predict", str(manifest), "--platform", "manylinux_2_28_x86_64", "--resolver", "pip",
        "--save", str(predicted),
    )  # fmt: skip
    if code == 2 and "could not" in err:
        pytest.skip(f"registry not reachable: {err[-300:]}")
    assert code == 0, out + err
    assert json.loads(predicted.read_text())["meta"]["kind"] == "predicted"
    code, report = _gate(predicted, image)
    assert code == 0, _roots(report)
    _wheel_for_3_12(root)
    code, report = _gate(predicted, _image(tmp_path / "cp312", ob.entries_from_folder(root)))
    assert code == 1
    assert _roots(report)[0][:2] == ("error", "ENV-WHEEL-TAG"), _roots(report)
