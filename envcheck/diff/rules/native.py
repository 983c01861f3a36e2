"""The native tree: which shared libraries were loaded, from where, and which files they are.

Paths are compared relative to their roots — a wheel's file relative to its distribution, an interpreter
file relative to its prefix — so two venvs at different paths with the same wheels compare equal.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from envcheck.diff.rules.base import canon, difference_rule, pkg, single_rule
from envcheck.findings import Finding, Rule, Severity
from envcheck.manifest.model import LoadedLibrary, Manifest
from envcheck.manifest.native import NativeNode

FAMILY = "native tree"

# auditwheel / delocate rename vendored libraries with a content hash (libgomp-a34b3233.so.1): the hash is
# a build detail, the library is the same one.
_HASHED = re.compile(r"-[0-9a-f]{8}(?=\.)")


def library_key(path: str) -> str:
    """The library's name without folder and vendoring hash: ``libgomp.so.1``."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return _HASHED.sub("", name)


@dataclass(frozen=True, slots=True)
class Placed:
    """A loaded library as compared: its key, where it came from relative to its root, and its identity."""

    key: str
    owner: str
    where: str
    identity: str | None


def _norm(path: str, windows: bool) -> str:
    """Forward slashes, no trailing slash; case-folded where the file system ignores case (Windows)."""
    out = path.replace("\\", "/").rstrip("/")
    return out.lower() if windows else out


def _roots(m: Manifest, windows: bool) -> list[tuple[str, str]]:
    py = m.python
    roots = [("{prefix}", py.prefix), ("{base_prefix}", py.base_prefix)]
    roots += [("{exec_prefix}", py.exec_prefix), ("{base_exec_prefix}", py.base_exec_prefix)]
    # Longest first: a venv inside another prefix is matched by the more specific root.
    return sorted(((n, _norm(r, windows)) for n, r in roots if r), key=lambda x: -len(x[1]))


_PLACED: dict[int, tuple[Manifest, dict[str, Placed]]] = {}


def placed(m: Manifest) -> dict[str, Placed]:
    """Loaded libraries by key, located relative to their owner or to the interpreter's prefixes (cached
    for the last manifests: four rules ask)."""
    hit = _PLACED.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    out = _placed(m)
    if len(_PLACED) >= 16:
        _PLACED.clear()
    _PLACED[id(m)] = (m, out)
    return out


def _placed(m: Manifest) -> dict[str, Placed]:
    if m.runtimes is None:
        return {}
    windows = m.platform is not None and m.platform.system == "Windows"
    locations = {canon(d.name): _norm(d.location, windows) for d in m.packages if not d.shadowed}
    roots = _roots(m, windows)
    out: dict[str, Placed] = {}
    for lib in m.runtimes.loaded:
        placed_lib = _place(lib, locations, roots, windows)
        out.setdefault(placed_lib.key, placed_lib)
    return out


def _place(
    lib: LoadedLibrary, locations: dict[str, str], roots: list[tuple[str, str]], windows: bool
) -> Placed:
    path = _norm(lib.path, windows)
    folder = path.rsplit("/", 1)[0]
    location = locations.get(canon(lib.owner))
    where = folder
    if location and folder.startswith(location + "/"):
        where = f"{{{lib.owner}}}" + _HASHED.sub("", folder[len(location) :])
    else:
        for name, root in roots:
            if folder == root or folder.startswith(root + "/"):
                where = name + folder[len(root) :]
                break
    return Placed(library_key(path), lib.owner, where, lib.identity)


def _is_wheel(owner: str) -> bool:
    return owner not in ("system", "unknown", "")


def _list(names: list[str], limit: int = 6) -> str:
    # Shared libraries first: they name the runtime (libcudnn), extension modules only the package.
    names = sorted(names, key=lambda n: (".cpython-" in n or n.endswith(".pyd"), n))
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


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
    b, t = placed(base), placed(target)
    for key in sorted(set(b) & set(t)):
        bp, tp = b[key], t[key]
        if bp.where == tp.where:
            continue
        to_system = _is_wheel(bp.owner) and not _is_wheel(tp.owner)
        yield rule.finding(
            key,
            f"{key} comes from {bp.where} ({bp.owner}) on the base and from {tp.where} ({tp.owner}) on the "
            "target" + (": a system copy replaces the one the wheel ships." if to_system else "."),
            "Remove the other copy's folder from LD_LIBRARY_PATH / the loader path for this application, "
            f"or reinstall {bp.owner} so its own copy is loaded.",
            base=f"{bp.where}/{key}",
            target=f"{tp.where}/{key}",
            severity="error" if to_system else None,
        )


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
)
def native_changed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b_versions = {canon(d.name): d.version for d in base.packages if not d.shadowed}
    t_versions = {canon(d.name): d.version for d in target.packages if not d.shadowed}
    if base.native is not None and target.native is not None and base.native.nodes and target.native.nodes:
        yield from _nodes_changed(rule, base.native.nodes, target.native.nodes, b_versions, t_versions)
        return
    b, t = placed(base), placed(target)
    for key in sorted(set(b) & set(t)):
        bp, tp = b[key], t[key]
        if bp.where != tp.where or not bp.identity or not tp.identity or bp.identity == tp.identity:
            continue
        owner = canon(tp.owner)
        if _is_wheel(tp.owner) and b_versions.get(owner) != t_versions.get(owner):
            continue  # the package changed version: ENV-PKG-VERSION / ENV-TORCH-VERSION say so
        yield rule.finding(
            key,
            f"{key} in {tp.where} is a different file on the target ({tp.owner}) than on the base, with no "
            "version change to explain it.",
            f"Reinstall {tp.owner if _is_wheel(tp.owner) else 'the system package that provides it'} "
            "(`pip install --force-reinstall --no-deps`), or find who replaced the file.",
            base=bp.identity,
            target=tp.identity,
        )


def _grouped(
    keys: list[str], places: dict[str, Placed], other: Manifest
) -> tuple[dict[str, list[str]], list[str]]:
    """Libraries by owner, and separately those whose owner distribution is not installed on ``other``
    (their absence follows from a package change, reported once)."""
    by_owner: dict[str, list[str]] = {}
    orphaned: list[str] = []
    for key in keys:
        owner = places[key].owner
        if _is_wheel(owner) and pkg(other, owner) is None:
            orphaned.append(key)
        else:
            by_owner.setdefault(owner, []).append(key)
    return by_owner, orphaned


def _whose(owner: str) -> str:
    return owner if _is_wheel(owner) else f"the {owner}" if owner == "system" else f"{owner} files"


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
    b, t = placed(base), placed(target)
    by_owner, orphaned = _grouped(sorted(set(b) - set(t)), b, target)
    for owner, keys in sorted(by_owner.items()):
        yield rule.finding(
            owner,
            f"{_n(keys)} of {_whose(owner)} loaded on the base {'is' if len(keys) == 1 else 'are'} not "
            f"loaded on the target: {_list(keys)}.",
            f"Check why the target no longer loads {'it' if len(keys) == 1 else 'them'}: another build of "
            f"{owner if _is_wheel(owner) else 'the system libraries'}, or a library path.",
            base=_list(keys),
            target="not loaded",
        )
    if orphaned:
        owners = sorted({b[k].owner for k in orphaned})
        yield rule.finding(
            "libraries of packages missing on the target",
            f"{_n(orphaned)} the base loads come from {len(owners)} package(s) not installed on the target "
            f"({_list(owners, 20)}): {_list(orphaned, 40)}. Whatever needs them (CUDA kernels, cuDNN, "
            "NCCL, ...) is unavailable there.",
            "Install the base's packages on the target from its lock file (the torch build decides most of "
            "them), or declare the difference intended.",
            base=_list(orphaned, 3),
            target="not installed",
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
    b, t = placed(base), placed(target)
    by_owner, orphaned = _grouped(sorted(set(t) - set(b)), t, base)
    for owner, keys in sorted(by_owner.items()):
        yield rule.finding(
            owner,
            f"{_n(keys)} of {_whose(owner)} loaded on the target only: {_list(keys)}.",
            "Expected if the target's build differs on purpose; otherwise align the two environments.",
            base="not loaded",
            target=_list(keys),
        )
    if orphaned:
        owners = sorted({t[k].owner for k in orphaned})
        yield rule.finding(
            "libraries of packages added on the target",
            f"{_n(orphaned)} loaded on the target come from {len(owners)} package(s) the base lacks "
            f"({_list(owners, 20)}): {_list(orphaned, 40)}.",
            "Expected if the target's build differs on purpose; otherwise align the two environments.",
            base="not installed",
            target=_list(orphaned, 3),
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
        if _is_wheel(lib.owner) or key not in shipped or not _CUDA_LIB.match(key):
            continue
        yield rule.finding(
            key,
            f"{key} is loaded from {lib.path}, not from {shipped[key]}, which ships it.",
            "Remove the system CUDA folders from LD_LIBRARY_PATH for this application (and from "
            "/etc/ld.so.conf.d if they do not belong there), or uninstall the conflicting copy.",
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
        if chain.from_extension:
            imported.add(chain.root)
    for root, missing in sorted(by_root.items()):
        names = sorted(set(missing))
        short = root.rsplit("/", 1)[-1]
        if root in imported:
            yield rule.finding(
                short,
                f"Importing {root} fails: {', '.join(names)} cannot be found ({texts[root]}).",
                f"Install what provides {', '.join(names)} (for Windows runtimes the current VC++ 2015-2022 "
                "x64 redistributable; never a DLL-download site), or reinstall the package that should "
                "bundle it.",
                base=root,
                target="missing: " + ", ".join(names),
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
            yield rule.finding(
                short,
                f"The plugin {root} cannot load here ({', '.join(names)} missing); only the feature that "
                "opens it fails.",
                f"Install {', '.join(names)} only if the application uses that feature.",
                base=root,
                target="missing: " + ", ".join(names),
                severity="info",
            )


def version_tuple(text: str | None) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in (text or "").split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


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
            f"{_list(sorted(files), 3) or 'a native file'} require(s) {family}_{need_text}; the machine's "
            f"library provides up to {family}_{have_text}: the import fails with 'version not found'.",
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
)
def native_shadowed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.native is None or not m.native.loaded:
        return
    for item in sorted(m.native.loaded, key=lambda d: (d.name, d.loaded)):
        if item.kind != "elsewhere":
            continue
        expected = item.expected or "the tree's copy"
        from_system = not _is_wheel(item.loaded_owner)
        yield rule.finding(
            item.name,
            f"{item.name} was loaded from {item.loaded} ({item.loaded_owner}); the native tree resolves it "
            f"to {expected}.",
            "Remove the other copy's folder from LD_LIBRARY_PATH / PATH for this application, or uninstall "
            "the stray copy, so the wheel's own file is loaded.",
            base=expected,
            target=item.loaded,
            severity=None if from_system else "warning",
        )


def _nodes_changed(
    rule: Rule,
    base_nodes: list[NativeNode],
    target_nodes: list[NativeNode],
    b_versions: dict[str, str],
    t_versions: dict[str, str],
) -> Iterator[Finding]:
    """Same location-independent key, another file, and no version change of its owner to explain it."""
    base_by_key = {n.key: n for n in base_nodes}
    for node in target_nodes:
        old = base_by_key.get(node.key)
        if old is None or not old.identity or not node.identity or old.identity == node.identity:
            continue
        owner = canon(node.owner)
        if _is_wheel(node.owner) and b_versions.get(owner) != t_versions.get(owner):
            continue
        # A system file (its key is its absolute path): distributions patch their libraries; info.
        severity: Severity | None = "info" if node.key.startswith("/") else None
        yield rule.finding(
            node.key,
            f"{node.key} is a different file on the target than on the base"
            + (" (RECORD no longer matches it)" if node.integrity == "modified" else "")
            + ", with no version change to explain it.",
            f"Reinstall {node.owner if _is_wheel(node.owner) else 'the package that provides it'} "
            "(`pip install --force-reinstall --no-deps`), or find who replaced the file.",
            base=old.identity,
            target=node.identity,
            severity=severity,
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
    before: dict[tuple[str, str], tuple[str | None, str]] = {}
    for node in base.native.nodes:
        for dep in node.dependencies or []:
            before[(node.key, dep.name)] = (dep.target, dep.kind)
    # One finding per dependency name: many files need the same library, the story is the same.
    changed: dict[str, tuple[str | None, str, str | None, str, list[str]]] = {}
    for node in target.native.nodes:
        for dep in node.dependencies or []:
            old = before.get((node.key, dep.name))
            if old is None or old[0] == dep.target or dep.kind == "missing":
                continue  # new files are ENV-NATIVE-ADDED's; missing ones ENV-NATIVE-MISSING's
            entry = changed.setdefault(dep.name, (old[0], old[1], dep.target, dep.kind, []))
            entry[4].append(node.key)
    for name, (old_target, old_kind, new_target, new_kind, needers) in sorted(changed.items()):
        to_machine = old_kind in ("bundled", "distribution") and new_kind in _TO_MACHINE
        yield rule.finding(
            name,
            f"{name} resolves to {old_target or old_kind} on the base and to {new_target or new_kind} on the "
            f"target, for {_list(sorted(needers), 3)}"
            + (": the machine's copy replaces the one a wheel ships." if to_machine else "."),
            "Remove the folder of the other copy from LD_LIBRARY_PATH (or the loader cache) for this "
            "application, or reinstall the package whose copy should win.",
            base=old_target or old_kind,
            target=new_target or new_kind,
            severity="error" if to_machine else None,
        )


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
)
def native_tampered(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.native is None:
        return
    for node in sorted(m.native.nodes or [], key=lambda n: n.key):
        if node.integrity == "modified":
            yield rule.finding(
                node.key,
                f"{node.path} differs from the sha256 its RECORD promises: it was replaced or patched after "
                f"{node.owner} was installed.",
                f"`pip install --force-reinstall --no-deps {node.owner}` and find out who replaced the file "
                "(never take DLLs from download sites).",
                base="RECORD",
                target=node.identity,
            )
        elif node.owner == "unowned":
            yield rule.finding(
                node.key,
                f"{node.path} sits inside site-packages but no installed package lists it: copied by hand or "
                "left behind by an uninstall, and the loader may pick it first.",
                "Delete the stray file (or reinstall the package that should own it).",
                base="no owner",
                target=node.path,
                severity="warning",
            )


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
    for req in sorted(target.native.requires or [], key=lambda r: r.name.lower()):
        if req.kind not in _MACHINE_PROVIDED or req.name.lower() in before:
            continue
        needers = _list(sorted(req.needed_by), 3) or f"{req.count} file(s)"
        yield rule.finding(
            req.name,
            f"The target's native tree needs {req.name}"
            + (f" ({req.runtime})" if req.runtime else "")
            + f", which nothing on the base needed; it is required by {needers}.",
            (
                "Install the GPU driver on every target machine meant to use the GPU (CPU-only machines "
                "need nothing: the library is only opened for CUDA)."
                if req.kind == "driver"
                else f"Make sure every target machine has {req.runtime or req.name} installed (or bundle it, "
                "after a licence review); never take DLLs from download sites."
            ),
            base="not needed",
            target=req.name,
        )


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
        yield rule.finding(
            f"{entry.owner}:{entry.path}",
            f"The RECORD of {entry.owner} lists {entry.path}, which leads outside the environment; "
            "envcheck did not read that file.",
            f"Delete that line from the RECORD of {entry.owner} before any pip uninstall or upgrade (pip "
            f"deletes every file RECORD lists), then reinstall it from a trusted index: "
            f"`pip install --force-reinstall --no-deps {entry.owner}`.",
            base="inside the environment",
            target=entry.path,
        )
