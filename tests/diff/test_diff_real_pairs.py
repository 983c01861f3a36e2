"""The engine on real manifests of real venvs: the CPU/CUDA pair in both directions, and two ways of getting
the same environment (snapshotted twice; two venvs at different paths) that must give nothing."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

import pytest
from diffdata import manifest

from envcheck.core.findings import Finding
from envcheck.diff.engine import diff, doctor
from envcheck.manifest.codec import volatile_paths
from envcheck.manifest.model import Manifest
from envcheck.report import render


def by_rule(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.rule, []).append(f)
    return out


def test_cpu_to_cuda_is_a_torch_version_and_variant_error() -> None:
    dev, cuda = manifest("dev-cpu"), manifest("cuda")
    findings = diff(dev, cuda)
    rules = by_rule(findings)
    (version,) = rules["ENV-TORCH-VERSION"]
    assert version.severity == "error"
    assert (version.base, version.target) == ("2.13.0+cpu", "2.14.1+cu130")
    assert "torch==2.13.0" in version.remedy
    (variant,) = rules["ENV-TORCH-VARIANT"]
    assert variant.severity == "error"
    assert (variant.base, variant.target) == ("cpu", "cu130")
    assert "driver" in variant.message and "cpu" in variant.remedy
    # The native consequence: torch's CUDA half and the nvidia-* libraries are loaded on the target only.
    added = {f.subject: f for f in rules["ENV-NATIVE-ADDED"]}
    assert "libtorch_cuda.so" in (added["torch"].target or "")
    assert "libcudart.so.13" in added["libraries of packages added on the target"].message
    assert {f.subject for f in rules["ENV-PKG-ADDED"]} >= {"nvidia-cudnn-cu13", "nvidia-nccl-cu13", "triton"}
    assert findings[0].severity == "error" and all(f.remedy and f.message for f in findings)


def test_cuda_to_cpu_reports_the_lost_cuda_stack() -> None:
    dev, cuda = manifest("dev-cpu"), manifest("cuda")
    findings = diff(cuda, dev)
    rules = by_rule(findings)
    assert {f.severity for f in rules["ENV-TORCH-VERSION"] + rules["ENV-TORCH-VARIANT"]} == {"error"}
    (variant,) = rules["ENV-TORCH-VARIANT"]
    assert "Torch not compiled with CUDA enabled" in variant.message
    assert "map_location" in variant.message
    lost = {f.subject: f for f in rules["ENV-NATIVE-LOST"]}
    assert lost["torch"].severity == "warning"
    assert "libtorch_cuda.so" in (lost["torch"].base or "")
    orphaned = lost["libraries of packages missing on the target"]
    assert "libcudnn.so.9" in orphaned.message and "nvidia-cudnn-cu13" in orphaned.message
    assert [f.subject for f in rules["ENV-BACKEND-LOST"]] == ["torch.backends: NCCL"]
    # The nvidia-* wheels went with torch: explained (info), not a separate problem each.
    missing = {f.subject: f.severity for f in rules["ENV-PKG-MISSING"]}
    assert missing["nvidia-cudnn-cu13"] == "info"


def test_same_environment_snapshotted_twice_gives_nothing() -> None:
    first, again = manifest("dev-cpu"), manifest("dev-cpu-again")
    assert first.meta.created != again.meta.created or first.meta.duration_s != again.meta.duration_s
    assert diff(first, again) == []
    assert diff(again, first) == []


def test_same_packages_in_venvs_at_two_paths_gives_nothing() -> None:
    a, b = manifest("twin-a"), manifest("twin-b")
    assert a.python.prefix != b.python.prefix
    assert a.package("markupsafe") is not None
    assert diff(a, b) == [] and diff(b, a) == []
    assert doctor(a) == doctor(b) == []


def test_volatile_fields_never_produce_findings() -> None:
    dev = manifest("dev-cpu")
    paths = set(volatile_paths(Manifest))
    assert {"meta.created", "platform.hostname"} <= paths
    assert dev.platform is not None
    changed = dev.replace(
        meta=dataclasses.replace(dev.meta, created="1999-01-01T00:00:00+00:00", duration_s=99.0),
        platform=dataclasses.replace(
            dev.platform,
            hostname="elsewhere",
            cpu=dataclasses.replace(dev.platform.cpu, model="Some Other CPU @ 1 GHz"),
        ),
    )
    assert diff(dev, changed) == []


def test_findings_are_sorted_and_reports_byte_identical() -> None:
    dev, cuda = manifest("dev-cpu"), manifest("cuda")
    findings = diff(dev, cuda) + doctor(cuda)
    shuffled = findings[:]
    random.Random(4).shuffle(shuffled)
    for fmt in ("text", "json", "markdown", "junit"):
        one = render(findings, fmt, title="t", fail_on="error")
        two = render(shuffled, fmt, title="t", fail_on="error")
        assert one == two
    assert diff(dev, cuda) == sorted(diff(dev, cuda), key=Finding.sort_key)


def test_doctor_on_the_real_environments() -> None:
    dev, cuda = manifest("dev-cpu"), manifest("cuda")
    # The dev box ran envcheck from its checkout (pip install -e): listed as pip freeze lists it, not a trap.
    ((editable,),) = by_rule(doctor(dev)).values()
    assert (editable.rule, editable.severity, editable.subject) == ("ENV-PKG-DIRECT", "info", "envcheck")
    rules = by_rule(doctor(cuda))
    # A CUDA build on a machine without a driver runs on the CPU: worth knowing, not a failure.
    assert [f.severity for f in rules.pop("ENV-CUDA-NO-DRIVER")] == ["info"]
    # nvshmem / cufile transports and the driver-only libcaffe2_nvrtc cannot load here: plugins, info.
    assert {f.severity for f in rules.pop("ENV-NATIVE-MISSING", [])} <= {"info"}
    assert rules == {}


def _without(path: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        node = d
        *parents, last = path.split(".")
        for key in parents:
            node = node[key]
        node[last] = None

    return edit


@pytest.mark.slow
@pytest.mark.parametrize(
    "section", ["platform", "gpu", "runtimes", "native", "torch.runtime", "torch.static", "verify"]
)
def test_rules_cope_with_a_missing_section(section: str) -> None:
    # A --no-probe snapshot, a crashed probe or an old writer leaves sections empty: rules skip what they
    # cannot know instead of failing.
    for name in ("dev-cpu", "cuda"):
        full, partial = manifest(name), manifest(name, _without(section))
        assert isinstance(diff(full, partial) + diff(partial, full) + doctor(partial), list)
    assert diff(manifest("dev-cpu", _without(section)), manifest("dev-cpu-again", _without(section))) == []


def _on_windows(root: str) -> Callable[[dict[str, Any]], None]:
    """The same environment as if installed under ``root`` on Windows (backslashes, another case)."""

    def edit(d: dict[str, Any]) -> None:
        prefix = d["python"]["prefix"]

        def win(path: str) -> str:
            return path.replace(prefix, root).replace("/", "\\")

        d["platform"]["system"] = "Windows"
        for key in ("prefix", "exec_prefix"):
            d["python"][key] = win(d["python"][key])
        for dist in d["packages"]:
            dist["location"] = win(dist["location"])
        for lib in d["runtimes"]["loaded"]:
            lib["path"] = win(lib["path"])

    return edit


def test_windows_paths_compare_relative_to_their_roots_ignoring_case() -> None:
    a = manifest("dev-cpu", _on_windows(r"C:\envs\app"))
    b = manifest("dev-cpu", _on_windows(r"D:\Users\Ops\APP-Venv"))
    assert [f for f in diff(a, b) if f.rule.startswith("ENV-NATIVE")] == []
