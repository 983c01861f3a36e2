"""Packages: distributions missing, added or changed, companion pins on torch, NumPy's ABI break."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Action, Uninstall, make
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.diff.rules.cuda import pinned_nvidia
from envcheck.diff.rules.torch import COMPANIONS, build_cause, installed_version, torch_causes
from envcheck.manifest.model import Distribution, Manifest
from envcheck.manifest.provenance import source
from envcheck.manifest.query import canon, index, local_label, major, pkg, release, torch_index_label, view
from envcheck.manifest.remedy import install_action, pip_install, remedy_text, requirement_action
from envcheck.manifest.requirements import (
    Graph,
    Req,
    applicable,
    graph,
    requirement_name,
    satisfies,
    specifier_set,
)

__all__ = ["COMPANIONS"]

FAMILY = "packages"

# Compared by their own rules (ENV-TORCH-*, ENV-NUMPY-MAJOR), not again as plain version changes.
_OWN_RULES = frozenset({"torch", "numpy"})


def _index(m: Manifest) -> dict[str, Distribution]:
    return index(m)


def _cuda_stack(name: str) -> bool:
    """Distributions that only a CUDA build of torch brings (its nvidia-* / cuda-* wheels, triton)."""
    return name.startswith(("nvidia-", "cuda-")) or name == "triton"


@dataclass(frozen=True, slots=True)
class _Change:
    """One distribution's difference: the key of the finding that reports it and its direct cause."""

    key: str
    cause: str | None


def _changes(base: Manifest, target: Manifest) -> dict[str, _Change]:
    """Every package difference of the pair with its cause, computed once per run for all three rules."""
    pair = ("package-changes", view(target))
    return view(base).memo(pair, lambda: _compute_changes(base, target))  # type: ignore[return-value]


def _compute_changes(base: Manifest, target: Manifest) -> dict[str, _Change]:
    b_index, t_index = _index(base), _index(target)
    b_graph, t_graph = graph(base), graph(target)
    causes = torch_causes(base, target)
    b_torch = b_graph.closure("torch") if "torch" in b_index else frozenset()
    t_torch = t_graph.closure("torch") if "torch" in t_index else frozenset()
    keys: dict[str, str] = {}
    for name in set(b_index) | set(t_index):
        b, t = b_index.get(name), t_index.get(name)
        if name == "torch":
            # torch's files without its metadata on one side (ENV-TORCH-NO-METADATA) is no package change
            # here: ENV-TORCH-* compare the torch/version.py both sides have.
            if "missing" in causes:
                keys[name] = causes["missing"]
            elif b is None and t is not None and installed_version(base) is None:
                keys[name] = f"ENV-PKG-ADDED:{t.name}"
        elif b is not None and t is None:
            keys[name] = f"ENV-PKG-MISSING:{b.name}"
        elif b is None and t is not None:
            keys[name] = f"ENV-PKG-ADDED:{t.name}"
        elif b is not None and t is not None and b.version != t.version:
            keys[name] = "ENV-NUMPY-MAJOR:numpy" if name == "numpy" else f"ENV-PKG-VERSION:{t.name}"

    def torch_cause(name: str) -> str | None:
        return build_cause(base, target, cuda_stack=_cuda_stack(name)) if causes else None

    direct: dict[str, str | None] = {}
    for name in keys:
        b, t = b_index.get(name), t_index.get(name)
        cause: str | None = None
        if name == "torch":
            cause = None
        elif b is not None and t is None:
            cause = _missing_cause(name, b_graph, t_graph, b_torch, keys, torch_cause)
        elif b is None and t is not None:
            cause = _added_cause(name, t_graph, t_torch, keys, torch_cause)
        elif b is not None and t is not None:
            cause = _version_cause(name, base, target, b_torch, t_torch, causes, torch_cause)
        direct[name] = cause
    by_key = {key: name for name, key in keys.items()}
    out: dict[str, _Change] = {}
    for name, key in keys.items():
        out[name] = _Change(key, _root(name, direct, by_key))
    return out


def _root(name: str, direct: dict[str, str | None], by_key: dict[str, str]) -> str | None:
    """Follow a chain of package causes to the finding that has none (reports fold under roots); a cycle
    (two distributions that came with each other) leaves the finding a root."""
    seen = {name}
    cause = direct.get(name)
    while cause is not None and cause in by_key:
        upper = by_key[cause]
        if upper in seen:
            return None
        seen.add(upper)
        if direct.get(upper) is None:
            return cause
        cause = direct[upper]
    return cause


def _missing_cause(
    name: str,
    b_graph: Graph,
    t_graph: Graph,
    b_torch: frozenset[str],
    keys: dict[str, str],
    torch_cause: Callable[[str], str | None],
) -> str | None:
    if name in t_graph.required_by:
        return None  # something on the target needs it: a root of its own (an error)
    # The extras a user asked for at install time are not recorded: a requirement through any extra
    # counts as what brought it, as the finding's message says ("it came with ...").
    requirers = b_graph.required_by.get(name) or frozenset(_dependents(b_graph.manifest).get(name, ()))
    if not requirers:
        return None
    # Only torch and what torch brings needed it on the base: the torch change dropped it.
    if all(r == "torch" or r in b_torch for r in requirers) and name in b_torch:
        return torch_cause(name)
    # It came with distributions that are gone or changed on the target: it followed them.
    followed = sorted(r for r in requirers if r in keys)
    if len(followed) == len(requirers):
        missing = [r for r in followed if keys[r].startswith(("ENV-PKG-MISSING:", "ENV-TORCH-MISSING:"))]
        return keys[(missing or followed)[0]]
    return None


def _added_cause(
    name: str,
    t_graph: Graph,
    t_torch: frozenset[str],
    keys: dict[str, str],
    torch_cause: Callable[[str], str | None],
) -> str | None:
    requirers = t_graph.required_by.get(name) or frozenset(_dependents(t_graph.manifest).get(name, ()))
    if not requirers:
        return None
    if all(r == "torch" or r in t_torch for r in requirers) and name in t_torch:
        return torch_cause(name)
    followed = sorted(r for r in requirers if r in keys)
    if len(followed) == len(requirers):
        added = [r for r in followed if keys[r].startswith("ENV-PKG-ADDED:")]
        return keys[(added or followed)[0]]
    return None


def _version_cause(
    name: str,
    base: Manifest,
    target: Manifest,
    b_torch: frozenset[str],
    t_torch: frozenset[str],
    causes: dict[str, str],
    torch_cause: Callable[[str], str | None],
) -> str | None:
    if name in COMPANIONS:
        # Companions are built per torch release: another torch release brings another companion.
        return causes.get("version")
    if name in b_torch and name in t_torch and _torch_lines(base, name) != _torch_lines(target, name):
        return torch_cause(name)  # the other torch pins another version of it
    return None


def _torch_lines(m: Manifest, name: str) -> frozenset[str]:
    """What torch and the meta-packages it pulls (cuda-toolkit) require of ``name`` on ``m``."""
    g = graph(m)
    owners = {"torch"} | {r for r in g.closure("torch") if r.startswith("cuda-")}
    return frozenset(str(e.req.specifier) for o in owners for e in g.edges.get(o, ()) if e.req.name == name)


def _dependents(m: Manifest) -> dict[str, set[str]]:
    """name -> names of the distributions whose Requires-Dist mention it (any marker, any extra)."""
    return view(m).memo("any-dependents", lambda: _any_dependents(m))  # type: ignore[return-value]


def _any_dependents(m: Manifest) -> dict[str, set[str]]:
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


def _install(base: Manifest, target: Manifest, dist: Distribution) -> tuple[tuple[Action, ...], str]:
    """The install that puts the base's ``dist`` on the target (a torch companion from torch's index, with
    its label), and its command as text for the target's shell."""
    return _reinstall([(dist.name, dist.version)], source=base, on=target)


def _reinstall(
    pins: list[tuple[str, str]], *, source: Manifest, on: Manifest, force: bool = False
) -> tuple[tuple[Action, ...], str]:
    """``install_action`` of ``pins`` from where ``source`` had them (``force``: reinstall what is there,
    ``--no-deps``), and its text for ``on``'s shell (``pip_install``'s, which names a recorded URL)."""
    action = install_action(pins, source=source, force=force, no_deps=force)
    options = "--force-reinstall --no-deps" if force else ""
    return (action,), pip_install(pins, source=source, on=on, options=options)


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
    fixes=("install",),
)
def pkg_missing(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    missing = sorted(set(b_index) - set(t_index))
    if not missing:
        return
    changes = _changes(base, target)
    t_graph = graph(target)
    b_dependents = _dependents(base)
    for name in missing:
        dist = b_index[name]
        change = changes.get(name)
        if change is None or change.key != f"{rule.id}:{dist.name}":
            continue  # torch: ENV-TORCH-MISSING (or ENV-TORCH-NO-METADATA) reports it, once
        cause = change.cause
        actions, install = _install(base, target, dist)
        requirers = sorted(t_index[r].name for r in t_graph.required_by.get(name, ()))
        if requirers:
            yield rule.finding(
                dist.name,
                f"{dist.name} {dist.version} is resolved on the base but missing on the target, where "
                f"{', '.join(requirers)} require(s) it: importing them fails.",
                f"On the target: {install} (better: reinstall from one lock file).",
                base=dist.version,
                target="missing",
                severity="error",
                actions=actions,
            )
            continue
        dependents = b_dependents.get(name, set())
        changed = sorted(
            b_index[d].name
            for d in dependents
            if d in b_index and (d not in t_index or t_index[d].version != b_index[d].version)
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
            f"If the application uses it, on the target: {install}.",
            base=dist.version,
            target="missing",
            severity="info" if follows or cause is not None else None,
            caused_by=cause,
            actions=actions,
        )


@difference_rule(
    "ENV-PKG-ADDED",
    family=FAMILY,
    severity="info",
    title="a distribution is installed on the target only",
    why="Extra packages can shadow modules, load their own native runtimes, or patch torch at import.",
    fm=("FM-04", "FM-25"),
    fixes=("uninstall",),
)
def pkg_added(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    added = sorted(set(t_index) - set(b_index))
    if not added:
        return
    changes = _changes(base, target)
    for name in added:
        dist = t_index[name]
        change = changes.get(name)
        if change is None:
            continue  # torch, whose files the base has without their metadata: ENV-TORCH-NO-METADATA's
        cause = change.cause
        actions = (_uninstall(dist.name),)
        yield rule.finding(
            dist.name,
            f"{dist.name} {dist.version} is installed on the target only"
            + (
                ", brought by the other torch build." if cause in torch_causes(base, target).values() else "."
            ),
            remedy_text(
                actions,
                target,
                note="if the application does not need it; or add it to the base's lock file.",
            ),
            base="missing",
            target=dist.version,
            caused_by=cause,
            actions=actions,
        )


def _uninstall(name: str) -> Action:
    """``pip uninstall`` of ``name``: every file its RECORD lists (a second copy of it elsewhere on
    sys.path is ENV-TORCH-SHADOWED's to name)."""
    return make(lambda: Uninstall(names=(name,)), f"uninstall {name}")


@difference_rule(
    "ENV-PKG-VERSION",
    family=FAMILY,
    severity="info",
    title="a distribution's version differs",
    why="New versions change behaviour; a new major version is a warning, other changes are info.",
    fm=("FM-07", "FM-26"),
    static_facts=True,
    fixes=("install",),
)
def pkg_version(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    changes: dict[str, _Change] | None = None
    for name in sorted(set(b_index) & set(t_index)):
        if name in _OWN_RULES:
            continue
        b, t = b_index[name], t_index[name]
        if b.version == t.version:
            continue
        changes = changes if changes is not None else _changes(base, target)
        label_changed = local_label(b.version) != local_label(t.version)
        is_major = major(b.version) != major(t.version)
        companion = name in COMPANIONS
        actions, install = _install(base, target, b)
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
            f"On the target: {install} (or update the base's lock file).",
            base=b.version,
            target=t.version,
            severity="error" if companion else "warning" if is_major or label_changed else None,
            caused_by=changes[name].cause if name in changes else None,
            actions=actions,
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
    static_facts=True,
    fixes=("install",),
)
def numpy_major(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = pkg(base, "numpy"), pkg(target, "numpy")
    if b is None or t is None or b.version == t.version:
        return
    crossed = major(b.version) != major(t.version)
    actions, install = _reinstall([("numpy", b.version)], source=base, on=target)
    yield rule.finding(
        "numpy",
        f"NumPy {b.version} on the base, {t.version} on the target"
        + (
            ": compiled extensions and pickled arrays may not survive the 1.x/2.x boundary."
            if crossed
            else "."
        ),
        f"On the target: {install}; or rebuild the extensions and re-save checkpoints as pure-tensor "
        "state_dicts (or safetensors).",
        base=b.version,
        target=t.version,
        severity=None if crossed else "info",
        actions=actions,
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
    static_facts=True,
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
            f"Reinstall it from torch's index: "
            f"{pip_install([(dist.name, dist.version.split('+')[0] + '+' + torch_label)], source=m, on=m)}"
            if torch_index_label(f"0+{torch_label}")
            else f"Reinstall {dist.name} from the same index as torch, in the same command.",
            base=f"torch +{torch_label}",
            target=f"{dist.name} +{label}",
        )


def _nvidia_pinned_by_torch(m: Manifest) -> frozenset[str]:
    """The nvidia-* wheels that torch pins (directly or through cuda-toolkit's extras): ENV-NVIDIA-PINS
    reports those, with CUDA's words."""
    return frozenset(pinned_nvidia(m))


@single_rule(
    "ENV-PKG-UNMET",
    family=FAMILY,
    severity="error",
    title="an installed distribution requires another that is missing or of a version it excludes",
    why=(
        "What `pip check` reports, with extras followed (a `pkg[extra]` requirement brings the extra's own "
        "requirements, which pip check does not look at): the import that needs it fails, or runs against "
        "an API the requirer was not built for. Markers are evaluated for the manifest's machine."
    ),
    fm=("FM-07", "FM-11"),
    evidence=("pytorch/vision#8985",),
    static_facts=True,
    fixes=("install",),
)
def pkg_unmet(rule: Rule, m: Manifest) -> Iterator[Finding]:
    installed = _index(m)
    g = graph(m)
    pinned: frozenset[str] | None = None
    unmet: dict[str, list[tuple[Distribution, Req, str]]] = {}
    for requirer in sorted(g.edges):
        for edge in g.edges[requirer]:
            req, name = edge.req, edge.req.name
            if name == requirer:
                continue  # `pkg[extra]` naming itself: its own extras, which the graph follows
            have = installed.get(name)
            if have is not None and satisfies(have.version, req):
                continue
            if have is not None and name == "torch":
                continue  # ENV-COMPANION-PIN says it, naming the torch release the requirer was built for
            if name.startswith("nvidia-"):
                pinned = pinned if pinned is not None else _nvidia_pinned_by_torch(m)
                if name in pinned:
                    continue  # ENV-NVIDIA-PINS says it, in CUDA's words
            unmet.setdefault(name, []).append((installed[requirer], req, edge.extra))
    for name, needs in sorted(unmet.items()):
        have = installed.get(name)
        shown = have.name if have is not None else needs[0][1].written
        asks = [f"{_written(req)}{req.specifier}" for _, req, _ in needs]
        by = "; ".join(
            f"{d.name} {d.version} requires {ask}" + (f" (through its extra '{extra}')" if extra else "")
            for (d, _, extra), ask in zip(needs, asks, strict=True)
        )
        actions, install = _unmet_install(m, shown, needs)
        yield rule.finding(
            shown,
            (
                f"{by}; it is not installed: importing them fails."
                if have is None
                else f"{by}; {have.name} {have.version} is installed."
            ),
            f"On this machine: {install}, then `pip check`.",
            actions=actions,
            base=", ".join(asks),
            target="missing" if have is None else have.version,
            # In a diff, the base had it and the target lost it: that finding explains this one (the link
            # is dropped when no such finding is in the report, as in `doctor`).
            caused_by=(
                None
                if have is not None
                else "ENV-TORCH-MISSING:torch"
                if name == "torch"
                else f"ENV-PKG-MISSING:{shown}"
            ),
        )


def _written(req: Req) -> str:
    return req.written + (f"[{','.join(sorted(req.extras))}]" if req.extras else "")


def _unmet_install(
    m: Manifest, shown: str, needs: list[tuple[Distribution, Req, str]]
) -> tuple[tuple[Action, ...], str]:
    """The install of what the requirers ask, and its text. An exact pin on torch or a companion by a
    labelled requirer keeps that label and its index (a bare ``torch==X`` installs the CUDA build on
    Linux)."""
    name = needs[0][1].name
    clauses = sorted({str(clause) for _, req, _ in needs for clause in specifier_set(req.specifier) or ()})
    label = torch_index_label(needs[0][0].version)
    if (
        label
        and (name == "torch" or name in COMPANIONS)
        and len(clauses) == 1
        and clauses[0].startswith("==")
    ):
        pin = clauses[0][2:]
        if "*" not in pin:
            return _reinstall([(shown, f"{pin.split('+')[0]}+{label}")], source=m, on=m)
    action = requirement_action(shown + ",".join(clauses))
    return (action,), remedy_text([action], m)


@difference_rule(
    "ENV-PKG-SOURCE",
    family=FAMILY,
    severity="error",
    title="a distribution comes from an editable checkout, a local path or a VCS on one side only",
    why=(
        "An editable or local install runs whatever its folder holds: a patched checkout at the released "
        "version number is not the release, and version comparison cannot see it (pip freeze shows it as "
        "`-e` or `name @ file://`). An error when the base has the release and the target a checkout, a "
        "folder, a VCS commit or an sdist; a warning for a wheel file from a local path (the released "
        "file, or one built locally: the manifest cannot tell), when only the base ran unreleased code, "
        "or when the two ran different checkouts or commits."
    ),
    fm=("FM-07", "FM-25"),
    # Not beside a predicted side: its direct_url names the wheel pip would download from the index,
    # and predict leaves path and VCS installs out (ENV-PREDICT-LEFT-OUT).
    static_facts=False,
    fixes=("install",),
)
def pkg_source(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_index, t_index = _index(base), _index(target)
    for name in sorted(set(b_index) & set(t_index)):
        b, t = b_index[name], t_index[name]
        if b.direct_url is None and t.direct_url is None:
            continue  # both from an index: the version rules compare them
        bs, ts = source(b), source(t)
        if bs.released and ts.released:
            continue
        same_checkout = bs.kind == ts.kind and (bs.kind != "vcs" or bs.commit == ts.commit)
        if not bs.released and not ts.released and same_checkout:
            continue  # the same kind of checkout: its folder differs from machine to machine
        versions = (
            b.version if b.version == t.version else f"{b.version} on the base, {t.version} on the target"
        )
        message = f"{t.name} {versions}: the base has {bs.shown}, the target has {ts.shown}" + (
            "; the target runs code no index serves, whatever its version says."
            if bs.released and ts.built_here
            else "; a wheel file from a local path is the release only if it is the released file."
            if bs.released
            else "; the base ran code no index serves."
            if ts.released
            else "; the two ran different code."
        )
        actions: tuple[Action, ...] = ()
        if bs.released:
            actions, install = _reinstall([(b.name, b.version)], source=base, on=target, force=True)
            remedy = "On the target, reinstall the release: " + install
        else:
            remedy = (
                f"Install on the target what the base ran ({bs.shown}), or rebuild the base from released "
                "versions and record it again."
            )
        yield rule.finding(
            t.name,
            message,
            remedy + ("" if remedy.endswith(".") else "."),
            base=bs.shown,
            target=ts.shown,
            severity=None if bs.released and ts.built_here else "warning",
            actions=actions,
        )


@single_rule(
    "ENV-PKG-DIRECT",
    family=FAMILY,
    severity="info",
    title="a distribution is installed from an editable checkout, a local path or a VCS",
    why=(
        "Developers install their own code this way; listed because no index serves it: another machine "
        "cannot install the same code from a version pin, and a patched checkout keeps the release's "
        "version number."
    ),
    fm=("FM-07",),
    # Not beside a predicted side: its direct_url names the wheel pip would download from the index,
    # and predict leaves path and VCS installs out (ENV-PREDICT-LEFT-OUT).
    static_facts=False,
    fixes=("install",),
)
def pkg_direct(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for _name, dist in sorted(_index(m).items()):
        if dist.direct_url is None:
            continue
        where = source(dist)
        if where.released:
            continue
        actions, install = _reinstall([(dist.name, dist.version)], source=m, on=m, force=True)
        yield rule.finding(
            dist.name,
            f"{dist.name} {dist.version} is installed from {where.shown} (pip freeze shows it as "
            + ("`-e`" if where.kind == "editable" else "a direct reference")
            + "), not from an index.",
            "Nothing to do on a development machine; to run the release instead (where an index has it): "
            + install
            + ".",
            target=where.shown,
            caused_by=f"ENV-PKG-SOURCE:{dist.name}",  # in a diff that reports it (dropped where absent)
            actions=actions,
        )
