"""The slips of a first hour, against real interpreters: a forgotten --python (an interpreter without
torch checked against a manifest or a requirements lock with torch), the interpreter named in every
title, `snapshot` over another environment's manifest, and the caller's shell recorded as the
environment's."""

from __future__ import annotations

import json
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from venvs import make_venv

from envcheck import api
from envcheck.collect.launch import Probes, start_probes
from envcheck.core.errors import UsageError
from envcheck.diff import engine
from envcheck.manifest import load
from envcheck.manifest.io import dumps
from envcheck.process.runner import RunningTarget

pytestmark = pytest.mark.slow

DATA = Path(__file__).parents[1] / "data" / "manifests"
DEV = DATA / "dev-cpu.json"
TIP = "Tip: pass the environment's interpreter with --python, e.g. --python path/to/venv/bin/python"


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A real venv without torch (nor anything else)."""
    from venvs import make_venv

    return str(make_venv(tmp_path_factory.mktemp("bare") / "venv"))


def _says_wrong_interpreter(python: str, reference: str, err: str, out: str) -> None:
    lines = err.splitlines()
    assert lines[0] == (
        f"warning: {python} has no torch, and {reference} has torch 2.13.0+cpu: "
        "probably the wrong interpreter"
    ), err
    assert lines[1] == TIP
    title = " ".join(out.split("\npolicy:", 1)[0].split())  # the title, unwrapped
    assert f"this machine ({python})" in title
    assert "probably the wrong interpreter (it has no torch" in title
    assert "pass --python path/to/venv/bin/python" in title


def test_gate_in_an_interpreter_without_torch_says_so_first(bare_python: str) -> None:
    code, out, err = run("gate", str(DEV), "--python", bare_python, "--no-imports", "-q")
    assert code == 1
    _says_wrong_interpreter(bare_python, "dev-cpu", err, out)


def test_verify_against_in_an_interpreter_without_torch_says_so_first(bare_python: str) -> None:
    code, out, err = run("verify", "--against", str(DEV), "--python", bare_python, "--no-imports", "-q")
    assert code == 1
    _says_wrong_interpreter(bare_python, "dev-cpu", err, out)
    title = " ".join(out.split("\npolicy:", 1)[0].split())
    assert title.startswith(f"envcheck verify: this machine ({bare_python}) against dev-cpu: ")


def test_lock_check_of_a_torch_lock_in_an_interpreter_without_torch(bare_python: str, tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("torch==2.13.0+cpu\n    # via -r requirements.in\n")
    code, out, err = run("lock", "--check", str(lock), "--python", bare_python, "-q")
    assert code == 1
    _says_wrong_interpreter(bare_python, str(lock), err, out)


def test_an_environment_with_torch_is_not_called_the_wrong_one(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text("numpy==0.0.1\n")
    code, out, err = run("lock", "--check", str(lock), "-q")
    assert code == 1
    assert "wrong interpreter" not in err + out
    # Without --python the title names envcheck's own interpreter by its path.
    title = " ".join(out.split("\npolicy:", 1)[0].split())
    assert title == f"envcheck lock --check: this machine ({sys.executable}) against {lock}"


def test_doctor_names_the_interpreter_it_inspected(bare_python: str) -> None:
    code, out, err = run("doctor", "--python", bare_python, "-q")
    assert code in (0, 1), err
    assert out.startswith(f"envcheck doctor: this machine ({bare_python})")


# -- snapshot over an existing file ---------------------------------------------------------------------


def _snapshot(out: Path, *args: str) -> tuple[int, str]:
    code, _, err = run("snapshot", "--no-probe", "-q", "-o", str(out), *args)
    return code, err


def test_snapshot_keeps_another_environments_manifest_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "envcheck.lock.json"
    shutil.copy(DEV, out)  # recorded by /root/venvs/dev/bin/python on another host
    before = out.read_bytes()
    code, err = _snapshot(out)
    assert code == 2
    error, tip = err.strip().splitlines()
    assert error.startswith(f"error: {out} holds the manifest of another environment: interpreter ")
    assert f"(this one: {sys.executable})" in error and error.endswith("not replaced")
    assert tip.startswith("Tip: Write this one elsewhere with -o FILE") and "--force" in tip
    assert out.read_bytes() == before
    code, err = _snapshot(out, "--force")
    assert code == 0, err
    assert load(out).python.executable == sys.executable


def test_a_manifest_refused_once_the_target_started_ends_its_probes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before the target starts, only the interpreter, host and label of the manifest at the output are read
    # (as JSON); the whole of it is decoded while the target starts. A file that names this environment but
    # is no manifest past those fields is refused then: the probes end at once and their folders go, in the
    # API's long-lived process as in the CLI's.
    out = tmp_path / "envcheck.lock.json"
    identity = {"python": {"executable": sys.executable}, "platform": {"hostname": platform.node()}}
    out.write_text(json.dumps({"schema_version": 1, **identity, "meta": {}}), encoding="utf-8")
    before = out.read_bytes()
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    started: list[Probes] = []

    def start(*args: Any, **kwargs: Any) -> Probes:
        started.append(start_probes(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr("envcheck.api._snapshot.start_probes", start)
    with pytest.raises(UsageError, match="exists and is not a manifest envcheck can read"):
        api.snapshot(api.SnapshotOptions(probe=False), replaces=out)
    (probes,) = started
    assert isinstance(probes.facts, RunningTarget) and probes.runtime is None
    assert probes.facts._proc.poll() is not None  # ended, not left to its deadline
    assert list(temp.iterdir()) == []
    assert out.read_bytes() == before


def test_snapshot_replaces_the_same_environments_manifest(tmp_path: Path) -> None:
    out = tmp_path / "envcheck.lock.json"
    assert _snapshot(out, "--label", "dev") == (0, "")
    # The same interpreter and host: replaced as before, its label kept (and said).
    assert _snapshot(out) == (0, "kept the label 'dev' of the manifest this one replaces\n")
    assert load(out).meta.label == "dev"
    code, err = _snapshot(out, "--label", "prod")  # another label given: another environment
    assert code == 2
    assert "label 'dev' (this one: 'prod')" in err


def test_another_name_of_the_same_environments_interpreter_is_the_same_environment(tmp_path: Path) -> None:
    # `python -m envcheck` runs bin/python, the console script bin/python3: one venv, one environment.
    # Another venv whose interpreter links to the same binary is another environment all the same.
    first = make_venv(tmp_path / "venv")
    second = first.with_name("python3")
    assert second.exists() and second.samefile(first)
    out = tmp_path / "envcheck.lock.json"
    assert _snapshot(out, "--python", str(first), "--label", "app") == (0, "")
    kept = "kept the label 'app' of the manifest this one replaces\n"
    assert _snapshot(out, "--python", str(second)) == (0, kept)
    assert load(out).python.executable == str(second)
    other = make_venv(tmp_path / "other")
    assert other.samefile(first)
    code, err = _snapshot(out, "--python", str(other))
    assert code == 2 and "holds the manifest of another environment: interpreter" in err


def test_snapshot_keeps_a_file_that_is_not_a_manifest(tmp_path: Path) -> None:
    out = tmp_path / "notes.json"
    out.write_text("my notes\n")
    code, err = _snapshot(out)
    assert code == 2
    assert f"error: {out} exists and is not a manifest envcheck can read" in err
    assert out.read_text() == "my notes\n"
    assert _snapshot(out, "--force")[0] == 0
    load(out)


# -- the caller's shell ------------------------------------------------------------------------------------


def test_the_callers_shell_is_marked_and_not_compared(bare_python: str, tmp_path: Path) -> None:
    own, other = tmp_path / "own.json", tmp_path / "other.json"
    code, err = _snapshot(own)
    assert code == 0, err
    code, _, err = run(
        "snapshot", "--no-probe", "-q", "-o", str(other), "--python", bare_python,
        env={"PATH": "/opt/elsewhere/bin:/usr/bin:/bin", "VIRTUAL_ENV": "/opt/elsewhere"},
    )  # fmt: skip
    assert code == 0, err
    assert "env_caller" not in json.loads(own.read_text())  # envcheck's own interpreter: its own shell
    recorded = load(other)
    assert recorded.env_caller is not None and {"PATH", "VIRTUAL_ENV"} <= set(recorded.env_caller)
    assert recorded.env["PATH"] == "/opt/elsewhere/bin:/usr/bin:/bin"
    base = load(own)
    changed = [f.subject for f in engine.diff(base, recorded) if f.rule == "ENV-VAR-CHANGED"]
    assert "PATH" not in changed and "VIRTUAL_ENV" not in changed
    # Two manifests that both recorded their own shell still compare PATH.
    own_elsewhere = base.replace(env={**base.env, "PATH": "/opt/elsewhere/bin:/usr/bin:/bin"})
    assert "PATH" in [f.subject for f in engine.diff(base, own_elsewhere) if f.rule == "ENV-VAR-CHANGED"]
    # The mark round-trips, and a manifest without it is written as before.
    assert load_text_round_trip(other)


def load_text_round_trip(path: Path) -> bool:
    return dumps(load(path)) == path.read_text()


def test_a_reference_without_torch_names_no_slip(bare_python: str, tmp_path: Path) -> None:
    """A manifest recorded without torch, gated in an interpreter without torch: nothing to name."""
    manifest = tmp_path / "bare.json"
    code, _, err = run("snapshot", "--no-verify", "-q", "-o", str(manifest), "--python", bare_python)
    assert code == 0, err
    code, out, err = run("gate", str(manifest), "--python", bare_python, "--no-imports", "-q")
    assert "wrong interpreter" not in err + out
    title = " ".join(out.split("\npolicy:", 1)[0].split())
    assert title == f"envcheck gate: this machine ({bare_python}) against {manifest}"


def test_envchecks_own_interpreter_is_named_so() -> None:
    """No --python: the warning says the interpreter inspected was envcheck's own."""
    from envcheck.api._common import wrong_interpreter

    slip = wrong_interpreter(
        python=None,
        executable="/opt/tool/bin/python",
        reference="dev",
        reference_torch="2.13.0+cpu",
        has_torch=False,
    )
    assert slip is not None
    assert slip.line == (
        "warning: envcheck's own interpreter (/opt/tool/bin/python) has no torch, and dev has torch "
        "2.13.0+cpu: probably the wrong interpreter"
    )
    assert (
        wrong_interpreter(
            python=None, executable="/x", reference="dev", reference_torch="2.13.0+cpu", has_torch=True
        )
        is None
    )
    assert (
        wrong_interpreter(
            python=None, executable="/x", reference="dev", reference_torch=None, has_torch=False
        )
        is None
    )


def test_a_real_venv_where_a_manifest_goes(bare_python: str) -> None:
    venv = Path(bare_python).parent.parent
    code, _, err = run("gate", str(venv))
    assert code == 2
    assert err.splitlines() == [
        f"error: {venv}: a Python environment's folder, not a manifest",
        f"Tip: To inspect that environment, pass its interpreter: --python {bare_python} "
        f"(`envcheck snapshot --python {bare_python}` records its manifest).",
    ]
