"""Prediction: what a target platform will install, need and lack, from a predicted manifest
(``envcheck predict``). Each rule runs only when the target side is predicted, and reads only what the
prediction holds (``static_facts``)."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule, Severity
from envcheck.diff.rules.base import difference_rule
from envcheck.manifest.model import MachineNeed, Manifest, PredictedSection
from envcheck.manifest.query import canon, index, pkg
from envcheck.manifest.remedy import pip_install
from envcheck.manifest.requirements import graph

FAMILY = "prediction for another platform"

# OpenMP families in people's words.
_OMP = {
    "gnu": "GNU (libgomp)",
    "intel": "Intel (libiomp5)",
    "llvm": "LLVM (libomp)",
    "msvc": "Microsoft (vcomp)",
}
_BLAS = {
    "mkl": "Intel MKL",
    "openblas": "OpenBLAS",
    "accelerate": "Apple Accelerate",
    "blas": "a system BLAS",
}
_SHOWN = 6


def _predicted(target: Manifest) -> PredictedSection | None:
    return target.predicted if target.meta.kind == "predicted" else None


def _where(p: PredictedSection) -> str:
    impl = {"cp": "CPython", "pp": "PyPy"}.get(p.implementation, p.implementation)
    return f"{p.platform} / {impl} {p.python_version}"


def _list(items: list[str], limit: int = _SHOWN) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


@difference_rule(
    "ENV-PREDICT-NO-WHEEL",
    family=FAMILY,
    severity="error",
    title="a distribution has no wheel for the target platform",
    why=(
        "pip on the target finds no wheel of the pinned version for its platform and Python: the install "
        "fails ('No matching distribution'), or falls back to building from source, which needs a compiler "
        "and the library's build dependencies the machine rarely has."
    ),
    fm=("FM-24",),
    static_facts=True,
)
def no_wheel(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    for u in p.unavailable:
        resolved = pkg(target, u.name)
        exists = (
            f"versions with a wheel for {p.platform}: {_list(u.available)}"
            if u.available
            else f"no version has a wheel for {p.platform}"
        )
        elsewhere = f"; {u.version} has wheels for {_list(u.platforms)}" if u.platforms else ""
        instead = f"; pip chose {resolved.version} instead" if resolved is not None else ""
        severity: Severity = "error" if resolved is None else "warning"
        if u.available:
            command = pip_install([(u.name, u.available[0])], on=target)
            remedy = (
                f"Pin a version that has a wheel for {p.platform} ({command}), or leave {u.name} out of "
                "the target's requirements with a marker."
            )
        else:
            remedy = (
                f"Leave {u.name} out of the requirements for {p.platform} with an environment marker "
                f"(e.g. `{u.name}=={u.version}; sys_platform == 'linux'`), or build and ship a wheel for it."
            )
        yield rule.finding(
            u.name,
            f"{u.name} {u.version} ({'a root of the environment' if u.root else 'a dependency'}) has no "
            f"wheel for {_where(p)} on the indexes pip uses: {exists}{elsewhere}{instead}.",
            remedy,
            base=u.version,
            target=resolved.version if resolved is not None else "no wheel",
            severity=severity,
        )


@difference_rule(
    "ENV-PREDICT-VARIANT",
    family=FAMILY,
    severity="error",
    title="the indexes do not serve the torch build variant for the target platform",
    why=(
        "The same torch version resolves to another build for the target (the registry's Windows and macOS "
        "torch is CPU-only): a CUDA model then runs on the CPU or fails at `.cuda()`; the index for the "
        "variant's label has to be named for the target to get it."
    ),
    fm=("FM-01", "FM-24"),
    static_facts=True,
)
def variant(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None or base.torch.static is None:
        return
    want = base.torch.static.variant
    have = target.torch.static.variant if target.torch.static is not None else None
    dist = pkg(target, "torch")
    if dist is None or have is None or have == want:
        return
    version = base.torch.static.version or (pkg(base, "torch").version if pkg(base, "torch") else "")  # type: ignore[union-attr]
    labelled = version if "+" in (version or "") else f"{version}+{want}"
    yield rule.finding(
        "torch",
        f"torch {labelled} ({want}) is not served for {_where(p)} by the indexes pip uses: they resolve "
        f"torch {dist.version}, a {have} build.",
        f"Resolve with the PyTorch wheel index for {want} builds, if it serves {p.platform}: "
        f"{pip_install([('torch', labelled)], source=base, on=target)}; "
        f"`envcheck predict --extra-index-url` takes that index. If the {have} build is intended, declare "
        'it in the policy (`[[intended]] rule = "ENV-PREDICT-VARIANT"`).',
        base=want,
        target=have,
    )


def _base_needs(base: Manifest) -> set[str]:
    """Lower-case names of what the base's tree needs from its machine (redistributables, the driver)."""
    native = base.native
    return {r.name.lower() for r in (native.requires or [] if native is not None else [])}


@difference_rule(
    "ENV-PREDICT-RUNTIME",
    family=FAMILY,
    severity="warning",
    title="the target machine must have a runtime the dev box did not need",
    why=(
        "The target's binaries import a runtime no wheel ships (the VC++ 2015-2022 runtime on Windows, an "
        "OpenMP runtime, the NVIDIA driver): without it `import torch` fails with 'DLL load failed' "
        "(WinError 126) or a missing shared library; one older than the binaries were built with fails "
        "with WinError 127 / 1114 or crashes."
    ),
    fm=("FM-02", "FM-03", "FM-05"),
    static_facts=True,
)
def runtime_needed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    had = _base_needs(base)
    for need in p.needs:
        # glibc and macOS are floors of the OS itself, Accelerate a part of it: not runtimes to install.
        if need.provided != "machine" or need.kind not in (
            "vc-runtime",
            "openmp",
            "nvidia-driver",
            "runtime",
        ):
            continue
        if need.files and all(f.lower() in had for f in need.files):
            continue
        if need.kind == "nvidia-driver" and any(n.startswith(("libcuda", "nvcuda")) for n in had):
            continue
        yield _runtime_finding(rule, need, p, target)


def _runtime_finding(rule: Rule, need: MachineNeed, p: PredictedSection, target: Manifest) -> Finding:
    files = f" ({', '.join(need.files)})" if need.files else ""
    owners = sorted({k.split(":", 1)[0] for k in need.needed_by}, key=lambda o: (o != "torch", o))
    count = len(need.needed_by)
    by = f", imported by {count} file{'s' * (count != 1)} of {_list(owners, 5)}" if owners else ""
    minimum = f" {need.minimum} or newer" if need.minimum else ""
    evidence = f" ({need.evidence})" if need.minimum and need.evidence else ""
    if need.kind == "vc-runtime":
        remedy = (
            f"Install the {need.name}{minimum} on the target machine (Microsoft's vc_redist installer; "
            "the latest one serves every 2015-2022 build), or bundle the DLLs beside the application."
        )
    elif need.kind == "nvidia-driver":
        remedy = f"Install the NVIDIA driver{minimum} on the target machine."
    else:
        remedy = f"Install {need.name}{minimum} on the target machine, or ship it with the application."
    return rule.finding(
        need.name,
        f"The {p.platform} binaries need {need.name}{files}{by}: the machine must provide it"
        f"{' in version' + minimum if minimum else ''}{evidence}; the dev box's environment did not need it.",
        remedy,
        target=f"{need.name}{minimum}".strip(),
    )


def _base_families(base: Manifest) -> tuple[dict[str, str], dict[str, str]]:
    """OpenMP and BLAS families of the base -> the file that shows it (threadpoolctl's view, else the
    native tree's OpenMP inventory)."""
    import re

    omp: dict[str, str] = {}
    blas: dict[str, str] = {}
    if base.native is not None:
        for o in base.native.openmp or []:
            omp.setdefault(o.family, o.key.rsplit("/", 1)[-1])
    if base.runtimes is not None:
        for pool in base.runtimes.threadpools:
            name = re.split(r"[/\\]", pool.filepath)[-1]
            if pool.user_api == "blas":
                family = "mkl" if "mkl" in pool.internal_api else pool.internal_api
                blas.setdefault(family, name)
    return omp, blas


@difference_rule(
    "ENV-PREDICT-OPENMP-BLAS",
    family=FAMILY,
    severity="warning",
    title="the OpenMP or BLAS runtime family changes on the target platform",
    why=(
        "Another OpenMP (libgomp → libiomp5md, vcomp) or BLAS (OpenBLAS → Accelerate, MKL) runtime sums "
        "and blocks in another order: float results differ in the last bits, and the thread settings change "
        "meaning (KMP_* steers Intel's runtime only, GOMP_* GNU's; OMP_NUM_THREADS is read by each)."
    ),
    fm=("FM-14", "FM-18"),
    static_facts=True,
)
def runtime_family(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    base_omp, base_blas = _base_families(base)
    for kind, had, words, subject in (
        ("openmp", base_omp, _OMP, "OpenMP"),
        ("blas", base_blas, _BLAS, "BLAS"),
    ):
        now = {n.family: n for n in p.needs if n.kind == kind and n.family}
        if not had or not now or set(now) & set(had):
            continue
        before = ", ".join(f"{words.get(f, f)}: {had[f]}" for f in sorted(had))
        after = ", ".join(
            f"{words.get(f, f)}: {', '.join(n.files) or n.name}"
            f" ({'bundled' if n.provided == 'bundled' else 'from the machine'})"
            for f, n in sorted(now.items())
        )
        yield rule.finding(
            subject,
            f"The {subject} runtime changes from {before} on the dev box to {after} on {p.platform}: "
            "results may differ in the last bits and thread settings change meaning.",
            f"Run `envcheck verify` on a {p.platform} machine against the dev box's goldens, and review the "
            "OMP_* / KMP_* / GOMP_* / *_NUM_THREADS variables the deployment sets.",
            base=", ".join(sorted(had)),
            target=", ".join(sorted(now)),
        )


@difference_rule(
    "ENV-PREDICT-PYTHON",
    family=FAMILY,
    severity="error",
    title="the target's Python version or ABI differs, and compiled distributions lack a wheel for it",
    why=(
        "Compiled wheels are built per CPython minor version (cp311, cp312) unless they use the stable ABI: "
        "a new Python needs a new wheel of each, which an older pinned version may not have."
    ),
    fm=("FM-24",),
    static_facts=True,
)
def python_abi(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    had = ".".join(base.python.version.split(".")[:2])
    impl = {"cp": "CPython", "pp": "PyPy"}.get(p.implementation, p.implementation)
    if had == p.python_version and base.python.implementation == impl:
        return
    compiled = []
    for u in p.unavailable:
        dist = pkg(base, u.name)
        tags = dist.wheel_tags if dist is not None else []
        if any(not t.split("-")[1].startswith(("none", "abi3")) for t in tags if t.count("-") == 2):
            compiled.append(f"{u.name} {u.version}")
    what = f"{base.python.implementation} {had} → {impl} {p.python_version}"
    if compiled:
        yield rule.finding(
            "python",
            f"Python changes ({what}) and compiled distributions have no wheel for it: {_list(compiled)}.",
            "Pin versions of these that publish wheels for the target's Python, or keep the dev box's Python "
            "version on the target.",
            base=had,
            target=p.python_version,
        )
    else:
        yield rule.finding(
            "python",
            f"Python changes ({what}); every compiled distribution resolved a wheel for it.",
            "Test on the target's Python version: pure-Python code and pickles may still behave differently.",
            base=had,
            target=p.python_version,
            severity="warning",
        )


@difference_rule(
    "ENV-PREDICT-LEFT-OUT",
    family=FAMILY,
    severity="info",
    title="a distribution installed from a path or VCS was left out of the prediction",
    why=(
        "No index serves a distribution installed from a local folder, an editable checkout or a VCS: the "
        "prediction cannot resolve it, and the target gets it only the way it was shipped."
    ),
    fm=("FM-07",),
    static_facts=True,
)
def left_out(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    for d in p.left_out:
        yield rule.finding(
            d.name,
            f"{d.name} {d.version} was {d.reason}: left out of the prediction for {p.platform}.",
            f"Ship {d.name} to the target as a wheel (`pip wheel` it) and check it there.",
            base=d.version,
        )


@difference_rule(
    "ENV-PREDICT-NOT-INSTALLED",
    family=FAMILY,
    severity="info",
    title="distributions of the dev box that the target platform does not install",
    why=(
        "The requirements that bring them in carry markers that exclude the target (torch's nvidia-* and "
        "triton requirements are Linux-only): code importing them directly fails there."
    ),
    fm=("FM-24",),
    static_facts=True,
)
def not_installed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None:
        return
    accounted = {canon(d.name) for d in p.left_out} | {canon(u.name) for u in p.unavailable}
    # What a root without a wheel would have brought is that root's finding, not this one's.
    g = graph(base)
    for u in p.unavailable:
        accounted |= g.closure(canon(u.name))
    have = index(target)
    gone = sorted(
        (d for name, d in index(base).items() if name not in have and name not in accounted),
        key=lambda d: canon(d.name),
    )
    if not gone:
        return
    names = [f"{d.name} {d.version}" for d in gone]
    yield rule.finding(
        f"{len(gone)} distribution{'s' * (len(gone) != 1)}",
        f"pip does not install these for {_where(p)} (the requirements that bring them in do not apply "
        f"there): {_list(names, 40)}.",
        "Import them only where they exist (e.g. `if sys.platform == 'linux'`), or leave them out of the "
        f"target's requirements; check that {p.platform} does not need what they provide.",
        base=", ".join(d.name for d in gone[:12]),
    )


@difference_rule(
    "ENV-PREDICT-REFUSED",
    family=FAMILY,
    severity="warning",
    title="wheel members or files the prediction refused to read",
    why=(
        "A member over a cap (its size, its compression ratio, the bytes one wheel or one command may "
        "write), a member name that leaves the wheel, or one that cannot be extracted is not scanned: the "
        "predicted tree lacks it, so what it needs or brings is unknown, and the prediction is incomplete."
    ),
    fm=("FM-24",),
    static_facts=True,
)
def refused(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    p = _predicted(target)
    if p is None or target.native is None or not target.native.refused:
        return
    entries = sorted(target.native.refused, key=lambda r: (r.kind, r.path))
    shown = [f"{r.path} ({r.reason})" for r in entries]
    yield rule.finding(
        f"{len(entries)} refused file{'s' * (len(entries) != 1)}",
        f"The prediction for {_where(p)} did not read {len(entries)} wheel member"
        f"{'s' * (len(entries) != 1)} or file{'s' * (len(entries) != 1)}: {_list(shown)}. What they need "
        "from the machine is not in this report.",
        "Check where these wheels come from (a real wheel stays far inside the caps); scan one yourself "
        "with `envcheck scan WHEEL` to see every member it refuses.",
        target=", ".join(sorted({r.kind for r in entries})),
    )
