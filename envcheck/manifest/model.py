"""The manifest: one frozen dataclass per section.

Every section is plain data; ``codec`` validates, encodes and derives the JSON Schema from these
annotations. Fields marked ``volatile()`` change between two snapshots of the same environment and are
ignored by ``diff``. Bump ``SCHEMA_VERSION`` on any incompatible change: a reader refuses a manifest whose
schema is newer than its own.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Literal

from envcheck.manifest.codec import JsonValue, omitted_when_default, volatile
from envcheck.manifest.native import NativeSection
from envcheck.manifest.verify import VerifySection

SCHEMA_VERSION = 1


ProbeStatus = Literal["ok", "error", "crashed", "timeout", "not-run"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ProbeOutcome:
    """How one run of the probe in the target interpreter ended.

    ``error``: Python raised (``exception`` holds the text); ``crashed``: the process died of a signal or
    exited non-zero without a report; ``timeout``: it was killed after ``timeout_s``; ``not-run``: skipped
    (``--no-probe``). ``stage`` names what it was doing when it stopped (``import torch``).
    """

    status: ProbeStatus
    stage: str | None = None
    exception: str | None = None
    exit_code: int | None = None
    signal: str | None = None
    stderr_tail: str | None = None
    timeout_s: float | None = None
    duration_s: float | None = volatile(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class Libc:
    """The C library the interpreter runs on (``glibc 2.36``, ``musl``), from ``platform.libc_ver``."""

    name: str | None
    version: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Cpu:
    """What the processor offers torch's dispatcher, and how much of it this process may use."""

    model: str | None
    isa_flags: list[str]
    logical_cpus: int | None
    affinity_cpus: int | None
    cgroup_cpu_quota: float | None


@dataclass(frozen=True, kw_only=True, slots=True)
class PlatformInfo:
    """Operating system, kernel, libc, CPU and container hints of the target machine.

    ``shm_bytes`` is the size of ``/dev/shm``: Docker's 64 MB default kills DataLoader workers with a bus
    error (FM-22)."""

    system: str
    release: str
    kernel: str
    machine: str
    distro: str | None
    libc: Libc
    cpu: Cpu
    container: list[str]
    shm_bytes: int | None = None
    hostname: str | None = volatile(None)
    # Top-level folders that are links (merged /usr: ``{"/lib": "/usr/lib"}``): paths through them name
    # the same files as paths under their targets. None: not recorded (a manifest from before).
    path_aliases: dict[str, str] | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PathEntry:
    """How one ``sys.path`` entry got there. ``origin``: ``pythonpath`` (the PYTHONPATH variable),
    ``user-site`` (the user's site-packages), ``site`` (the environment's own site-packages),
    ``base-site`` (the base interpreter's, in a venv made with ``--system-site-packages``), ``pth`` (a path
    line of the ``.pth`` file ``pth``), ``stdlib``, or ``other`` (code run at start-up: an ``import`` line
    of a .pth, sitecustomize; or the program)."""

    path: str
    origin: str
    pth: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class CustomizeModule:
    """A ``sitecustomize`` or ``usercustomize`` module, which ``site`` imports when the interpreter starts:
    its path and which of ``envcheck/inside/startup.py``'s ``MENTIONS`` (``torch``, ``set_flush_denormal``,
    ``set_num_threads``, …) its source names (read as text, never run; ``read``: False when it could not be
    read, ``truncated``: only its first 256 KiB were)."""

    name: Literal["sitecustomize", "usercustomize"]
    path: str
    mentions: list[str] = field(default_factory=list)
    read: bool = True
    truncated: bool = False

    @property
    def changes_numerics(self) -> list[str]:
        """The calls it names that change how torch computes (all but a plain mention of torch)."""
        return [m for m in self.mentions if m != "torch"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Startup:
    """What runs at start-up: the customize modules found, and each LD_PRELOAD entry that is a link (or a
    relative path) -> the file it resolves to, which is what the loader maps."""

    customize: list[CustomizeModule] = field(default_factory=list)
    preload: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True, slots=True)
class UnsupportedWheel:
    """A distribution installed from a wheel none of whose ``Tag:`` lines this interpreter supports (a
    ``cp312`` wheel under Python 3.11): ``tags`` its first few tags."""

    name: str
    version: str
    metadata_dir: str
    tags: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class WheelSupport:
    """The WHEEL tags of every distribution against ``sys_tags()``, evaluated in the target: ``checked``
    distributions with tags, ``count`` of them unsupported, the first ones in ``unsupported``; ``source``:
    the ``packaging`` that answered (``packaging.tags`` or pip's vendored copy)."""

    source: str
    checked: int
    count: int = 0
    unsupported: list[UnsupportedWheel] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class VenvConfig:
    """The venv's ``pyvenv.cfg`` (PEP 405): ``home`` (the base interpreter's folder), whether it exists and
    the python found in it, the ``version`` it was made with (``version_info`` for uv), whether it sees
    the base's site-packages, uv's ``relocatable`` and the tool that wrote it. ``read`` False: unreadable."""

    path: str
    read: bool = True
    home: str | None = None
    home_exists: bool = False
    home_python: str | None = None
    version: str | None = None
    include_system_site_packages: bool = False
    relocatable: bool = False
    creator: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class BrokenScript:
    """A console or GUI script an ``entry_points.txt`` declares that would not run: ``problem`` is
    ``missing`` (no file), ``interpreter-missing`` (its ``#!`` names no file), ``foreign-interpreter``
    (another environment's python), ``no-interpreter-line``, ``not-executable`` or ``unreadable``."""

    name: str
    kind: Literal["console", "gui"]
    distribution: str
    version: str
    path: str
    problem: str
    interpreter: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class ScriptsCheck:
    """The declared scripts of the environment's own distributions in ``folder``: ``declared``,
    ``checked``, ``skipped`` (links out of the folder, not files), ``count`` broken, the first ones in
    ``broken``; ``truncated``: more than the probe's bound were declared."""

    folder: str
    declared: int = 0
    checked: int = 0
    skipped: int = 0
    count: int = 0
    broken: list[BrokenScript] = field(default_factory=list)
    truncated: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class PythonInfo:
    """The target interpreter: version, where it lives, what kind of environment, which wheels it takes."""

    implementation: str
    version: str
    abi_flags: str
    pointer_bits: int
    executable: str
    prefix: str
    base_prefix: str
    exec_prefix: str
    base_exec_prefix: str
    environment: Literal["venv", "conda", "system"]
    user_site_enabled: bool
    user_site: str | None
    sys_path: list[str]
    wheel_tags: list[str]
    mp_start_method: str | None
    shared_library: str | None
    # Identity of the interpreter's own library (docs/reference.md), recorded by the probe; None: not
    # recorded.
    # ``own_library``: the real path of the installation's libpython; ``loaded_library``: the real path of
    # the libpython mapped into the process (another one when LD_LIBRARY_PATH names a distribution's);
    # ``build_version``: the version the installation's headers declare (``version`` is what the loaded
    # library reports); ``stdlib_errors``: stdlib extension modules that fail to import, with the error;
    # ``path_aliases``: linked folders among the prefixes and ``sys_path`` -> their real paths.
    own_library: str | None = None
    loaded_library: str | None = None
    build_version: str | None = None
    stdlib_errors: dict[str, str] | None = None
    path_aliases: dict[str, str] | None = None
    # How each ``sys_path`` entry got there, in order (``PathEntry``); None: not recorded (before).
    path_origins: list[PathEntry] | None = omitted_when_default(None)  # noqa: RUF009
    # What runs before the application (``envcheck/inside/startup.py``); None: not recorded.
    startup: Startup | None = omitted_when_default(None)  # noqa: RUF009
    # Whether the installation can run on this interpreter (``envcheck/inside/venv_facts.py``); None: not
    # recorded. ``extension_suffixes``: ``importlib.machinery.EXTENSION_SUFFIXES``; ``wheel_support``: the
    # distributions whose WHEEL tags this interpreter does not take; ``venv_config``: its ``pyvenv.cfg``;
    # ``scripts``: the declared console and GUI scripts that would not run.
    extension_suffixes: list[str] | None = omitted_when_default(None)  # noqa: RUF009
    wheel_support: WheelSupport | None = omitted_when_default(None)  # noqa: RUF009
    venv_config: VenvConfig | None = omitted_when_default(None)  # noqa: RUF009
    scripts: ScriptsCheck | None = omitted_when_default(None)  # noqa: RUF009


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeFile:
    """A compiled file a distribution installed, with the sha256 its RECORD promises (if any)."""

    path: str
    sha256: str | None
    size: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Distribution:
    """One installed distribution, as ``importlib.metadata`` sees it on the target's ``sys.path``.

    ``version`` keeps the local label (``2.13.0+cpu``). ``location`` is the ``sys.path`` entry it lives in;
    ``shadowed`` is true when an earlier entry holds a distribution of the same name, so Python never
    imports this one.
    """

    name: str
    version: str
    installer: str | None
    requires: list[str]
    direct_url: JsonValue
    wheel_tags: list[str]
    location: str
    metadata_dir: str
    shadowed: bool
    native_files: list[NativeFile]


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchStatic:
    """What ``torch/version.py`` says, read as text without importing torch (a broken torch still has it)."""

    location: str
    version: str | None
    git_version: str | None
    cuda: str | None
    hip: str | None
    debug: bool | None
    variant: str


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchDevice:
    """One accelerator as torch sees it."""

    kind: str
    index: int
    name: str
    capability: str | None
    total_memory: int | None
    multi_processor_count: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Numerics:
    """The switches that change float results without changing versions."""

    allow_tf32_matmul: bool | None
    allow_tf32_cudnn: bool | None
    float32_matmul_precision: str | None
    deterministic_algorithms: bool | None
    cudnn_enabled: bool | None
    cudnn_benchmark: bool | None
    cudnn_deterministic: bool | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Backends:
    """Which backends this torch build has and which are usable here."""

    cuda_built: bool | None
    cuda_available: bool | None
    cuda_device_count: int | None
    mps_built: bool | None
    mps_available: bool | None
    xpu_available: bool | None
    mkldnn_available: bool | None
    mkl_available: bool | None
    openmp_available: bool | None
    distributed_available: bool | None
    nccl_available: bool | None
    gloo_available: bool | None
    mpi_available: bool | None


@dataclass(frozen=True, kw_only=True, slots=True)
class FpControl:
    """The floating-point control state after ``import torch`` (read by what arithmetic does, ``method``).

    ``flush_to_zero``: results too small for a normal float become zero (MXCSR.FTZ, FPCR.FZ);
    ``denormals_are_zero``: subnormal inputs read as zero (MXCSR.DAZ, FPCR.FZ). ``set_when``: ``start-up``
    (already on before ``import torch``: a preloaded library, one the interpreter links, a module ``site``
    imported) or ``import torch``; ``None`` when off. ``fast_math_libraries``: loaded libraries whose symbol
    tables name GCC's ``set_fast_math`` (``-ffast-math``'s constructor that turns both on);
    ``preloaded``: what LD_PRELOAD named (a link as the file it resolves to), recorded only when the state is
    on.
    """

    flush_to_zero: bool | None
    denormals_are_zero: bool | None
    set_when: str | None = None
    fast_math_libraries: list[str] = field(default_factory=list)
    preloaded: list[str] = field(default_factory=list)
    method: str = "arithmetic"
    # The sitecustomize / usercustomize files whose source calls a function that sets the mode
    # (``torch.set_flush_denormal``), recorded only when the state is on; None: not recorded.
    customize: list[str] | None = omitted_when_default(None)  # noqa: RUF009

    @property
    def flushes(self) -> bool:
        """True when either mode is on: subnormal numbers do not survive arithmetic here."""
        return bool(self.flush_to_zero or self.denormals_are_zero)


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchRuntime:
    """What only a live ``import torch`` knows: the build's libraries, CPU dispatch, threads, devices."""

    version: str
    file: str
    cudnn_version: int | None
    nccl_version: str | None
    mkl_version: str | None
    onednn_version: str | None
    openmp: str | None
    cxx11_abi: bool | None
    cpu_capability: str | None
    cuda_arch_list: list[str]
    num_threads: int | None
    num_interop_threads: int | None
    parallel_info: str | None
    quantized_engines: list[str]
    quantized_engine: str | None
    numerics: Numerics
    backends: Backends
    devices: list[TorchDevice]
    build_config: str | None
    small_op_ok: bool
    fp_control: FpControl | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class TorchInfo:
    """torch as found on ``sys.path``: every tree (several is a finding), the first one's version file, and
    the live facts when the probe could import it."""

    trees: list[str]
    static: TorchStatic | None
    runtime: TorchRuntime | None


@dataclass(frozen=True, kw_only=True, slots=True)
class Gpu:
    """One GPU as the driver (not torch) reports it."""

    index: int
    name: str
    uuid: str | None
    memory_total: int | None
    compute_capability: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuDriver:
    """The NVIDIA driver, found independently of torch. ``found`` false with a ``reason`` is a fact too."""

    found: bool
    source: Literal["nvml", "libcuda", "nvidia-smi"] | None
    reason: str | None
    driver_version: str | None
    cuda_driver_version: int | None
    gpus: list[Gpu]


@dataclass(frozen=True, kw_only=True, slots=True)
class LoadedLibrary:
    """A shared library mapped into the probe after ``import torch`` and one small op."""

    path: str
    owner: str
    identity: str | None


@dataclass(frozen=True, kw_only=True, slots=True)
class ThreadPool:
    """An OpenMP or BLAS runtime as threadpoolctl (or, without it, the probe's path matching) sees it."""

    user_api: str
    internal_api: str
    filepath: str
    version: str | None
    num_threads: int | None
    owner: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Runtimes:
    """Libraries actually loaded, and among them the threading and BLAS runtimes."""

    loaded: list[LoadedLibrary]
    threadpools: list[ThreadPool]
    threadpoolctl: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowsVersion:
    """Windows' version (``10.0``) and build (``19045``), with the update revision (``UBR``), the product
    name and the display version (``22H2``) the registry states, where it states them."""

    version: str
    build: int
    ubr: int | None = None
    product: str | None = None
    display: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class VcRuntimeRegistry:
    """The VC++ 2015-2022 x64 redistributable's own record: the registry key
    ``HKLM\\SOFTWARE\\Microsoft\\VisualStudio\\14.0\\VC\\Runtimes\\x64`` (``view``: the 64-bit or the
    32-bit registry, where its 32-bit installer writes it), its ``Installed`` flag and its version."""

    installed: bool
    version: str | None
    view: str


@dataclass(frozen=True, kw_only=True, slots=True)
class VcRuntime:
    """The VC++ runtime a Windows machine has: the redistributable's registry key (None: absent) and
    ``System32\\msvcp140.dll`` (None: absent) with its FileVersion (None: absent, or no version resource)."""

    registry: VcRuntimeRegistry | None = None
    msvcp140: str | None = None
    msvcp140_version: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class PathDll:
    """A DLL in a ``PATH`` folder that is not the environment's own, named as a DLL the environment ships,
    a VC++ runtime DLL (outside System32) or an OpenMP runtime: a copy torch's ``PATH`` fallback
    (``LoadLibraryW``) or another program may load in place of the right one."""

    name: str
    folder: str
    path: str
    version: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DllChainLink:
    """A file on the path Windows' loader followed from the DLL that failed, with the MSVC linker version
    (``14.42``: the toolset that built it) of its PE header."""

    name: str
    path: str
    linker: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DllNotFound:
    """An import (``MSVCP140.dll``) the loader finds nowhere it looks, and the path of the file needing it."""

    name: str
    needed_by: str


@dataclass(frozen=True, kw_only=True, slots=True)
class DllRefused:
    """An import that exists (``path``) yet does not load, with the Windows error code."""

    name: str
    path: str
    needed_by: str
    error: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class DllLoadFailure:
    """Where Windows' loader stops when ``import torch`` fails with ``Error loading "...\\c10.dll"``: asked of
    the loader itself, import by import, from ``dll`` (``chain``) down to what is not found or refused."""

    dll: str
    chain: list[DllChainLink] = field(default_factory=list)
    missing: list[DllNotFound] = field(default_factory=list)
    refused: list[DllRefused] = field(default_factory=list)
    # When every import loads: the Windows error of loading ``dll`` itself (998: its start-up code faulted,
    # as c10.dll's does on a msvcp140 older than its toolset), None when it loads or was not asked.
    error: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowsInfo:
    """What a Windows machine holds beyond the portable facts (``envcheck/inside/windows_facts.py``).

    ``loaded``: the modules the process had loaded when ``import torch`` failed, full paths in load order
    (None: it did not fail; after a successful import they are ``runtimes.loaded``); ``load_failure``: where
    the loader stopped (None: it did not fail, or the error named no DLL); ``openmp``: the OpenMP runtime
    DLLs loaded (from either list). ``KMP_DUPLICATE_LIB_OK`` is in ``env``."""

    version: WindowsVersion | None = None
    vc_runtime: VcRuntime | None = None
    path_dlls: list[PathDll] = field(default_factory=list)
    loaded: list[str] | None = None
    load_failure: DllLoadFailure | None = None
    openmp: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class Stash:
    """An entry pip's uninstall left beside the live tree (``~orch``, ``~orch-2.12.0.dist-info``): pip
    renames the old tree so while it installs the new one, and removes it when the install commits, so
    one that remains means an install was interrupted. ``kind``: ``dist-info`` (a stashed metadata folder:
    ``name`` and ``version`` from its METADATA) or ``package`` (a stashed package folder: ``name`` is the
    project it belongs to, as far as a stashed RECORD or its own name tells). ``files``: how many files it
    holds (bounded by the walk)."""

    path: str
    kind: Literal["dist-info", "package"]
    name: str | None = None
    version: str | None = None
    files: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class OrphanFiles:
    """Files under one top-level package folder that no RECORD lists. ``count`` is all of them,
    ``examples`` the first few (compiled code first), ``modules`` how many are code the interpreter or the
    loader takes (``.py``, an extension module, a shared library), ``likely`` where they most likely came
    from: ``stash <project>`` (a stash of that project's install stands for the folder: an interrupted
    install), ``dist-info <path>`` (the RECORD of a distribution in an earlier ``sys.path`` folder lists
    them), ``no distribution`` (no RECORD names the folder at all: a package folder in a site folder whose
    every distribution has a RECORD) or ``unknown``."""

    folder: str
    count: int
    examples: list[str] = field(default_factory=list)
    modules: int = 0
    likely: str = "unknown"
    # The distributions whose RECORD lists files under ``folder`` (name and version): what a clean
    # reinstall of the folder takes.
    owners: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class SharedFiles:
    """Files that the RECORDs of two distributions (or more) both list, in one folder: ``owners`` their
    metadata folders, ``count`` how many files, ``examples`` the first few."""

    owners: list[str]
    count: int
    examples: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class MissingFiles:
    """Files one distribution's RECORD lists (``owner``: its metadata folder) that are not on disk, under
    its package folders: ``count`` of them, ``examples`` the first few (modules first), ``modules`` how many
    are Python modules outside a package's own tests (``tests/``, ``test_*.py``: what slimmed images drop).
    Byte-code is left out, and so are a live snapshot's native files (they are ``ENV-NATIVE-FILE-MISSING``'s,
    checked with their hashes). A container image's manifest counts them here too (``natives``): there a
    later layer deleted what an earlier one installed, which is the cause the native tree's findings about
    those files fold under (``diff.causes``)."""

    owner: str
    count: int
    examples: list[str] = field(default_factory=list)
    modules: int = 0
    natives: int = omitted_when_default(0)


@dataclass(frozen=True, kw_only=True, slots=True)
class SourceMissing:
    """An editable install (PEP 660) whose source folder, as ``direct_url.json`` names it, does not exist."""

    name: str
    version: str
    path: str


@dataclass(frozen=True, kw_only=True, slots=True)
class InstallFacts:
    """How the installation agrees with its own metadata (``envcheck/inside/install_facts.py``): pip's
    stashes left behind, files no RECORD owns, files two RECORDs claim. ``walked``: how many files under
    the distributions' top-level folders were looked at; ``truncated``: the walk stopped at its bound, so
    what it did not reach is unknown (never reported as fine or broken)."""

    stashes: list[Stash] = field(default_factory=list)
    orphans: list[OrphanFiles] = field(default_factory=list)
    shared: list[SharedFiles] = field(default_factory=list)
    missing: list[MissingFiles] = field(default_factory=list)
    sources_missing: list[SourceMissing] = field(default_factory=list)
    walked: int = 0
    truncated: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class ConfigCheck:
    """What a configuration variable of torch's names, checked live where cheap
    (``envcheck/inside/config_checks.py``): a compiler exists and answers ``--version``, a folder exists
    and is writable. Nothing is compiled. ``ok`` false with ``detail`` saying what failed."""

    variable: str
    value: str
    kind: Literal["compiler", "folder"]
    ok: bool
    detail: str | None = None


ManifestKind = Literal["snapshot", "predicted", "image"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ImageSource:
    """The container image an ``image`` manifest was read from (``envcheck snapshot --image``): nothing in
    it ran. ``digest``: the image manifest's (``digest_kind`` ``manifest``), or the config's for a ``docker
    save`` tarball without an OCI index (``config``, the image ID); ``source_format``: ``oci-layout``,
    ``oci-archive`` or ``docker-save``; ``platform``: ``os/arch[/variant]``; ``python``: the interpreter
    read, a path inside the image, and ``python_from`` how it was chosen."""

    digest: str
    digest_kind: str
    config_digest: str
    source_format: str
    platform: str
    layers: int
    python: str
    python_from: str
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class Meta:
    """Who wrote this manifest, when, and how the probe went.

    ``kind``: ``snapshot`` (recorded on the machine it describes), ``predicted`` (``envcheck predict``:
    resolved and scanned for a target platform from another machine) or ``image`` (``snapshot --image``:
    a container image's files, read statically; ``Manifest.image`` names it). ``absent`` names, as dotted
    paths (``runtimes``, ``platform.cpu``, ``python.executable``), the facts this manifest does not hold
    because only a live probe of the machine could know them: a field named here holds an empty value,
    never a guess, and the diff engine gives no finding about it. None: nothing absent (every snapshot).
    """

    envcheck_version: str
    label: str | None
    target: str
    probe: ProbeOutcome
    created: str = volatile()
    duration_s: float | None = volatile(None)
    # ``omitted_when_default`` returns a ``dataclasses.field`` (as ``volatile`` does), not a shared value.
    kind: ManifestKind = omitted_when_default("snapshot")  # noqa: RUF009
    absent: list[str] | None = omitted_when_default(None)  # noqa: RUF009


MachineNeedKind = Literal["vc-runtime", "openmp", "blas", "nvidia-driver", "glibc", "macos", "runtime"]


@dataclass(frozen=True, kw_only=True, slots=True)
class MachineNeed:
    """Something a predicted target's binaries need from the machine, or bring with them.

    ``kind``: the VC++ runtime, an OpenMP or BLAS runtime, the NVIDIA driver, the glibc floor, the macOS
    minimum, or another redistributable ``runtime``. ``name`` says it for people (``Microsoft Visual C++
    2015-2022 Redistributable (x64)``, ``Intel OpenMP (libiomp5md.dll)``, ``glibc``); ``family`` is the
    runtime family for OpenMP / BLAS (``intel``, ``gnu``, ``llvm``, ``msvc``, ``mkl``, ``openblas``,
    ``accelerate``). ``provided``: ``bundled`` (a wheel ships the files) or ``machine`` (it must be
    installed there). ``minimum`` is the lowest version that satisfies the binaries when their data imply
    one, with ``evidence`` saying where it comes from (a bundled DLL's PE FileVersion, a manylinux tag, a
    ``GLIBC_`` symbol version, ``LC_BUILD_VERSION``). ``files`` the library names, ``needed_by`` the node
    keys of the files that import them (bounded by the scan)."""

    kind: MachineNeedKind
    name: str
    provided: Literal["bundled", "machine"]
    family: str | None = None
    minimum: str | None = None
    evidence: str | None = None
    files: list[str] = field(default_factory=list)
    needed_by: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class LeftOut:
    """A distribution of the source environment that the prediction did not resolve, and why (installed
    from a local path, a VCS or an editable checkout: no index serves it)."""

    name: str
    version: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Unavailable:
    """A distribution pinned for the target that no index serves a wheel of for it. ``available`` lists,
    from the indexes' own answer, the versions that do have a wheel for the target (newest first, bounded);
    ``platforms`` the platform tags the pinned version's wheels exist for, when the indexes said."""

    name: str
    version: str
    root: bool
    reason: str
    available: list[str] = field(default_factory=list)
    platforms: list[str] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class PredictedSection:
    """How a predicted manifest was made, and what its target machine must provide.

    ``platform``: the wheel platform tag predicted for (``win_amd64``), ``python_version`` and
    ``implementation`` the interpreter's (``3.11``, ``cp``); ``indexes`` the index URLs pip used (secrets
    redacted); ``needs`` what the binaries need from the machine; ``left_out`` the distributions not
    resolved and why; ``unavailable`` the pins no index has a wheel of for the target."""

    platform: str
    python_version: str
    implementation: str
    indexes: list[str] = field(default_factory=list)
    needs: list[MachineNeed] = field(default_factory=list)
    left_out: list[LeftOut] = field(default_factory=list)
    unavailable: list[Unavailable] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    """The whole environment, as one lockfile manifest. ``predicted`` is set only on a predicted manifest
    (``meta.kind == "predicted"``)."""

    schema_version: int
    meta: Meta
    platform: PlatformInfo | None
    python: PythonInfo
    packages: list[Distribution]
    torch: TorchInfo
    gpu: GpuDriver | None
    runtimes: Runtimes | None
    env: dict[str, str]
    native: NativeSection | None = None
    verify: VerifySection | None = None
    predicted: PredictedSection | None = omitted_when_default(None)  # noqa: RUF009
    # Set when the target was another interpreter (--python) started from the caller's shell: the names
    # of ``env`` that describe that shell (PATH, VIRTUAL_ENV, CONDA_PREFIX, ...), not the environment.
    # ENV-VAR-CHANGED compares those variables only between two manifests that both leave this None.
    env_caller: list[str] | None = omitted_when_default(None)  # noqa: RUF009
    # Windows only: the machine's version, VC++ runtime, PATH DLLs and where the loader stopped; None
    # elsewhere and in a manifest from before.
    windows: WindowsInfo | None = omitted_when_default(None)  # noqa: RUF009
    # How the installation agrees with its metadata (stashes, orphans, files two RECORDs claim); None: not
    # recorded (a manifest from before, or a predicted one).
    install: InstallFacts | None = omitted_when_default(None)  # noqa: RUF009
    # What the configuration variables torch reads point at, checked live; None: not recorded.
    config_checks: list[ConfigCheck] | None = omitted_when_default(None)  # noqa: RUF009
    # The container image this manifest was read from (``meta.kind == "image"``); None otherwise.
    image: ImageSource | None = omitted_when_default(None)  # noqa: RUF009

    @property
    def is_predicted(self) -> bool:
        """True for a manifest ``envcheck predict`` made: its live facts are absent, not empty."""
        return self.meta.kind == "predicted"

    def package(self, name: str) -> Distribution | None:
        """The importable (first, unshadowed) distribution named ``name`` (any spelling), or None."""
        wanted = canonical(name)
        for dist in self.packages:
            if canonical(dist.name) == wanted and not dist.shadowed:
                return dist
        return None

    def replace(self, **changes: object) -> Manifest:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


def canonical(name: str) -> str:
    """PEP 503 normalised project name."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


__all__ = [
    "SCHEMA_VERSION",
    "Backends",
    "BrokenScript",
    "ConfigCheck",
    "Cpu",
    "Distribution",
    "DllChainLink",
    "DllLoadFailure",
    "DllNotFound",
    "DllRefused",
    "FpControl",
    "Gpu",
    "GpuDriver",
    "InstallFacts",
    "LeftOut",
    "Libc",
    "LoadedLibrary",
    "MachineNeed",
    "Manifest",
    "Meta",
    "MissingFiles",
    "NativeFile",
    "Numerics",
    "OrphanFiles",
    "PathDll",
    "PathEntry",
    "PlatformInfo",
    "PredictedSection",
    "ProbeOutcome",
    "PythonInfo",
    "Runtimes",
    "ScriptsCheck",
    "SharedFiles",
    "SourceMissing",
    "Stash",
    "ThreadPool",
    "TorchDevice",
    "TorchInfo",
    "TorchRuntime",
    "TorchStatic",
    "Unavailable",
    "UnsupportedWheel",
    "VcRuntime",
    "VcRuntimeRegistry",
    "VenvConfig",
    "WheelSupport",
    "WindowsInfo",
    "WindowsVersion",
    "canonical",
    "field",
]
