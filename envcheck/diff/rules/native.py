"""The native tree: which shared libraries were loaded, from where, and which files they are.

Paths are compared relative to their roots — a wheel's file relative to its distribution, an interpreter
file relative to its prefix — so two venvs at different paths with the same wheels compare equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from envcheck.core.findings import Finding, Rule, Severity
from envcheck.core.remedy import Action, Manual
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.diff.rules.loader import (
    Placed,
    aligned,
    is_wheel,
    is_windows,
    loader_cause,
    loader_fix,
    loader_variable,
    name_list,
    placed,
    reinstall_actions,
    reinstall_text,
    shipped_by,
    tree_names,
    variant_cause,
    version_cause,
    version_tuple,
)
from envcheck.manifest.identity import Aliases, aliases, canonical, foreign_libpython
from envcheck.manifest.installation import install_cause
from envcheck.manifest.model import Manifest, NativeFile
from envcheck.manifest.native import RECORD_FILE_ABSENT, NativeNode, shipped_by_python
from envcheck.manifest.ospackages import install_command, os_packages
from envcheck.manifest.query import canon, library_key, pkg
from envcheck.manifest.remedy import install_action, remedy_text

FAMILY = "native tree"


@difference_rule(
    "ENV-NATIVE-LOADED-FROM",
    family=FAMILY,
    severity="warning",
    title="a shared library is loaded from a different place",
    why=(
        "The same soname from another package or a system folder is another build: system CUDA/cuDNN in "
        "LD_LIBRARY_PATH shadowing the nvidia-* wheels gives 'undefined symbol' or version mismatches."
    ),
    fm=("FM-11", "FM-03", "FM-14"),
    evidence=("pytorch/pytorch#134929", "pytorch/pytorch#119989", "infiniflow/ragflow#4466"),
)
def loaded_from(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    if base.runtimes is None or target.runtimes is None:
        return  # a side whose probe did not run (or crashed) loaded nothing we know of: unknown, not lost
    b, t = aligned(base, target)
    for key in sorted(set(b) & set(t)):
        bp, tp = b[key], t[key]
        if bp.where == tp.where:
            continue
        if bp.identity and bp.identity == tp.identity and bp.owner == tp.owner:
            continue  # the same bytes of the same owner under another spelling: nothing moved
        to_system = is_wheel(bp.owner) and not is_wheel(tp.owner)
        restore = (
            f"reinstall {bp.owner} so its own copy is loaded"
            if is_wheel(bp.owner)
            else f"make the loader find {bp.where}/{key} first again"
        )
        yield rule.finding(
            key,
            f"{key} comes from {bp.where} ({bp.owner}) on the base and from {tp.where} ({tp.owner}) on the "
            "target" + (": a system copy replaces the one the wheel ships." if to_system else "."),
            f"{_sentence(loader_fix(target, f'{tp.folder}/{key}'))}; or {restore}.",
            base=f"{bp.where}/{key}",
            target=f"{tp.where}/{key}",
            severity="error" if to_system else None,
            caused_by=loader_cause(target, tp.folder, f"{tp.folder}/{key}", base)
            or _libpython_cause(base, target, key)
            or (version_cause(base, target, tp.owner) if bp.owner == tp.owner else None),
        )


def _libpython_cause(base: Manifest, target: Manifest, key: str = "") -> str | None:
    """The key of ENV-PYTHON-LIBPYTHON when the target runs a libpython other than its own and the base
    did not (and, with ``key``, when ``key`` is not that libpython itself)."""
    name = foreign_libpython(target)
    if name is None or foreign_libpython(base) is not None or key == library_key(name):
        return None
    return f"ENV-PYTHON-LIBPYTHON:{name}"


@difference_rule(
    "ENV-NATIVE-CHANGED",
    family=FAMILY,
    severity="warning",
    title="a shared library at the same place is a different file",
    why=(
        "A hand-copied or patched library (a DLL dropped into torch/lib) behaves differently without any "
        "version change."
    ),
    fm=("FM-03",),
    evidence=("pytorch/pytorch#29279", "zeyad-mansour/lunar#58"),
    fixes=("install",),
)
def native_changed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_versions = {canon(d.name): d.version for d in base.packages if not d.shadowed}
    t_versions = {canon(d.name): d.version for d in target.packages if not d.shadowed}
    if base.native is not None and target.native is not None and base.native.nodes and target.native.nodes:
        yield from _nodes_changed(
            rule, target, base.native.nodes, target.native.nodes, b_versions, t_versions
        )
        return
    b, t = placed(base), placed(target)
    for key in sorted(set(b) & set(t)):
        bp, tp = b[key], t[key]
        if bp.where != tp.where or not bp.identity or not tp.identity or bp.identity == tp.identity:
            continue
        owner = canon(tp.owner)
        if is_wheel(tp.owner) and b_versions.get(owner) != t_versions.get(owner):
            continue  # the package changed version: ENV-PKG-VERSION / ENV-TORCH-VERSION say so
        remedy, actions = _changed_remedy(target, tp.owner)
        yield rule.finding(
            key,
            f"{key} in {tp.where} is a different file on the target ({tp.owner}) than on the base, with no "
            "version change to explain it.",
            remedy,
            base=bp.identity,
            target=tp.identity,
            actions=actions,
        )


def _changed_remedy(m: Manifest, owner: str) -> tuple[str, tuple[Action, ...]]:
    """ENV-NATIVE-CHANGED's remedy on ``m`` for a file of ``owner``: its exact build installed again (the
    file as the wheel shipped it), or, for a file of the machine, its package."""
    if not is_wheel(owner):
        return "Reinstall the operating system's package that provides it, or find who replaced the file.", ()
    text, actions = _reinstall_owner(m, owner)
    return f"Reinstall {_owner_release(m, owner)}: {text}, or find who replaced the file.", actions


def _grouped(
    keys: list[str], places: dict[str, Placed], other: Manifest
) -> tuple[dict[str, list[str]], list[str]]:
    """Libraries by owner, and separately those whose owner distribution is not installed on ``other``
    (their absence follows from a package change, reported once)."""
    by_owner: dict[str, list[str]] = {}
    orphaned: list[str] = []
    for key in keys:
        owner = places[key].owner
        if is_wheel(owner) and pkg(other, owner) is None:
            orphaned.append(key)
        else:
            by_owner.setdefault(owner, []).append(key)
    return by_owner, orphaned


# The subject of the libraries the interpreter itself loads (stdlib extension modules and what they link)
# when a libpython of another build decides them.
INTERPRETER_SIDE = "the interpreter's libraries"


def _interpreter_side(
    by_owner: dict[str, list[str]], base: Manifest, target: Manifest
) -> tuple[dict[str, list[str]], list[str], str | None]:
    """When the target runs a foreign libpython (and the base its own), the system libraries that no
    wheel's native file needs are the interpreter's: its stdlib modules (a distribution's libpython builds
    many in) and what they link (libssl for _ssl, which fails to import against it). Those are taken out
    of the ``system`` group, with the libpython finding as their cause."""
    cause = _libpython_cause(base, target)
    system = by_owner.get("system")
    if cause is None or not system:
        return by_owner, [], None
    needed = tree_names(base) | tree_names(target)
    own = [k for k in system if k not in needed]
    rest = [k for k in system if k in needed]
    out = {o: keys for o, keys in by_owner.items() if o != "system"}
    if rest:
        out["system"] = rest
    return out, own, cause


def _whose(owner: str) -> str:
    return owner if is_wheel(owner) else f"the {owner}" if owner == "system" else f"{owner} files"


def _n(keys: list[str]) -> str:
    return f"{len(keys)} librar{'y' if len(keys) == 1 else 'ies'}"


@difference_rule(
    "ENV-NATIVE-LOST",
    family=FAMILY,
    severity="warning",
    title="shared libraries loaded on the base are not loaded on the target",
    why="What the base runs with (CUDA, cuDNN, MKL, an OpenMP runtime) is absent: those code paths are gone.",
    fm=("FM-01", "FM-02", "FM-11"),
)
def native_lost(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    if base.runtimes is None or target.runtimes is None:
        return  # a side whose probe did not run (or crashed) loaded nothing we know of: unknown, not lost
    b, t = aligned(base, target)
    by_owner, orphaned = _grouped(sorted(set(b) - set(t)), b, target)
    by_owner, own, cause = _interpreter_side(by_owner, base, target)
    for owner, keys in sorted(by_owner.items()):
        yield rule.finding(
            owner,
            f"{_n(keys)} of {_whose(owner)} loaded on the base {'is' if len(keys) == 1 else 'are'} not "
            f"loaded on the target: {name_list(keys)}.",
            f"Check why the target no longer loads {'it' if len(keys) == 1 else 'them'}: another build of "
            f"{owner if is_wheel(owner) else 'the system libraries'}, or a library path.",
            base=name_list(keys),
            target="not loaded",
            caused_by=variant_cause(base, target, [owner]) or version_cause(base, target, owner),
        )
    if own:
        yield rule.finding(
            INTERPRETER_SIDE,
            f"{_n(own)} that no wheel's native file needs (the interpreter's stdlib modules and what they "
            f"link) loaded on the base {'is' if len(own) == 1 else 'are'} not loaded on the target, which "
            f"runs another libpython: {name_list(own)}.",
            "Run the interpreter with its own libpython (see ENV-PYTHON-LIBPYTHON).",
            base=name_list(own),
            target="not loaded",
            caused_by=cause,
        )
    if orphaned:
        owners = sorted({b[k].owner for k in orphaned})
        yield rule.finding(
            "libraries of packages missing on the target",
            f"{_n(orphaned)} the base loads come from {len(owners)} package(s) not installed on the target "
            f"({name_list(owners, 20)}): {name_list(orphaned, 40)}. Whatever needs them (CUDA kernels, "
            "cuDNN, NCCL, ...) is unavailable there.",
            "Install the base's packages on the target from its lock file (the torch build decides most of "
            "them), or declare the difference intended.",
            base=name_list(orphaned, 3),
            target="not installed",
            caused_by=variant_cause(base, target, owners),
        )


@difference_rule(
    "ENV-NATIVE-ADDED",
    family=FAMILY,
    severity="info",
    title="shared libraries are loaded on the target only",
    why="New native code in the process: another runtime, another build, another kernel path.",
    fm=("FM-04", "FM-14"),
)
def native_added(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    if base.runtimes is None or target.runtimes is None:
        return  # a side whose probe did not run (or crashed) loaded nothing we know of: unknown, not lost
    b, t = aligned(base, target)
    by_owner, orphaned = _grouped(sorted(set(t) - set(b)), t, base)
    by_owner, own, cause = _interpreter_side(by_owner, base, target)
    for owner, keys in sorted(by_owner.items()):
        yield rule.finding(
            owner,
            f"{_n(keys)} of {_whose(owner)} loaded on the target only: {name_list(keys)}.",
            "Expected if the target's build differs on purpose; otherwise align the two environments.",
            base="not loaded",
            target=name_list(keys),
            caused_by=variant_cause(base, target, [owner]) or version_cause(base, target, owner),
        )
    if own:
        yield rule.finding(
            INTERPRETER_SIDE,
            f"{_n(own)} that no wheel's native file needs (the interpreter's stdlib modules and what they "
            f"link) loaded on the target only, which runs another libpython: {name_list(own)}.",
            "Run the interpreter with its own libpython (see ENV-PYTHON-LIBPYTHON).",
            base="not loaded",
            target=name_list(own),
            caused_by=cause,
        )
    if orphaned:
        owners = sorted({t[k].owner for k in orphaned})
        yield rule.finding(
            "libraries of packages added on the target",
            f"{_n(orphaned)} loaded on the target come from {len(owners)} package(s) the base lacks "
            f"({name_list(owners, 20)}): {name_list(orphaned, 40)}.",
            "Expected if the target's build differs on purpose; otherwise align the two environments.",
            base="not installed",
            target=name_list(orphaned, 3),
            caused_by=variant_cause(base, target, owners),
        )


# The CUDA libraries the nvidia-* wheels ship and torch expects from them (FM-11).
_CUDA_LIB = re.compile(
    r"^lib(cudnn|cublas|cublasLt|cudart|cusparse|cusolver|cufft|curand|nccl|nvJitLink|nvrtc)"
)


@single_rule(
    "ENV-CUDA-LIB-SHADOWED",
    family=FAMILY,
    severity="error",
    title="a CUDA library is loaded from the system while an nvidia-* wheel ships it",
    why=(
        "LD_LIBRARY_PATH or the linker cache wins for transitive dependencies: a system cuDNN/cuBLAS/"
        "nvJitLink of another version replaces the wheel's ('undefined symbol', 'cuDNN version "
        "incompatibility')."
    ),
    fm=("FM-11",),
    evidence=("pytorch/pytorch#134929", "pytorch/pytorch#119989", "pytorch/pytorch#188892"),
)
def cuda_lib_shadowed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.runtimes is None or (m.native is not None and m.native.loaded is not None):
        return  # reconciled against the native tree: ENV-NATIVE-SHADOWED reports it with the tree's answer
    shipped: dict[str, str] = {}
    for dist in m.packages:
        if dist.shadowed or not canon(dist.name).startswith(("nvidia-", "torch")):
            continue
        for nf in dist.native_files:
            shipped.setdefault(library_key(nf.path), dist.name)
    for lib in sorted(m.runtimes.loaded, key=lambda x: x.path):
        key = library_key(lib.path)
        if is_wheel(lib.owner) or key not in shipped or not _CUDA_LIB.match(key):
            continue
        yield rule.finding(
            key,
            f"{key} is loaded from {lib.path}, not from {shipped[key]}, which ships it.",
            _sentence(loader_fix(m, canonical(lib.path, aliases(m))))
            + "; or uninstall the conflicting copy.",
            base=shipped[key],
            target=lib.path,
        )


@single_rule(
    "ENV-NATIVE-MISSING",
    family=FAMILY,
    severity="error",
    title="a native dependency does not resolve (an import will fail)",
    why=(
        "The loader cannot find a library in the import closure: 'DLL load failed', '[WinError 126]', "
        "'cannot open shared object file'. The message names the first broken module, not the absent file."
    ),
    fm=("FM-02", "FM-11", "FM-13"),
    evidence=("pytorch/pytorch#131662", "pytorch/pytorch#125109", "ContinuumIO/anaconda-issues#13513"),
    static_facts=True,
    fixes=("install",),
)
def native_missing(rule: Rule, m: Manifest) -> Iterator[Finding]:
    native = m.native
    if native is None or not native.missing:
        return
    drivers = {r.name for r in native.requires or [] if r.kind == "driver"}
    by_root: dict[str, list[str]] = {}
    texts: dict[str, str] = {}
    imported: set[str] = set()
    for chain in native.missing:
        by_root.setdefault(chain.root, []).append(chain.missing)
        texts.setdefault(chain.root, chain.text)
        if chain.from_extension and _optional_extension(chain.root) is None:
            imported.add(chain.root)
    subjects = _missing_subjects(list(by_root))
    for root, missing in sorted(by_root.items()):
        names = sorted(set(missing))
        short = subjects[root]
        if root in imported:
            shippers = shipped_by(m, names)
            if shippers:
                # The distribution's own file is gone (its RECORD lists it): only reinstalling it puts back
                # the build its other files were linked against; an OS package would be another build.
                actions = reinstall_actions(m, shippers)
                remedy = f"Reinstall what ships {', '.join(names)}: {reinstall_text(m, actions)}."
            else:
                remedy, actions = _missing_remedy(m, root, names)
            yield rule.finding(
                short,
                f"Importing {root} fails: {', '.join(names)} cannot be found ({texts[root]}).",
                remedy,
                base=root,
                target="missing: " + ", ".join(names),
                actions=actions,
            )
        elif (backend := _optional_extension(root)) is not None:
            yield rule.finding(
                short,
                f"{root} cannot load here ({', '.join(names)} missing): it is {backend}, imported only "
                "inside `try:` with a fallback, so the package imports and works without it.",
                f"Nothing to do unless the application needs {backend}: then install what ships "
                f"{', '.join(names)}.",
                base=root,
                target="missing: " + ", ".join(names),
                severity="info",
            )
        elif set(names) <= drivers:
            yield rule.finding(
                short,
                f"{root} needs the GPU driver ({', '.join(names)}), which this machine lacks: it loads only "
                "where a driver is installed.",
                "Nothing to do on a machine without a GPU; on a GPU machine install the NVIDIA driver.",
                base=root,
                target="missing: " + ", ".join(names),
                severity="info",
            )
        else:
            # No extension module links this library: it is a plugin opened on demand (an RDMA transport, an
            # MPI bootstrap). Only the feature that opens it fails.
            shippers = shipped_by(m, names)
            actions = reinstall_actions(m, shippers)
            # The same file missing from an import's closure is that import's failure: reported there.
            cause = next(
                (
                    f"{rule.id}:{subjects[other]}"
                    for other in sorted(imported)
                    if set(names) <= set(by_root[other])
                ),
                None,
            )
            yield rule.finding(
                short,
                f"The plugin {root} cannot load here ({', '.join(names)} missing); only the feature that "
                "opens it fails.",
                f"Only if the application uses that feature: reinstall what ships {', '.join(names)}, "
                f"{reinstall_text(m, actions)}."
                if shippers
                else f"Install {', '.join(names)} only if the application uses that feature.",
                base=root,
                target="missing: " + ", ".join(names),
                severity="info",
                caused_by=cause,
                actions=actions,
            )


# Extension modules that their package imports only inside `try:`, as one backend among others, and whose
# library comes from a distribution the package does not require: a missing library there is no failed import.
# numba's TBB threading layer needs libtbb.so.12 from the `tbb` wheel; without it numba uses its OpenMP or
# workqueue layer (numba docs, "The Threading Layers"). Keys: the root's path inside its distribution, up to
# the extension's suffix.
_OPTIONAL_EXTENSIONS = {"numba/np/ufunc/tbbpool.": "numba's optional TBB threading layer"}


def _optional_extension(root: str) -> str | None:
    """What optional backend the extension module ``root`` (``dist:path``) is, or None."""
    path = root.split(":", 1)[-1].replace("\\", "/")
    return next((what for key, what in _OPTIONAL_EXTENSIONS.items() if path.startswith(key)), None)


def _missing_subjects(roots: list[str]) -> dict[str, str]:
    """The subject of each root's finding: its file name (``_C.cpython-311-x86_64-linux-gnu.so``), or, where
    two roots share one (every package's ``_C``), its path after the owner (``visionops/_C.cpython-…``), so
    that each finding keeps a key of its own."""
    short = {root: root.rsplit("/", 1)[-1] for root in roots}
    counts: dict[str, int] = {}
    for name in short.values():
        counts[name] = counts.get(name, 0) + 1
    return {root: name if counts[name] == 1 else root.split(":", 1)[-1] for root, name in short.items()}


def _missing_remedy(m: Manifest, root: str, names: list[str]) -> tuple[str, tuple[Action, ...]]:
    """What to do about ``names`` that no installed distribution ships, missing from the import of
    ``root``: a library only a Python distribution ships (a torch build's ``libc10_cuda.so``, an nvidia-*
    wheel's ``libcudart.so.13``) comes from that distribution, never from the operating system: torch's
    exact build installed again, which also installs the wheels it pins that are gone (pip adds a missing
    requirement; what is there stays). Others come from the OS's packages (Windows: the VC++
    redistributable), a step envcheck does not write as a command."""
    wheel = {n: what for n in names if (what := shipped_by_python(n)) is not None}
    rest = [n for n in names if n not in wheel]
    parts: list[str] = []
    actions: list[Action] = []
    if wheel:
        owner = root.split(":", 1)[0] if ":" in root else None
        dist = pkg(m, owner) if owner else None
        torch = pkg(m, "torch")
        whats = sorted(set(wheel.values()))
        head = (
            f"only {' or '.join(whats)} ships {', '.join(wheel)} (Python distributions, never an operating "
            "system's package)"
        )
        if dist is not None and canon(dist.name) != "torch" and torch is not None:
            parts.append(
                f"{head}: {dist.name} {dist.version} was built for a torch build that ships "
                f"{'it' if len(wheel) == 1 else 'them'}, and torch {torch.version} is installed. Install the "
                f"{dist.name} build made for torch {torch.version} from the index that serves it (or "
                "rebuild it against the installed torch), or the torch build it was made for"
            )
        elif torch is not None:
            action = install_action([("torch", torch.version)], source=m)
            actions.append(action)
            parts.append(
                f"{head}: install torch {torch.version} again from the index of its build, which installs "
                f"the wheels it pins that are gone: {remedy_text([action], m)}"
            )
        else:
            parts.append(f"{head}: install the torch build that {root.split(':', 1)[0]} was made for")
    distro = m.platform.distro if m.platform else None
    found = None if is_windows(m) or not rest else os_packages(rest, distro)
    if found is not None:
        tool, packages, unknown = found
        command = install_command(tool, packages)
        image = m.meta.kind == "image"
        place = "in the image's Dockerfile" if image else "as root"
        shown = f"RUN {command}" if image else command
        ships = "ships" if len(packages) == 1 else "ship"
        known = name_list([n for n in rest if n not in unknown], 6)
        text = f"install the operating system's {', '.join(packages)}, which {ships} {known}, "
        text += f"{place}: `{shown}`"
        if unknown:
            text += f"; and what provides {', '.join(unknown)} (from the operating system's packages)"
        parts.append(text)
        actions.append(Manual(text=f"{place}: {shown}"))
    elif rest:
        provider = (
            " (for Windows runtimes the current VC++ 2015-2022 x64 redistributable; never a "
            "DLL-download site)"
            if is_windows(m)
            else " (from the operating system's packages)"
        )
        parts.append(
            f"install what provides {', '.join(rest)}{provider}, or reinstall the package that should "
            "bundle it"
        )
    text = "; ".join(parts) + "."
    return text[:1].upper() + text[1:], tuple(actions)


@single_rule(
    "ENV-SYMBOL-VERSION",
    family=FAMILY,
    severity="error",
    title="a required GLIBC_ / GLIBCXX_ / CXXABI_ version is newer than the machine provides",
    why='"version `GLIBCXX_3.4.30\' not found (required by …/libtorch_python.so)" at import.',
    fm=("FM-13",),
    evidence=("pytorch/pytorch#156215", "mlverse/torch#1414", "pytorch/pytorch#87279"),
)
def symbol_version(rule: Rule, m: Manifest) -> Iterator[Finding]:
    native = m.native
    if native is None:
        return
    provided: dict[str, tuple[int, ...]] = {}
    if native.glibc_provided:
        provided["GLIBC"] = version_tuple(native.glibc_provided)
    for node in native.nodes or []:
        for family, version in (node.version_provides or {}).items():
            provided[family] = max(provided.get(family, ()), version_tuple(version))
    needs: dict[str, tuple[tuple[int, ...], list[str]]] = {}
    if native.glibc_required:
        needs["GLIBC"] = (version_tuple(native.glibc_required), [])
    for node in native.nodes or []:
        for family, version in (node.version_needs or {}).items():
            wanted = version_tuple(version)
            best, files = needs.get(family, ((), []))
            if wanted > best:
                needs[family] = (wanted, [node.key])
            elif wanted == best:
                files.append(node.key)
    for family in ("GLIBC", "GLIBCXX", "CXXABI"):
        if family not in needs or family not in provided:
            continue
        wanted, files = needs[family]
        if wanted <= provided[family]:
            continue
        need_text = ".".join(map(str, wanted))
        have_text = ".".join(map(str, provided[family]))
        yield rule.finding(
            f"{family}_{need_text}",
            f"{name_list(sorted(files), 3) or 'a native file'} require(s) {family}_{need_text}; the "
            f"machine's library provides up to {family}_{have_text}: the import fails with 'version not "
            "found'.",
            "Use a newer base OS (glibc ≥ 2.28 for manylinux_2_28 wheels), or one consistent libstdc++ "
            "(conda's libstdcxx-ng or the system's), or a torch built for this system.",
            base=f"{family}_{need_text}",
            target=f"{family}_{have_text}",
        )


@single_rule(
    "ENV-NATIVE-SHADOWED",
    family=FAMILY,
    severity="error",
    title="a loaded library is not the file the native tree predicts",
    why=(
        "Something else on the loader path (LD_LIBRARY_PATH, a system folder, a copy loaded earlier) "
        "replaces the file a wheel ships: version mismatches and 'undefined symbol'."
    ),
    fm=("FM-11", "FM-03"),
    evidence=("pytorch/pytorch#134929", "pytorch/pytorch#29279", "pytorch/pytorch#36868"),
    fixes=("install",),
)
def native_shadowed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.native is None:
        return
    reported: set[str] = set()
    absent = absent_files(m)
    for shadow in _static_shadows(m):
        reported.add(shadow.name.lower())
        needers = name_list(sorted(shadow.needers), 3)
        through = {
            "ld-library-path": " through LD_LIBRARY_PATH",
            "ld-so-cache": " through the loader cache",
            "default-dirs": " from the default folders",
        }.get(shadow.how, "")
        loaded = " The process loaded that copy." if shadow.loaded else ""
        if shadow.shipped in absent and shadow.how != "ld-library-path":
            # Nothing shadows it: the wheel's own file is gone and the loader searched on.
            text, actions = _reinstall_owner(m, shadow.owner)
            yield rule.finding(
                shadow.name,
                f"{shadow.owner}'s own {shadow.name} ({shadow.shipped}) is not on disk, so its {needers} "
                f"resolve it to {shadow.resolved}{through}.{loaded}",
                f"Reinstall {_owner_release(m, shadow.owner)}: {text}.",
                actions=actions,
                base=shadow.shipped,
                target=shadow.resolved,
                severity=None if not is_wheel(shadow.resolved_owner) else "warning",
                caused_by=f"ENV-NATIVE-FILE-MISSING:{shadow.shipped}",
            )
            continue
        yield rule.finding(
            shadow.name,
            f"{shadow.owner} ships {shadow.name} ({shadow.shipped}), but its {needers} resolve it to "
            f"{shadow.resolved}{through}.{loaded}",
            f"{_sentence(loader_fix(m, shadow.resolved, shadow.how))}, so that {shadow.owner}'s own "
            f"{shadow.name} is found first.",
            base=shadow.shipped,
            target=shadow.resolved,
            severity=None if not is_wheel(shadow.resolved_owner) else "warning",
            caused_by="ENV-VAR-CHANGED:LD_LIBRARY_PATH" if shadow.how == "ld-library-path" else None,
        )
    table = aliases(m)
    for item in sorted(m.native.loaded or [], key=lambda d: (d.name, d.loaded)):
        if item.kind != "elsewhere" or item.name.lower() in reported:
            continue
        expected = item.expected or "the tree's copy"
        from_system = not is_wheel(item.loaded_owner)
        path = canonical(item.loaded, table)
        yield rule.finding(
            item.name,
            f"{item.name} was loaded from {item.loaded} ({item.loaded_owner}); the native tree resolves it "
            f"to {expected}.",
            f"{_sentence(loader_fix(m, path))}; or uninstall the stray copy, so the wheel's own file is "
            "loaded.",
            base=expected,
            target=item.loaded,
            severity=None if from_system else "warning",
            caused_by=loader_cause(m, path.rsplit("/", 1)[0], path),
        )


@dataclass(frozen=True, slots=True)
class _Shadow:
    name: str
    owner: str
    shipped: str
    resolved: str
    resolved_owner: str
    how: str
    needers: tuple[str, ...]
    loaded: bool


def _static_shadows(m: Manifest) -> list[_Shadow]:
    """Libraries a wheel ships that its own files resolve elsewhere (the tree's static truth): torch ships
    torch/lib/libgomp.so.1, yet LD_LIBRARY_PATH makes libtorch_cpu.so find the system's libgomp.so.1."""
    nodes = (m.native.nodes if m.native is not None else None) or []
    by_key = {n.key: n for n in nodes}
    shipped: dict[tuple[str, str], str] = {}
    for n in nodes:
        if not is_wheel(n.owner) or n.owner == "interpreter":
            continue
        for name in {library_key(n.path), *((library_key(n.soname),) if n.soname else ())}:
            shipped.setdefault((n.owner, name.lower()), n.key)
    found: dict[tuple[str, str], tuple[str, str, str, list[str]]] = {}
    for n in nodes:
        if not is_wheel(n.owner) or n.owner == "interpreter":
            continue
        for dep in n.dependencies or []:
            if dep.kind in ("bundled", "missing") or dep.target is None:
                continue
            own = shipped.get((n.owner, library_key(dep.name).lower()))
            if own is None or own == dep.target:
                continue
            entry = found.setdefault((n.owner, dep.name), (own, dep.target, dep.how, []))
            entry[3].append(n.key)
    loaded_ids = {
        lib.identity for lib in (m.runtimes.loaded if m.runtimes is not None else []) if lib.identity
    }
    out = []
    for (owner, name), (own, resolved, how, needers) in sorted(found.items()):
        node = by_key.get(resolved)
        out.append(
            _Shadow(
                name=name,
                owner=owner,
                shipped=own,
                resolved=resolved,
                resolved_owner=node.owner if node is not None else "system",
                how=how,
                needers=tuple(needers),
                loaded=node is not None and node.identity is not None and node.identity in loaded_ids,
            )
        )
    return out


def _nodes_changed(
    rule: Rule,
    target: Manifest,
    base_nodes: list[NativeNode],
    target_nodes: list[NativeNode],
    b_versions: dict[str, str],
    t_versions: dict[str, str],
) -> Iterator[Finding]:
    """Same location-independent key, another file, and no version change of its owner to explain it
    (the remedy: ``target``'s own build of the owner, installed again)."""
    base_by_key = {n.key: n for n in base_nodes}
    for node in target_nodes:
        old = base_by_key.get(node.key)
        if old is None or not old.identity or not node.identity or old.identity == node.identity:
            continue
        owner = canon(node.owner)
        if is_wheel(node.owner) and b_versions.get(owner) != t_versions.get(owner):
            continue
        # A system file (its key is its absolute path): distributions patch their libraries; info.
        severity: Severity | None = "info" if node.key.startswith("/") else None
        remedy, actions = _changed_remedy(target, node.owner)
        yield rule.finding(
            node.key,
            f"{node.key} is a different file on the target than on the base"
            + (" (RECORD no longer matches it)" if node.integrity == "modified" else "")
            + ", with no version change to explain it.",
            remedy,
            actions=actions,
            base=old.identity,
            target=node.identity,
            severity=severity,
            caused_by=f"ENV-NATIVE-TAMPERED:{node.key}" if node.integrity == "modified" else None,
        )


_TO_MACHINE = frozenset({"os", "external", "missing", "driver", "redistributable"})


@difference_rule(
    "ENV-NATIVE-RESOLVED-ELSEWHERE",
    family=FAMILY,
    severity="warning",
    title="a native dependency resolves to another file than on the base",
    why=(
        "The loader picks another copy: a system cuDNN/cuBLAS/nvJitLink instead of the wheel's "
        "(LD_LIBRARY_PATH, ld.so.cache), another libstdc++, another OpenMP runtime."
    ),
    fm=("FM-11", "FM-13", "FM-03", "FM-14"),
    evidence=("pytorch/pytorch#134929", "infiniflow/ragflow#4466", "pytorch/pytorch#88882"),
)
def resolved_elsewhere(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    if base.native is None or target.native is None or not base.native.nodes or not target.native.nodes:
        return
    b_table, t_table = aliases(base), aliases(target)
    b_ids = {n.key: n.identity for n in base.native.nodes if n.identity}
    t_ids = {n.key: n.identity for n in target.native.nodes if n.identity}
    before: dict[tuple[str, str], tuple[str | None, str]] = {}
    for node in base.native.nodes:
        for dep in node.dependencies or []:
            before[(node.key, dep.name)] = (dep.target, dep.kind)
    # One finding per dependency name: many files need the same library, the story is the same.
    changed: dict[str, tuple[str | None, str, str | None, str, str, list[str]]] = {}
    for node in target.native.nodes:
        for dep in node.dependencies or []:
            old = before.get((node.key, dep.name))
            if old is None or old[0] == dep.target or dep.kind == "missing" or dep.how == "missing":
                continue  # new files are ENV-NATIVE-ADDED's; missing ones ENV-NATIVE-MISSING's
            if _same_node(old[0], b_table, b_ids, dep.target, t_table, t_ids):
                continue  # one file under two spellings (/lib → /usr/lib on a merged-/usr system)
            entry = changed.setdefault(dep.name, (old[0], old[1], dep.target, dep.kind, dep.how, []))
            entry[5].append(node.key)
    for name, (old_target, old_kind, new_target, new_kind, how, needers) in sorted(changed.items()):
        to_machine = old_kind in ("bundled", "distribution") and new_kind in _TO_MACHINE
        cause = None
        if how == "ld-library-path" and new_target and new_target.startswith("/"):
            path = canonical(new_target, t_table)
            cause = loader_cause(target, path.rsplit("/", 1)[0], path, base)
        yield rule.finding(
            name,
            f"{name} resolves to {old_target or old_kind} on the base and to {new_target or new_kind} on the "
            f"target, for {name_list(sorted(needers), 3)}"
            + (": the machine's copy replaces the one a wheel ships." if to_machine else "."),
            f"Remove the folder of the other copy from {loader_variable(target)} (or the loader cache) for "
            "this application, or reinstall the package whose copy should win.",
            base=old_target or old_kind,
            target=new_target or new_kind,
            severity="error" if to_machine else None,
            caused_by=cause,
        )


def _same_node(
    a: str | None,
    a_table: Aliases,
    a_ids: dict[str, str],
    b: str | None,
    b_table: Aliases,
    b_ids: dict[str, str],
) -> bool:
    """Whether two resolved targets (node keys) are one file: the same path once each side's aliases
    are applied (system files are keyed by their absolute path), or the same content."""
    if a is None or b is None:
        return False
    if a.startswith("/") and b.startswith("/") and canonical(a, a_table) == canonical(b, b_table):
        return True
    return a in a_ids and a_ids[a] == b_ids.get(b)


@single_rule(
    "ENV-NATIVE-TAMPERED",
    family=FAMILY,
    severity="error",
    title="a native file no package installed, or one that no longer matches its RECORD",
    why=(
        "A DLL or .so copied by hand into torch/lib, or patched after install, is loaded first and is "
        "another build: 'procedure could not be found', WinError 127/1114, or silent misbehaviour."
    ),
    fm=("FM-03", "FM-02"),
    evidence=("pytorch/pytorch#29279", "pytorch/pytorch#129568", "zeyad-mansour/lunar#58"),
    fixes=("install",),
)
def native_tampered(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.native is None:
        return
    for node in sorted(m.native.nodes or [], key=lambda n: n.key):
        if node.integrity == "modified":
            record = _record_entry(m, node)
            resized = node.identity is None and node.size is not None and record is not None
            differs = (
                f"is {node.size:,} bytes where its RECORD says {record.size:,}"  # type: ignore[union-attr]
                if resized and record.size is not None  # type: ignore[union-attr]
                else "differs from the sha256 its RECORD promises"
            )
            text, actions = _reinstall_owner(m, node.owner)
            yield rule.finding(
                node.key,
                f"{node.path} {differs}: it was replaced or patched after {node.owner} was installed.",
                f"Reinstall {_owner_release(m, node.owner)}: {text}, and find out who replaced the file "
                f"(never take {'DLLs' if is_windows(m) else 'libraries'} from download sites).",
                actions=actions,
                base="RECORD",
                target=node.identity or (f"{node.size} bytes" if node.size is not None else "modified"),
                caused_by=install_cause(m, node.owner, _relative(node)),
            )
        elif node.owner == "unowned":
            # Not a command: a file some library links by name may be all that makes it load, and which
            # package should own it is no RECORD's word.
            step = Manual(
                text=f"Delete {node.path} if no library needs it, or reinstall the package that should own "
                "it."
            )
            yield rule.finding(
                node.key,
                f"{node.path} sits inside site-packages but no installed package lists it: copied by hand or "
                "left behind by an uninstall, and the loader may pick it first.",
                step.text,
                actions=(step,),
                base="no owner",
                target=node.path,
                severity="warning",
                caused_by=install_cause(m, node.owner, _relative(node)),
            )


def _relative(node: NativeNode) -> str | None:
    """The path of ``node`` relative to its site folder, from its ``owner:relative/path`` key."""
    return node.key.split(":", 1)[1] if ":" in node.key else None


def _record_entry(m: Manifest, node: NativeNode) -> NativeFile | None:
    """What the RECORD of ``node``'s owner says about it (``owner:relative/path`` keys)."""
    dist = pkg(m, node.owner)
    rel = node.key.split(":", 1)[1] if ":" in node.key else None
    if dist is None or rel is None:
        return None
    return next((f for f in dist.native_files if f.path == rel), None)


def _owner_release(m: Manifest, owner: str) -> str:
    dist = pkg(m, owner)
    return f"{owner} {dist.version}" if dist is not None else owner


def _reinstall_owner(m: Manifest, owner: str) -> tuple[str, tuple[Action, ...]]:
    """The reinstall of ``owner``'s exact build (``reinstall_actions``), and its words."""
    dist = pkg(m, owner)
    if dist is None:  # a node's owner is one of the manifest's distributions; an edited manifest may lie
        return f"install {owner} again at the version it had, from the index it came from", ()
    actions = reinstall_actions(m, [dist])
    return reinstall_text(m, actions), actions


def absent_files(m: Manifest) -> dict[str, NativeNode]:
    """Node key -> node of every native file a distribution's RECORD lists that is not on disk."""
    nodes = (m.native.nodes if m.native is not None else None) or []
    return {n.key: n for n in nodes if n.error == RECORD_FILE_ABSENT and is_wheel(n.owner)}


@single_rule(
    "ENV-NATIVE-FILE-MISSING",
    family=FAMILY,
    severity="error",
    title="a native file a distribution's RECORD lists is not on disk",
    why=(
        "A library deleted after install (a clean-up script, a slimmed image, a half-done upgrade) does not "
        "always fail the import: the loader searches on and finds another copy (the OS's libgomp or "
        "libstdc++, an older VC++ runtime), so the process runs another build than the wheel shipped and "
        "was tested with."
    ),
    fm=("FM-02", "FM-03", "FM-14"),
    static_facts=True,
    fixes=("install",),
)
def native_file_missing(rule: Rule, m: Manifest) -> Iterator[Finding]:
    native = m.native
    if native is None:
        return
    # A file no other copy replaces, whose absence fails an import: ENV-NATIVE-MISSING reports that import
    # with the chain and the same reinstall.
    failing = {c.missing.lower() for c in native.missing or [] if c.from_extension}
    nodes = native.nodes or []
    by_key = {n.key: n for n in nodes}
    runtimes = {r.name.lower(): r.runtime for r in native.requires or [] if r.runtime}
    for key, node in sorted(absent_files(m).items()):
        rel = key.split(":", 1)[1]
        name = rel.rsplit("/", 1)[-1]
        instead, needers = _loads_instead(nodes, key, name)
        other = by_key.get(instead) if instead is not None else None
        loaded, same = _loaded_instead(m, name, other, node.path)
        if instead is None and name.lower() in failing:
            continue
        if instead is not None:
            where = other.path if other is not None else instead
            owner = other.owner if other is not None else "system"
            what = runtimes.get(name.lower()) or "copy"
            label = (
                f"the OS's {what}"
                if owner == "system"
                else "a copy no package lists"
                if owner == "unowned"
                else f"{owner}'s {what}"
            )
            seen = (
                " The process loaded it."
                if same
                else f" The process loaded {loaded}."
                if loaded is not None
                else ""
            )
            message = (
                f"{rel} is missing: {where} loads instead, {label}, for {name_list(needers, 3)}.{seen} "
                f"{node.owner}'s files were built and tested with their own copy."
            )
            target = where
        elif loaded is not None:
            message = (
                f"{rel} is missing; no file of the tree links it by name, and the running process has "
                f"{loaded} loaded, another copy of that library."
            )
            target = loaded
        else:
            message = (
                f"{rel} is missing; no file of the tree links it by name, so whatever opens it (an import, "
                "a dlopen) fails."
            )
            target = "missing"
        text, actions = _reinstall_owner(m, node.owner)
        yield rule.finding(
            key,
            message,
            f"Reinstall {_owner_release(m, node.owner)}: {text}, and find out what deleted the file.",
            actions=actions,
            base=f"RECORD: {rel}",
            target=target,
        )


def _loads_instead(nodes: list[NativeNode], key: str, name: str) -> tuple[str | None, list[str]]:
    """The node the loader resolves ``name`` to now that ``key`` is gone (the one most of its needers get),
    and those needers."""
    wanted = library_key(name).lower()
    targets: dict[str, list[str]] = {}
    for n in nodes:
        for d in n.dependencies or []:
            if d.target is not None and d.target != key and library_key(d.name).lower() == wanted:
                targets.setdefault(d.target, []).append(n.key)
    if not targets:
        return None, []
    best = max(sorted(targets), key=lambda t: len(targets[t]))
    return best, sorted(set(targets[best]))


def _loaded_instead(m: Manifest, name: str, static: NativeNode | None, gone: str) -> tuple[str | None, bool]:
    """The file of that name the live process mapped (``runtimes.loaded``), and whether it is ``static``
    (the file the loader resolves it to: same identity, or path): that file when it was mapped, else one
    whose name starts with ``name`` (``libgomp.so.1.0.0``) other than ``gone``, the missing file itself."""
    if m.runtimes is None:
        return None, False
    loaded = m.runtimes.loaded
    if static is not None:
        hit = next(
            (
                lib.path
                for lib in loaded
                if lib.path == static.path or (static.identity and lib.identity == static.identity)
            ),
            None,
        )
        if hit is not None:
            return hit, True
    wanted = library_key(name).lower()
    hit = next(
        (lib.path for lib in loaded if lib.path != gone and library_key(lib.path).lower().startswith(wanted)),
        None,
    )
    return hit, False


_MACHINE_PROVIDED = ("redistributable", "driver")


@difference_rule(
    "ENV-NATIVE-REQUIRES",
    family=FAMILY,
    severity="warning",
    title="the target's native tree needs a runtime or driver the base's did not",
    why=(
        "A redistributable (VC++ runtime, OpenMP, libgfortran) or the GPU driver must now be installed on "
        "the machine: where it is absent, imports fail with 'DLL load failed' / 'cannot open shared object'."
    ),
    fm=("FM-02", "FM-05"),
    evidence=("pytorch/pytorch#131662", "pytorch/pytorch#39734", "ROCm/TheRock#1520"),
)
def native_requires(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    if base.native is None or target.native is None or base.native.requires is None:
        return
    before = {r.name.lower() for r in base.native.requires}
    # What the base's files needed but found in a wheel (bundled): a requirement of the machine on the
    # target then means the machine's copy is used instead, which ENV-NATIVE-RESOLVED-ELSEWHERE reports.
    resolved_before: dict[str, str] = {}
    for node in base.native.nodes or []:
        for dep in node.dependencies or []:
            if dep.target is not None and dep.kind in ("bundled", "distribution"):
                resolved_before.setdefault(dep.name.lower(), dep.target)
    windows = is_windows(target)
    for req in sorted(target.native.requires or [], key=lambda r: r.name.lower()):
        if req.kind not in _MACHINE_PROVIDED or req.name.lower() in before:
            continue
        needers = name_list(sorted(req.needed_by), 3) or f"{req.count} file(s)"
        what = f"{req.name}" + (f" ({req.runtime})" if req.runtime else "")
        bundled = resolved_before.get(req.name.lower())
        if bundled is not None:
            message = (
                f"The target's native tree needs {what} from the machine; the base needed it too and found "
                f"the copy a wheel ships ({bundled}). It is required by {needers}."
            )
            base_side = f"bundled: {bundled}"
        else:
            message = (
                f"The target's native tree needs {what}, which nothing on the base needed; it is required "
                f"by {needers}."
            )
            base_side = "not needed"
        if req.kind == "driver":
            remedy = (
                "Install the GPU driver on every target machine meant to use the GPU (CPU-only machines "
                "need nothing: the library is only opened for CUDA)."
            )
        elif bundled is not None:
            remedy = (
                f"Let the wheel's own copy ({bundled}) be found again: remove the machine's folder from "
                f"{loader_variable(target)} for this application."
            )
        elif windows:
            remedy = (
                f"Make sure every target machine has {req.runtime or req.name} installed (or bundle it, "
                "after a licence review); never take DLLs from download sites."
            )
        else:
            remedy = (
                f"Make sure every target machine has {req.runtime or req.name} installed from its operating "
                "system's packages, or install a build of the package that bundles it."
            )
        yield rule.finding(
            req.name,
            message,
            remedy,
            base=base_side,
            target=req.name,
            caused_by=(
                f"ENV-NATIVE-RESOLVED-ELSEWHERE:{req.name}"
                if bundled is not None
                else variant_cause(base, target, [n.split(":", 1)[0] for n in req.needed_by])
            ),
        )


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


@single_rule(
    "ENV-NATIVE-RECORD-ESCAPE",
    family=FAMILY,
    severity="error",
    title="a RECORD names a native file outside the environment",
    why=(
        "RECORD paths are relative to site-packages (PyPA spec 'Recording installed projects') and an "
        "installer writes files only inside the environment; an entry leading out of it (../../../etc/…, "
        "an absolute path) was forged or hand-edited, and `pip uninstall` deletes what RECORD lists. "
        "envcheck never reads that file."
    ),
)
def native_record_escape(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.native is None:
        return
    for entry in sorted(m.native.refused or [], key=lambda r: (r.owner, r.path)):
        if entry.kind != "record-escape":
            continue
        dist = pkg(m, entry.owner)
        record = f"{dist.metadata_dir}/RECORD" if dist is not None and dist.metadata_dir else "its RECORD"
        # By hand, and first: the reinstall's uninstall deletes every file RECORD lists, that line's too, so
        # no command is written that could run before the edit (a script runs its commands in order).
        step = Manual(
            text=f"Delete the line naming {entry.path} from {record} before any pip uninstall or upgrade "
            "(pip deletes every file RECORD lists)."
        )
        then = (
            f" Then install {dist.name} {dist.version} again from a trusted index: "
            + remedy_text(reinstall_actions(m, [dist]), m)
            + "."
            if dist is not None
            else f" Then install {entry.owner} again from a trusted index."
        )
        yield rule.finding(
            f"{entry.owner}:{entry.path}",
            f"The RECORD of {entry.owner} lists {entry.path}, which leads outside the environment; "
            "envcheck did not read that file.",
            step.text + then,
            actions=(step,),
            base="inside the environment",
            target=entry.path,
        )
