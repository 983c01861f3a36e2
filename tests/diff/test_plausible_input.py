"""Plausible but broken input is a finding or one line with exit 2, never "internal error".

- A requirement marker holding both quote characters (each string of a PEP 508 marker may use the other
  quote): doctor, diff, a fleet report and a cluster report, in every format.
- A torch whose ``.dist-info`` is gone (a real venv: an interrupted install or uninstall): snapshot, doctor,
  diff both ways and gate; ``KeyError: 'torch'`` before ENV-TORCH-NO-METADATA.
- A hash cache (``ENVCHECK_CACHE_DIR``) that cannot be written: below a regular file, in a read-only
  folder, on a full file system: the run goes on without a cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from diffdata import MANIFESTS, dist_entry, manifest
from hostile import envcheck_argv
from venvs import clone_site_packages, needs_torch, venv_site

from envcheck.app import flows
from envcheck.cluster.report import Environments, JobView, build
from envcheck.diff.policy import Policy
from envcheck.manifest.io import load
from envcheck.report import FORMATS, render

# Each string of a marker takes the quote the other string does not: packaging reads them all.
BOTH_QUOTES = (
    "quoted-dep>=1; os_name == 'posix' and platform_release != \"a'b\" and platform_version != 'c\"d'",
    "quoted-dep>=1; extra == \"a'b\" or os_name == 'posix'",
    "quoted-dep>=1 ; 'a\"b' != sys_platform and \"x'y\" not in platform_machine",
    "numpy>=99; python_version >= '3' and implementation_name != \"it's\" and os_name != 'say \"hi\"'",
    'quoted-dep[x]>=1; os_name == "posix" and extra == \'q"\'',
)


def with_markers(d: dict[str, Any]) -> None:
    torch = dist_entry(d, "torch")
    torch["requires"] = [*torch["requires"], *BOTH_QUOTES]


@pytest.mark.slow
def test_markers_holding_both_quotes_in_doctor_diff_fleet_and_cluster(tmp_path: Path) -> None:
    quoted = manifest("dev-cpu", with_markers)
    reports = [
        flows.doctor("quoted", quoted, Policy()),
        flows.diff("base", manifest("dev-cpu"), ("quoted", quoted), Policy()),
        flows.diff("quoted", quoted, ("base", manifest("dev-cpu")), Policy()),
    ]
    found = {(f.rule, f.subject) for f in reports[0].findings}
    assert ("ENV-PKG-UNMET", "quoted-dep") in found and ("ENV-PKG-UNMET", "numpy") in found
    # A cluster whose ranks carry the markers, against the majority and against a manifest.
    raw = json.loads((MANIFESTS / "dev-cpu.json").read_text(encoding="utf-8"))
    with_markers(raw)
    environments = Environments()
    environments.add("n1", 0, raw)
    environments.add("n1", 1, json.loads((MANIFESTS / "dev-cpu.json").read_text(encoding="utf-8")))
    job = JobView(world_size=2, environments=environments, problems=(), collectives={}, members=(0, 1))
    reports += [build(job, None, Policy()), build(job, ("base.json", manifest("dev-cpu")), Policy())]
    for report in reports:
        for fmt in FORMATS:
            render(report.findings, fmt, title=report.title, fail_on="error", groups=report.groups)
    # The CLI: doctor, diff and a fleet folder, every format.
    path = tmp_path / "quoted.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    shutil.copy(path, fleet / "a.json")
    shutil.copy(MANIFESTS / "dev-cpu.json", fleet / "b.json")
    for fmt in FORMATS:
        for args in (
            ("doctor", str(path)),
            ("diff", str(MANIFESTS / "dev-cpu.json"), str(path)),
            ("diff", str(MANIFESTS / "dev-cpu.json"), str(fleet)),
        ):
            code, stdout, stderr = run(*args, "-f", fmt)
            assert code == 1 and "internal error" not in stderr and "quoted-dep" in stdout, (
                args,
                fmt,
                stderr,
            )


@pytest.fixture(scope="module")
def torch_without_metadata(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A real venv: the test environment's site-packages, hard-linked, without torch's .dist-info."""
    from venvs import make_venv

    python = make_venv(tmp_path_factory.mktemp("no-dist-info") / "venv")
    clone_site_packages(python)
    (info,) = venv_site(python).glob("torch-*.dist-info")
    shutil.rmtree(info)  # removes the links, never the files they share with the test environment
    yield python


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        envcheck_argv(*args),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "NO_COLOR": "1", **(env or {})},
    )


@pytest.mark.slow
@needs_torch
def test_a_torch_without_its_dist_info(torch_without_metadata: Path, tmp_path: Path) -> None:
    snap = tmp_path / "nodist.json"
    done = _cli("snapshot", "--python", str(torch_without_metadata), "--no-verify", "-o", str(snap))
    assert done.returncode == 0, done.stderr
    base = str(MANIFESTS / "dev-cpu.json")
    for args in (
        ("doctor", str(snap), "-f", "json"),
        ("diff", base, str(snap), "-f", "json"),
        ("diff", str(snap), base, "-f", "json"),
        ("gate", base, "--python", str(torch_without_metadata), "--no-imports", "-f", "json"),
    ):
        done = _cli(*args)
        assert done.returncode in (0, 1) and "internal error" not in done.stderr, (args, done.stderr)
        findings = json.loads(done.stdout)["findings"]
        rules = {(f["rule"], f["subject"]) for f in findings}
        if args[0] != "diff" or args[2] == str(snap):  # the metadata-less side is the one inspected
            (f,) = [f for f in findings if f["rule"] == "ENV-TORCH-NO-METADATA"]
            # The exact build reinstalled: in its own remedy, or its root's (the torch tree no RECORD
            # owns), which a consequence defers to.
            root = next((r for r in findings if r["id"] == f["caused_by"]), f)
            assert "--force-reinstall --no-deps 'torch==2.13.0" in root["remedy"], (f, root)
        # torch's files are there: it is neither missing nor added, and the libraries it loads are torch's
        # own in torch's own place, not "system copies" (no distribution owns them).
        gone = {("ENV-PKG-MISSING", "torch"), ("ENV-PKG-ADDED", "torch"), ("ENV-TORCH-MISSING", "torch")}
        assert not gone & rules and not {r for r, _ in rules if r.startswith("ENV-NATIVE-")}, (args, rules)


def _full_filesystem(tmp_path: Path) -> Iterator[Path]:
    """A 16 KiB tmpfs filled to the last byte (needs the right to mount, as root in CI's container)."""
    mount = tmp_path / "full"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(mount)], capture_output=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode(errors='replace').strip()}")
    try:
        with (mount / "fill").open("wb", buffering=0) as f, pytest.raises(OSError):
            while True:
                f.write(b"\0" * 4096)
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture(params=["below-a-file", "read-only", "full"])
def unwritable_cache(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    if request.param == "below-a-file":
        (tmp_path / "a-file").write_text("x")
        yield tmp_path / "a-file" / "cache"
    elif request.param == "read-only":
        if os.geteuid() == 0:
            yield Path("/proc/envcheck-cache")  # procfs: even root cannot create a folder there
        else:
            folder = tmp_path / "ro"
            folder.mkdir(mode=0o500)
            yield folder / "cache"
    else:
        for full in _full_filesystem(tmp_path):
            yield full / "cache"


@pytest.mark.slow
def test_a_hash_cache_that_cannot_be_written_is_no_cache(unwritable_cache: Path, tmp_path: Path) -> None:
    out = tmp_path / "m.json"
    done = _cli(
        "snapshot",
        "--no-verify",
        "--verify-files",
        "-o",
        str(out),
        env={"ENVCHECK_CACHE_DIR": str(unwritable_cache)},
    )
    assert done.returncode == 0 and "internal error" not in done.stderr, done.stderr
    assert load(out).native is not None  # the walk and the RECORD check ran, without a cache
    assert not (unwritable_cache / "file-hashes.json").exists()
