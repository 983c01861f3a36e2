"""torch's changes as root causes: the package, backend and CUDA findings they explain fold under them.

Real manifests (a CPU venv and a CUDA venv, and the shipped examples), in both directions, and edited ones
for the cases this machine cannot produce. Reports are built by the diff flow, so the links seen here are
the ones a user sees.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from diffdata import dist_entry, manifest

from envcheck.app import flows
from envcheck.core.findings import Finding
from envcheck.diff.policy import Policy
from envcheck.manifest.io import load
from envcheck.manifest.model import Manifest

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"
CPU_EXAMPLE = EXAMPLES / "torch-2.13.0-cpu-linux.json"
CUDA_EXAMPLE = EXAMPLES / "torch-2.14.1-cu130-linux-nogpu.json"


def report(base: Manifest, target: Manifest) -> tuple[Finding, ...]:
    return flows.diff("base", base, ("target", target), Policy(disabled=True)).findings


def by_key(findings: tuple[Finding, ...]) -> dict[str, Finding]:
    return {f.key: f for f in findings}


def pairs() -> list[tuple[str, Manifest, Manifest]]:
    cpu, cuda = manifest("dev-cpu"), manifest("cuda")
    ex_cpu, ex_cuda = load(CPU_EXAMPLE), load(CUDA_EXAMPLE)
    return [
        ("cpu->cuda", cpu, cuda),
        ("cuda->cpu", cuda, cpu),
        ("example cpu->cuda", ex_cpu, ex_cuda),
        ("example cuda->cpu", ex_cuda, ex_cpu),
    ]


@pytest.mark.parametrize(("name", "base", "target"), pairs(), ids=[p[0] for p in pairs()])
def test_variant_and_version_lead_and_the_cuda_stack_sits_under_them(
    name: str, base: Manifest, target: Manifest
) -> None:
    findings = report(base, target)
    keys = by_key(findings)
    variant, version = keys["ENV-TORCH-VARIANT:torch"], keys["ENV-TORCH-VERSION:torch"]
    assert variant.caused_by is None and version.caused_by is None
    # Every cause named is a finding of the same report.
    assert all(f.caused_by in keys for f in findings if f.caused_by)
    # The nvidia-* / cuda-* wheels and triton the CUDA build brings or drops sit under the variant.
    stack = [
        f
        for f in findings
        if f.rule in ("ENV-PKG-ADDED", "ENV-PKG-MISSING")
        and f.subject.lower().startswith(("nvidia-", "cuda-", "triton"))
    ]
    assert len(stack) >= 17, name
    assert {f.caused_by for f in stack} == {"ENV-TORCH-VARIANT:torch"}, name
    roots = [f for f in findings if f.caused_by is None]
    consequences = len(findings) - len(roots)
    assert consequences > len(roots), (name, Counter(f.rule for f in roots))
    # torch itself is reported by its own rules, never again as a package
    assert not [f for f in findings if f.rule.startswith("ENV-PKG-") and f.subject == "torch"]


def test_the_lost_nccl_backend_is_the_variants_doing() -> None:
    findings = by_key(report(manifest("cuda"), manifest("dev-cpu")))
    lost = findings["ENV-BACKEND-LOST:torch.backends: NCCL"]
    assert lost.caused_by == "ENV-TORCH-VARIANT:torch"


def test_torch_missing_is_one_root_with_what_came_with_it_under_it() -> None:
    def no_torch(d: dict[str, Any]) -> None:
        packages = d["packages"]
        assert isinstance(packages, list)
        d["packages"] = [
            p for p in packages if p["name"] not in ("torch", "triton") and "nvidia" not in p["name"]
        ]
        d["torch"] = {"static": None, "runtime": None, "trees": []}
        d["runtimes"]["loaded"] = []

    findings = report(manifest("cuda"), manifest("cuda", no_torch))
    keys = by_key(findings)
    assert "ENV-TORCH-MISSING:torch" in keys
    assert "ENV-PKG-MISSING:torch" not in keys  # one root, not two
    triton = keys["ENV-PKG-MISSING:triton"]
    assert triton.caused_by == "ENV-TORCH-MISSING:torch"
    nvidia = [f for f in findings if f.rule == "ENV-PKG-MISSING" and f.subject.startswith("nvidia-")]
    assert nvidia and {f.caused_by for f in nvidia} == {"ENV-TORCH-MISSING:torch"}


def test_a_dependency_that_left_with_its_dependent_folds_under_it() -> None:
    # pydantic and its own dependencies are gone from the target: pydantic-core came with pydantic.
    def no_pydantic(d: dict[str, Any]) -> None:
        packages = d["packages"]
        assert isinstance(packages, list)
        gone = {"pydantic", "pydantic_core", "annotated-types", "typing-inspection"}
        d["packages"] = [p for p in packages if p["name"] not in gone]

    findings = by_key(report(manifest("dev-cpu"), manifest("dev-cpu", no_pydantic)))
    assert findings["ENV-PKG-MISSING:pydantic"].caused_by is None
    assert findings["ENV-PKG-MISSING:pydantic_core"].caused_by == "ENV-PKG-MISSING:pydantic"
    assert findings["ENV-PKG-MISSING:annotated-types"].caused_by == "ENV-PKG-MISSING:pydantic"


def test_an_unrelated_missing_package_stays_a_root() -> None:
    def no_pytest(d: dict[str, Any]) -> None:
        packages = d["packages"]
        assert isinstance(packages, list)
        d["packages"] = [p for p in packages if p["name"] != "pytest"]

    findings = by_key(report(manifest("dev-cpu"), manifest("dev-cpu", no_pytest)))
    assert findings["ENV-PKG-MISSING:pytest"].caused_by is None
    assert findings["ENV-PKG-MISSING:pytest"].severity == "warning"


def test_unmet_requirement_folds_under_the_missing_package_in_a_diff_and_leads_in_doctor() -> None:
    def with_torchvision(d: dict[str, Any]) -> None:
        entry = dict(dist_entry(d, "filelock"), name="torchvision", version="0.28.0+cpu")
        entry.update(requires=["numpy", "torch==2.13.0", "pillow!=8.3.*,>=5.3.0"], native_files=[])
        d["packages"].append(entry)

    def with_pillow(d: dict[str, Any]) -> None:
        with_torchvision(d)
        d["packages"].append(dict(dist_entry(d, "filelock"), name="pillow", version="12.0.0", requires=[]))

    base, target = manifest("dev-cpu", with_pillow), manifest("dev-cpu", with_torchvision)
    findings = by_key(report(base, target))
    assert findings["ENV-PKG-UNMET:pillow"].caused_by == "ENV-PKG-MISSING:pillow"
    assert findings["ENV-PKG-MISSING:pillow"].caused_by is None
    alone = flows.doctor("target", target, Policy(disabled=True)).findings
    assert [f.caused_by for f in alone if f.rule == "ENV-PKG-UNMET"] == [None]


def test_threads_set_by_omp_num_threads_name_the_variable() -> None:
    def one_thread(d: dict[str, Any]) -> None:
        d["env"]["OMP_NUM_THREADS"] = "1"
        d["torch"]["runtime"]["num_threads"] = 1

    findings = by_key(report(manifest("dev-cpu"), manifest("dev-cpu", one_thread)))
    assert findings["ENV-THREADS-CHANGED:torch threads"].caused_by == "ENV-VAR-CHANGED:OMP_NUM_THREADS"


def test_libraries_that_come_and_go_with_a_new_release_fold_under_its_version_change() -> None:
    """numpy 2 → 1: its loaded libraries change with the release (numpy.libs, numpy/_core → numpy/core);
    the version change is the root cause, the native findings its consequences."""

    def older_numpy(d: dict[str, Any]) -> None:
        dist_entry(d, "numpy")["version"] = "1.26.4"
        loaded = d["runtimes"]["loaded"]
        d["runtimes"]["loaded"] = [
            lib for lib in loaded if not (lib["owner"] == "numpy" and "libquadmath" in lib["path"])
        ]

    findings = by_key(report(manifest("dev-cpu"), manifest("dev-cpu", older_numpy)))
    assert "ENV-NUMPY-MAJOR:numpy" in findings
    lost = findings["ENV-NATIVE-LOST:numpy"]
    assert lost.caused_by == "ENV-NUMPY-MAJOR:numpy"
    assert findings["ENV-NUMPY-MAJOR:numpy"].caused_by is None


def test_a_library_of_an_unchanged_release_stays_a_root_cause() -> None:
    def lost_quadmath(d: dict[str, Any]) -> None:
        d["runtimes"]["loaded"] = [
            lib
            for lib in d["runtimes"]["loaded"]
            if not (lib["owner"] == "numpy" and "libquadmath" in lib["path"])
        ]

    findings = by_key(report(manifest("dev-cpu"), manifest("dev-cpu", lost_quadmath)))
    assert findings["ENV-NATIVE-LOST:numpy"].caused_by is None
