"""End to end: credentials planted everywhere a target can leak them never reach a manifest, a report or
the terminal.

Canaries (each shaped like the credential it stands for, so a redactor can know it) are planted in:
environment variables under allowlisted prefixes, a distribution's METADATA ``Requires-Dist`` and its
``direct_url.json``, a folder on ``sys.path``, the message of a failing ``import torch`` and the stderr the
target prints, and a ``--checks`` file whose checks raise with one and print one to stderr before the
process dies. Then the real CLI runs ``snapshot`` (of the broken venv, and with goldens of the test
interpreter), ``show``, ``diff`` in every format, ``verify`` and ``gate``; no canary may appear in any
manifest, report file, stdout or stderr. Each canary-bearing field is also checked to have arrived,
redacted, so the test cannot pass because a field went missing. (A target's stderr is kept only when it
dies: the dying check's is.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from hostile import envcheck_argv
from venvs import fault_torch, needs_torch, site_packages, venv_site

from envcheck.core.redact import REDACTED

MANIFESTS = Path(__file__).resolve().parent / "data" / "manifests"

GHP_FOLDER = "ghp_" + "CanaryFolder0123456789abcdefghijklmn"
CANARIES = {
    "TORCH_ACCESS_KEY": "CanaryTorchAccessKey01",
    "CUDA_LICENSE_KEY": "CanaryCudaLicense02",
    "PIP_PROXY": "proxyuser:CanaryProxyPass03@proxy.example:3128",
    "PIP_INDEX_URL": "https://user:p@ssCanaryIndex04@pypi.corp.example/simple",
    "PIP_EXTRA_INDEX_URL": "https://s3.example/simple?X-Amz-Credential=CanaryAmzCred05&X-Amz-Signature=CanarySig06",
    "CONDA_CHANNELS": "https://conda.anaconda.org/t/ab-1234-CanaryConda07/pytorch",
    "TORCH_HOME": "/srv/models?token=CanaryQueryToken08",
}
# The secret part of each planted value: what must never be printed or written.
SECRETS = [
    "CanaryTorchAccessKey01",
    "CanaryCudaLicense02",
    "CanaryProxyPass03",
    "CanaryIndex04",
    "CanaryAmzCred05",
    "CanarySig06",
    "CanaryConda07",
    "CanaryQueryToken08",
    "CanaryRequires09",
    "CanaryGitToken10",
    GHP_FOLDER,
    "CanaryImportError11",
    "CanaryStderr12",
    "CanaryCheckError13",
    "CanaryCheckStderr14",
]

FAULT_TORCH = """
import sys
sys.stderr.write("fetching wheels with Authorization: Bearer CanaryStderr12.payload\\n")
sys.stderr.flush()
raise ImportError("libc10.so missing; reinstall from https://ci:CanaryImportError11@mirror.corp.example/whl")
"""

CHECKS = """
import os
import sys


def check_leaks_in_exception():
    raise RuntimeError("upload failed: password=CanaryCheckError13 for https://u:CanaryCheckError13@h.example/")


def check_zz_dies_after_printing():
    sys.stderr.write("retrying with token=CanaryCheckStderr14\\n")
    sys.stderr.flush()
    os._exit(7)
"""


def _plant_distribution(site: Path) -> None:
    info = site / "canary_pkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: canary-pkg\nVersion: 1.0\n"
        "Requires-Dist: private-dep @ https://deploy:CanaryRequires09@git.corp.example/private-dep-1.0.whl\n\n",
        encoding="utf-8",
    )
    direct_url = {
        "url": "git+https://oauth2:CanaryGitToken10@gitlab.corp.example/org/canary.git",
        "vcs_info": {"vcs": "git", "commit_id": "0" * 40},
    }
    (info / "direct_url.json").write_text(json.dumps(direct_url), encoding="utf-8")
    (info / "INSTALLER").write_text("pip\n", encoding="utf-8")
    (info / "RECORD").write_text("canary_pkg-1.0.dist-info/METADATA,,\n", encoding="utf-8")


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
@needs_torch
def test_no_canary_reaches_a_manifest_a_report_or_the_terminal(
    venv_factory: Callable[[str], Path], tmp_path: Path
) -> None:
    broken = fault_torch(venv_factory, "canary-venv", FAULT_TORCH)
    site = venv_site(broken)
    _plant_distribution(site)
    secret_folder = tmp_path / GHP_FOLDER
    secret_folder.mkdir()
    (site / "canary.pth").write_text(f"{secret_folder}\n", encoding="utf-8")
    checks = tmp_path / "checks.py"
    checks.write_text(CHECKS, encoding="utf-8")
    env = {**os.environ, **CANARIES, "PYTHONPATH": str(secret_folder), "NO_COLOR": "1"}

    runs = {
        "snapshot broken": envcheck_argv("snapshot", "--python", str(broken), "-o", "broken.json"),
        "snapshot live": envcheck_argv("snapshot", "--checks", str(checks), "-o", "live.json"),
        "show": envcheck_argv("show", "broken.json"),
        "diff text": envcheck_argv("diff", "broken.json", "live.json", "--junit", "diff.xml"),
        "diff json": envcheck_argv("diff", "broken.json", "live.json", "-f", "json", "-o", "diff.json"),
        "diff markdown": envcheck_argv("diff", "broken.json", "live.json", "-f", "markdown", "-o", "diff.md"),
        "verify": envcheck_argv("verify", "--checks", str(checks), "--junit", "verify.xml"),
        "gate": envcheck_argv("gate", "broken.json", "--checks", str(checks), "--junit", "gate.xml"),
    }
    printed = {}
    for name, argv in runs.items():
        result = _run(argv, env, tmp_path)
        assert result.returncode in (0, 1), f"{name}: exit {result.returncode}\n{result.stderr[-3000:]}"
        assert "Traceback" not in result.stderr, f"{name}:\n{result.stderr[-3000:]}"
        printed[name] = result.stdout + result.stderr

    written = {p.name: p.read_text(encoding="utf-8") for p in tmp_path.iterdir() if p.is_file()}
    assert {"broken.json", "live.json", "diff.xml", "diff.json", "diff.md", "verify.xml", "gate.xml"} <= set(
        written
    )
    written.pop("checks.py")
    leaks = [
        f"{secret} in {where}"
        for where, text in [*printed.items(), *written.items()]
        for secret in SECRETS
        if secret in text
    ]
    assert not leaks, leaks

    # Every canary-bearing field arrived, redacted: the test saw the leak paths it claims to cover.
    broken_manifest = written["broken.json"]
    live_manifest = written["live.json"]
    for name in ("TORCH_ACCESS_KEY", "CUDA_LICENSE_KEY", "PIP_PROXY", "PIP_INDEX_URL", "CONDA_CHANNELS"):
        assert f'"{name}"' in broken_manifest and f'"{name}"' in live_manifest, name
    assert "private-dep @ https://<redacted>@git.corp.example" in broken_manifest
    assert "git+https://<redacted>@gitlab.corp.example" in broken_manifest
    assert "reinstall from https://<redacted>@mirror.corp.example" in broken_manifest  # failing import
    assert f"/{REDACTED}" in live_manifest  # the ghp_ folder on sys.path (PYTHONPATH)
    # The custom checks ran in the live snapshot (goldens): the exception and the dying check's stderr.
    assert "upload failed: password=<redacted>" in live_manifest
    assert "retrying with token=<redacted>" in live_manifest
    for report in ("verify.xml", "gate.xml"):
        assert "leaks_in_exception" in written[report] and "upload failed" in written[report], report
        assert "zz_dies_after_printing" in written[report], report


# --- a manifest envcheck did not write --------------------------------------------------------------------
# An older release's manifest, a hand-edited one, a cluster rank's payload: its strings never passed the
# target's redactor. Every report envcheck writes from it (each format, stdout and files) still holds none
# of its credentials.
PLANTED = {
    "index": "https://ci:CanaryIndexUrl21@mirror.corp.example/whl/cpu",
    "extra": "https://pkgs.corp.example/simple?token=CanaryQuery22",
    "wheel": "https://u:CanaryWheel23@files.corp.example/torch-2.12.0+cpu-cp311-cp311-linux_x86_64.whl",
    "requirement": "private-dep @ https://deploy:CanaryRequirement24@git.corp.example/private-dep-1.0.whl",
    "key_base": "CanaryAccessKey25",
    "key_target": "CanaryAccessKey26",
    "sys_path": "/srv/" + "ghp_" + "CanaryPath27abcdefghijklmnopqrstuvwxyz",
    "label": "prod-box hf_" + "CanaryLabel28abcdefghijklmnopqrstu",
    "pip_conf": "CanaryPipConf29",
}
UNREDACTED_SECRETS = [
    "CanaryIndexUrl21",
    "CanaryQuery22",
    "CanaryWheel23",
    "CanaryRequirement24",
    "CanaryAccessKey25",
    "CanaryAccessKey26",
    "CanaryPath27",
    "CanaryLabel28",
    "CanaryPipConf29",
]
FORMATS = ("text", "json", "markdown", "junit", "html")


def _unredacted(side: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MANIFESTS / "dev-cpu.json").read_text(encoding="utf-8"))
    data["meta"]["label"] = PLANTED["label"]
    data["env"]["TORCH_ACCESS_KEY"] = PLANTED["key_base" if side == "base" else "key_target"]
    data["python"]["sys_path"].append(PLANTED["sys_path"])
    if side == "base":
        data["env"]["PIP_INDEX_URL"] = PLANTED["index"]
        data["env"]["PIP_EXTRA_INDEX_URL"] = PLANTED["extra"]
        torch = next(d for d in data["packages"] if d["name"] == "torch")
        torch["version"] = data["torch"]["static"]["version"] = data["torch"]["runtime"]["version"] = (
            "2.12.0+cpu"
        )
        torch["direct_url"] = {"url": PLANTED["wheel"], "archive_info": {}}
        torch["requires"] = [*torch["requires"], PLANTED["requirement"]]
    return data


@pytest.mark.slow
def test_no_canary_of_an_unredacted_manifest_reaches_any_report(tmp_path: Path) -> None:
    base, target = _unredacted("base"), _unredacted("target")
    (tmp_path / "base.json").write_text(json.dumps(base), encoding="utf-8")
    (tmp_path / "target.json").write_text(json.dumps(target), encoding="utf-8")
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "a.json").write_text(json.dumps(target), encoding="utf-8")
    (fleet / "b.json").write_text(json.dumps(base), encoding="utf-8")
    # pip's configuration holds a credential too: no command here reads it, none may print it.
    pip_conf = tmp_path / "pip.conf"
    pip_conf.write_text(f"[global]\nindex-url = https://u:{PLANTED['pip_conf']}@pip.corp.example/simple\n")
    env = {"PIP_CONFIG_FILE": str(pip_conf), "NO_COLOR": "1", "COLUMNS": "400"}
    out = tmp_path / "out"
    out.mkdir()

    printed: dict[str, str] = {}

    def cli(name: str, *args: str) -> None:
        code, stdout, stderr = run(*args, env=env)
        assert code in (0, 1), f"{name}: exit {code}\n{stderr[-3000:]}"
        printed[name] = stdout + stderr

    base_json, target_json = str(tmp_path / "base.json"), str(tmp_path / "target.json")
    cli("show", "show", base_json)
    for fmt in FORMATS:
        cli(f"diff {fmt}", "diff", base_json, target_json, "-f", fmt, "-o", str(out / f"diff.{fmt}"))
        cli(f"doctor {fmt}", "doctor", base_json, "-f", fmt, "-o", str(out / f"doctor.{fmt}"))
        cli(f"fleet {fmt}", "diff", base_json, str(fleet), "-f", fmt, "-o", str(out / f"fleet.{fmt}"))
        cli(f"diff stdout {fmt}", "diff", base_json, target_json, "-f", fmt, "--verbose")
    cli("diff junit", "diff", base_json, target_json, "--junit", str(out / "diff-junit.xml"))
    cli("doctor junit", "doctor", base_json, "--junit", str(out / "doctor-junit.xml"))
    cli("verify", "verify", "--against", base_json, "-f", "markdown", "-o", str(out / "verify.md"))
    # scan: a tree whose folder is named like a token (the paths of a tree are its report's strings).
    tree = tmp_path / "tree" / PLANTED["sys_path"].rsplit("/", 1)[1]
    tree.mkdir(parents=True)
    shutil.copy(next((site_packages() / "numpy" / "_core").glob("_multiarray_umath*.so")), tree)
    cli("scan text", "scan", str(tmp_path / "tree"), "-o", str(out / "scan.txt"))
    cli("scan json", "scan", str(tmp_path / "tree"), "--format", "json", "-o", str(out / "scan.json"))
    cli(
        "gate",
        "gate",
        base_json,
        "--no-imports",
        "-f",
        "html",
        "-o",
        str(out / "gate.html"),
        "--junit",
        str(out / "gate.xml"),
    )

    # A cluster report: two ranks' payloads as they arrive (unredacted), diffed against the base.
    from envcheck.cluster.report import Environments, JobView, build
    from envcheck.diff.policy import Policy
    from envcheck.manifest.io import load
    from envcheck.report import render

    environments = Environments()
    environments.add("node-" + PLANTED["label"], 0, target)
    environments.add("node-b", 1, base)
    job = JobView(world_size=2, environments=environments, problems=(), collectives={}, members=(0, 1))
    for against in (None, ("base.json", load(base_json))):
        report = build(job, against, Policy())
        for fmt in FORMATS:
            printed[f"cluster {fmt} {against is None}"] = render(
                report.findings,
                fmt,
                title=report.title,
                fail_on="error",
                rules=report.rules,
                groups=report.groups,
                member=report.member,
                verbose=True,
            )

    written = {p.name: p.read_text(encoding="utf-8") for p in out.iterdir()}
    assert len(written) == 3 * len(FORMATS) + 7, sorted(written)
    leaks = [
        f"{secret} in {where}"
        for where, text in [*printed.items(), *written.items()]
        for secret in UNREDACTED_SECRETS
        if secret in text
    ]
    assert not leaks, leaks
    # The canary-bearing strings arrived, redacted: the reports quote the index URL, the requirement, the
    # variable and the label (the test cannot pass because nothing was reported).
    everything = "\n".join([*printed.values(), *written.values()])
    for arrived in ("mirror.corp.example", "private-dep", "TORCH_ACCESS_KEY", "prod-box", REDACTED):
        assert arrived in everything, arrived
    assert "mirror.corp.example" in written["diff.text"] and REDACTED in written["diff.text"]
    assert f"{REDACTED}/_multiarray_umath" in written["scan.txt"] and REDACTED in written["scan.json"]
