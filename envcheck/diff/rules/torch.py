"""torch build and variant: version, CUDA/CPU/ROCm variant, C++ ABI, build identity, several trees."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Action, Manual
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.manifest.model import Backends, Distribution, Manifest
from envcheck.manifest.provenance import origin, own, same_folder, take_off, take_off_remedy, where
from envcheck.manifest.query import canon, local_label, pkg, public, release, windows
from envcheck.manifest.remedy import install_action, pip_install, pytorch_index, remedy_text

FAMILY = "torch build and variant"

# Torch companions built per torch version and per variant (their wheels carry the same local label).
COMPANIONS = frozenset({"torchvision", "torchaudio", "torchtext", "torchdata", "torchrec", "torchao"})

# The root-cause keys a torch change produces (``Finding.key``), for the findings it explains.
MISSING_KEY = "ENV-TORCH-MISSING:torch"
VARIANT_KEY = "ENV-TORCH-VARIANT:torch"
VERSION_KEY = "ENV-TORCH-VERSION:torch"
CUDA_VERSION_KEY = "ENV-CUDA-VERSION:torch.version.cuda"


def installed_version(m: Manifest) -> str | None:
    """torch's full version on ``m`` (``2.13.0+cpu``): torch/version.py, else the runtime, else pip's."""
    if m.torch.static is not None and m.torch.static.version:
        return m.torch.static.version
    if m.torch.runtime is not None:
        return m.torch.runtime.version
    dist = pkg(m, "torch")
    return dist.version if dist else None


_torch_version = installed_version

TREES_KEY = "ENV-TORCH-TREES:torch"


def other_tree_cause(m: Manifest) -> str | None:
    """``ENV-TORCH-TREES``'s key when ``m`` has several torch trees and the one Python imports (the static
    facts' tree) is not the installed torch distribution's: what ``m`` says of torch's version and build
    is then the other tree's, a consequence of that tree coming first."""
    static, dist = m.torch.static, pkg(m, "torch")
    if len(m.torch.trees) < 2 or static is None or dist is None:
        return None
    own = dist.location.replace("\\", "/").rstrip("/") + "/torch"
    return TREES_KEY if static.location.replace("\\", "/").rstrip("/") != own else None


def full_version(m: Manifest) -> str | None:
    """torch's version with the build's local label even where pip's metadata lacks one (the default
    index's Linux wheel says ``2.14.1`` for a cu130 build): what pins the same build elsewhere."""
    dist = pkg(m, "torch")
    static = m.torch.static.version if m.torch.static is not None else None
    for version in (dist.version if dist is not None else None, static):
        if version and local_label(version):
            return version
    return installed_version(m)


def torch_causes(base: Manifest, target: Manifest) -> dict[str, str]:
    """The torch changes that ENV-TORCH-* / ENV-CUDA-VERSION report as root causes from ``base`` to
    ``target``, by kind: ``missing``, ``variant`` (CPU <-> GPU, or another GPU family), ``cuda`` (another
    CUDA release of a CUDA build), ``version`` (another release). Values are the root findings' keys;
    the conditions mirror those rules exactly, so a key named here is a finding of the same run."""
    out: dict[str, str] = {}
    b, t = installed_version(base), installed_version(target)
    if b and not t:
        out["missing"] = MISSING_KEY
        return out
    if not b or not t:
        return out
    bs, ts = base.torch.static, target.torch.static
    if bs is not None and ts is not None and bs.variant != ts.variant:
        if _kind(bs.variant) == _kind(ts.variant) == "cu":
            if bs.cuda and ts.cuda and bs.cuda != ts.cuda:
                out["cuda"] = CUDA_VERSION_KEY
        else:
            out["variant"] = VARIANT_KEY
    if public(b) != public(t):
        out["version"] = VERSION_KEY
    return out


def build_cause(base: Manifest, target: Manifest, *, cuda_stack: bool) -> str | None:
    """The one torch root that explains a consequence: for the CUDA stack (nvidia-* wheels, CUDA
    libraries, CUDA backends) the variant or CUDA release first, for anything else the version first."""
    causes = torch_causes(base, target)
    order = (
        ("missing", "variant", "cuda", "version") if cuda_stack else ("missing", "version", "variant", "cuda")
    )
    return next((causes[k] for k in order if k in causes), None)


def family_pins(source: Manifest, version: str) -> list[tuple[str, str]]:
    """torch at ``version`` and the companions ``source`` has, each at its own version with torch's label:
    one command installs the family from one index."""
    pins = [("torch", version)]
    for dist in sorted(source.packages, key=lambda d: canon(d.name)):
        if canon(dist.name) in COMPANIONS and not dist.shadowed:
            pins.append((dist.name, dist.version))
    return pins


def _family_install(base: Manifest, target: Manifest, version: str) -> tuple[str, tuple[Action, ...]]:
    """The base's torch build and companions installed on the target in one command, from the index that
    serves that build (``install_action``: the one the base recorded, else PyTorch's for its label)."""
    pins = family_pins(base, version)
    return (
        f"On the target: {pip_install(pins, source=base, on=target)}; one command for torch and its "
        "companions, pinned in a constraints or lock file."
    ), (install_action(pins, source=base),)


@difference_rule(
    "ENV-TORCH-MISSING",
    family=FAMILY,
    severity="error",
    title="torch is installed on the base but not on the target",
    why="Nothing that imports torch can run on the target.",
    fm=("FM-25",),
    fixes=("install",),
)
def torch_missing(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = _torch_version(base), _torch_version(target)
    if b and not t:
        remedy, actions = _family_install(base, target, full_version(base) or b)
        yield rule.finding(
            "torch",
            f"torch {b} is installed on the base; the target has no torch: `import torch` fails.",
            remedy,
            base=b,
            target="not installed",
            actions=actions,
        )


@single_rule(
    "ENV-TORCH-NO-METADATA",
    family=FAMILY,
    severity="warning",
    title="torch's files are installed without their metadata (.dist-info)",
    why=(
        "`import torch` works, but pip does not know torch is there: `pip check` and `pip list` miss it, "
        "and installing anything that requires torch installs another copy over these files, of "
        "whichever build the default index serves. An interrupted install or uninstall leaves this."
    ),
    fm=("FM-25",),
    static_facts=True,
    fixes=("install",),
)
def torch_no_metadata(rule: Rule, m: Manifest) -> Iterator[Finding]:
    static = m.torch.static
    if static is None or not static.version or pkg(m, "torch") is not None:
        return
    pins = [("torch", static.version)]
    yield rule.finding(
        "torch",
        f"torch {static.version} is in {static.location}, but no torch .dist-info folder is on sys.path: "
        "pip does not see it.",
        "Reinstall it so its metadata is written again: "
        + pip_install(pins, source=m, on=m, options="--force-reinstall --no-deps")
        + ".",
        target=static.version,
        actions=(install_action(pins, source=m, force=True, no_deps=True),),
    )


@difference_rule(
    "ENV-TORCH-VERSION",
    family=FAMILY,
    severity="error",
    title="torch version differs",
    why=(
        "Extensions and companions (torchvision, torchaudio, flash-attn) link torch's unstable C++ ABI and "
        "break on any other version; defaults and numerics of high-level modules change between releases."
    ),
    fm=("FM-07", "FM-26", "FM-09"),
    evidence=("pytorch/audio#3335", "pytorch/vision#4222", "pytorch/pytorch#105837"),
    fixes=("install",),
)
def torch_version(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = _torch_version(base), _torch_version(target)
    if not b or not t:
        return
    b_release, t_release = b.split("+", 1)[0], t.split("+", 1)[0]
    if b_release == t_release:
        return
    remedy, actions = _family_install(base, target, full_version(base) or b)
    yield rule.finding(
        "torch",
        f"torch {b_release} on the base, {t_release} on the target: compiled extensions and companion "
        "packages built for one do not load against the other, and model outputs may change.",
        remedy + f" Or re-validate the model on {t_release}.",
        base=b,
        target=t,
        caused_by=other_tree_cause(target),
        actions=actions,
    )


_GPU_VARIANTS = ("cu", "rocm", "xpu")


def _pin(version: str | None, variant: str) -> str:
    """``2.13.0+cpu``: the release with the variant's local label (``X+cpu`` when the version is unknown)."""
    return f"{(version or 'X').split('+', 1)[0]}+{variant}"


def _kind(variant: str) -> str:
    return next((v for v in _GPU_VARIANTS if variant.startswith(v)), variant)


@difference_rule(
    "ENV-TORCH-VARIANT",
    family=FAMILY,
    severity="error",
    title="torch build variant differs (CUDA / ROCm / CPU-only)",
    why=(
        "`torch==X` is satisfied by `+cpu` and `+cu121` alike; a CPU-only build raises 'Torch not compiled "
        "with CUDA enabled' and cannot load CUDA checkpoints without map_location."
    ),
    fm=("FM-01", "FM-10"),
    evidence=("pytorch/pytorch#51858", "pytorch/pytorch#43493", "pytorch/pytorch.github.io#757"),
    fixes=("install",),
)
def torch_variant(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    bs, ts = base.torch.static, target.torch.static
    if bs is None or ts is None or bs.variant == ts.variant:
        return
    b_kind, t_kind = _kind(bs.variant), _kind(ts.variant)
    if b_kind == t_kind == "cu":
        return  # same family, another CUDA release: ENV-CUDA-VERSION says it with the right severity
    if b_kind in _GPU_VARIANTS and t_kind == "cpu":
        message = (
            f"The base runs a {bs.variant} (GPU) build of torch, the target a CPU-only build: "
            "`.cuda()` and `device='cuda'` raise 'Torch not compiled with CUDA enabled', CUDA checkpoints "
            "need `map_location='cpu'`, and every CUDA library the base loads is absent."
        )
    elif b_kind == "cpu":
        message = (
            f"The base runs a CPU-only build of torch, the target a {ts.variant} build: it needs a matching "
            "NVIDIA driver, loads a different set of native libraries, and may pick other kernels."
        )
    else:
        message = f"torch is built for {bs.variant} on the base and {ts.variant} on the target."
    version = full_version(base) or _pin(bs.version, bs.variant)
    remedy, actions = _family_install(base, target, version)
    yield rule.finding(
        "torch",
        message,
        remedy + " Or declare the difference intended in the policy if the target is meant to differ.",
        base=bs.variant,
        target=ts.variant,
        caused_by=other_tree_cause(target),
        actions=actions,
    )


@difference_rule(
    "ENV-TORCH-BUILD",
    family=FAMILY,
    severity="warning",
    title="the same torch version from a different build (git hash, debug flag)",
    why="Another build of the same version can differ in compiler, flags and bundled libraries.",
    fm=("FM-18", "FM-25"),
)
def torch_build(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    bs, ts = base.torch.static, target.torch.static
    if bs is None or ts is None or bs.version != ts.version:
        return
    if bs.git_version and ts.git_version and bs.git_version != ts.git_version:
        yield rule.finding(
            "torch.version.git_version",
            f"Both sides report torch {bs.version} but from different source commits: a rebuild or a "
            "different distributor (conda vs pip).",
            "Install torch from the same index or channel on both machines.",
            base=bs.git_version,
            target=ts.git_version,
        )
    if bs.debug is not None and ts.debug is not None and bs.debug != ts.debug:
        yield rule.finding(
            "torch.version.debug",
            "One side runs a debug build of torch: much slower, with other assertions.",
            "Install a release build on both machines.",
            base=str(bs.debug).lower(),
            target=str(ts.debug).lower(),
        )


@difference_rule(
    "ENV-TORCH-CXX11-ABI",
    family=FAMILY,
    severity="error",
    title="torch's _GLIBCXX_USE_CXX11_ABI differs",
    why="Extensions built against one C++ ABI fail with 'undefined symbol' against the other.",
    fm=("FM-07",),
    evidence=("pytorch/pytorch#51039", "pytorch/pytorch#17492", "Dao-AILab/flash-attention#853"),
)
def torch_cxx11_abi(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if (
        br is None
        or tr is None
        or br.cxx11_abi is None
        or tr.cxx11_abi is None
        or br.cxx11_abi == tr.cxx11_abi
    ):
        return
    yield rule.finding(
        "torch._C._GLIBCXX_USE_CXX11_ABI",
        "Compiled extensions (flash-attn, torch-scatter, your own) built for the base's C++ ABI fail to load "
        "on the target with 'undefined symbol'.",
        "Install the same torch build on both sides and rebuild or reinstall the extensions for it.",
        base=str(br.cxx11_abi).lower(),
        target=str(tr.cxx11_abi).lower(),
        # Each torch build fixes its ABI flag: another release or variant is what changed it.
        caused_by=build_cause(base, target, cuda_stack=False),
    )


# Backends whose loss changes what the model can do (not merely a different machine).
_BACKENDS: tuple[tuple[str, str], ...] = (
    ("cuda_available", "CUDA usable"),
    ("distributed_available", "torch.distributed"),
    ("nccl_available", "NCCL"),
    ("gloo_available", "Gloo"),
    ("mkldnn_available", "oneDNN (mkldnn)"),
    ("mkl_available", "MKL"),
    ("openmp_available", "OpenMP"),
    ("mps_available", "MPS"),
    ("xpu_available", "XPU"),
)


@difference_rule(
    "ENV-BACKEND-LOST",
    family=FAMILY,
    severity="warning",
    title="a torch backend available on the base is unavailable on the target",
    why=(
        "Code paths silently change: no NCCL means no multi-GPU all_reduce ('Distributed package doesn't "
        "have NCCL built in'); no oneDNN/MKL changes CPU kernels and speed."
    ),
    fm=("FM-16", "FM-24", "FM-18"),
    evidence=("torchgeo/torchgeo#1198", "meta-llama/codellama#70"),
)
def backend_lost(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None:
        return
    for attr, label in _BACKENDS:
        b: bool | None = getattr(br.backends, attr)
        t: bool | None = getattr(tr.backends, attr)
        if b and t is False:
            cause = None
            if attr in _CUDA_BACKENDS and br.backends.cuda_built and tr.backends.cuda_built is False:
                cause = build_cause(base, target, cuda_stack=True)  # the target's build has no CUDA
            yield rule.finding(
                f"torch.backends: {label}",
                f"{label} works on the base and not on the target; code that uses it fails or falls back.",
                "Install a torch build with this backend on the target, or make the application check "
                "for it and fall back explicitly.",
                base="available",
                target="unavailable",
                severity="error" if attr == "cuda_available" and _gpu_build(tr.backends) else None,
                caused_by=cause,
            )


_CUDA_BACKENDS = frozenset({"cuda_available", "nccl_available"})


def _gpu_build(backends: Backends) -> bool:
    return bool(backends.cuda_built)


@single_rule(
    "ENV-TORCH-TREES",
    family=FAMILY,
    severity="error",
    title="more than one torch tree on sys.path",
    why=(
        "Python imports the first tree while pip, extensions or native libraries may belong to the other: "
        "'undefined symbol', wrong versions, leftover DLLs. The venv's own torch ahead of the base "
        "interpreter's, in a venv made with --system-site-packages, is normal: not reported."
    ),
    fm=("FM-25",),
    evidence=("pytorch/pytorch#29544", "pytorch/pytorch#56126", "patientx-cfz/comfyui-rocm#131"),
    fixes=("variable", "edit"),
)
def torch_trees(rule: Rule, m: Manifest) -> Iterator[Finding]:
    trees: list[str] = []
    for tree in m.torch.trees:
        if not any(same_folder(m, tree, seen) for seen in trees):  # one folder spelt twice is one tree
            trees.append(tree)
    if len(trees) < 2:
        return
    parents = [_parent(tree) for tree in trees]
    froms = [origin(m, parent) for parent in parents]
    listing = ", ".join(where(m, parent) + " → torch" for parent in parents)
    if own(froms[0]) and all(f is not None and f.origin == "base-site" for f in froms[1:]):
        # A venv made with --system-site-packages: its own torch is imported and its pip manages it; what
        # the base's packages need of it is ENV-COMPANION-PIN's and ENV-PKG-UNMET's to say.
        return
    keep = next((i for i, f in enumerate(froms) if own(f)), None)
    remedies = [take_off_remedy(m, parents[i], "torch") for i in range(len(trees)) if i != keep]
    fixes = [take_off(m, parents[i], "torch") for i in range(len(trees)) if i != keep]
    actions = (
        tuple(a for r in remedies if r is not None for a in r.actions) if remedies and all(remedies) else ()
    )
    first = (
        "The environment's own torch is imported; the other tree is left over, and tools that scan sys.path "
        "see it"
        if keep == 0
        else "`import torch` takes the first"
        + (f", not the environment's own ({trees[keep]})" if keep is not None else "")
        + "; anything installed against another one breaks"
    )
    remedy = (
        "; ".join(f for f in fixes if f is not None)
        if fixes and all(fixes)
        else "Uninstall the extra copies (check the user site, "
        + ("%APPDATA%\\Python" if windows(m) else "~/.local")
        + ", and PYTHONPATH; `PYTHONNOUSERSITE=1` isolates a venv), then reinstall torch once."
    )
    yield rule.finding(
        "torch",
        f"{len(trees)} torch trees on sys.path: {listing}. {first[:1].upper()}{first[1:]}.",
        remedy[:1].upper() + remedy[1:] + ("" if remedy.endswith(".") else "."),
        target=", ".join(trees),
        severity="warning" if keep == 0 else None,
        actions=actions,
    )


def _parent(path: str) -> str:
    """The folder that holds ``path`` (either separator: a Windows manifest read anywhere)."""
    cut = max(path.rstrip("/\\").rfind("/"), path.rstrip("/\\").rfind("\\"))
    return path[:cut] if cut > 0 else path


def _name(path: str) -> str:
    cut = max(path.rfind("/"), path.rfind("\\"))
    return path[cut + 1 :]


@single_rule(
    "ENV-TORCH-SHADOWED",
    family=FAMILY,
    severity="error",
    title="a distribution is installed twice and one copy shadows the other",
    why=(
        "Python imports the first copy on sys.path while pip, extensions and native files may belong to "
        "the other; the loser's native files still sit there. A venv's own copy ahead of the base "
        "interpreter's (--system-site-packages) is normal, and one folder twice on sys.path is one copy."
    ),
    fm=("FM-25",),
    evidence=("cloveranon/Clover-Edition#128",),
    fixes=("variable", "edit"),
)
def shadowed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for dist in m.packages:
        if not dist.shadowed:
            continue
        winner = pkg(m, dist.name)
        if winner is None:
            continue
        yield from _shadow(rule, m, winner, dist)


def _shadow(rule: Rule, m: Manifest, winner: Distribution, loser: Distribution) -> Iterator[Finding]:
    name = winner.name
    torchish = canon(name).startswith("torch")
    if same_folder(m, winner.location, loser.location):
        if not winner.metadata_dir or _name(winner.metadata_dir) == _name(loser.metadata_dir):
            return  # one folder on sys.path twice (an older manifest): one copy, listed twice
        # Which copy importlib.metadata meets first is an accident of directory order, not the one to keep:
        # ENV-DIST-DUPLICATE, whose consequence this is, uninstalls each copy with its own RECORD and
        # installs the one to keep. No command here competes with it.
        yield rule.finding(
            name,
            f"{name} has two metadata folders in {winner.location}: {_name(winner.metadata_dir)} and "
            f"{_name(loser.metadata_dir)}; one is left over from an install or an uninstall that did not "
            "finish, and tools may read either.",
            f"Keep one copy of {name}: uninstall each one (pip uninstall, once per metadata folder), then "
            "install the release you need once; ENV-DIST-DUPLICATE's remedy writes the commands.",
            target=f"{winner.version}, {loser.version}",
            severity="warning",
        )
        return
    w_from, l_from = origin(m, winner.location), origin(m, loser.location)
    # torch's own copies: the other tree is the root (ENV-TORCH-TREES, dropped where absent), this follows.
    tree_cause = TREES_KEY if canon(name) == "torch" and len(m.torch.trees) > 1 else None
    both = (
        f"{name} {winner.version} in {where(m, winner.location)} shadows {name} {loser.version} in "
        f"{where(m, loser.location)}"
    )
    if own(w_from) and l_from is not None and l_from.origin == "base-site":
        # Normal in a venv made with --system-site-packages: the venv's copy is imported and the venv's
        # pip manages it. Where the base's packages need another version, ENV-PKG-UNMET says so.
        return
    if own(w_from):
        fix = take_off(m, loser.location, name, loser.metadata_dir)
        fixed = take_off_remedy(m, loser.location, name, loser.metadata_dir)
        yield rule.finding(
            name,
            f"{both}: the environment's own copy is imported; the other one is not, yet tools that read "
            "every folder on sys.path see it.",
            (fix[:1].upper() + fix[1:] + ".")
            if fix
            else f"Take {loser.location} off sys.path, or delete its copy of {name} if nothing uses it.",
            target=f"{winner.version} imported, {loser.version} shadowed",
            severity="warning",
            caused_by=tree_cause,
            actions=fixed.actions if fixed is not None else (),
        )
        return
    fixed = take_off_remedy(m, winner.location, name, winner.metadata_dir)
    if own(l_from):
        fix = take_off(m, winner.location, name, winner.metadata_dir)
        consequence = (
            f"{both}: the environment's own copy, the one its pip installed and manages, is not the one "
            "imported."
        )
        remedy = (
            fix[:1].upper() + fix[1:] + f", so that {name} is imported from {loser.location}."
            if fix
            else (
                "Put the environment's own site-packages first: find what adds "
                f"{winner.location} ahead of it (never uninstall from the base interpreter: other "
                "environments use it)."
                if w_from is not None and w_from.origin == "base-site"
                else _generic(m, name, winner, loser)
            )
        )
    else:
        fixes = [f for f in (take_off(m, winner.location, name, winner.metadata_dir),) if f]
        consequence = (
            f"{both}: Python imports the first copy while pip, extensions and native files may belong "
            "to the other."
        )
        remedy = (
            f"Keep one copy: {fixes[0]}, or reinstall {name} into the environment once."
            if fixes
            else _generic(m, name, winner, loser)
        )
    yield rule.finding(
        name,
        consequence,
        remedy,
        caused_by=tree_cause,
        target=f"{winner.version} imported, {loser.version} shadowed",
        severity="error" if torchish else "warning",
        actions=fixed.actions if fixed is not None else (),
    )


def _generic(m: Manifest, name: str, winner: Distribution, loser: Distribution) -> str:
    """The remedy when the manifest does not say how the copies got onto sys.path (recorded before)."""
    return (
        f"Keep one copy of {name}: find what puts {winner.location} ahead of {loser.location} on sys.path "
        "(PYTHONPATH, a .pth file in site-packages, the user site: `PYTHONNOUSERSITE=1` keeps it off), "
        "take it off, then reinstall it once into the environment."
    )


@single_rule(
    "ENV-GPU-UNUSED",
    family=FAMILY,
    severity="error",
    title="an NVIDIA GPU is present but torch is a CPU-only build",
    why="'Torch not compiled with CUDA enabled': the GPU sits idle and `.cuda()` raises.",
    fm=("FM-01",),
    evidence=("pytorch/pytorch#51858", "facebookresearch/detectron2#460"),
)
def gpu_unused(rule: Rule, m: Manifest) -> Iterator[Finding]:
    static = m.torch.static
    if static is None or m.gpu is None or not m.gpu.found or not m.gpu.gpus:
        return
    if static.cuda or static.hip:
        return
    names = ", ".join(sorted({g.name for g in m.gpu.gpus}))
    step = _cuda_build_step(m, static.version or "", m.gpu.cuda_driver_version)
    yield rule.finding(
        "torch",
        f"The machine has {len(m.gpu.gpus)} NVIDIA GPU(s) ({names}) but torch {static.version} is built "
        f"without CUDA ({static.variant}).",
        f"{step.text[:1].upper()}{step.text[1:]}; or declare CPU-only intended in the policy.",
        target=static.variant,
        caused_by=VARIANT_KEY,  # in a diff from a GPU build: the variant change (dropped where absent)
        actions=(step,),
    )


# The CUDA builds PyTorch's index serves for current releases (2.9 onward), newest first, with the
# driver's CUDA version (``cuda_driver_version``: 1000 * major + 10 * minor) each needs.
_CUDA_BUILDS = ((13000, "cu130"), (12080, "cu128"), (12060, "cu126"))


def _cuda_build_step(m: Manifest, version: str, driver: int | None) -> Manual:
    """The CUDA build of torch ``version`` (and of its companions) the driver runs, from PyTorch's index
    for it: a manual step, since no machine of envcheck's tests has a GPU to prove the command on. A driver
    older than every build says so."""
    label = next((lb for need, lb in _CUDA_BUILDS if driver is None or driver >= need), None)
    if label is None:
        shown = f"{driver // 1000}.{driver % 1000 // 10}" if driver is not None else "?"
        return Manual(
            text=f"upgrade the NVIDIA driver: it supports CUDA {shown}, older than every CUDA build of "
            f"torch PyTorch publishes ({', '.join(lb for _, lb in _CUDA_BUILDS)}), then install one"
        )
    pins = [("torch", f"{public(version)}+{label}")] + [
        (d.name, f"{public(d.version)}+{label}")
        for d in sorted(m.packages, key=lambda d: canon(d.name))
        if canon(d.name) in COMPANIONS and not d.shadowed
    ]
    which = "the newest" if driver is None else "the newest the driver supports"
    return Manual(
        text=f"install the {label} build of torch {public(version)} ({which}) from PyTorch's index "
        f"{pytorch_index(label)}: {remedy_text([install_action(pins, source=m)], m)}"
    )


@difference_rule(
    "ENV-TORCH-LOAD-DEFAULT",
    family=FAMILY,
    severity="warning",
    title="torch crosses 2.6, where torch.load defaults to weights_only=True",
    why=(
        "Checkpoints holding more than tensors (numpy arrays, argparse Namespaces, whole nn.Modules) load on "
        "the older side and fail on the newer one with 'Weights only load failed'."
    ),
    fm=("FM-09",),
    evidence=("pytorch/torchchat#1356", "Megvii-BaseDetection/YOLOX#1906", "e3nn/e3nn#519"),
)
def torch_load_default(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = release(_torch_version(base), 2), release(_torch_version(target), 2)
    if b is None or t is None or (b >= (2, 6)) == (t >= (2, 6)):
        return
    newer = "target" if t >= (2, 6) else "base"
    yield rule.finding(
        "torch.load(weights_only)",
        f"torch.load defaults to weights_only=True on the {newer} (torch ≥ 2.6) and to False on the other: "
        "a checkpoint with pickled objects loads on one side only.",
        "Save checkpoints as tensor state_dicts (or safetensors), pass weights_only explicitly, and register "
        "trusted classes with torch.serialization.add_safe_globals.",
        base=".".join(map(str, b)),
        target=".".join(map(str, t)),
        caused_by=VERSION_KEY,  # crossing 2.6 is a release change, which ENV-TORCH-VERSION reports
    )
