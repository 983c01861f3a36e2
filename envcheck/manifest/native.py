"""The manifest's ``native`` section: the static native library tree (filled by ``envcheck.native``).

Every file is a ``NativeNode`` named by a location-independent ``key`` so that two environments at
different paths compare equal:

- ``<distribution>:<path relative to its site-packages>`` for a file a distribution's RECORD lists
  (``torch:torch/lib/libc10.so``);
- ``unowned:<path relative to site-packages>`` for a native file inside site-packages that no RECORD lists
  (a DLL copied into ``torch/lib`` by hand);
- ``interpreter:<file name>`` for the interpreter's own shared library;
- the absolute path for every other (system) file; ``os:<name>`` for a library the operating system
  provides without a file the scanner can see (a Windows API set, a file of a foreign platform).

Every list is sorted, so two snapshots of the same environment give byte-identical sections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from envcheck.manifest.codec import omitted_when_default

# How one dependency was found: which rule of the platform loader matched.
Resolution = Literal[
    # Linux ld.so (ld.so(8))
    "rpath",
    "ld-library-path",
    "runpath",
    "ld-so-cache",
    "default-dirs",
    "already-loaded",
    # Windows LoadLibraryExW with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS, as Python >= 3.8 loads extensions
    "loader-dir",
    "dll-directory",
    "system32",
    "api-set",
    "known-dll",
    "path",  # torch's LoadLibraryW retry of a torch\lib DLL, which searches PATH (``via``: the folder)
    # macOS dyld (dyld(1))
    "loader-path",
    "executable-path",
    "lc-rpath",
    "dyld-library-path",
    "fallback-path",
    "system-image",
    # any loader
    "absolute",
    "expected-on-machine",
    "missing",
]

# What a dependency is to the file that needs it.
DependencyKind = Literal[
    "bundled",  # in the same distribution (or the same scanned tree)
    "distribution",  # installed by another distribution (``provider`` names it)
    "os",  # part of the operating system
    "redistributable",  # a runtime the machine must have installed (VC++, OpenMP, GNU runtime)
    "driver",  # the GPU driver (libcuda, nvcuda.dll)
    "interpreter",  # the Python interpreter's own library
    "external",  # outside the scanned tree, expected from another package (``envcheck scan`` only)
    "missing",  # should be there and is not
]

Integrity = Literal["record", "computed", "verified", "modified", "foreign", "unhashed"]
# ``NativeNode.error`` of a file a distribution's RECORD lists that is not on disk (deleted after install).
RECORD_FILE_ABSENT = "listed in RECORD but not on disk"


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeDependency:
    """One needed library of a file (ELF DT_NEEDED, PE import or delay-load import, Mach-O LC_LOAD_DYLIB):
    the name as written, what it resolved to (``target`` is a node key, None when MISSING or when the OS
    provides it without a visible file), how the loader found it, and what it is to the importer.

    ``via`` is the search entry that matched, unexpanded so it is location-independent
    (``$ORIGIN/../../nvidia/cudnn/lib``); ``provider`` names the distribution for ``distribution``.
    """

    name: str
    target: str | None
    how: Resolution
    kind: DependencyKind
    via: str | None = None
    provider: str | None = None
    delay_load: bool = False
    weak: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeNode:
    """One native file in the closure: identity, what its header says, and its resolved dependencies.

    ``role``: ``extension`` (a Python extension module, where an import starts), ``library``,
    ``interpreter``, or ``executable`` (a program the tree ships: ``torch/bin/torch_shm_manager``).
    ``owner`` is the distribution name, ``system`` or ``unowned``. ``identity`` is
    ``sha256:<hex>`` (from RECORD when pip installed the file, computed otherwise). ``integrity`` says where
    the identity came from and, with ``--verify-files``, whether the file still matches RECORD.
    ``version_needs`` maps a symbol-version family (``GLIBC``, ``GLIBCXX``, ``CXXABI``, ``GCC``, ...) to the
    highest version the file requires; ``version_provides`` the same for what a library defines (libc,
    libstdc++). ``error`` says why the file could not be read (truncated, not a binary, missing, a loop).
    """

    key: str
    path: str
    owner: str
    role: Literal["extension", "library", "interpreter", "executable"]
    format: Literal["elf", "pe", "macho"] | None
    machine: str | None = None
    soname: str | None = None
    identity: str | None = None
    integrity: Integrity | None = None
    size: int | None = None
    build_id: str | None = None
    file_version: str | None = None
    # PE only: the optional header's linker version (``14.42``); for MSVC it is the toolset that built the
    # file, and the VC++ redistributable must be at least as recent (``envcheck.native.vcruntime``).
    linker_version: str | None = omitted_when_default(None)
    rpath: list[str] | None = None
    runpath: list[str] | None = None
    version_needs: dict[str, str] | None = None
    version_provides: dict[str, str] | None = None
    dependencies: list[NativeDependency] | None = None
    error: str | None = None
    # ELF only, for torch's libc10 and for every file of another owner that needs libc10 / libtorch: the
    # C++ ABI (``_GLIBCXX_USE_CXX11_ABI``) it was compiled with, read from the names of its dynamic string
    # table that mangle torch's functions (``envcheck.native.elf.cxx11_abi``); None when they do not say.
    cxx11_abi: bool | None = omitted_when_default(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class MissingChain:
    """A dependency that resolves MISSING, with the chain that reaches it: from the extension module whose
    import will fail (``from_extension`` true), else from the library itself (a plugin only ever dlopened,
    e.g. an optional transport of nvshmem). ``chain`` holds node keys, ``missing`` the absent name, ``text``
    the chain for people (``_C.cpython-311-x86_64-linux-gnu.so → libtorch_python.so → libc10.so: MISSING``).
    """

    root: str
    chain: list[str]
    missing: str
    text: str
    from_extension: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class OpenMPRuntime:
    """One OpenMP runtime file in the environment (renamed copies included), its family and owner."""

    family: Literal["gnu", "intel", "llvm", "msvc"]
    key: str
    owner: str
    path: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Requirement:
    """A library the target machine must provide (an OS library, a redistributable runtime, the GPU
    driver, the interpreter), the runtime it belongs to (``Microsoft Visual C++ 2015-2022
    Redistributable``), how many files need it directly and, except for plain OS libraries (which nearly
    every file needs), which ones."""

    name: str
    kind: DependencyKind
    runtime: str | None
    count: int
    needed_by: list[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedDisagreement:
    """Static tree vs the libraries the probe saw mapped after ``import torch``.

    ``kind``: ``elsewhere`` (the loaded file is not the one the tree predicts for this name, e.g.
    LD_LIBRARY_PATH shadowing the wheel's cuDNN), ``dlopened`` (loaded but absent from the tree: opened at
    run time with dlopen / ctypes), ``missing-loaded`` (the tree says MISSING yet a file of that name was
    loaded).
    """

    kind: Literal["elsewhere", "dlopened", "missing-loaded"]
    name: str
    loaded: str
    loaded_owner: str
    expected: str | None = None


# Why a file of the tree was never opened, or a wheel member never extracted.
RefusalKind = Literal[
    "not-regular",  # a FIFO, a device or a socket: opening or reading it can block or never end
    "link-outside",  # a link (or a search path) leading out of the scanned tree
    "link-loop",  # a symbolic link loop
    "record-escape",  # a RECORD entry naming a path outside the environment / the wheel
    "member-name",  # a wheel member named with ``..`` or an absolute path (zip slip)
    "member-cap",  # a wheel member over a size, ratio or count cap
    "member-corrupt",  # a wheel member that cannot be extracted (bad CRC, a clashing or duplicate name)
    "walk-cap",  # the walk's budget of dependency entries was spent: this file's were not followed
]


@dataclass(frozen=True, kw_only=True, slots=True)
class RefusedFile:
    """A file envcheck did not read, and why: scanned trees and wheels are untrusted, so only regular files
    inside them are opened (docs/guarantees.md). ``path`` is as the tree, RECORD or the zip names it;
    ``owner`` the distribution (or ``tree`` / ``unowned`` / ``wheel``); ``reason`` names the cap or the
    target."""

    path: str
    owner: str
    kind: RefusalKind
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeSection:
    """The native library tree of every compiled module, resolved the way the platform loader would.

    ``loader``: which loader's rules were applied. ``nodes`` sorted by key; ``missing`` the chains of
    imports that will fail; ``requires`` what the machine must provide; ``openmp`` every OpenMP runtime
    file; ``glibc_required`` the highest ``GLIBC_`` version any file needs and ``glibc_provided`` what the
    resolved libc defines; ``loaded`` the disagreements with the live process (None until reconciled).
    ``refused`` lists the files never opened and the wheel members never extracted, with the reason.
    ``skipped`` says why no tree was made. ``hwcaps``: on Linux, the ``glibc-hwcaps`` levels this machine's
    ld.so searches, best first (``x86-64-v3``...): a library under ``glibc-hwcaps/<level>/`` is the one
    loaded on a CPU of that level, the plain copy beside it elsewhere.
    """

    loader: Literal["ld.so", "windows", "dyld"] | None = None
    nodes: list[NativeNode] | None = None
    missing: list[MissingChain] | None = None
    requires: list[Requirement] | None = None
    openmp: list[OpenMPRuntime] | None = None
    glibc_required: str | None = None
    glibc_provided: str | None = None
    loaded: list[LoadedDisagreement] | None = None
    refused: list[RefusedFile] | None = None
    skipped: str | None = None
    hwcaps: list[str] | None = omitted_when_default(None)  # noqa: RUF009


# ------------------------------------------------------------------------------ libraries of a torch build

# What a build is for: torch's own variants, by kind (``cu130`` and ``cu126`` are both ``cuda``).
BuildKind = Literal["cpu", "cuda", "rocm"]

# torch's own libraries (``libc10.so``, ``libtorch_cpu.so``, ``c10_cuda.dll``, ``libtorch_python.dylib``):
# a file that needs one was built against torch. ``libtorchvision.so`` / ``libtorchaudio.so`` are not.
_TORCH_LIBRARY = re.compile(r"^(lib)?(c10|torch)(_[a-z0-9_]+)?\.(so|dll|dylib)(\.[\w.]+)?$", re.I)
# The libraries only a CUDA build of torch needs and ships (or pins from nvidia-* wheels), and a ROCm
# build's. Driver libraries (``libcuda.so``) are not here: they are the machine's.
_CUDA_BUILD = re.compile(
    r"^((lib)?(c10_cuda|torch_cuda\w*)\.(so|dll)"
    r"|lib(cudart|cublas(Lt)?|cudnn\w*|cufft\w*|curand|cusparse\w*|cusolver\w*|nvrtc\w*|nccl|nvJitLink"
    r"|nvToolsExt|cupti|cufile\w*|nvshmem\w*|cudss)\.so(\.[\w.]+)?"
    r"|(cudart|cublas(Lt)?|cudnn\w*|cufft|curand|cusparse|cusolver|nvrtc\w*|nvJitLink\w*)64_[\w.]*\.dll)$",
    re.I,
)
_ROCM_BUILD = re.compile(
    r"^((lib)?(c10_hip|torch_hip\w*)\.so"
    r"|lib(amdhip64|hipblas\w*|rocblas|MIOpen|hiprtc\w*|rccl|hipfft|hiprand|hipsparse\w*|hipsolver\w*"
    r"|roctracer64|roctx64|hsa-runtime64|rocsolver|rocfft|rocrand|rocsparse)\.so(\.[\w.]+)?)$",
    re.I,
)


def links_torch(name: str) -> bool:
    """Whether a needed library ``name`` is one of torch's own (libc10, libtorch*, c10_cuda...)."""
    return bool(_TORCH_LIBRARY.match(name))


def build_kind_of_library(name: str) -> BuildKind | None:
    """``cuda`` / ``rocm`` when a file that needs ``name`` was built for that GPU variant of torch (it
    needs torch's GPU library or the toolkit's runtime); None for any other name (needing libc10 alone
    says nothing about the variant)."""
    if _CUDA_BUILD.match(name):
        return "cuda"
    if _ROCM_BUILD.match(name):
        return "rocm"
    return None


def build_kind_of_label(label: str | None) -> BuildKind | None:
    """The variant a local version label names: ``cpu``, ``cu130`` -> ``cuda``, ``rocm6.4`` -> ``rocm``;
    None for any other label (or none)."""
    if not label:
        return None
    label = label.lower()
    if label == "cpu" or label.startswith("cpu."):
        return "cpu"
    if re.match(r"^cu\d+", label):
        return "cuda"
    if label.startswith("rocm"):
        return "rocm"
    return None


def shipped_by_python(name: str) -> str | None:
    """What kind of Python distribution ships a library named ``name`` (never an OS package): a torch
    build (``libc10_cuda.so``, ``libtorch_hip.so``), an nvidia-* CUDA wheel (``libcudart.so.13``,
    ``libcudnn.so.9``), a ROCm wheel; None for any other name."""
    kind = build_kind_of_library(name)
    if links_torch(name):
        return {"cuda": "a CUDA build of torch", "rocm": "a ROCm build of torch"}.get(
            kind or "", "torch's wheel"
        )
    if kind == "cuda":
        return "the nvidia-* wheels a CUDA build of torch pins"
    if kind == "rocm":
        return "a ROCm build of torch"
    return None
