"""The predicted manifest: what a resolution and the scans of its wheels say about the target machine.

It holds the packages (full versions, variants), the native tree of every platform wheel, merged, and what
the machine must provide (``predicted.needs``). Facts only a live probe of that machine could know (its
CPU, kernel, libc version, GPUs, loaded libraries, environment variables, interpreter paths) are not
guessed: their fields stay empty and ``meta.absent`` names them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from datetime import datetime, timezone

from envcheck import __version__
from envcheck.collect.facts import torch_variant
from envcheck.core.redact import redact_text
from envcheck.manifest.model import (
    SCHEMA_VERSION,
    Cpu,
    Distribution,
    Libc,
    MachineNeed,
    Manifest,
    Meta,
    NativeFile,
    PlatformInfo,
    PredictedSection,
    ProbeOutcome,
    PythonInfo,
    TorchInfo,
    TorchStatic,
)
from envcheck.manifest.native import (
    NativeNode,
    NativeSection,
    Requirement,
)
from envcheck.manifest.query import canon
from envcheck.native.vcruntime import vc_runtime_floor
from envcheck.predict.fetch import TreeScan
from envcheck.predict.resolve import Resolution, ResolvedWheel

# Facts a predicted manifest leaves empty: only a live probe of the target machine knows them.
ABSENT = (
    "platform.release",
    "platform.kernel",
    "platform.distro",
    "platform.libc",
    "platform.cpu",
    "platform.container",
    "platform.shm_bytes",
    "python.abi_flags",
    "python.executable",
    "python.prefix",
    "python.base_prefix",
    "python.exec_prefix",
    "python.base_exec_prefix",
    "python.environment",
    "python.user_site_enabled",
    "python.sys_path",
    "python.wheel_tags",
    "python.mp_start_method",
    "python.shared_library",
    "packages.installer",
    "packages.location",
    "packages.metadata_dir",
    "torch.trees",
    "torch.runtime",
    "gpu",
    "runtimes",
    "env",
    "verify",
)

VC_RUNTIME = "Microsoft Visual C++ 2015-2022 Redistributable"
_VC_DLL = re.compile(r"^(msvcp140|vcruntime140|concrt140|vccorlib140|vcomp140)([_-][\w.-]*)?\.dll$", re.I)
_BLAS = (
    (re.compile(r"mkl_|libmkl", re.I), "mkl", "Intel MKL"),
    (re.compile(r"openblas", re.I), "openblas", "OpenBLAS"),
    (re.compile(r"Accelerate\.framework|libBLAS\.dylib|vecLib", re.I), "accelerate", "Apple Accelerate"),
    (re.compile(r"^libblas\.|^libcblas\.", re.I), "blas", "a system BLAS"),
)
_OPENMP_NAMES = {
    "intel": "Intel OpenMP",
    "llvm": "LLVM OpenMP",
    "gnu": "GNU OpenMP (libgomp)",
    "msvc": "Microsoft OpenMP (vcomp)",
}
_OPENMP_FILES = (
    (re.compile(r"^libiomp5", re.I), "intel"),
    (re.compile(r"^libomp", re.I), "llvm"),
    (re.compile(r"^libgomp", re.I), "gnu"),
    (re.compile(r"^vcomp\d+", re.I), "msvc"),
)
# The oldest NVIDIA driver branch per CUDA major (NVIDIA's minor-version compatibility).
_MIN_DRIVER = {11: "450", 12: "525", 13: "580"}
_MACOS_TAG = re.compile(r"macosx_(\d+)_(\d+)_")
_MANYLINUX_TAG = re.compile(r"manylinux_(\d+)_(\d+)_")
_LEGACY_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def predicted_manifest(
    source: Manifest,
    resolution: Resolution,
    tree: TreeScan,
    *,
    indexes: Sequence[str],
    label: str | None = None,
) -> Manifest:
    """The manifest ``envcheck predict`` writes for one target (``meta.kind = "predicted"``)."""
    target = resolution.target
    native = dataclasses.replace(tree.section, loader=target.loader)
    # Each name spelled as the distribution's metadata spells it, whichever resolver ran: uv's lock
    # normalises names (``boolean-py``, ``typing-extensions``) where pip's report and a snapshot keep the
    # METADATA's (``boolean.py``, ``typing_extensions``); the source manifest's spelling of the same
    # canonical name is that METADATA's.
    spelled = {canon(d.name): d.name for d in source.packages}
    packages = [_distribution(w, native, spelled.get(canon(w.name), w.name)) for w in resolution.wheels]
    torch_wheel = next((w for w in resolution.wheels if canon(w.name) == "torch"), None)
    torch = TorchInfo(trees=[], static=_torch_static(torch_wheel, tree.torch_version), runtime=None)
    needs = machine_needs(native, resolution, torch.static, tree.macos_minimum)
    impl = {"cp": "CPython", "pp": "PyPy"}[target.implementation]
    platform = PlatformInfo(
        system=target.system,
        release="",
        kernel="",
        machine=target.machine,
        distro=None,
        libc=Libc(name="glibc" if target.glibc_floor else None, version=None),
        cpu=Cpu(model=None, isa_flags=[], logical_cpus=None, affinity_cpus=None, cgroup_cpu_quota=None),
        container=[],
    )
    python = PythonInfo(
        implementation=impl,
        version=target.python_version,
        abi_flags="",
        pointer_bits=target.pointer_bits,
        executable="",
        prefix="",
        base_prefix="",
        exec_prefix="",
        base_exec_prefix="",
        environment="venv",
        user_site_enabled=False,
        user_site=None,
        sys_path=[],
        wheel_tags=[],
        mp_start_method=None,
        shared_library=None,
    )
    meta = Meta(
        envcheck_version=__version__,
        label=label,
        target=f"{target.platform} / {impl} {target.python_version}",
        probe=ProbeOutcome(status="not-run", stage="predicted: no machine to probe"),
        created=datetime.now(timezone.utc).replace(microsecond=0).isoformat(),
        kind="predicted",
        absent=list(ABSENT),
    )
    return Manifest(
        schema_version=SCHEMA_VERSION,
        meta=meta,
        platform=platform,
        python=python,
        packages=packages,
        torch=torch,
        gpu=None,
        runtimes=None,
        env={},
        native=native,
        verify=None,
        predicted=PredictedSection(
            platform=target.platform,
            python_version=target.python_version,
            implementation=target.implementation,
            indexes=list(indexes),
            needs=needs,
            left_out=list(resolution.left_out),
            unavailable=list(resolution.unavailable),
        ),
    )


def _distribution(w: ResolvedWheel, native: NativeSection, name: str) -> Distribution:
    owner = canon(w.name)
    files = [
        NativeFile(
            path=n.key.split(":", 1)[1],
            sha256=(n.identity or "").removeprefix("sha256:") or None,
            size=n.size,
        )
        for n in native.nodes or []
        if canon(n.owner) == owner and ":" in n.key
    ]
    return Distribution(
        name=name,
        version=w.version,
        installer=None,
        requires=[redact_text(r) for r in w.requires or ()],
        direct_url={"url": redact_text(w.url), "archive_info": {"hashes": {"sha256": w.sha256}}},
        wheel_tags=_wheel_tags(w.filename),
        location="",
        metadata_dir="",
        shadowed=False,
        native_files=files,
    )


def _wheel_tags(filename: str) -> list[str]:
    """The expanded tags of a wheel file name (``cp311-cp311-win_amd64``), as WHEEL's ``Tag`` lines."""
    parts = filename[: -len(".whl")].split("-") if filename.endswith(".whl") else []
    if len(parts) < 5:
        return []
    py, abi, plat = parts[-3:]
    return sorted(f"{p}-{a}-{t}" for p in py.split(".") for a in abi.split(".") for t in plat.split("."))


def _torch_static(wheel: ResolvedWheel | None, values: dict[str, object] | None) -> TorchStatic | None:
    if wheel is None:
        return None
    values = values or {}

    def text(key: str) -> str | None:
        v = values.get(key)
        return v if isinstance(v, str) else None

    version = text("__version__") or wheel.version
    debug = values.get("debug")
    return TorchStatic(
        location="",
        version=version,
        git_version=text("git_version"),
        cuda=text("cuda"),
        hip=text("hip"),
        debug=debug if isinstance(debug, bool) else None,
        variant=torch_variant(version, text("cuda"), text("hip")),
    )


def _vtuple(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:4])


def _basename(path: str) -> str:
    return re.split(r"[/\\]", path)[-1]


def machine_needs(
    native: NativeSection,
    resolution: Resolution,
    torch: TorchStatic | None,
    macos_minimum: tuple[str, str] | None = None,
) -> list[MachineNeed]:
    """What the target's binaries need from the machine, or bring with them: the VC++ runtime (with the
    minimum the bundled copies' PE FileVersion implies), OpenMP and BLAS runtimes, the NVIDIA driver, the
    glibc floor and the macOS minimum."""
    target = resolution.target
    needs: list[MachineNeed] = []
    nodes = native.nodes or []
    requires = native.requires or []
    if target.system == "Windows":
        vc = [r for r in requires if r.kind == "redistributable" and _VC_DLL.match(r.name)]
        # The newest MSVC toolset among the binaries that load the machine's runtime (never a bundled copy)
        floor = vc_runtime_floor(nodes)
        if vc:
            needs.append(
                MachineNeed(
                    kind="vc-runtime",
                    name=f"{VC_RUNTIME} ({_arch(target.machine)})",
                    provided="machine",
                    minimum=floor.version if floor is not None else None,
                    evidence=(
                        f"{floor.key}: {floor.reason}"
                        if floor is not None
                        else "the binaries' PE imports (none states an MSVC toolset)"
                    ),
                    files=sorted({r.name for r in vc}, key=str.lower),
                    needed_by=sorted({k for r in vc for k in r.needed_by}),
                )
            )
    for family in sorted({o.family for o in native.openmp or []}):
        files = sorted({_basename(o.key) for o in native.openmp or [] if o.family == family})
        needs.append(
            MachineNeed(
                kind="openmp",
                name=f"{_OPENMP_NAMES[family]} ({', '.join(files)})",
                family=family,
                provided="bundled",
                files=files,
                needed_by=sorted({o.key for o in native.openmp or [] if o.family == family}),
            )
        )
    bundled_omp = {o.family for o in native.openmp or []}
    for r in requires:
        wanted = next((f for p, f in _OPENMP_FILES if p.match(r.name)), None)
        if wanted is not None and r.kind in ("redistributable", "os") and wanted not in bundled_omp:
            needs.append(
                MachineNeed(
                    kind="openmp",
                    name=f"{_OPENMP_NAMES[wanted]} ({r.name})",
                    family=wanted,
                    provided="machine",
                    files=[r.name],
                    needed_by=list(r.needed_by),
                )
            )
    needs += _blas(nodes, requires)
    driver = [r for r in requires if r.kind == "driver"]
    cuda = torch.cuda if torch is not None else None
    if driver or cuda:
        major = int(cuda.split(".")[0]) if cuda and cuda.split(".")[0].isdigit() else None
        needs.append(
            MachineNeed(
                kind="nvidia-driver",
                name="NVIDIA driver",
                provided="machine",
                minimum=_MIN_DRIVER.get(major) if major is not None else None,
                evidence=f"torch is built for CUDA {cuda}" if cuda else "the binaries import the CUDA driver",
                files=sorted({r.name for r in driver}),
                needed_by=sorted({k for r in driver for k in r.needed_by}),
            )
        )
    if target.system == "Linux":
        needs.append(_glibc(native, resolution))
    if target.system == "Darwin":
        needs.append(_macos(resolution, macos_minimum))
    return needs


def _arch(machine: str) -> str:
    return {"AMD64": "x64", "x86": "x86", "ARM64": "ARM64"}.get(machine, machine)


def _blas(nodes: Sequence[NativeNode], requires: Sequence[Requirement]) -> list[MachineNeed]:
    found: dict[str, tuple[str, str, set[str], set[str]]] = {}
    for n in nodes:
        if n.owner == "system":
            continue
        for pattern, family, name in _BLAS:
            if pattern.search(_basename(n.key)):
                entry = found.setdefault(family, (name, "bundled", set(), set()))
                entry[2].add(_basename(n.key))
                entry[3].add(n.key)
    for r in requires:
        for pattern, family, name in _BLAS:
            if pattern.search(r.name) and family not in found:
                found[family] = (name, "machine", {r.name}, set(r.needed_by))
    return [
        MachineNeed(
            kind="blas",
            name=name,
            family=family,
            provided=provided,  # type: ignore[arg-type]
            files=sorted(files),
            needed_by=sorted(by)[:20],
        )
        for family, (name, provided, files, by) in sorted(found.items())
    ]


def _glibc(native: NativeSection, resolution: Resolution) -> MachineNeed:
    """The glibc floor: the target's tag, the highest glibc a chosen wheel's tags need (a wheel tagged
    for several manylinux levels needs the lowest of them), or a higher ``GLIBC_`` symbol version."""
    best = _vtuple(resolution.target.glibc_floor or "0")
    evidence = f"the platform tag {resolution.target.platform}"
    for w in resolution.wheels:
        levels = [_manylinux(t.split("-")[-1]) for t in _wheel_tags(w.filename)]
        known = [v for v in levels if v is not None]
        if known and min(known) > best:
            best, evidence = min(known), f"the wheel tag of {w.filename}"
    symbol = native.glibc_required
    if symbol and _vtuple(symbol) > best:
        best, evidence = _vtuple(symbol), f"GLIBC_{symbol} symbol versions the binaries need"
    return MachineNeed(
        kind="glibc",
        name="glibc",
        provided="machine",
        minimum=".".join(map(str, best)) if best != (0,) else None,
        evidence=evidence,
    )


def _manylinux(platform: str) -> tuple[int, ...] | None:
    m = _MANYLINUX_TAG.match(platform + "_")
    if m is not None:
        return (int(m.group(1)), int(m.group(2)))
    return _LEGACY_MANYLINUX.get(platform.split("_", maxsplit=1)[0])


def _macos(resolution: Resolution, declared: tuple[str, str] | None) -> MachineNeed:
    """The macOS minimum: the target's tag, the highest ``macosx_X_Y`` of the chosen wheels, or the highest
    minimum a Mach-O file declares (``LC_BUILD_VERSION``)."""
    best = _vtuple(resolution.target.macos_minimum or "0")
    evidence = f"the platform tag {resolution.target.platform}"
    for w in resolution.wheels:
        tags = [m for t in _wheel_tags(w.filename) if (m := _MACOS_TAG.search(t + "_"))]
        if tags:
            lowest = min((int(m.group(1)), int(m.group(2))) for m in tags)
            if lowest > best:
                best, evidence = lowest, f"the wheel tag of {w.filename}"
    if declared is not None and _vtuple(declared[0]) > best:
        best, evidence = _vtuple(declared[0]), f"LC_BUILD_VERSION of {declared[1]}"
    return MachineNeed(
        kind="macos",
        name="macOS",
        provided="machine",
        minimum=".".join(map(str, best)),
        evidence=evidence,
    )
