"""Packages: distributions missing, added or changed, companion pins on torch, NumPy's ABI break."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.diff.rules._requirements import applicable, requirement_name, satisfies
from envcheck.diff.rules.base import (
    canon,
    difference_rule,
    local_label,
    major,
    pkg,
    release,
    single_rule,
)
from envcheck.findings import Finding, Rule
from envcheck.manifest.model import Distribution, Manifest

FAMILY = "packages"

# Compared by their own rules (ENV-TORCH-*, ENV-NUMPY-MAJOR), not again as plain version changes.
_OWN_RULES = frozenset({"torch", "numpy"})

# Torch companions built per torch version and per variant (their wheels carry the same local label).
COMPANIONS = frozenset({"torchvision", "torchaudio", "torchtext", "torchdata", "torchrec", "torchao"})


def _index(m: Manifest) -> dict[str, Distribution]:
    return {canon(d.name): d for d in m.packages if not d.shadowed}


def _dependents(m: Manifest) -> dict[str, set[str]]:
    """name -> names of the distributions whose Requires-Dist mention it (any marker, any extra)."""
    out: dict[str, set[str]] = {}
    for dist in m.packages:
        if dist.shadowed:
            continue
        owner = canon(dist.name)
        for line in dist.requires:
            name = requirement_name(line)
            if name:
                out.setdefault(name, set()).add(owner)
    return out


@difference_rule(
    "ENV-PKG-MISSING",
    family=FAMILY,
    severity="warning",
    title="a distribution installed on the base is missing on the target",
    why=(
        "An import that worked on the base raises ModuleNotFoundError on the target. It is an error when a "
        "package installed on the target declares it as a requirement."
    ),
    fm=("FM-07", "FM-11"),
)
def pkg_missing(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    missing = sorted(set(b_index) - set(t_index))
    if not missing:
        return
    wanted = set(missing)
    t_required_by: dict[str, list[str]] = {}
    for dist in target.packages:
        if dist.shadowed:
            continue
        names = [line for line in dist.requires if requirement_name(line) in wanted]
        # A line without a marker always applies: no need to import packaging to know it.
        for line in names:
            name = requirement_name(line)
            if ";" not in line and name:
                t_required_by.setdefault(name, []).append(dist.name)
        for app in applicable(target, [line for line in names if ";" in line]):
            t_required_by.setdefault(app.requirement.name, []).append(dist.name)
    b_dependents = _dependents(base)
    for name in missing:
        dist = b_index[name]
        requirers = sorted(set(t_required_by.get(name, [])))
        if requirers:
            yield rule.finding(
                dist.name,
                f"{dist.name} {dist.version} is resolved on the base but missing on the target, where "
                f"{', '.join(requirers)} require(s) it: importing them fails.",
                f"Install {dist.name}=={dist.version} on the target (reinstall from one lock file).",
                base=dist.version,
                target="missing",
                severity="error",
            )
            continue
        dependents = b_dependents.get(name, set())
        changed = sorted(
            d for d in dependents if d not in t_index or t_index[d].version != b_index[d].version
        )
        follows = bool(dependents) and len(changed) == len(dependents)
        yield rule.finding(
            dist.name,
            (
                f"{dist.name} {dist.version} is not installed on the target; it came with "
                f"{', '.join(changed)}, which are missing or another version there."
                if follows
                else f"{dist.name} {dist.version} is installed on the base but not on the target: code that "
                "imports it fails."
            ),
            f"Install {dist.name}=={dist.version} on the target if the application uses it.",
            base=dist.version,
            target="missing",
            severity="info" if follows else None,
        )


@difference_rule(
    "ENV-PKG-ADDED",
    family=FAMILY,
    severity="info",
    title="a distribution is installed on the target only",
    why="Extra packages can shadow modules, load their own native runtimes, or patch torch at import.",
    fm=("FM-04", "FM-25"),
)
def pkg_added(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    for name in sorted(set(t_index) - set(b_index)):
        dist = t_index[name]
        yield rule.finding(
            dist.name,
            f"{dist.name} {dist.version} is installed on the target only.",
            "Remove it if the application does not need it, or add it to the base's lock file.",
            base="missing",
            target=dist.version,
        )


@difference_rule(
    "ENV-PKG-VERSION",
    family=FAMILY,
    severity="info",
    title="a distribution's version differs",
    why="New versions change behaviour; a new major version is a warning, other changes are info.",
    fm=("FM-07", "FM-26"),
)
def pkg_version(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    for name in sorted(set(b_index) & set(t_index)):
        if name in _OWN_RULES:
            continue
        b, t = b_index[name], t_index[name]
        if b.version == t.version:
            continue
        label_changed = local_label(b.version) != local_label(t.version)
        is_major = major(b.version) != major(t.version)
        companion = name in COMPANIONS
        yield rule.finding(
            t.name,
            f"{t.name} is {b.version} on the base and {t.version} on the target"
            + (" (another build variant)" if label_changed else "")
            + (
                "; torch companions must match torch exactly."
                if companion
                else "; a new major version may change its API."
                if is_major
                else "."
            ),
            f"Pin {b.name}=={b.version} in the target's requirements (or update the base's lock file).",
            base=b.version,
            target=t.version,
            severity="error" if companion else "warning" if is_major or label_changed else None,
        )


@difference_rule(
    "ENV-NUMPY-MAJOR",
    family=FAMILY,
    severity="warning",
    title="NumPy's major version differs (the 1.x / 2.x ABI break)",
    why=(
        "Modules compiled against NumPy 1.x crash or refuse to load under 2.x ('_ARRAY_API not found'); "
        "pickles written under NumPy 2 reference numpy._core, which NumPy 1 cannot import."
    ),
    fm=("FM-08",),
    evidence=("pytorch/pytorch#131668", "pytorch/pytorch#132179", "MIC-DKFZ/nnUNet#2299"),
)
def numpy_major(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = pkg(base, "numpy"), pkg(target, "numpy")
    if b is None or t is None or b.version == t.version:
        return
    crossed = major(b.version) != major(t.version)
    yield rule.finding(
        "numpy",
        f"NumPy {b.version} on the base, {t.version} on the target"
        + (
            ": compiled extensions and pickled arrays may not survive the 1.x/2.x boundary."
            if crossed
            else "."
        ),
        f"Pin numpy=={b.version} on the target, or rebuild the extensions and re-save checkpoints as "
        "pure-tensor state_dicts (or safetensors).",
        base=b.version,
        target=t.version,
        severity=None if crossed else "info",
    )


@single_rule(
    "ENV-NUMPY-TORCH-ABI",
    family=FAMILY,
    severity="error",
    title="NumPy 2 with a torch built against NumPy 1",
    why="torch < 2.3 (and the Windows 2.4.0 wheels) cannot use NumPy 2: 'Numpy is not available'.",
    fm=("FM-08",),
    evidence=("pytorch/pytorch#131668", "pytorch/pytorch#132179"),
)
def numpy_torch_abi(rule: Rule, m: Manifest) -> Iterator[Finding]:
    torch, numpy = pkg(m, "torch"), pkg(m, "numpy")
    if torch is None or numpy is None or major(numpy.version) in (None, "0", "1"):
        return
    tv = release(torch.version, 3)
    if tv is None:
        return
    windows = m.platform is not None and m.platform.system == "Windows"
    if tv[:2] < (2, 3) or (windows and tv == (2, 4, 0)):
        yield rule.finding(
            "numpy",
            f"torch {torch.version} was built against NumPy 1.x; with NumPy {numpy.version} its NumPy "
            "interop fails ('Numpy is not available', '_ARRAY_API not found').",
            "Pin `numpy<2`, or upgrade torch (2.3+; on Windows 2.4.1+).",
            base=torch.version,
            target=numpy.version,
        )


@single_rule(
    "ENV-COMPANION-PIN",
    family=FAMILY,
    severity="error",
    title="a package's requirements pin another torch than the one installed",
    why=(
        "torchvision, torchaudio and compiled extensions are built for one torch release: 'operator "
        "torchvision::nms does not exist', 'undefined symbol'."
    ),
    fm=("FM-07",),
    evidence=("pytorch/vision#4222", "pytorch/vision#8985", "ultralytics/yolov5#5511"),
)
def companion_pin(rule: Rule, m: Manifest) -> Iterator[Finding]:
    torch = pkg(m, "torch")
    if torch is None:
        return
    for dist in sorted(m.packages, key=lambda d: canon(d.name)):
        if dist.shadowed or canon(dist.name) == "torch":
            continue
        lines = [line for line in dist.requires if requirement_name(line) == "torch"]
        for app in applicable(m, lines):
            if not app.requirement.specifier or satisfies(torch.version, app.requirement):
                continue
            yield rule.finding(
                dist.name,
                f"{dist.name} {dist.version} requires torch{app.requirement.specifier} but torch "
                f"{torch.version} is installed: its compiled parts will not load.",
                f"Install the {dist.name} release built for torch {torch.version.split('+')[0]} (one "
                "command for the whole torch family, one index), or the torch it asks for.",
                base=f"torch{app.requirement.specifier}",
                target=torch.version,
            )


@single_rule(
    "ENV-COMPANION-VARIANT",
    family=FAMILY,
    severity="error",
    title="a torch companion is built for another variant than torch (e.g. +cpu with +cu121)",
    why=(
        "A CPU torchvision with a CUDA torch: 'Could not run torchvision::nms with arguments from the "
        "CUDA backend'."
    ),
    fm=("FM-07",),
    evidence=("pytorch/pytorch#62350",),
)
def companion_variant(rule: Rule, m: Manifest) -> Iterator[Finding]:
    torch = pkg(m, "torch")
    static = m.torch.static
    if torch is None:
        return
    torch_label = local_label(torch.version) or (static.variant if static else None)
    if not torch_label:
        return
    for dist in sorted(m.packages, key=lambda d: canon(d.name)):
        label = local_label(dist.version)
        if canon(dist.name) not in COMPANIONS or dist.shadowed or not label or label == torch_label:
            continue
        yield rule.finding(
            dist.name,
            f"{dist.name} {dist.version} is a {label} build; torch is {torch_label}.",
            f"Reinstall {dist.name} from the same {torch_label} index as torch, in the same command.",
            base=f"torch +{torch_label}",
            target=f"{dist.name} +{label}",
        )
