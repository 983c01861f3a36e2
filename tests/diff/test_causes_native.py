"""Root causes in the native, environment and interpreter families.

The shadowing case is taken on this machine, for real: the test venv snapshotted plainly and again under
``LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu``, which holds Debian's libgomp.so.1 and libpython3.11.so.1.0
(3.11.2) while the venv's interpreter is pyenv's 3.11.7 with its own libpython. The other families are
real manifests edited the way a snapshot would record them; ``causes.link`` is checked on its own too.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from diffdata import manifest

from envcheck.app import flows
from envcheck.core.findings import Finding, Severity
from envcheck.diff.causes import link
from envcheck.diff.engine import diff, doctor
from envcheck.diff.policy import Policy
from envcheck.manifest.identity import aliases, canonical
from envcheck.manifest.io import load
from envcheck.manifest.model import Manifest

SYSTEM = "/usr/lib/x86_64-linux-gnu"
VAR = "ENV-VAR-CHANGED:LD_LIBRARY_PATH"


def _shadowing_possible() -> str | None:
    if not sys.platform.startswith("linux"):
        return "Linux loader case"
    try:
        import torch  # noqa: F401  (only whether it is installed; the probe imports it in the target)
    except ImportError:
        return "torch is not installed in the test environment"
    if not Path(SYSTEM, "libgomp.so.1").exists():
        return f"{SYSTEM} has no libgomp.so.1"
    return None


needs_shadowing = pytest.mark.skipif(_shadowing_possible() is not None, reason=str(_shadowing_possible()))


def _envcheck(*args: str, ld_library_path: str | None, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Manifest, Manifest]:
    """(folder, plain, shadowed): two real snapshots of the test venv (no smoke suite)."""
    folder = tmp_path_factory.mktemp("shadowing")
    for name, value in (("plain", None), ("shadowed", SYSTEM)):
        done = _envcheck(
            "snapshot", "--no-verify", "-o", str(folder / f"{name}.json"), ld_library_path=value, cwd=folder
        )
        assert done.returncode == 0, done.stderr
    return folder, load(folder / "plain.json"), load(folder / "shadowed.json")


def _errors_and_warnings(findings: tuple[Finding, ...] | list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity in ("error", "warning")]


def _same_file_sides(
    findings: tuple[Finding, ...] | list[Finding], base: Manifest, target: Manifest
) -> list[str]:
    b, t = aliases(base), aliases(target)
    return [
        f.key
        for f in findings
        if f.base
        and f.target
        and f.base.startswith("/")
        and f.target.startswith("/")
        and canonical(f.base, b) == canonical(f.target, t)
    ]


@pytest.mark.slow
@needs_shadowing
def test_the_variable_leads_with_the_moved_libraries_under_it(pair: tuple[Path, Manifest, Manifest]) -> None:
    _, plain, shadowed = pair
    report = flows.diff("plain.json", plain, ("shadowed.json", shadowed), Policy())
    found = {f.key: f for f in report.findings}
    roots = [f for f in report.findings if f.caused_by is None]
    assert VAR in found and found[VAR].caused_by is None
    # The wheel's libgomp lost to the system's copy: one finding, under the variable.
    assert found["ENV-NATIVE-SHADOWED:libgomp.so.1"].caused_by == VAR
    assert found["ENV-NATIVE-SHADOWED:libgomp.so.1"].target == f"{SYSTEM}/libgomp.so.1"
    # Its echoes are folded into it, not repeated.
    for echo in ("ENV-NATIVE-RESOLVED-ELSEWHERE", "ENV-NATIVE-LOADED-FROM", "ENV-NATIVE-REQUIRES"):
        assert f"{echo}:libgomp.so.1" not in found
    # No libc / libm / ld.so "moved" from /lib to /usr/lib: one file on a merged-/usr system.
    assert not [k for k in found if k.startswith("ENV-NATIVE-RESOLVED-ELSEWHERE:")]
    assert _same_file_sides(report.findings, plain, shadowed) == []
    # The other libpython, its version and the stdlib it changed.
    if plain.python.shared_library and not Path(plain.python.shared_library).resolve().is_relative_to(SYSTEM):
        lib = next(f for f in report.findings if f.rule == "ENV-PYTHON-LIBPYTHON")
        assert lib.caused_by == VAR and lib.target and lib.target.startswith(SYSTEM)
        if plain.python.version != shadowed.python.version:
            assert found["ENV-PYTHON-VERSION:python"].caused_by == VAR
    assert len(_errors_and_warnings(report.findings)) <= 5, [f.key for f in report.findings]
    assert len(_errors_and_warnings(roots)) <= 2, [f.key for f in roots]
    assert {f.caused_by for f in report.findings if f.caused_by} == {VAR}


@pytest.mark.slow
@needs_shadowing
def test_doctor_names_the_shadowed_library_and_the_foreign_libpython(
    pair: tuple[Path, Manifest, Manifest],
) -> None:
    _, plain, shadowed = pair
    found = {f.key: f for f in flows.doctor("shadowed.json", shadowed, Policy()).findings}
    gomp = found["ENV-NATIVE-SHADOWED:libgomp.so.1"]
    assert gomp.severity == "error" and gomp.caused_by is None  # no baseline: the variable is no finding here
    assert "torch ships libgomp.so.1" in gomp.message and "LD_LIBRARY_PATH" in gomp.message
    assert gomp.base == "torch:torch/lib/libgomp.so.1"
    if shadowed.python.loaded_library and shadowed.python.loaded_library.startswith(SYSTEM):
        python = next(f for f in found.values() if f.rule == "ENV-PYTHON-LIBPYTHON")
        assert python.severity == "error" and python.target == shadowed.python.loaded_library
        if shadowed.python.stdlib_errors:
            assert all(name in python.message for name in shadowed.python.stdlib_errors)
    # The plain snapshot of the same venv is clean of both.
    clean = flows.doctor("plain.json", plain, Policy()).findings
    assert not [f for f in clean if f.rule in ("ENV-NATIVE-SHADOWED", "ENV-PYTHON-LIBPYTHON")]


@needs_shadowing
def test_requires_says_the_base_bundled_it(pair: tuple[Path, Manifest, Manifest]) -> None:
    # Before linking (engine only): the echo is true on its own, and folds under the move.
    _, plain, shadowed = pair
    requires = [
        f for f in diff(plain, shadowed) if f.rule == "ENV-NATIVE-REQUIRES" and f.subject == "libgomp.so.1"
    ]
    assert requires, "the target's tree needs libgomp.so.1 from the machine"
    assert "nothing on the base needed" not in requires[0].message
    assert requires[0].base == "bundled: torch:torch/lib/libgomp.so.1"
    assert requires[0].caused_by == "ENV-NATIVE-RESOLVED-ELSEWHERE:libgomp.so.1"
    assert "download" not in requires[0].remedy and "VC++" not in requires[0].remedy


@pytest.mark.slow
@needs_shadowing
def test_gate_under_the_variable(pair: tuple[Path, Manifest, Manifest]) -> None:
    folder, _, _ = pair
    done = _envcheck("gate", "plain.json", "--format", "json", ld_library_path=SYSTEM, cwd=folder)
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    findings: list[dict[str, Any]] = report["findings"]
    keys = {f.get("id") or f"{f['rule']}:{f['subject']}" for f in findings}
    assert {"ENV-VAR-CHANGED:LD_LIBRARY_PATH", "ENV-NATIVE-SHADOWED:libgomp.so.1"} <= keys
    serious = [f for f in findings if f["severity"] in ("error", "warning")]
    assert len(serious) <= 5, sorted(keys)
    assert not [k for k in keys if k.startswith("ENV-NATIVE-RESOLVED-ELSEWHERE:")]
    shadow = next(f for f in findings if f["rule"] == "ENV-NATIVE-SHADOWED")
    assert shadow.get("caused_by") == VAR


# --- edited real manifests: one cause family each -----------------------------------------------------


def _preloaded_intel_openmp(d: dict[str, Any]) -> None:
    """LD_PRELOAD of a system libgomp: the process maps it instead of torch's."""
    d["env"]["LD_PRELOAD"] = "/opt/gomp/libgomp.so.1"
    for lib in d["runtimes"]["loaded"]:
        if lib["path"].endswith("/torch/lib/libgomp.so.1"):
            lib.update(path="/opt/gomp/libgomp.so.1", owner="system", identity="sha256:" + "2" * 64)


def test_ld_preload_is_the_cause_of_the_library_it_names() -> None:
    base, target = manifest("dev-cpu"), manifest("dev-cpu", _preloaded_intel_openmp)
    report = flows.diff("base", base, ("target", target), Policy())
    moved = next(
        f for f in report.findings if f.rule == "ENV-NATIVE-LOADED-FROM" and f.subject == "libgomp.so.1"
    )
    assert moved.caused_by == "ENV-VAR-CHANGED:LD_PRELOAD"
    assert next(f for f in report.findings if f.key == "ENV-VAR-CHANGED:LD_PRELOAD").caused_by is None


def test_a_variable_that_does_not_name_the_folder_is_not_the_cause() -> None:
    def unrelated(d: dict[str, Any]) -> None:
        _preloaded_intel_openmp(d)
        d["env"].pop("LD_PRELOAD")
        d["env"]["LD_LIBRARY_PATH"] = "/opt/other"

    report = flows.diff("base", manifest("dev-cpu"), ("target", manifest("dev-cpu", unrelated)), Policy())
    moved = next(
        f for f in report.findings if f.rule == "ENV-NATIVE-LOADED-FROM" and f.subject == "libgomp.so.1"
    )
    assert moved.caused_by is None


def _respelled_system_paths(d: dict[str, Any]) -> None:
    """Every system file named through /usr/lib instead of /lib, as LD_LIBRARY_PATH=/usr/lib/... does, and
    no content identity to lean on: only the recorded alias tells they are the same files."""
    d["platform"]["path_aliases"] = {"/lib": "/usr/lib", "/lib64": "/usr/lib64"}
    for node in d["native"]["nodes"]:
        node["identity"] = None
        if node["key"].startswith("/lib/"):
            node["key"] = "/usr" + node["key"]
            node["path"] = "/usr" + node["path"]
        for dep in node.get("dependencies") or []:
            if dep.get("target") and dep["target"].startswith("/lib/"):
                dep["target"] = "/usr" + dep["target"]


def test_merged_usr_respelling_is_no_move() -> None:
    base = manifest("dev-cpu", lambda d: d["platform"].update(path_aliases={"/lib": "/usr/lib"}))
    target = manifest("dev-cpu", _respelled_system_paths)
    assert any(
        dep.target and dep.target.startswith("/usr/lib/")
        for n in target.native.nodes or []  # type: ignore[union-attr]
        for dep in n.dependencies or []
    ), "the edit must respell something"
    assert [f for f in diff(base, target) if f.rule == "ENV-NATIVE-RESOLVED-ELSEWHERE"] == []
    # Without the recorded alias (a manifest from before) and without identities, spelling is all there is.
    unaliased = manifest(
        "dev-cpu", _respelled_system_paths, lambda d: d["platform"].update(path_aliases=None)
    )
    assert [f for f in diff(manifest("dev-cpu"), unaliased) if f.rule == "ENV-NATIVE-RESOLVED-ELSEWHERE"]


def _foreign_libpython(d: dict[str, Any]) -> None:
    d["env"]["LD_LIBRARY_PATH"] = SYSTEM
    d["python"].update(
        version="3.11.2",
        build_version="3.11.7",
        own_library="/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
        loaded_library=f"{SYSTEM}/libpython3.11.so.1.0",
        stdlib_errors={"_ssl": "ImportError: undefined symbol: _PyModule_Add"},
    )


def test_another_libpython_is_the_cause_of_the_python_version() -> None:
    base = manifest("dev-cpu", lambda d: d["python"].update(version="3.11.7", build_version="3.11.7"))
    report = flows.diff("base", base, ("target", manifest("dev-cpu", _foreign_libpython)), Policy())
    found = {f.key: f for f in report.findings}
    assert found["ENV-PYTHON-LIBPYTHON:libpython3.11.so.1.0"].caused_by == VAR
    assert found["ENV-PYTHON-VERSION:python"].caused_by == VAR  # via the libpython, flattened to the root
    assert "_ssl" in found["ENV-PYTHON-LIBPYTHON:libpython3.11.so.1.0"].message


def test_linux_remedies_never_advise_the_vc_redistributable() -> None:
    def missing_libgomp(d: dict[str, Any]) -> None:
        d["native"]["missing"] = [
            {
                "root": "torch:torch/_C.cpython-311-x86_64-linux-gnu.so",
                "chain": [
                    "torch:torch/_C.cpython-311-x86_64-linux-gnu.so",
                    "torch:torch/lib/libtorch_cpu.so",
                ],
                "missing": "libgomp.so.1",
                "text": "_C → libtorch_cpu.so → libgomp.so.1: MISSING",
                "from_extension": True,
            }
        ]

    linux = doctor(manifest("dev-cpu", missing_libgomp))
    assert [f for f in linux if f.rule == "ENV-NATIVE-MISSING"]
    assert not [f.key for f in linux if "VC++" in f.remedy or "DLL" in f.remedy]
    # torch ships libgomp.so.1 (its RECORD lists it): reinstalling torch is the remedy, on any system.
    assert any(
        "--force-reinstall --no-deps 'torch==" in f.remedy for f in linux if f.rule == "ENV-NATIVE-MISSING"
    )

    def missing_runtime(d: dict[str, Any]) -> None:
        missing_libgomp(d)
        d["native"]["missing"][0]["missing"] = (
            "VCRUNTIME140_1.dll"  # no distribution of the manifest ships it
        )
        d["native"].update(loader="windows")

    windows = doctor(manifest("dev-cpu", missing_runtime))
    assert any("VC++" in f.remedy for f in windows if f.rule == "ENV-NATIVE-MISSING")


def test_requires_of_a_library_the_base_never_needed_says_so() -> None:
    def drop_gomp(d: dict[str, Any]) -> None:
        for node in d["native"]["nodes"]:
            node["dependencies"] = [x for x in node.get("dependencies") or [] if x["name"] != "libgomp.so.1"]

    def needs_gomp(d: dict[str, Any]) -> None:
        d["native"]["requires"].append(
            {
                "name": "libgomp.so.1",
                "kind": "redistributable",
                "runtime": "GNU OpenMP runtime (libgomp)",
                "count": 1,
                "needed_by": ["torch:torch/lib/libtorch_cpu.so"],
            }
        )

    found = [
        f
        for f in diff(manifest("dev-cpu", drop_gomp), manifest("dev-cpu", needs_gomp))
        if f.rule == "ENV-NATIVE-REQUIRES"
    ]
    assert [(f.base, f.caused_by) for f in found] == [("not needed", None)]
    assert "operating system's packages" in found[0].remedy


# --- causes.link on its own ---------------------------------------------------------------------------


def _f(
    rule: str,
    subject: str,
    *,
    caused_by: str | None = None,
    base: str | None = None,
    target: str | None = None,
    severity: Severity = "warning",
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        subject=subject,
        message="m",
        remedy="r",
        base=base,
        target=target,
        caused_by=caused_by,
    )


def test_link_folds_echoes_and_redirects_their_consequences() -> None:
    var = _f("ENV-VAR-CHANGED", "LD_LIBRARY_PATH", base="unset", target="'/opt/lib'")
    shadow = _f("ENV-NATIVE-SHADOWED", "libx.so.1", caused_by=var.key, target="/opt/lib/libx.so.1")
    moved = _f("ENV-NATIVE-RESOLVED-ELSEWHERE", "libx.so.1", caused_by=var.key, target="/opt/lib/libx.so.1")
    requires = _f("ENV-NATIVE-REQUIRES", "libx.so.1", caused_by=moved.key)
    other = _f("ENV-NATIVE-LOST", "numpy", caused_by=moved.key)
    out = {f.key: f for f in link([var, shadow, moved, requires, other])}
    assert set(out) == {var.key, shadow.key, other.key}
    assert out[shadow.key].caused_by == var.key
    assert out[other.key].caused_by == var.key  # named the dropped echo: now its root


def test_link_checks_that_the_variable_names_the_folder() -> None:
    var = _f("ENV-VAR-CHANGED", "LD_LIBRARY_PATH", base="'/opt/lib'", target="'/opt/lib:/srv/lib'")
    old_folder = _f("ENV-NATIVE-SHADOWED", "liba.so", caused_by=var.key, target="/opt/lib/liba.so")
    new_folder = _f("ENV-NATIVE-SHADOWED", "libb.so", caused_by=var.key, target="/srv/lib/libb.so")
    out = {f.key: f.caused_by for f in link([var, old_folder, new_folder])}
    assert out == {var.key: None, old_folder.key: None, new_folder.key: var.key}


def test_link_makes_roots_of_absent_causes_and_of_loops() -> None:
    a = _f("ENV-NATIVE-LOST", "a", caused_by="ENV-NATIVE-LOST:b")
    b = _f("ENV-NATIVE-LOST", "b", caused_by="ENV-NATIVE-LOST:a")
    orphan = _f("ENV-NATIVE-SHADOWED", "c", caused_by="ENV-VAR-CHANGED:LD_LIBRARY_PATH")
    assert [f.caused_by for f in link([a, b, orphan])] == [None, None, None]
    assert link([dataclasses.replace(orphan, caused_by=None)]) == [
        dataclasses.replace(orphan, caused_by=None)
    ]


def test_the_cuda_stack_a_torch_variant_brings_folds_under_it() -> None:
    examples = Path(__file__).resolve().parents[2] / "manifests" / "examples"
    cpu = load(examples / "torch-2.13.0-cpu-linux.json")
    cuda = load(examples / "torch-2.14.1-cu130-linux-nogpu.json")
    found = {f.key: f for f in flows.diff("cpu", cpu, ("cuda", cuda), Policy()).findings}
    variant = "ENV-TORCH-VARIANT:torch"
    assert found[variant].caused_by is None
    assert found["ENV-NATIVE-REQUIRES:libcuda.so.1"].caused_by == variant
    assert found["ENV-NATIVE-ADDED:torch"].caused_by == variant
    # A system library is not the variant's to claim.
    assert found["ENV-NATIVE-ADDED:system"].caused_by is None
