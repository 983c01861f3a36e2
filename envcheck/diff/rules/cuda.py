"""CUDA, driver and GPU: CUDA release, cuDNN/NCCL, driver age, GPU architectures, the nvidia-* wheels."""

from __future__ import annotations

import re
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Action, Manual, Uninstall, make
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.diff.rules.torch import VARIANT_KEY, build_cause, family_pins, full_version, other_tree_cause
from envcheck.manifest.model import Distribution, Manifest
from envcheck.manifest.provenance import origin, own
from envcheck.manifest.query import canon, pkg, release
from envcheck.manifest.remedy import pip_install, remedy_text, requirement_action
from envcheck.manifest.requirements import Req, applicable, requirement_name, satisfies

FAMILY = "CUDA, driver and GPU"

# NVIDIA's minor-version compatibility table: the oldest driver branch per CUDA major
# (docs.nvidia.com, "CUDA Compatibility" / "Minor Version Compatibility").
MIN_DRIVER = {11: 450, 12: 525, 13: 580}


def _cuda(m: Manifest) -> str | None:
    return m.torch.static.cuda if m.torch.static else None


def foreign_torch(m: Manifest) -> str | None:
    """The key of the finding that says the torch ``m`` imports is not the environment's own: another torch
    tree first on sys.path (``ENV-TORCH-TREES``), or another copy of the torch distribution shadowing the
    environment's (``ENV-TORCH-SHADOWED``). What ``m`` says of torch's CUDA build and pins is then the
    other torch's, and a remedy that installs CUDA wheels for it would change the environment for a torch
    it does not use: the CUDA findings follow from that root (a key whose finding is absent is dropped
    when causes are linked)."""
    tree = other_tree_cause(m)
    if tree is not None:
        return tree
    torch = pkg(m, "torch")
    if torch is None or not any(d.shadowed and canon(d.name) == "torch" for d in m.packages):
        return None
    return None if own(origin(m, torch.location)) else f"ENV-TORCH-SHADOWED:{torch.name}"


@difference_rule(
    "ENV-CUDA-VERSION",
    family=FAMILY,
    severity="warning",
    title="torch's CUDA release differs",
    why=(
        "Another CUDA major needs another driver branch and another set of nvidia-* wheels; extensions built "
        "for one CUDA major refuse the other. A minor change alters kernels and numerics."
    ),
    fm=("FM-05", "FM-07", "FM-11"),
    evidence=("pytorch/pytorch#162531", "nagadomi/nunif#702"),
)
def cuda_version(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = _cuda(base), _cuda(target)
    if not b or not t or b == t:
        return
    crossed = b.split(".")[0] != t.split(".")[0]
    yield rule.finding(
        "torch.version.cuda",
        f"torch is built with CUDA {b} on the base and CUDA {t} on the target"
        + (
            ": the driver, the nvidia-* wheels and every CUDA extension must match the new major."
            if crossed
            else "."
        ),
        f"On the target: {pip_install(family_pins(base, full_version(base) or b), source=base, on=target)}"
        f" (the torch build for CUDA {b}).",
        base=b,
        target=t,
        severity="error" if crossed else None,
        caused_by=foreign_torch(target),
    )


@difference_rule(
    "ENV-CUDA-LIBS",
    family=FAMILY,
    severity="warning",
    title="cuDNN or NCCL version differs",
    why=(
        "cuDNN picks other convolution algorithms (numerics, speed, CUDNN_STATUS errors); nodes with "
        "different NCCL versions hang or fail in collectives."
    ),
    fm=("FM-11", "FM-12", "FM-16"),
    evidence=("pytorch/pytorch#119989", "pytorch/pytorch#186591"),
)
def cuda_libs(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None:
        return
    pairs = (
        ("cuDNN", br.cudnn_version, tr.cudnn_version),
        ("NCCL", br.nccl_version, tr.nccl_version),
    )
    for name, b, t in pairs:
        if b is not None and t is not None and b != t:
            wheel = "nvidia-cudnn" if name == "cuDNN" else "nvidia-nccl"
            # torch pins the nvidia-* wheel that provides the library: another pin is another torch's doing.
            moved = _torch_pins(base, wheel) != _torch_pins(target, wheel)
            yield rule.finding(
                f"torch {name}",
                f"torch uses {name} {b} on the base and {t} on the target.",
                "Install the same torch build and nvidia-* wheels on both sides"
                + (
                    f"; keep system {name} out of LD_LIBRARY_PATH."
                    if target.env.get("LD_LIBRARY_PATH")
                    else "."
                ),
                base=str(b),
                target=str(t),
                caused_by=build_cause(base, target, cuda_stack=True) if moved else None,
            )


def _torch_pins(m: Manifest, prefix: str) -> frozenset[str]:
    """torch's requirement lines on the wheels whose names start with ``prefix`` (``nvidia-cudnn``)."""
    torch = pkg(m, "torch")
    if torch is None:
        return frozenset()
    return frozenset(line for line in torch.requires if (requirement_name(line) or "").startswith(prefix))


def _capabilities(m: Manifest) -> list[tuple[str, str]]:
    """(GPU name, "X.Y") for every GPU, from torch when it saw them, else from the driver."""
    out: list[tuple[str, str]] = []
    if m.torch.runtime is not None:
        out = [(d.name, d.capability) for d in m.torch.runtime.devices if d.kind == "cuda" and d.capability]
    if not out and m.gpu is not None and m.gpu.found:
        out = [(g.name, g.compute_capability) for g in m.gpu.gpus if g.compute_capability]
    return out


@difference_rule(
    "ENV-GPU-CHANGED",
    family=FAMILY,
    severity="warning",
    title="GPUs differ: fewer GPUs, or another compute capability",
    why=(
        "Another architecture runs other kernels (TF32 exists from sm_80 on, bf16 is emulated before it): "
        "outputs and speed change; fewer GPUs break device indices and multi-GPU code."
    ),
    fm=("FM-06", "FM-17", "FM-20"),
    evidence=("pytorch/pytorch#53635", "vllm-project/vllm#1157"),
)
def gpu_changed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = _capabilities(base), _capabilities(target)
    if not b:
        return
    b_caps = sorted({c for _, c in b})
    t_caps = sorted({c for _, c in t})
    if len(t) < len(b):
        yield rule.finding(
            "GPUs",
            f"The base has {len(b)} GPU(s), the target {len(t)}.",
            "Run on a machine with as many GPUs, or make device selection configurable.",
            base=str(len(b)),
            target=str(len(t)),
            severity="error" if not t and _cuda(target) else None,
        )
    if t and b_caps != t_caps:
        yield rule.finding(
            "GPU compute capability",
            f"GPU architecture {', '.join(b_caps)} on the base, {', '.join(t_caps)} on the target: other "
            "kernels, other numerics (TF32, bf16 support).",
            "Validate the model's outputs on the target's GPU (envcheck verify) before going live.",
            base=", ".join(b_caps),
            target=", ".join(t_caps),
        )


@single_rule(
    "ENV-DRIVER-TOO-OLD",
    family=FAMILY,
    severity="error",
    title="the NVIDIA driver is older than torch's CUDA runtime",
    why=(
        "'The NVIDIA driver on your system is too old': torch.cuda.is_available() is False or CUDA calls "
        "fail."
    ),
    fm=("FM-05",),
    evidence=("pytorch/pytorch#30528", "pytorch/pytorch#52675", "lllyasviel/Fooocus#1313"),
)
def driver_too_old(rule: Rule, m: Manifest) -> Iterator[Finding]:
    cuda = release(_cuda(m), 2)
    gpu = m.gpu
    if cuda is None or gpu is None or not gpu.found:
        return
    need = cuda[0] * 1000 + cuda[1] * 10
    have = gpu.cuda_driver_version
    if have is not None and have < need:
        same_major = have // 1000 == cuda[0]
        yield rule.finding(
            "NVIDIA driver",
            f"The driver supports CUDA {have // 1000}.{have % 1000 // 10}; torch needs CUDA "
            f"{cuda[0]}.{cuda[1]}"
            + (
                " (same major: minor-version compatibility may work, PTX JIT will not)."
                if same_major
                else ": CUDA is unusable ('driver too old')."
            ),
            f"Upgrade the NVIDIA driver (≥ {MIN_DRIVER.get(cuda[0], '?')} for CUDA {cuda[0]}.x), or install "
            "the torch build for the CUDA release the driver supports.",
            base=f"CUDA {cuda[0]}.{cuda[1]}",
            target=f"driver {gpu.driver_version or '?'} (CUDA {have // 1000}.{have % 1000 // 10})",
            severity="warning" if same_major else None,
        )
        return
    branch = release(gpu.driver_version, 1)
    minimum = MIN_DRIVER.get(cuda[0])
    if branch is not None and minimum is not None and branch[0] < minimum:
        yield rule.finding(
            "NVIDIA driver",
            f"Driver {gpu.driver_version} is older than {minimum}, the first branch for CUDA {cuda[0]}.x.",
            f"Upgrade the NVIDIA driver to {minimum} or newer.",
            base=f"CUDA {cuda[0]}.{cuda[1]}",
            target=f"driver {gpu.driver_version}",
        )


@single_rule(
    "ENV-CUDA-NO-DRIVER",
    family=FAMILY,
    severity="info",
    title="a CUDA build of torch on a machine without an NVIDIA driver",
    why="torch runs on CPU only; in a container, the GPU may not be passed through (`--gpus`).",
    fm=("FM-05", "FM-01"),
    evidence=("NVIDIA/nvidia-docker#1234",),
)
def cuda_no_driver(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if not _cuda(m) or m.gpu is None or m.gpu.found:
        return
    yield rule.finding(
        "NVIDIA driver",
        f"torch is built for CUDA {_cuda(m)} but no NVIDIA driver is visible "
        f"({m.gpu.reason or 'not found'}): everything runs on the CPU.",
        (
            "Pass the GPU into the container (`--gpus all`, nvidia-container-toolkit) and install the driver "
            "on the host, "
            if m.platform is not None and m.platform.container
            else "Install the NVIDIA driver, "
        )
        + "or install the CPU build of torch to save gigabytes.",
        target="no driver",
        # In a diff from a build that needed no driver, the variant change is why this matters; the link
        # is dropped where no such finding is in the report (doctor, or a CUDA base).
        caused_by=VARIANT_KEY,
    )


def _sm(capability: str) -> int | None:
    parts = release(capability, 2)
    return parts[0] * 10 + parts[1] if parts else None


def _runs_on(arch_list: list[str], sm: int) -> bool:
    for arch in arch_list:
        match = re.fullmatch(r"(sm|compute)_(\d+)[a-z]?", arch)
        if not match:
            continue
        built = int(match.group(2))
        if match.group(1) == "compute" and built <= sm:
            return True  # PTX is JIT-compiled for newer GPUs
        # A cubin runs on GPUs of the same major with an equal or higher minor (CUDA binary compatibility).
        if match.group(1) == "sm" and built // 10 == sm // 10 and built <= sm:
            return True
    return False


@single_rule(
    "ENV-GPU-ARCH-MISSING",
    family=FAMILY,
    severity="error",
    title="a GPU's architecture is missing from torch's arch list",
    why="'no kernel image is available for execution on the device' (is_available() may still say True).",
    fm=("FM-06",),
    evidence=("pytorch/pytorch#150733", "pytorch/pytorch#17966", "pytorch/pytorch#31285"),
)
def gpu_arch_missing(rule: Rule, m: Manifest) -> Iterator[Finding]:
    rt = m.torch.runtime
    if rt is None or not rt.cuda_arch_list:
        return
    for name, capability in sorted(set(_capabilities(m))):
        sm = _sm(capability)
        if sm is None or _runs_on(rt.cuda_arch_list, sm):
            continue
        yield rule.finding(
            name,
            f"{name} is sm_{sm}; torch was built for {' '.join(rt.cuda_arch_list)}: no kernel runs on it.",
            "Install a torch build that includes this architecture (newer GPUs need newer CUDA builds, "
            "e.g. cu128+ for sm_120), or pin an older torch for old GPUs.",
            base=" ".join(rt.cuda_arch_list),
            target=f"sm_{sm}",
        )


def pinned_nvidia(m: Manifest) -> dict[str, list[tuple[Req, str]]]:
    """nvidia-* name -> [(requirement line, required by)] from torch's Requires-Dist, following the extras
    of meta-packages such as ``cuda-toolkit[cublas,...]`` one level down."""
    torch = pkg(m, "torch")
    if torch is None:
        return {}
    out: dict[str, list[tuple[Req, str]]] = {}
    wanted = [
        line for line in torch.requires if (requirement_name(line) or "").startswith(("nvidia-", "cuda-"))
    ]
    for app in applicable(m, wanted):
        name = app.requirement.name
        if name.startswith("nvidia-"):
            out.setdefault(name, []).append((app.requirement, "torch"))
            continue
        meta = pkg(m, name)
        if meta is None or not app.requirement.extras:
            continue
        lines = [line for line in meta.requires if (requirement_name(line) or "").startswith("nvidia-")]
        for sub in applicable(m, lines, tuple(sorted(app.requirement.extras))):
            out.setdefault(sub.requirement.name, []).append((sub.requirement, f"torch → {meta.name}"))
    return out


@single_rule(
    "ENV-NVIDIA-PINS",
    family=FAMILY,
    severity="error",
    title="nvidia-* wheels do not match torch's pins",
    why=(
        "torch loads the CUDA libraries from the nvidia-* wheels it pins; another version fails with "
        "'undefined symbol' (ncclCommRegister, __nvJitLinkComplete) or a cuDNN version mismatch."
    ),
    fm=("FM-11",),
    evidence=("pytorch/pytorch#134929", "pytorch/pytorch#119932", "pytorch/pytorch#186591"),
    fixes=("install",),
)
def nvidia_pins(rule: Rule, m: Manifest) -> Iterator[Finding]:
    cause = foreign_torch(m)
    for name, pins in sorted(pinned_nvidia(m).items()):
        dist = pkg(m, name)
        for pin, by in pins:
            req = f"{pin.written}{pin.specifier}"
            if dist is None:
                message = (
                    f"{by} requires {req} but it is not installed: the CUDA library it provides is taken "
                    "from the system, or missing."
                )
            elif not satisfies(dist.version, pin):
                message = f"{by} requires {req}; {dist.version} is installed."
            else:
                continue
            # The requirement exactly as torch states it: pip installs (or replaces the installed version
            # with) one that meets it, and nothing else changes.
            action = requirement_action(req)
            yield rule.finding(
                name,
                message,
                remedy_text([action], m, note=f"(the requirement of {by})."),
                base=req,
                target="missing" if dist is None else dist.version,
                caused_by=cause,
                actions=(action,),
            )
            break


_CU_SUFFIX = re.compile(r"-cu(\d+)$")
_CUDA_MAJOR_BY_VERSION = ("nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti", "nvidia-nvjitlink")


@single_rule(
    "ENV-NVIDIA-MIXED-CUDA",
    family=FAMILY,
    severity="error",
    title="nvidia-* wheels of two CUDA majors are installed",
    why="Two families of CUDA libraries (cu12 and cu13) in one environment: the wrong one gets loaded.",
    fm=("FM-11",),
    evidence=("pytorch/pytorch#186591", "pytorch/pytorch#119072"),
    fixes=("uninstall",),
)
def nvidia_mixed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    majors = _nvidia_majors(m)
    if len(majors) > 1:
        described = "; ".join(
            f"CUDA {k}: {', '.join(sorted(f'{d.name} {d.version}' for d in v))}"
            for k, v in sorted(majors.items())
        )
        remedy, actions = _mixed_remedy(m, majors)
        yield rule.finding(
            "nvidia-* wheels",
            f"nvidia-* wheels for {len(majors)} CUDA majors are installed ({described}).",
            remedy,
            target=", ".join(f"cu{k}" for k in sorted(majors)),
            caused_by=foreign_torch(m),
            actions=actions,
        )


def _nvidia_majors(m: Manifest) -> dict[str, list[Distribution]]:
    """The installed nvidia-* wheels by the CUDA major they are for: the ``-cuNN`` of the name, or, for the
    wheels named without it, the major of their version."""
    majors: dict[str, list[Distribution]] = {}
    for dist in m.packages:
        name = canon(dist.name)
        if not name.startswith("nvidia-") or dist.shadowed:
            continue
        suffix = _CU_SUFFIX.search(name)
        if suffix:
            majors.setdefault(suffix.group(1), []).append(dist)
        elif name in _CUDA_MAJOR_BY_VERSION:
            majors.setdefault(dist.version.split(".")[0], []).append(dist)
    return majors


def _torch_major(m: Manifest, majors: dict[str, list[Distribution]]) -> str | None:
    """The CUDA major torch uses: its build's, else the one major of the installed wheels it pins."""
    cuda = _cuda(m)
    if cuda:
        return cuda.split(".")[0]
    pinned = set(pinned_nvidia(m))
    used = {major for major, dists in majors.items() if any(canon(d.name) in pinned for d in dists)}
    return used.pop() if len(used) == 1 else None


def _mixed_remedy(m: Manifest, majors: dict[str, list[Distribution]]) -> tuple[str, tuple[Action, ...]]:
    """Uninstall, by name, the wheels of the CUDA majors torch does not use, when no other installed
    distribution requires them; otherwise a manual step that names them and who needs them."""
    keep = _torch_major(m, majors)
    listing = "; ".join(
        f"CUDA {k}: {', '.join(sorted(d.name for d in v))}" for k, v in sorted(majors.items())
    )
    if keep is None or keep not in majors:
        step = Manual(
            text=f"Keep the nvidia-* wheels of the CUDA major your packages use and uninstall the others "
            f"({listing}): torch uses none of them."
        )
        return step.text, (step,)
    extra = sorted({d.name for major, dists in majors.items() if major != keep for d in dists})
    wanted = {canon(n) for n in extra}
    users = sorted(
        f"{d.name} requires {requirement_name(line)}"
        for d in m.packages
        if not d.shadowed and canon(d.name) not in wanted and canon(d.name) != "torch"
        for line in d.requires
        if requirement_name(line) in wanted
    )
    others = ", ".join(sorted(k for k in majors if k != keep))
    if users:
        step = Manual(
            text=f"torch uses CUDA {keep}; the CUDA {others} wheels ({', '.join(extra)}) are required by "
            f"other packages ({'; '.join(users[:6])}): install their builds for CUDA {keep}, then uninstall "
            "those wheels."
        )
        return step.text, (step,)
    action = make(lambda: Uninstall(names=tuple(extra)), f"uninstall {', '.join(extra)}")
    note = f"(torch uses CUDA {keep}; nothing installed requires the CUDA {others} wheels)."
    return remedy_text([action], m, note=note), (action,)
