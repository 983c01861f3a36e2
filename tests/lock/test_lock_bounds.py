"""``lock`` and ``lock --check`` against hostile input, in the class-level hostile suite: every case runs
the real CLI in a child bounded by ``tests/hostile.py`` (300 MB, its deadline + 5 s, no traceback).

- a lock of 1.2 M pins is refused at ``MAX_LOCK_PINS`` with one line, read line by line, and a lock at
  the limit is checked (every finding in a JSON report and JUnit) within the same bound;
- bad markers in a lock are a finding or one line and exit 2, never "internal error";
- a manifest's recorded index is used (and written into the lock) only with ``--trust-manifest-index``;
- every value of a lock in a remedy is quoted: pasted into bash, ``${X}$(cmd)`` and backticks run nothing;
- a lock passes the redactor: credentials planted in requirement lines (their markers reach the lock),
  index URLs and ``direct_url.json`` never reach it, nor stdout or stderr;
- ``lock --timeout`` is one deadline for the command: every pip-compile run together, not each.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import Bounded, assert_bounded, envcheck_argv, run_bounded
from test_canaries import GHP_FOLDER, SECRETS

from envcheck.lock.check import MAX_LOCK_PINS, LockedPin, LockFile, compare
from envcheck.manifest.io import load

from .conftest import Env
from .test_lock_hostile import _wheel
from .test_lock_index import NAME, VERSION, _manifest

TIMEOUT = 120.0
pytestmark = pytest.mark.slow


def _bounded(*args: str | Path, env: dict[str, str] | None = None) -> Bounded:
    result = run_bounded(
        envcheck_argv(*map(str, args)), timeout=TIMEOUT, env={**os.environ, "NO_COLOR": "1", **(env or {})}
    )
    assert_bounded(result, timeout=TIMEOUT)
    assert "internal error" not in result.stderr, result.stderr
    return result


def _one_line(result: Bounded, *fragments: str) -> str:
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    for fragment in fragments:
        assert fragment in errors[0], result.stderr
    return errors[0]


@pytest.fixture
def labelled_index(tmp_path: Path) -> Path:
    """A PEP 503 index folder ``.../cpu`` serving only a small real ``+cpu`` wheel (as test_lock_index)."""
    project = tmp_path / "index" / "cpu" / NAME
    project.mkdir(parents=True)
    wheel = _wheel(project, NAME, VERSION, [])
    href = wheel.name.replace("+", "%2B")
    (project / "index.html").write_text(f'<html><body><a href="{href}">{wheel.name}</a></body></html>\n')
    return project.parent


@pytest.fixture(scope="module")
def empty_python(venv_factory: Callable[[str], Path]) -> Path:
    """A real venv with nothing installed: its snapshot is quick, and any pin is missing there."""
    return venv_factory("empty-for-locks")


def test_a_lock_of_a_million_pins_is_refused_line_by_line(tmp_path: Path, empty_python: Path) -> None:
    lock = tmp_path / "huge.txt"
    with lock.open("w", encoding="utf-8") as f:  # 1.2 M pins in 13 MB: under the 16 MiB a lock may have
        for i in range(1_200_000):
            f.write(f"p{i}==1\n")
    result = _bounded("lock", "--check", lock, "--python", empty_python)
    _one_line(result, f"line {MAX_LOCK_PINS + 1}:", f"more than {MAX_LOCK_PINS:,} pins (MAX_LOCK_PINS)")


def test_a_lock_at_the_limit_is_checked_within_bounds(tmp_path: Path, empty_python: Path) -> None:
    lock = tmp_path / "at-limit.txt"
    lock.write_text("".join(f"p{i}==1\n" for i in range(MAX_LOCK_PINS)), encoding="utf-8")
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    args = ("lock", "--check", lock, "--python", empty_python, "--format", "json", "-o", report)
    result = _bounded(*args, "--junit", junit)
    assert result.returncode == 1, result.stderr
    findings = json.loads(report.read_text(encoding="utf-8"))["findings"]
    assert len(findings) == MAX_LOCK_PINS and {f["rule"] for f in findings} == {"LOCK-MISSING"}


BAD_MARKERS = [
    # packaging reads it, and cannot read its own rendering again (it used to end in "internal error")
    "python_version < '3.\\ud800'",
    # both quote characters in one marker
    "platform_release == 'a\"b' or platform_version == \"c'd\"",
    "python_version ~= '3'",  # a comparison packaging cannot make: one line
    "extra == 'x'",  # never true in a requirements file
    "'3' < python_version and platform_machine in 'x86_64 aarch64 arm64'",
    "python_version === '3.11'",
    "platform_release == 'é\u202e'",
]


@pytest.mark.parametrize("marker", BAD_MARKERS)
def test_bad_markers_are_a_finding_or_one_line(tmp_path: Path, empty_python: Path, marker: str) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(f"six==1.17.0 ; {marker}\n", encoding="utf-8")
    result = _bounded("lock", "--check", lock, "--python", empty_python, "--format", "json")
    if result.returncode == 2:
        _one_line(result, "line 1")
    else:
        findings = json.loads(result.stdout)["findings"]
        assert result.returncode == (1 if findings else 0)
        assert [f["rule"] for f in findings] in ([], ["LOCK-MISSING"])


def test_a_manifests_index_is_used_only_when_trusted(
    small_env: Env, tmp_path: Path, labelled_index: Path
) -> None:
    index = labelled_index
    manifest = _manifest(small_env, tmp_path, {"PIP_EXTRA_INDEX_URL": index.as_uri()})
    out = tmp_path / "lock.txt"
    result = _bounded("lock", manifest, "-o", out, env={"TORCH_INDEX_URL": ""})
    _one_line(result, f"{NAME}=={VERSION}")  # not contacted: nothing else serves the labelled build
    assert f"the manifest names an index for +cpu builds ({index.as_uri()})" in result.stderr
    assert not out.exists()

    result = _bounded("lock", manifest, "-o", out, "--trust-manifest-index", env={"TORCH_INDEX_URL": ""})
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    assert f"--extra-index-url {index.as_uri()}\n" in text
    assert "`envcheck lock --trust-manifest-index` was asked to trust it" in text  # never silently


def _printed(command: str, cwd: Path) -> list[str]:
    """The words bash makes of ``command`` (a remedy as pasted), printed one a line instead of run."""
    done = subprocess.run(
        ["bash", "-c", f"printf '%s\\n' {command}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
        env={**os.environ, "X": "ix"},
        check=True,
    )
    return done.stdout.splitlines()


def test_a_hostile_lock_yields_remedies_that_run_nothing_in_bash(tmp_path: Path, empty_python: Path) -> None:
    ran = tmp_path / "ran"
    ran.mkdir()
    hostile = {
        "index": f"${{X}}$(touch {ran}/index)",
        "extra": f"`touch {ran}/extra`x",
        "links": f"'$(touch {ran}/links)'\"`touch {ran}/links2`\"",
    }
    version = f"1`touch${{IFS}}{ran}/version`$HOME"  # "===" takes any text but spaces, ";" and ")"
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        f"--index-url {hostile['index']}\n--extra-index-url {hostile['extra']}\n"
        f"--find-links {hostile['links']}\n"
        f"torch==9.9.9+cpu\nsix==={version}\n",
        encoding="utf-8",
    )
    # In the venv's own folder: an interpreter finds its venv beside the path it was started by.
    python = empty_python.parent / "py$(touch ran-python)`touch ran-python2`"
    if not python.exists():
        python.symlink_to(empty_python)
    result = _bounded("lock", "--check", lock, "--python", python, "--format", "json")
    assert result.returncode == 1, result.stderr
    remedies = {f["subject"]: f["remedy"] for f in json.loads(result.stdout)["findings"]}
    assert set(remedies) == {"torch", "six"}
    # torch: a command run by the interpreter's pip, from PyTorch's index for +cpu builds (no index of the
    # lock is named after the label); none of the lock's hostile sources is written.
    assert remedies["torch"].startswith("`") and remedies["torch"].endswith("`"), remedies["torch"]
    assert _printed(remedies["torch"][1:-1], tmp_path) == [
        str(python),
        "-m",
        "pip",
        "install",
        "torch==9.9.9+cpu",
        "--index-url",
        "https://download.pytorch.org/whl/cpu",
    ]
    # six: its index holds pip's own ${X} (expanded in a requirements file, never on pip's command line)
    # and its version is no PEP 440 version: a step by hand that names them, no command to paste.
    assert remedies["six"].startswith("Install six==") and "`" not in remedies["six"], remedies["six"]
    assert list(ran.iterdir()) == [] and not (tmp_path / "ran-python").exists()
    assert not (tmp_path / "ran-python2").exists()


def test_windows_remedies_are_powershell_literals() -> None:
    manifest = load(
        Path(__file__).resolve().parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
    )
    assert manifest.platform is not None
    on_windows = manifest.replace(platform=dataclasses.replace(manifest.platform, system="Windows"))
    pins = (LockedPin(name="missing-one", written="missing-one", version="1.0", line=1),)
    sources = (("--index-url", "https://h.example/$(calc)/x"),)
    (finding,) = [
        f
        for f in compare(LockFile(pins=pins, sources=sources), on_windows, python="C:\\py's\\python.exe")
        if f.subject == "missing-one"
    ]
    assert finding.remedy == (
        "`& 'C:\\py''s\\python.exe' -m pip install 'missing-one==1.0' --index-url "
        "'https://h.example/$(calc)/x'`"
    )
    # pip expands a ${VAR} of a requirements file, never one of its command line: such an index is named in
    # a step by hand, never written as an argument.
    sources = (("--index-url", "https://h.example/${X}/simple"),)
    (finding,) = [
        f
        for f in compare(LockFile(pins=pins, sources=sources), on_windows, python="C:\\py's\\python.exe")
        if f.subject == "missing-one"
    ]
    assert [a.kind for a in finding.actions] == ["manual"]
    assert "https://h.example/${X}/simple" in finding.remedy and "`" not in finding.remedy


def test_a_lock_passes_the_redactor(small_env: Env, tmp_path: Path) -> None:
    data = json.loads(small_env.manifest.read_text(encoding="utf-8"))
    six = next(d for d in data["packages"] if d["name"] == "six")
    # python-dateutil (real: pip-compile resolves it) requires six under a marker that carries a token.
    data["packages"].append(
        {
            **six,
            "name": "python-dateutil",
            "version": "2.9.0.post0",
            "requires": [f'six>=1.5 ; platform_release != "{GHP_FOLDER}"'],
        }
    )
    data["packages"].append(
        {
            **six,
            "name": "canary-pkg",
            "version": "1.0",
            "requires": [
                "private-dep @ https://deploy:CanaryRequires09@git.corp.example/private-dep-1.0.whl"
            ],
            "direct_url": {
                "url": "git+https://oauth2:CanaryGitToken10@gitlab.corp.example/org/canary.git",
                "vcs_info": {"vcs": "git", "commit_id": "0" * 40},
            },
        }
    )
    manifest = tmp_path / "canary.json"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "lock.txt"
    index = "https://ci:p@ssCanaryIndex04@pkgs.invalid/simple?token=CanaryQueryToken08"
    retries = {"PIP_RETRIES": "0", "PIP_TIMEOUT": "3", "PIP_DEFAULT_TIMEOUT": "3"}
    result = _bounded(
        "lock", manifest, "--allow-unlocked", "--extra-index-url", index, "-o", out, env=retries
    )
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret not in text + result.stdout + result.stderr, secret
    # Each canary-bearing line arrived, redacted: the test cannot pass by a line going missing.
    assert "--extra-index-url https://pkgs.invalid/simple?token=<redacted>\n" in text
    assert "six==" in text and 'platform_release != "<redacted>"' in text
    assert "#   canary-pkg==1.0: installed from a VCS checkout" in text


def test_the_timeout_bounds_every_pip_compile_run_together(monkeypatch: pytest.MonkeyPatch) -> None:
    from envcheck.core.deadline import Deadline, DeadlineExpired
    from envcheck.lock import compile as compile_module
    from envcheck.lock.inputs import lock_inputs
    from envcheck.manifest.query import views
    from envcheck.manifest.requirements import graph

    # A fault injected: a clock that only pip-compile moves, 2 s a run, and every run finds nothing.
    clock = [1000.0]
    monkeypatch.setattr("envcheck.core.deadline.time.monotonic", lambda: clock[0])
    given: list[float] = []

    def nothing_found(inputs, options, index, deadline):  # type: ignore[no-untyped-def]
        given.append(deadline.remaining())
        clock[0] += 2.0
        pin = inputs.roots[0]
        log = f"ERROR: No matching distribution found for {pin.name}=={pin.version}\n"
        return compile_module._Compiled(returncode=1, output="", log=log)

    monkeypatch.setattr(compile_module, "_run_compile", nothing_found)
    manifest = load(
        Path(__file__).resolve().parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
    )
    with views(manifest):
        g = graph(manifest)
    inputs = lock_inputs(manifest)
    assert len(inputs.roots) > 3  # without the deadline, a run for each (up to MAX_TRIES)
    options = compile_module.LockOptions(allow_unlocked=True, timeout=5.0)
    with pytest.raises(DeadlineExpired, match=r"--timeout 5 s\) passed while running pip-compile \(3 runs"):
        compile_module._compile_until_locked(inputs, g, options, None, Deadline.after(5.0))
    assert given == [5.0, 3.0, 1.0]


def test_lock_ends_by_its_timeout_however_many_runs_it_needs(small_env: Env, tmp_path: Path) -> None:
    data = json.loads(small_env.manifest.read_text(encoding="utf-8"))
    six = next(d for d in data["packages"] if d["name"] == "six")
    # Eight distributions no source serves: --allow-unlocked drops them one pip-compile run at a time.
    data["packages"] += [{**six, "name": f"envcheck-unserved-{i}", "version": "0.0.1"} for i in range(8)]
    manifest = tmp_path / "unserved.json"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    result = run_bounded(
        envcheck_argv("lock", str(manifest), "--allow-unlocked", "--timeout", "3"),
        timeout=3,
        env={**os.environ, "NO_COLOR": "1"},
    )
    assert_bounded(result, timeout=3)
    if result.returncode != 0:  # a machine fast enough does all nine runs in 3 s
        _one_line(result, "--timeout")
