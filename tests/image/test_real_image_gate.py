"""``snapshot``, ``gate`` and ``diff`` with ``--image`` on real Debian images (``realimages.py``: mmdebstrap,
the image's own python and pip under chroot, torch 2.13.0 and NumPy from real wheels), each broken image
first shown broken under chroot by its own interpreter (``test_real_images.py``).

The reference is the healthy image's own ``snapshot --image``: the healthy image gates clean against it,
each broken one fails with the invariant it violates as the first root cause, and the image's three formats
give one manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from build_images import Image
from clirun import run
from realimages import *  # noqa: F403 - the session fixtures of the real images, found by pytest here

pytestmark = pytest.mark.slow

# Each broken image: the rule the gate must lead with (the invariant), never the import it breaks.
FIRST = {
    "venv_moved_image": {"ENV-SCRIPT-BROKEN"},
    "numpy_cp312_image": {"ENV-WHEEL-TAG", "ENV-EXT-SUFFIX"},
    "libgomp_whiteout_image": {"ENV-FILE-GONE"},
    "env_weights_only_image": {"ENV-VAR-CHANGED"},
    "base_bump_image": {"ENV-VENV-INTERPRETER"},
}


def _snapshot(image: Path, out: Path) -> dict[str, Any]:
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(out))
    assert code == 0, err
    return json.loads(out.read_text())  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def reference(healthy_image: Image, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("reference") / "healthy.json"
    assert healthy_image.oci_layout is not None
    _snapshot(healthy_image.oci_layout, out)
    return out


def _roots(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    findings = report["findings"]
    return [(f["severity"], f["rule"], f["subject"]) for f in findings if f.get("caused_by") is None]


def test_the_healthy_images_manifest_lists_what_pip_list_lists_under_chroot(
    healthy_image: Image,
    reference: Path,
) -> None:
    manifest = json.loads(reference.read_text())
    found = sorted((p["name"].lower(), p["version"]) for p in manifest["packages"])
    assert found == sorted((name.lower(), version) for name, version in healthy_image.pip_list)
    torch = manifest["torch"]["static"]
    assert torch["version"] == healthy_image.version_of("torch")
    assert manifest["python"]["executable"] == "/app/.venv/bin/python"
    assert manifest["meta"]["kind"] == "image" and manifest["image"]["digest"].startswith("sha256:")
    assert manifest["platform"]["distro"].startswith("Debian GNU/Linux 12")


def test_the_healthy_image_gates_clean_against_its_own_manifest(
    healthy_image: Image,
    reference: Path,
) -> None:
    code, out, err = run(
        "gate", str(reference), "--image", str(healthy_image.oci_archive), "--format", "json"
    )
    assert code == 0, err
    roots = _roots(json.loads(out))
    assert roots == [("info", "VERIFY-NOT-RUN", "verify")], roots


@pytest.mark.parametrize("fixture", sorted(FIRST))
def test_a_broken_image_fails_the_gate_with_its_cause_first(
    request: pytest.FixtureRequest, reference: Path, fixture: str
) -> None:
    image: Image = request.getfixturevalue(fixture)
    assert image.broken, image.name
    code, out, err = run("gate", str(reference), "--image", str(image.oci_layout), "--format", "json")
    assert code == 1, err
    roots = _roots(json.loads(out))
    severity, rule, _subject = roots[0]
    assert severity == "error" and rule in FIRST[fixture], (image.broken, roots)


def test_the_three_formats_of_the_healthy_image_give_one_manifest(
    healthy_image: Image,
    reference: Path,
    tmp_path: Path,
) -> None:
    def comparable(manifest: dict[str, Any]) -> dict[str, Any]:
        manifest = dict(manifest, meta=dict(manifest["meta"]))
        source = manifest.pop("image")
        for volatile in ("created", "duration_s", "target"):
            manifest["meta"].pop(volatile, None)
        return {"manifest": manifest, "config": source["config_digest"]}

    layout = comparable(json.loads(reference.read_text()))
    for path in (healthy_image.oci_archive, healthy_image.docker_archive):
        assert path is not None
        assert comparable(_snapshot(path, tmp_path / f"{path.name}.json")) == layout, path


def _closure(native: dict[str, Any], root_key: str) -> set[str]:
    """The image paths of the files the static tree loads from ``root_key``, itself included."""
    by_key = {n["key"]: n for n in native["nodes"]}
    seen, todo = set(), [root_key]
    while todo:
        key = todo.pop()
        if key in seen or key not in by_key:
            continue
        seen.add(key)
        todo += [d["target"] for d in by_key[key].get("dependencies") or [] if d.get("target")]
    return {by_key[k]["path"] for k in seen}


def test_the_healthy_images_native_tree_is_what_its_own_ld_so_loads(
    healthy_image: Image, reference: Path
) -> None:
    """For every extension module of torch and NumPy, the image's own ld.so (``ld.so --list`` under
    chroot) maps exactly the files the static tree resolves, each compared after its links are followed
    inside the image."""
    from build_images import run_in_root

    from envcheck.image.rootfs import resolve_in_root

    native = json.loads(reference.read_text())["native"]
    assert native["glibc_provided"] == "2.36" and not native["missing"]  # bookworm's glibc, all resolved
    extensions = [n for n in native["nodes"] if n["role"] == "extension" and n["owner"] in ("torch", "numpy")]
    assert len(extensions) >= 5
    root = healthy_image.root

    def real(path: str) -> str:
        found = resolve_in_root(root, path)
        assert found is not None, path
        return "/" + str(found.relative_to(root))

    for node in extensions:
        listed = run_in_root(root, ["/lib64/ld-linux-x86-64.so.2", "--list", node["path"]])
        assert listed.returncode == 0, listed.output
        loaded = {
            real(line.split(" => ", 1)[1].rsplit(" (", 1)[0])
            for line in listed.output.splitlines()
            if " => /" in line
        }
        loaded.add(real(node["path"]))
        static = {real(p) for p in _closure(native, node["key"])}
        # ld.so lists itself by its own path (no "=>"): the static tree has it as libc's dependency.
        static = {p for p in static if not p.endswith("/ld-linux-x86-64.so.2")}
        assert loaded == static, (node["key"], loaded ^ static)
