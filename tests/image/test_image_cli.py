"""``snapshot``, ``diff`` and ``gate`` with ``--image``, as a user runs them on hostile images: each one is
one line on stderr and exit 2, within the deadline and the memory bound (``tests/hostile.py``), nothing
written outside envcheck's own temporary folder and no report pretending the image was checked."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import ocibuild as ob
import pytest
from clirun import run
from hostile import assert_bounded, envcheck_argv, run_bounded

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples"
TIMEOUT = 30.0


def _reference() -> Path:
    found = sorted(EXAMPLE.glob("*.json"))
    assert found, EXAMPLE
    return found[0]


def _climbing(tmp: Path) -> Path:
    blobs = [ob.layer([ob.file("usr/bin/python3", "x"), ob.file("../../escaped", "pwned")])]
    return ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp / "climbing")


def _whiteout_outside(tmp: Path) -> Path:
    blobs = [ob.layer([ob.file("a", "x")]), ob.layer([ob.Entry(name="../.wh.victim", kind="file")])]
    return ob.oci_image(blobs, ob.image_config(blobs)).write_tar(tmp / "whiteout.tar")


def _bomb(tmp: Path) -> Path:
    blobs = [ob.zero_bomb(64 * 1024**2)]
    return ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp / "bomb")


def _big_config(tmp: Path) -> Path:
    plain = [ob.layer([ob.file("x")], compress=False)]
    files = ob.docker_save(plain, ob.image_config(plain))
    name = next(n for n in files.files if n.endswith(".json") and n != "manifest.json")
    files.files[name] = ob.Zeros(100 * 1024**2)
    return files.write_tar(tmp / "big-config.tar")


def _lying_manifest(tmp: Path) -> Path:
    blobs = [ob.layer([ob.file("x")])]
    layout = ob.oci_image(blobs, ob.image_config(blobs))
    digest = json.loads(layout.files["index.json"])["manifests"][0]["digest"]  # type: ignore[arg-type]
    name = f"blobs/sha256/{digest.removeprefix('sha256:')}"
    manifest = layout.files[name]
    assert isinstance(manifest, bytes)
    layout.files[name] = manifest.replace(b'"schemaVersion":2', b'"schemaVersion":3')
    return layout.write_folder(tmp / "lying")


def _python_loop(tmp: Path) -> Path:
    # The interpreter the Cmd names is a link loop: no interpreter, said in one line.
    blobs = [
        ob.layer([ob.symlink("usr/bin/python3", "python3.11"), ob.symlink("usr/bin/python3.11", "python3")])
    ]
    return ob.oci_image(blobs, ob.image_config(blobs)).write_folder(tmp / "loop")


HOSTILE: dict[str, tuple[Callable[[Path], Path], str]] = {
    "a member named with ../": (_climbing, "escaped"),
    "a whiteout naming outside the root": (_whiteout_outside, "'../.wh.victim' climbs out of the root"),
    "a layer bomb": (_bomb, "bomb"),
    "a 100 MB config": (_big_config, "bytes, more than"),
    "a manifest that does not match its digest": (_lying_manifest, "does not match its digest"),
    "an interpreter that is a link loop": (_python_loop, "--image-python"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.parametrize("command", ["snapshot", "gate"])
def test_a_hostile_image_is_one_line_and_exit_2_within_the_bounds(
    tmp_path: Path, case: str, command: str
) -> None:
    build, said = HOSTILE[case]
    image = build(tmp_path)
    out = tmp_path / "out.json"
    args = (
        ["snapshot", "--image", str(image), "-o", str(out)]
        if command == "snapshot"
        else ["gate", str(_reference()), "--image", str(image)]
    )
    result = run_bounded(
        envcheck_argv(*args, "--timeout", str(TIMEOUT)), timeout=TIMEOUT, cwd=tmp_path, tree=True
    )
    assert_bounded(result, timeout=TIMEOUT, tree=True)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and len(lines) <= 2, result.stderr  # the error, and a tip
    assert not out.exists()
    assert not (tmp_path.parent / "escaped").exists()
    assert result.stdout.strip() == ""


def test_options_that_need_a_running_interpreter_are_refused_beside_image(tmp_path: Path) -> None:
    image = tmp_path / "image"
    for args, flag in (
        (["snapshot", "--image", str(image), "--python", "/usr/bin/python3"], "--python"),
        (["gate", str(_reference()), "--image", str(image), "--import", "app"], "--import"),
        (["diff", str(_reference()), str(_reference()), "--image", str(image)], "TARGET"),
    ):
        code, _out, err = run(*args)
        assert code == 2, err
        assert f"{flag} does not go with --image" in err, err


def test_an_image_snapshot_never_replaces_a_live_environments_manifest(tmp_path: Path) -> None:
    """The default output is the dev box's envcheck.lock.json: an image's snapshot refuses to replace it
    (or any file that is not a manifest) before reading the image, replaces another image's, and --force
    replaces anything."""
    live = tmp_path / "envcheck.lock.json"
    live.write_bytes(_reference().read_bytes())
    image = tmp_path / "no-such-image"  # never read: the refusal comes first
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(live))
    assert code == 2 and "not of an image: not replaced" in err, err
    assert live.read_bytes() == _reference().read_bytes()
    notes = tmp_path / "notes.json"
    notes.write_text("my notes\n")
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(notes))
    assert code == 2 and "is not a manifest envcheck can read" in err, err
    code, _out, err = run("snapshot", "--image", str(image), "-o", str(live), "--force")
    assert code == 2 and "cannot read" in err, err  # past the refusal: the image itself is missing
