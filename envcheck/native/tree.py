"""The walk: from the root files (every RECORD native file, the interpreter's library) through the full
transitive closure of needed libraries, each edge resolved by the loader of the importer's format.

Each file is read once (results cached by path), each node resolved once (under the first root that
reaches it, roots in key order, so the tree is deterministic), cycles end at an already-visited node.
"""

# ruff: noqa: PTH117, PTH119, PTH120, PTH202
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Literal, NamedTuple, cast

from envcheck.core.deadline import Deadline
from envcheck.inside import names as target_names
from envcheck.manifest.native import (
    RECORD_FILE_ABSENT,
    DependencyKind,
    Integrity,
    MissingChain,
    NativeDependency,
    NativeNode,
    NativeSection,
    OpenMPRuntime,
    RefusalKind,
    RefusedFile,
    Requirement,
    links_torch,
)
from envcheck.native.binary import BinaryError, BinaryInfo, read_binary
from envcheck.native.elf import cxx11_abi, version_key
from envcheck.native.hashing import MAX_RECORD_HASH_BYTES, MAX_RECORD_HASH_TOTAL, Hasher
from envcheck.native.interface import Found, Image, Resolver
from envcheck.native.oslibs import classify_name, openmp_family
from envcheck.native.windows import WindowsResolver

# Dependency entries one walk resolves, in all its files: a CUDA torch venv has about 3,000; past the
# budget a file's needed libraries are not followed, and the section says which (``walk-cap``).
MAX_WALK_EDGES = 50_000

Role = Literal["extension", "library", "interpreter", "executable"]

# The one pattern, shared with the probe: ``libfoo.so.1.2.3``, LLVM's ``libMLIRDialectPlugin.so.23.0git``;
# ``notes.so.bak`` is not a library.
NATIVE_SUFFIX = target_names.NATIVE_SUFFIX
# Python extension modules: PEP 3149 tags (.cpython-311-x86_64-linux-gnu.so, .abi3.so), Windows .pyd,
# and the untagged ``_foo.so`` a few build systems still produce (``lib*.so`` are libraries).
_EXTENSION = re.compile(r"(\.(cpython|pypy|graalpy)[-\w]*\.(so|dylib)|\.abi3\.(so|dylib)|\.pyd)$", re.I)


# Programs shipped inside packages (torch/bin/torch_shm_manager, nvidia/cuda_nvcc/bin/ptxas,
# torch/bin/protoc.exe): a ``.exe``, or a file without a suffix in a ``bin`` folder. A candidate that is no
# binary (a script) is dropped by the walk, never reported.
_EXECUTABLE = re.compile(r"((^|/)bin/[^/.]+|\.exe)$", re.I)


def is_executable_name(rel_path: str) -> bool:
    """Whether a file of a tree (``/``-separated path) may be a program the tree ships."""
    return bool(_EXECUTABLE.search(rel_path))


def is_torch_preload(path: str) -> bool:
    """Whether ``import torch`` on Windows loads this file itself before ``torch._C``: every
    ``torch\\lib\\*.dll`` (``_load_dll_libraries``)."""
    folder = os.path.dirname(path)
    return (
        path.lower().endswith(".dll")
        and os.path.basename(folder) == "lib"
        and os.path.basename(os.path.dirname(folder)).lower() == "torch"
    )


def is_extension(path: str) -> bool:
    """Whether ``path`` is a Python extension module (where an ``import`` starts)."""
    name = os.path.basename(path)
    if _EXTENSION.search(name):
        return True
    return name.endswith(".so") and not name.startswith("lib")


class RootFile(NamedTuple):
    """A file the walk starts from: its absolute path, its key, owner, and what RECORD says about it."""

    path: str
    key: str
    owner: str
    role: Role
    record_sha256: str | None = None
    foreign: bool = False
    record_size: int | None = None


class Catalog:
    """Names any path the walk meets: RECORD-owned files, unowned files under site-packages, the
    interpreter's library, and system files (their absolute path). ``display`` turns a path into what
    the tree shows (relative inside a scanned wheel)."""

    __slots__ = ("display", "interpreter", "owned", "site_dirs")

    def __init__(self, *, site_dirs: list[str] | None = None) -> None:
        self.owned: dict[str, RootFile] = {}
        self.site_dirs: list[str] = site_dirs if site_dirs is not None else []
        self.interpreter: str | None = None
        self.display: Callable[[str], str] = _unchanged

    def add(self, root: RootFile) -> None:
        self.owned.setdefault(_norm(root.path), root)

    def relative(self, folder: str | None) -> str | None:
        """A search folder inside site-packages as a path relative to it (``torch/lib``), so two
        environments at different places compare equal; other folders unchanged."""
        if folder is None or not os.path.isabs(folder):
            return folder
        normal = _norm(folder)
        for site in self.site_dirs:
            if normal == site or normal.startswith(site + os.sep):
                return os.path.relpath(normal, site).replace(os.sep, "/")
        return folder

    def describe(self, path: str) -> tuple[str, str, Role | None, str | None, bool]:
        """``(key, owner, role, RECORD sha256, foreign)`` of ``path``."""
        hit = self.owned.get(_norm(path))
        if hit is not None:
            return hit.key, hit.owner, hit.role, hit.record_sha256, hit.foreign
        if self.interpreter is not None and _same_file(path, self.interpreter):
            return (
                f"interpreter:{os.path.basename(self.interpreter)}",
                "interpreter",
                "interpreter",
                None,
                False,
            )
        normal = _norm(path)
        for site in self.site_dirs:
            if normal.startswith(site + os.sep):
                rel = os.path.relpath(normal, site).replace(os.sep, "/")
                return f"unowned:{rel}", "unowned", None, None, True
        return path, "system", None, None, False


def _unchanged(path: str) -> str:
    return path


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(path))


def _same_file(a: str, b: str) -> bool:
    if os.path.basename(a).split(".")[0] != os.path.basename(b).split(".")[0]:
        return False
    try:
        return os.path.realpath(a) == os.path.realpath(b)
    except OSError:
        return False


class _Node:
    """A file during the walk (mutable: its headers, error and dependencies are filled in)."""

    __slots__ = (
        "absent",
        "deps",
        "error",
        "foreign",
        "info",
        "key",
        "owner",
        "path",
        "record_sha256",
        "record_size",
        "refused",
        "resized",
        "role",
        "unchecked",
    )

    def __init__(
        self,
        key: str,
        path: str,
        owner: str,
        role: Role,
        record_sha256: str | None,
        foreign: bool,
        record_size: int | None = None,
    ) -> None:
        self.key = key
        self.path = path
        self.owner = owner
        self.role = role
        self.record_sha256 = record_sha256
        self.foreign = foreign
        self.record_size = record_size
        self.info: BinaryInfo | None = None
        self.error: str | None = None
        self.refused: str | None = None
        self.deps: list[NativeDependency] = []
        self.absent = False  # not on disk
        self.resized: int | None = None  # its size on disk, when it is not the size RECORD promises
        self.unchecked = False  # over the RECORD check's bounds: not read


class Walker:
    """One walk over a catalog with one resolver per binary format."""

    def __init__(
        self,
        catalog: Catalog,
        resolvers: Mapping[str, Resolver],
        *,
        host: bool,
        scan_root: str | None = None,
        executable: str | None = None,
        refused: Sequence[RefusedFile] = (),
        use_cache: bool = True,
    ) -> None:
        self.catalog = catalog
        # The hash cache (``envcheck.native.hashing``); off for a tree that lives only as long as the walk
        # (a container image unpacked for one snapshot): its entries would never be read again.
        self.use_cache = use_cache
        self.resolvers = resolvers
        self.host = host
        self.scan_root = _norm(scan_root) if scan_root else None
        # A scan opens only files whose real path stays inside the scanned tree (docs/guarantees.md).
        self.inside: tuple[str, ...] | None = (os.path.realpath(scan_root),) if scan_root else None
        # Files refused before the walk (RECORD entries leaving the tree, wheel members not extracted).
        self.refused = list(refused)
        self._infos: dict[str, BinaryInfo | BinaryError] = {}
        # The command's deadline (``walk``): past it the walk stops, and the snapshot's native section says
        # why it was skipped (``envcheck.native.scan_for_snapshot``).
        self._deadline: Deadline | None = None
        self.preloads: list[str] = []  # keys of the files ``import torch`` loads first, in its order
        self.executable: Image | None = None
        if executable:
            info = self.probe(executable)
            if info is not None:
                self.executable = Image(executable, info)

    def read(self, path: str) -> BinaryInfo | BinaryError:
        """The headers of ``path``, read once."""
        cached = self._infos.get(path)
        if cached is None:
            try:
                cached = read_binary(path, inside=self.inside)
            except BinaryError as e:
                cached = e
            self._infos[path] = cached
        return cached

    def probe(self, path: str) -> BinaryInfo | None:
        info = self.read(path)
        return info if isinstance(info, BinaryInfo) else None

    def walk(
        self,
        roots: Iterable[RootFile],
        *,
        verify_files: bool,
        integrity: bool = False,
        deadline: Deadline | None = None,
    ) -> NativeSection:
        """Resolve the closure of ``roots`` into a ``NativeSection`` (never raises for a bad file: the
        reason is recorded on its node). ``integrity``: every file RECORD lists is checked against its
        RECORD sha256 (``verified`` / ``modified``) through the hash cache; ``verify_files`` does the same
        reading every file again."""
        ordered = sorted(roots, key=lambda r: r.key)
        self._verify = verify_files
        self._integrity = integrity or verify_files
        self._record_bytes = 0  # bytes submitted for the RECORD check
        self._edges = 0  # dependency entries resolved (MAX_WALK_EDGES)
        # Files without a RECORD digest (and with ``integrity`` every file) are hashed in the background
        # while the walk reads headers.
        # A file the deadline stops hashing keeps RECORD's digest (``unhashed``), as one over the bounds.
        self._hasher = Hasher(
            use_cache=self.use_cache, refresh=verify_files, inside=self.inside, deadline=deadline
        )
        self._deadline = deadline
        nodes: dict[str, _Node] = {}
        by_path: dict[str, str] = {}
        queue: deque[tuple[str, tuple[Image, ...], Image | None]] = deque()
        self._register_executable_closure()
        for root in ordered:
            if _norm(root.path) in by_path:
                continue
            node = _Node(
                root.key, root.path, root.owner, root.role, root.record_sha256, root.foreign, root.record_size
            )
            nodes[root.key] = node
            by_path[_norm(root.path)] = root.key
            info = self._load(node)
            if info is None and root.role == "executable" and not node.refused and not node.absent:
                # A candidate program that is not a binary (a shell or Python script in bin/): not a node.
                del nodes[root.key], by_path[_norm(root.path)]
                continue
            # Sonames of every root are known before resolving (ld.so's already-loaded fallback).
            resolver = self.resolvers.get(info.format) if info else None
            if info is not None and resolver is not None:
                resolver.register_root(root.path, info)
        # torch's own DLLs first, in the order ``import torch`` loads them, then extension modules: an import
        # starts there, so a library both loaded by an extension and listed in RECORD is resolved in the
        # context of that import (its loader chain, its load folder).
        # glob's order on NTFS: names compared upper-cased (``_`` after the letters)
        preloads = sorted((r for r in ordered if is_torch_preload(r.path)), key=lambda r: r.path.upper())
        self.preloads = [r.key for r in preloads]
        windows = self.resolvers.get("pe")
        if isinstance(windows, WindowsResolver):
            windows.preload_dirs = {_norm(os.path.dirname(r.path)) for r in preloads}
        start = (self.executable,) if self.executable else ()
        waves = [
            preloads,
            [r for r in ordered if r.role == "extension"],
            [r for r in ordered if r.role != "extension" and not is_torch_preload(r.path) and r.key in nodes],
        ]
        seen: set[str] = set()
        for wave in waves:
            queue.extend((r.path, start, None) for r in wave)
            self._drain(queue, nodes, by_path, seen)
        try:
            return self._section(nodes, ordered)
        finally:
            self._hasher.close()

    def _register_executable_closure(self) -> None:
        """The interpreter's own libraries (libc, libm, libpython for a shared build) are loaded before any
        extension: a dependency of that name is met by them even where the importer's search path would
        not find it (``-z nodefaultlib``)."""
        if self.executable is None:
            return
        resolver = self.resolvers.get(self.executable.info.format)
        if resolver is None or not self.host:
            return
        todo = [self.executable]
        done: set[str] = set()
        while todo:
            image = todo.pop()
            if image.path in done:
                continue
            done.add(image.path)
            for needed in image.info.needed:
                found = resolver.resolve(needed, image, (), self.executable)
                info = self.probe(found.path) if found.path else None
                if found.path is not None and info is not None:
                    resolver.register(found.path, info)
                    todo.append(Image(found.path, info))

    def _drain(
        self,
        queue: deque[tuple[str, tuple[Image, ...], Image | None]],
        nodes: dict[str, _Node],
        by_path: dict[str, str],
        seen: set[str],
    ) -> None:
        while queue:
            path, chain, root_image = queue.popleft()
            key = by_path[_norm(path)]
            if key in seen:
                continue
            seen.add(key)
            node = nodes[key]
            info = node.info
            if info is None:
                continue
            image = Image(path, info)
            root = root_image or image
            resolver = self.resolvers.get(info.format)
            if resolver is None:
                continue
            if self._edges + len(info.needed) > MAX_WALK_EDGES:
                # The command's budget: many files under every per-file cap (250 files of 4,000 needed
                # libraries each) must not make a walk of a million resolutions (182 s, 1.5 GB).
                self.refused.append(
                    RefusedFile(
                        path=node.path,
                        owner=node.owner,
                        kind="walk-cap",
                        reason=f"its {len(info.needed)} needed libraries were not followed: the walk's "
                        f"budget of {MAX_WALK_EDGES} dependency entries in all (MAX_WALK_EDGES) was spent",
                    )
                )
                continue
            for needed in info.needed:
                self._edges += 1
                if self._deadline is not None and self._edges % 1024 == 0:
                    self._deadline.check("walking the native tree", f"{self._edges} dependencies resolved")
                found = resolver.resolve(needed, image, chain, root)
                dep, target_path = self._edge(needed.name, needed.delay_load, needed.weak, found, node, info)
                node.deps.append(dep)
                if target_path is None or dep.target is None:
                    continue
                if dep.target not in nodes:
                    _key, owner, role, sha, foreign = self.catalog.describe(target_path)
                    child = _Node(dep.target, target_path, owner, role or "library", sha, foreign)
                    nodes[dep.target] = child
                    by_path[_norm(target_path)] = dep.target
                    self._load(child)
                else:
                    by_path.setdefault(_norm(target_path), dep.target)
                if dep.target not in seen:
                    queue.append((target_path, (image, *chain), root))

    def _load(self, node: _Node) -> BinaryInfo | None:
        if self._deadline is not None:
            self._deadline.check("walking the native tree", f"{len(self._infos)} files read")
        if not os.path.lexists(node.path):
            node.error = RECORD_FILE_ABSENT if node.record_sha256 is not None else "not on disk"
            node.absent = True
            return None
        info = self.read(node.path)
        if isinstance(info, BinaryError) and info.refused is not None:
            node.error = str(info)
            node.refused = info.refused  # never hashed either: its bytes must not reach the report
            return None
        if isinstance(info, BinaryError):
            node.error = str(info)
            # A file that is no binary is hashed only to check it against its RECORD: its digest would say
            # nothing about a library, and it may be any file a link named like one leads to.
            if self._integrity and node.record_sha256:
                self._check_record(node)
            return None
        if node.record_sha256 and self._integrity:
            self._check_record(node)
        elif not node.record_sha256:
            self._hasher.submit(node.path)
        node.info = info
        return info

    def _check_record(self, node: _Node) -> None:
        """Hash a RECORD-listed file to compare it with RECORD, unless its size already differs from
        RECORD's (then it is ``modified`` without reading it)."""
        size = _size(node.path)
        if node.record_size is not None and size is not None and size != node.record_size:
            node.resized = size
            return
        if size is None or size > MAX_RECORD_HASH_BYTES or self._record_bytes + size > MAX_RECORD_HASH_TOTAL:
            node.unchecked = True
            return
        self._record_bytes += size
        self._hasher.submit(node.path, limit=MAX_RECORD_HASH_BYTES)

    def _edge(
        self, name: str, delay: bool, weak: bool, found: Found, importer: _Node, info: BinaryInfo
    ) -> tuple[NativeDependency, str | None]:
        provider_kind = classify_name(name, info.format)
        if found.path is not None:
            key, owner, _role, _sha, _foreign = self.catalog.describe(found.path)
            kind: DependencyKind
            provider = None
            if owner == "interpreter":
                kind = "interpreter"
            elif (owner == importer.owner and owner not in ("system", "unowned")) or owner == "unowned":
                kind = "bundled"
            elif owner != "system":
                kind, provider = "distribution", owner
            elif provider_kind is not None:
                kind = provider_kind[0]
            else:
                kind = "os"
            dep = NativeDependency(
                name=name,
                target=key,
                how=found.how,
                kind=kind,
                via=self._via(found),
                provider=provider,
                delay_load=delay,
                weak=weak,
            )
            return dep, found.path
        how = found.how
        if how in ("api-set", "known-dll", "system-image"):
            return NativeDependency(
                name=name, target=None, how=how, kind="os", delay_load=delay, weak=weak
            ), None
        if provider_kind is not None:
            how = "missing" if self.host else "expected-on-machine"
            return (
                NativeDependency(
                    name=name, target=None, how=how, kind=provider_kind[0], delay_load=delay, weak=weak
                ),
                None,
            )
        if how == "expected-on-machine" or (not self.host and self._points_outside(importer, info)):
            return (
                NativeDependency(
                    name=name,
                    target=None,
                    how="expected-on-machine",
                    kind="external",
                    delay_load=delay,
                    weak=weak,
                ),
                None,
            )
        return NativeDependency(
            name=name, target=None, how="missing", kind="missing", delay_load=delay, weak=weak
        ), None

    def _via(self, found: Found) -> str | None:
        # os.add_dll_directory folders are inside the environment: named relative to site-packages.
        return self.catalog.relative(found.via) if found.how == "dll-directory" else found.via

    def _points_outside(self, importer: _Node, info: BinaryInfo) -> bool:
        """In a scan, an unresolved library is expected from another package when the importer's own
        search path leads out of the scanned tree (torch's ``$ORIGIN/../../nvidia/cudnn/lib``)."""
        if self.scan_root is None or info.format == "pe":
            return False
        origin = os.path.dirname(importer.path)
        for entry in (*info.rpath, *info.runpath):
            folder = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
            folder = folder.replace("@loader_path", origin)
            if "$" in folder or folder.startswith("@"):
                continue
            if not _norm(folder).startswith(self.scan_root):
                return True
        return False

    # ----------------------------------------------------------------------------------------- section

    def _section(self, nodes: dict[str, _Node], roots: Sequence[RootFile]) -> NativeSection:
        identities = self._identities(nodes.values())
        out: list[NativeNode] = []
        for key in sorted(nodes):
            n = nodes[key]
            info = n.info
            identity, integrity, size = identities.get(key, (None, None, None))
            out.append(
                NativeNode(
                    key=key,
                    path=self.catalog.display(n.path),
                    owner=n.owner,
                    role=n.role,
                    format=info.format if info else None,
                    machine=info.machine if info else None,
                    soname=info.soname if info else None,
                    identity=identity,
                    integrity=integrity,
                    size=size,
                    build_id=info.build_id if info else None,
                    file_version=info.file_version if info else None,
                    linker_version=info.linker_version if info else None,
                    rpath=list(info.rpath) or None if info else None,
                    runpath=list(info.runpath) or None if info else None,
                    version_needs=dict(sorted(info.version_needs.items())) or None if info else None,
                    version_provides=dict(sorted(info.version_provides.items())) or None if info else None,
                    dependencies=sorted(n.deps, key=lambda d: (d.name.lower(), d.name)) or None,
                    error=n.error,
                    cxx11_abi=self._cxx11_abi(n),
                )
            )
        refused = self.refused + [
            RefusedFile(
                path=self.catalog.display(n.path),
                owner=n.owner,
                kind=cast("RefusalKind", n.refused),
                reason=n.error or "",
            )
            for n in nodes.values()
            if n.refused is not None
        ]
        loaders = {"elf": "ld.so", "pe": "windows", "macho": "dyld"}
        formats = [nodes[r.key].info.format for r in roots if r.key in nodes and nodes[r.key].info]  # type: ignore[union-attr]
        loader = loaders[max(set(formats), key=formats.count)] if formats else None
        return NativeSection(
            loader=loader,  # type: ignore[arg-type]
            nodes=out,
            missing=missing_chains(out, [r.key for r in roots], self.preloads),
            requires=requirements(out),
            openmp=openmp_inventory(out),
            glibc_required=_glibc_required(out),
            glibc_provided=next(
                (
                    n.version_provides.get("GLIBC")
                    for n in out
                    if n.soname == "libc.so.6" and n.version_provides
                ),
                None,
            ),
            refused=sorted(refused, key=lambda r: (r.path, r.kind)) or None,
        )

    def _cxx11_abi(self, node: _Node) -> bool | None:
        """The C++ ABI (``NativeNode.cxx11_abi``) of torch's libc10 (its own exports) and of every C++ ELF
        file of another owner (a distribution's, or unowned in site-packages) that calls torch's functions:
        one that needs torch's libraries, or libstdc++ (the linker drops a DT_NEEDED libc10.so none of
        whose symbols resolved: an extension of the other ABI may call torch and not need it). None for
        the rest, unread: torch's other libraries are torch's ABI by definition, system files are no
        build against torch."""
        info = node.info
        if info is None or info.format != "elf" or node.refused is not None:
            return None
        if node.owner == "torch":
            if not (info.soname or "").startswith("libc10.so"):
                return None
            return cxx11_abi(node.path, undefined=False, inside=self.inside)
        if node.owner in ("system", "interpreter") or not any(
            links_torch(d.name) or d.name.startswith("libstdc++.so") for d in info.needed
        ):
            return None
        return cxx11_abi(node.path, inside=self.inside)

    def _identities(
        self, nodes: Iterable[_Node]
    ) -> dict[str, tuple[str | None, Integrity | None, int | None]]:
        out: dict[str, tuple[str | None, Integrity | None, int | None]] = {}
        for n in nodes:
            if n.refused is not None or (n.info is None and not n.record_sha256):
                continue
            if n.record_sha256 and (not self._integrity or n.absent):
                out[n.key] = (f"sha256:{n.record_sha256}", "record", _size(n.path))
                continue
            if n.resized is not None:
                out[n.key] = (None, "modified", n.resized)
                continue
            digest = None if n.unchecked else self._hasher.result(n.path)
            integrity: Integrity
            if digest is None and n.record_sha256:
                # Unreadable (permissions, a link to a FIFO) or over the bound: RECORD's word is all there is.
                out[n.key] = (f"sha256:{n.record_sha256}", "unhashed", _size(n.path))
                continue
            if digest is None:
                integrity = "unhashed"
            elif n.foreign:
                integrity = "foreign"
            elif n.record_sha256:
                integrity = "verified" if digest == f"sha256:{n.record_sha256}" else "modified"
                if n.info is None and integrity == "modified":
                    digest = None  # not a binary any more: its digest is not a library's identity
            else:
                integrity = "computed"
            out[n.key] = (digest, integrity, _size(n.path))
        return out


def _size(path: str) -> int | None:
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def broken(dep: NativeDependency, by_key: Mapping[str, NativeNode]) -> str | None:
    """Why this dependency will fail to load (``MISSING`` or ``UNREADABLE (reason)``), None when it loads.
    A weak Mach-O import that is absent does not fail (dyld: LC_LOAD_WEAK_DYLIB), nor does a PE delay-load
    import: it is loaded when one of its functions is first called, never with its importer."""
    if dep.delay_load:
        return None
    if dep.how == "missing" and not dep.weak:
        return "MISSING"
    target = by_key.get(dep.target) if dep.target is not None else None
    if target is not None and target.error is not None:
        return f"UNREADABLE ({target.error})"
    return None


def missing_chains(
    nodes: Sequence[NativeNode], roots: Sequence[str], preloads: Sequence[str] = ()
) -> list[MissingChain]:
    """For every dependency that will not load (MISSING, or a file that cannot be read), the shortest chain
    that reaches it from what an import loads first: ``preloads`` in their order (the ``torch\\lib`` DLLs
    ``import torch`` loads before ``torch._C``, so the chain named is the one Windows fails on: ``c10.dll``),
    then an extension module (or, when none reaches it, from a root file, or the importer itself). A
    delay-load edge is not followed: nothing behind it is loaded with the importer."""
    by_key = {n.key: n for n in nodes}
    reasons = {
        (n.key, d.name): why for n in nodes for d in n.dependencies or () if (why := broken(d, by_key))
    }
    if not reasons:
        return []
    first = [k for k in preloads if k in by_key]
    extensions = sorted(k for k in roots if k in by_key and by_key[k].role == "extension")
    others = sorted(k for k in roots if k in by_key and by_key[k].role != "extension" and k not in first)
    found: dict[tuple[str, str], list[str]] = {}
    for start in (*first, *extensions, *others):
        if len(found) == len(reasons):
            break
        parents: dict[str, str | None] = {start: None}
        queue = deque([start])
        while queue:
            key = queue.popleft()
            for d in by_key[key].dependencies or ():
                if (key, d.name) in reasons and (key, d.name) not in found:
                    path = [key]
                    while (parent := parents[path[-1]]) is not None:
                        path.append(parent)
                    found[(key, d.name)] = path[::-1]
                if (
                    d.target is not None
                    and d.target in by_key
                    and d.target not in parents
                    and not d.delay_load
                ):
                    parents[d.target] = key
                    queue.append(d.target)
    for edge in reasons:
        found.setdefault(edge, [edge[0]])
    out = []
    for (importer, name), chain in found.items():
        names = [os.path.basename(by_key[k].path) for k in chain]
        out.append(
            MissingChain(
                root=chain[0],
                chain=chain,
                missing=name,
                text=" → ".join([*names, name]) + f": {reasons[(importer, name)]}",
                from_extension=by_key[chain[0]].role == "extension" or chain[0] in first,
            )
        )
    return sorted(out, key=lambda c: (c.root, c.missing, c.chain))


def requirements(nodes: Sequence[NativeNode]) -> list[Requirement]:
    """What the machine must provide, from every edge to an OS library, redistributable, driver or the
    interpreter (names grouped case-insensitively for Windows). A delay-load import is loaded only when one
    of its functions is first called, so it is not a requirement (numpy's bundled msvcp140 delay-loads
    CONCRT140.dll, and numpy imports on a machine without it), except the GPU driver's."""
    groups: dict[tuple[str, str], tuple[str, str, set[str], list[NativeDependency]]] = {}
    for n in nodes:
        fmt = n.format or "elf"
        for d in n.dependencies or ():
            if d.kind not in ("os", "redistributable", "driver", "interpreter"):
                continue
            if d.delay_load and d.kind != "driver":
                continue
            norm = d.name.lower() if fmt == "pe" else d.name
            entry = groups.setdefault((d.kind, norm), (d.name, fmt, set(), []))
            entry[2].add(n.key)
            entry[3].append(d)
    out = []
    for (kind, _norm_name), (name, first_fmt, needers, _deps) in groups.items():
        label = classify_name(name, first_fmt)
        out.append(
            Requirement(
                name=name,
                kind=kind,  # type: ignore[arg-type]
                runtime=label[1] if label else None,
                count=len(needers),
                needed_by=[] if kind == "os" else sorted(needers),
            )
        )
    return sorted(out, key=lambda r: (r.kind, r.name.lower()))


def openmp_inventory(nodes: Sequence[NativeNode]) -> list[OpenMPRuntime]:
    """Every OpenMP runtime file in the tree, renamed copies included."""
    out = []
    for n in nodes:
        family = openmp_family(os.path.basename(n.path))
        if family is not None and n.error is None:
            out.append(OpenMPRuntime(family=family, key=n.key, owner=n.owner, path=n.path))
    return sorted(out, key=lambda o: (o.family, o.key))


def _glibc_required(nodes: Sequence[NativeNode]) -> str | None:
    best: str | None = None
    for n in nodes:
        if n.owner == "system" or not n.version_needs:
            continue
        v = n.version_needs.get("GLIBC")
        if v is not None and (best is None or version_key(v) > version_key(best)):
            best = v
    return best
