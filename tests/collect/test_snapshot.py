"""`envcheck snapshot` against real interpreters: the test venv's torch (whichever build is installed),
copies of it, and faults."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from venvs import clone_site_packages, fault_torch, installed_torch, needs_torch

from envcheck.cli import app
from envcheck.manifest import load
from envcheck.manifest.codec import volatile_paths
from envcheck.manifest.model import Manifest

pytestmark = pytest.mark.slow


def snapshot(tmp_path: Path, *args: str, name: str = "m.json") -> tuple[int, str, str, Path]:
    out = tmp_path / name
    result = CliRunner().invoke(app, ["snapshot", "-o", str(out), "--no-verify", *args])
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr, out


@pytest.fixture(scope="module")
def torch_manifest(tmp_path_factory: pytest.TempPathFactory, torch_python: str) -> Manifest:
    code, _, stderr, out = snapshot(tmp_path_factory.mktemp("snap"), "--python", torch_python)
    assert code == 0, stderr
    return load(out)


@needs_torch
def test_torch_facts_of_the_installed_build(torch_manifest: Manifest) -> None:
    version, cuda = installed_torch()
    static = torch_manifest.torch.static
    assert static is not None
    assert static.version == version
    assert static.cuda == cuda
    assert static.variant == ("cpu" if cuda is None else "cu" + "".join(cuda.split(".")[:2]))
    runtime = torch_manifest.torch.runtime
    assert runtime is not None
    assert runtime.version == version
    assert runtime.backends.cuda_built is (cuda is not None)
    if cuda is None:
        assert runtime.cudnn_version is None
    assert runtime.small_op_ok is True
    assert torch_manifest.meta.probe.status == "ok"


@needs_torch
def test_every_distribution_pip_lists_is_recorded(torch_manifest: Manifest) -> None:
    listed = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    )
    from envcheck.manifest.model import canonical

    pip_names = {canonical(d["name"]): d["version"] for d in json.loads(listed.stdout)}
    recorded = {canonical(d.name): d.version for d in torch_manifest.packages if not d.shadowed}
    assert pip_names.items() <= recorded.items()
    torch = torch_manifest.package("torch")
    assert torch is not None
    assert torch.version == installed_torch()[0]
    assert torch.installer == "pip"
    assert any(f.path.endswith("libc10.so") and f.sha256 for f in torch.native_files)


@needs_torch
def test_the_openmp_runtime_torch_loaded_is_named_with_its_path(torch_manifest: Manifest) -> None:
    runtimes = torch_manifest.runtimes
    assert runtimes is not None
    openmp = [p for p in runtimes.threadpools if p.user_api == "openmp"]
    assert openmp, runtimes.threadpools
    torch_omp = [p for p in openmp if p.owner == "torch"]
    assert torch_omp, openmp
    assert Path(torch_omp[0].filepath).exists()
    assert "gomp" in Path(torch_omp[0].filepath).name
    loaded = {Path(lib.path).name: lib for lib in runtimes.loaded}
    assert loaded["libc10.so"].owner == "torch"
    assert loaded["libc10.so"].identity and loaded["libc10.so"].identity.startswith("sha256:")


def _flatten(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flatten(v, f"{path}.{k}" if path else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{path}[{i}]")
    else:
        yield path, value


def _is_volatile(path: str, patterns: list[str]) -> bool:
    import re

    for pattern in patterns:
        regex = re.escape(pattern).replace(r"\[\]", r"\[\d+\]").replace(r"\*", r"[^.]+")
        if re.match(regex + r"($|[.\[])", path):
            return True
    return False


@needs_torch
def test_two_snapshots_differ_only_in_volatile_fields(tmp_path: Path, torch_python: str) -> None:
    _, _, _, first = snapshot(tmp_path, "--python", torch_python, name="a.json")
    _, _, _, second = snapshot(tmp_path, "--python", torch_python, name="b.json")
    a = dict(_flatten(json.loads(first.read_text())))
    b = dict(_flatten(json.loads(second.read_text())))
    assert a.keys() == b.keys()
    patterns = list(volatile_paths(Manifest))
    assert "meta.created" in patterns
    changed = sorted(k for k in a if a[k] != b[k])
    assert all(_is_volatile(k, patterns) for k in changed), [
        k for k in changed if not _is_volatile(k, patterns)
    ]


@needs_torch
def test_another_venv_is_described_not_the_running_one(
    tmp_path: Path, venv_factory: Callable[[str], Path]
) -> None:
    other = venv_factory("other")
    clone_site_packages(other)
    code, _, stderr, out = snapshot(tmp_path, "--python", str(other))
    assert code == 0, stderr
    manifest = load(out)
    assert manifest.python.executable == str(other)
    assert manifest.python.prefix == str(other.parent.parent)
    assert manifest.python.environment == "venv"
    assert manifest.torch.static is not None
    assert manifest.torch.static.location.startswith(str(other.parent.parent))
    assert manifest.torch.runtime is not None
    assert manifest.torch.runtime.file.startswith(str(other.parent.parent))
    assert manifest.package("envcheck") is None


@needs_torch
def test_envcheck_never_imports_torch_in_its_own_process(tmp_path: Path, torch_python: str) -> None:
    # `sys.modules['torch'] = None` makes any `import torch` in this process raise ImportError.
    out = tmp_path / "m.json"
    code = (
        "import sys; sys.modules['torch'] = None; sys.argv = ['envcheck'] + sys.argv[1:]; "
        "from envcheck.cli import main; main()"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, "snapshot", "--no-verify", "--python", torch_python, "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert load(out).torch.runtime is not None


def test_a_venv_without_torch_is_a_fact_not_an_error(
    tmp_path: Path, venv_factory: Callable[[str], Path]
) -> None:
    bare = venv_factory("bare")
    out = tmp_path / "m.json"
    result = CliRunner().invoke(app, ["snapshot", "-o", str(out), "--python", str(bare)])  # suite included
    code, stdout, stderr = result.exit_code, result.stdout, result.stderr
    assert code == 0, stderr
    manifest = load(out)
    assert manifest.torch.static is None
    assert manifest.torch.runtime is None
    assert manifest.meta.probe.status == "ok"
    assert "torch      not installed" in stdout
    # Neither packaging nor pip is in that venv: the wheel tags are derived by envcheck instead.
    assert manifest.python.wheel_tags[0].startswith("cp3")
    assert manifest.packages == []
    assert manifest.verify is not None
    assert manifest.verify.skipped == "torch is not installed in the target"
    assert "verify     not run (torch is not installed in the target): no goldens" in stdout


@needs_torch
def test_broken_torch_is_recorded_and_the_manifest_written(tmp_path: Path, broken_torch_python: Path) -> None:
    code, stdout, stderr, out = snapshot(tmp_path, "--python", str(broken_torch_python))
    assert code == 0, stderr
    manifest = load(out)
    probe = manifest.meta.probe
    assert probe.status == "error"
    assert probe.stage == "import torch"
    assert probe.exception is not None and "libc10.so" in probe.exception
    # The static facts survive a torch that cannot import.
    assert manifest.torch.static is not None and manifest.torch.static.version == installed_torch()[0]
    assert manifest.torch.runtime is None
    assert "failed during import torch" in stdout


@pytest.mark.parametrize(
    ("body", "signal_name"),
    [
        ("import ctypes\nctypes.string_at(0)\n", "SIGSEGV"),
        ("import os\nos.abort()\n", "SIGABRT"),
    ],
)
def test_a_target_killed_by_a_signal_is_recorded(
    tmp_path: Path, venv_factory: Callable[[str], Path], body: str, signal_name: str
) -> None:
    python = fault_torch(venv_factory, f"crash-{signal_name}", body)
    code, stdout, stderr, out = snapshot(tmp_path, "--python", str(python))
    assert code == 0, stderr
    probe = load(out).meta.probe
    assert probe.status == "crashed"
    assert probe.signal == signal_name
    assert probe.stage == "import torch"
    assert f"crashed during import torch: {signal_name}" in stdout


def test_a_hanging_target_is_killed_after_the_timeout(
    tmp_path: Path, venv_factory: Callable[[str], Path]
) -> None:
    python = fault_torch(venv_factory, "hang", "import time\ntime.sleep(600)\n")
    code, stdout, stderr, out = snapshot(tmp_path, "--python", str(python), "--timeout", "3")
    assert code == 0, stderr
    manifest = load(out)
    assert manifest.meta.probe.status == "timeout"
    assert manifest.meta.probe.timeout_s == 3
    assert manifest.meta.probe.stage == "import torch"
    assert manifest.torch.static is not None and manifest.torch.static.version == "9.9.9+fault"
    assert "hung during import torch, killed after 3 s" in stdout


def test_canary_secrets_never_reach_the_manifest(
    tmp_path: Path, venv_factory: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    canaries = {
        "MY_SERVICE_TOKEN": "canary-token-3141",
        "TORCH_HUB_SECRET_KEY": "canary-secret-2718",
        "AWS_SECRET_ACCESS_KEY": "canary-aws-1618",
        "PIP_INDEX_URL": "https://deploy:canary-password-1414@packages.example.invalid/simple",
        "PIP_EXTRA_INDEX_URL": "https://packages.example.invalid/simple?token=canary-query-1732",
        "CUDA_LAUNCH_BLOCKING": "1",
    }
    for name, value in canaries.items():
        monkeypatch.setenv(name, value)
    bare = venv_factory("secrets")
    code, _, stderr, out = snapshot(tmp_path, "--python", str(bare))
    assert code == 0, stderr
    text = out.read_text(encoding="utf-8")
    for marker in (
        "canary-token-3141",
        "canary-secret-2718",
        "canary-aws-1618",
        "canary-password-1414",
        "canary-query-1732",
    ):
        assert marker not in text
    env = load(out).env
    assert env["CUDA_LAUNCH_BLOCKING"] == "1"
    assert env["TORCH_HUB_SECRET_KEY"] == "<redacted>"
    assert env["PIP_INDEX_URL"] == "https://<redacted>@packages.example.invalid/simple"
    assert "MY_SERVICE_TOKEN" not in env


def test_redact_paths_hides_the_home_folder(
    tmp_path: Path, venv_factory: Callable[[str], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    bare = venv_factory("home")
    monkeypatch.setenv("HOME", str(bare.parent.parent.parent))
    code, _, stderr, out = snapshot(tmp_path, "--python", str(bare), "--redact-paths")
    assert code == 0, stderr
    manifest = load(out)
    assert manifest.python.executable.startswith("~/")
    assert str(bare.parent.parent.parent) not in out.read_text(encoding="utf-8")


def test_a_missing_interpreter_is_a_usage_error(tmp_path: Path) -> None:
    code, _, stderr, out = snapshot(tmp_path, "--python", str(tmp_path / "nope" / "python"))
    assert code == 2
    assert stderr.startswith("error: the target interpreter ")
    assert "does not exist" in stderr
    assert "Tip: " in stderr
    assert not out.exists()


def test_python_dash_m_envcheck_works_like_the_console_script(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "envcheck", "--version"], capture_output=True, text=True, check=True
    )
    from envcheck import __version__

    assert result.stdout == f"envcheck {__version__}\n"


def _pyenv_python(version: str) -> Path | None:
    found = sorted(Path.home().glob(f".pyenv/versions/{version}.*/bin/python"))
    return found[-1] if found else None


@pytest.mark.skipif(_pyenv_python("3.8") is None, reason="no Python 3.8 interpreter on this machine")
def test_the_probe_runs_on_a_real_python_3_8(tmp_path: Path) -> None:
    python38 = _pyenv_python("3.8")
    assert python38 is not None
    venv = tmp_path / "py38"
    subprocess.run([str(python38), "-m", "venv", "--without-pip", str(venv)], check=True)
    code, _, stderr, out = snapshot(tmp_path, "--python", str(venv / "bin" / "python"))
    assert code == 0, stderr
    manifest = load(out)
    assert manifest.python.version.startswith("3.8.")
    assert manifest.meta.probe.status == "ok"
    assert manifest.python.wheel_tags[0].startswith("cp38-cp38")


@pytest.mark.skipif(_pyenv_python("3.7") is None, reason="no Python 3.7 interpreter on this machine")
def test_an_interpreter_older_than_3_8_is_refused_clearly(tmp_path: Path) -> None:
    python37 = _pyenv_python("3.7")
    code, _, stderr, out = snapshot(tmp_path, "--python", str(python37))
    assert code == 2
    assert "envcheck inspects Python 3.8 and newer" in stderr
    assert not out.exists()
