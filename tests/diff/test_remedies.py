"""Install remedies a user can paste: every pip command parses, pins the base's full version (local label
included) and names the index that serves a labelled build; where a wheel store for it is reachable, pip
itself accepts the command (``--dry-run --no-deps``)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from diffdata import Edit, manifest
from packaging.requirements import Requirement

from envcheck.app import flows
from envcheck.core.findings import Finding
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest
from envcheck.manifest.query import pkg
from envcheck.manifest.remedy import pytorch_index

WHEELS = Path("/opt/wheels")
COMMAND = re.compile(r"`(pip install [^`]+)`")


def torch_at(version: str) -> Edit:
    def edit(d: dict[str, object]) -> None:
        for entry in d["packages"]:  # type: ignore[attr-defined]
            if entry["name"] == "torch":
                entry["version"] = version
        d["torch"]["static"]["version"] = version  # type: ignore[index]
        d["torch"]["runtime"]["version"] = version  # type: ignore[index]

    return edit


def findings(base: Manifest, target: Manifest) -> tuple[Finding, ...]:
    return flows.diff("base", base, ("target", target), Policy(disabled=True)).findings


def pip_requirements(command: str) -> list[Requirement]:
    """The requirement arguments of a ``pip install`` command, parsed as pip would (after the shell)."""
    argv = shlex.split(command)
    assert argv[:2] == ["pip", "install"], command
    out, skip = [], False
    for arg in argv[2:]:
        if skip:
            skip = False
        elif arg.startswith("-"):
            skip = arg in ("--index-url", "--extra-index-url", "--find-links")
        else:
            out.append(Requirement(arg))
    return out


def all_remedy_cases() -> list[tuple[Manifest, Manifest]]:
    cpu, cuda = manifest("dev-cpu"), manifest("cuda")
    older = manifest("dev-cpu", torch_at("2.12.0+cpu"))
    return [(cpu, cuda), (cuda, cpu), (older, cpu), (cpu, older)]


def test_every_pip_command_parses_and_pins_the_bases_full_version() -> None:
    checked = 0
    for base, target in all_remedy_cases():
        for finding in findings(base, target):
            if finding.caused_by is not None:
                # A consequence defers to its root's remedy (envcheck.diff.fixes): no command of its own.
                assert finding.actions == () and "`pip" not in finding.remedy, finding.key
                assert finding.remedy.startswith("Follows from "), finding.key
                continue
            for command in COMMAND.findall(finding.remedy):
                for req in pip_requirements(command):
                    pins = [s.version for s in req.specifier if s.operator == "=="]
                    dist = pkg(base, req.name)
                    if pins and dist is not None and finding.base not in (None, "missing"):
                        # torch's labelled version may come from torch/version.py when pip's lacks it
                        static = base.torch.static.version if base.torch.static else None
                        assert pins[0] in (dist.version, static), (finding.key, command)
                    checked += 1
    assert checked > 10


def test_the_version_remedy_keeps_the_label_and_names_the_index() -> None:
    # The trap of the issue: `torch==2.12.0` drops the label, and on Linux that pin installs the CUDA build.
    base, target = manifest("dev-cpu", torch_at("2.12.0+cpu")), manifest("dev-cpu")
    (version,) = [f for f in findings(base, target) if f.rule == "ENV-TORCH-VERSION"]
    (command,) = COMMAND.findall(version.remedy)
    assert [str(r) for r in pip_requirements(command)] == ["torch==2.12.0+cpu"]
    # PyTorch's own index for the build, by its public URL: nothing for the user to look up.
    assert "--index-url 'https://download.pytorch.org/whl/cpu'" in command


def test_an_index_recorded_on_the_base_is_used_and_a_redacted_one_is_not() -> None:
    def index(url: str) -> Edit:
        return lambda d: d["env"].update(PIP_EXTRA_INDEX_URL=url)

    target = manifest("dev-cpu")
    recorded = manifest("dev-cpu", torch_at("2.12.0+cpu"), index("https://mirror.example.invalid/whl/cpu"))
    (f,) = [f for f in findings(recorded, target) if f.rule == "ENV-TORCH-VERSION"]
    assert (
        "--index-url 'https://mirror.example.invalid/whl/cpu'" in f.remedy
        and "download.pytorch.org" not in f.remedy
    )
    redacted = manifest(
        "dev-cpu", torch_at("2.12.0+cpu"), index("https://<redacted>@mirror.example.invalid/whl/cpu")
    )
    (f,) = [f for f in findings(redacted, target) if f.rule == "ENV-TORCH-VERSION"]
    assert "<redacted>" not in f.remedy and "'https://download.pytorch.org/whl/cpu'" in f.remedy


def test_a_cuda_build_without_a_label_is_pinned_with_its_label() -> None:
    # The CUDA venv's pip metadata says 2.14.1 (the default index's Linux wheel); torch/version.py says
    # 2.14.1+cu130: the remedy pins the build, from the cu130 index.
    (f,) = [f for f in findings(manifest("cuda"), manifest("dev-cpu")) if f.rule == "ENV-TORCH-VARIANT"]
    (command,) = COMMAND.findall(f.remedy)
    assert "torch==2.14.1+cu130" in [str(r) for r in pip_requirements(command)]
    assert "--index-url 'https://download.pytorch.org/whl/cu130'" in f.remedy


def test_remedies_fit_a_windows_target() -> None:
    def on_windows(d: dict[str, object]) -> None:
        d["platform"]["system"] = "Windows"  # type: ignore[index]

    base, target = manifest("dev-cpu", torch_at("2.12.0+cpu")), manifest("dev-cpu", on_windows)
    (f,) = [f for f in findings(base, target) if f.rule == "ENV-TORCH-VERSION"]
    assert "pip install 'torch==2.12.0+cpu' --index-url 'https://download.pytorch.org/whl/cpu'" in f.remedy
    assert '"' not in COMMAND.findall(f.remedy)[0]  # PowerShell expands $(…) in double quotes


@pytest.mark.slow
def test_pip_accepts_the_command_against_a_local_index(tmp_path: Path) -> None:
    wheels = sorted(WHEELS.glob("torch-2.13.0+cpu-*.whl")) if WHEELS.is_dir() else []
    if not wheels:
        pytest.skip("no local wheel store serving torch==2.13.0+cpu on this machine")
    # A PEP 503 index whose URL ends in /cpu, as PyTorch's does, serving the local wheel.
    project = tmp_path / "whl" / "cpu" / "torch"
    project.mkdir(parents=True)
    project.joinpath("index.html").write_text(
        "".join(f'<a href="{w.as_uri()}">{w.name}</a>\n' for w in wheels), encoding="utf-8"
    )
    base, target = manifest("dev-cpu"), manifest("dev-cpu", torch_at("2.12.0+cpu"))
    (f,) = [f for f in findings(base, target) if f.rule == "ENV-TORCH-VERSION"]
    (command,) = COMMAND.findall(f.remedy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull)
    # PyTorch's CPU index is not reachable here: the local index at the same path stands in for it.
    assert pytorch_index("cpu") in command
    command = command.replace(pytorch_index("cpu"), (tmp_path / "whl" / "cpu").as_uri())
    python = shlex.quote(sys.executable)
    # --ignore-installed: the test environment has this torch; pip must find it on the index.
    proc = subprocess.run(
        [
            "bash",
            "-c",
            command.replace(
                "pip install", f"{python} -m pip install --dry-run --no-deps --ignore-installed", 1
            ),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if "No module named pip" in proc.stderr:
        pytest.skip("the test environment has no pip")
    assert proc.returncode == 0, proc.stderr
    assert "Would install torch-2.13.0+cpu" in proc.stdout
