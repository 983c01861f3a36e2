"""Turn the probe's raw JSON into manifest sections. Pure functions: no I/O beyond what is passed in.

The probe's output is untrusted in the same way a manifest is (it comes from another interpreter, maybe
another Python version, maybe a program that only calls itself Python), so every section goes through
``codec.decode`` or an explicit type check, and a malformed answer becomes a ``ManifestError`` naming
every malformed location, never a ``KeyError`` or a ``TypeError``. ``static_facts`` and ``runtime_facts``
decode a whole result (of the facts and of the runtime probe) and are the entry points ``take_snapshot``
uses.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, TypeVar

from envcheck.core.errors import ManifestError
from envcheck.manifest.codec import decode, json_kind
from envcheck.manifest.model import (
    SCHEMA_VERSION,
    ConfigCheck,
    Distribution,
    GpuDriver,
    InstallFacts,
    LoadedLibrary,
    Manifest,
    Meta,
    PlatformInfo,
    PythonInfo,
    Runtimes,
    ThreadPool,
    TorchInfo,
    TorchRuntime,
    TorchStatic,
    WindowsInfo,
)

SOURCE = "probe output"
# A live process maps a few hundred libraries (a CUDA torch about 300); a list far longer than any real one
# would only make envcheck hash files for a hostile target.
MAX_LOADED_LIBRARIES = 20_000

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True, slots=True)
class StaticFacts:
    """The facts probe's result, decoded: what the target told about itself without importing torch."""

    python_version: tuple[int, ...] | None
    platform: PlatformInfo
    python: PythonInfo
    packages: list[Distribution]
    torch: TorchInfo
    env: dict[str, str]
    windows: WindowsInfo | None = None
    install: InstallFacts | None = None
    config_checks: list[ConfigCheck] | None = None

    def manifest(self, meta: Meta) -> Manifest:
        """A manifest of these facts alone, under ``meta``: no runtime probe, GPU or native tree yet (a
        live snapshot adds them; a container image's has none to add but its tree)."""
        return Manifest(
            schema_version=SCHEMA_VERSION,
            meta=meta,
            platform=self.platform,
            python=self.python,
            packages=self.packages,
            torch=self.torch,
            gpu=None,
            runtimes=None,
            env=self.env,
            windows=self.windows,
            install=self.install,
            config_checks=self.config_checks,
        )


def utc_now() -> str:
    """Now, as a manifest's ``meta.created`` says it: UTC, to the second, ISO 8601."""
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeFacts:
    """The runtime probe's result, decoded. ``None`` where the probe did not get that far (a crash, no
    torch): absent is data; present and malformed is a ``ManifestError``."""

    gpu: GpuDriver | None
    torch_runtime: TorchRuntime | None
    loaded: list[str] | None
    threadpools: list[dict[str, Any]] | None
    traceback_tail: str | None
    stdlib_errors: dict[str, str] | None = None
    # Windows, after a failed ``import torch``: ``{"loaded": [...], "failure": {...}}``
    # (``envcheck/inside/probe.py``), decoded into ``WindowsInfo.loaded`` / ``load_failure``.
    windows_load: WindowsInfo | None = None


class _Problems:
    """Every malformed location of one result, so that one message lists them all."""

    def __init__(self) -> None:
        self.items: list[str] = []

    def section(self, build: Callable[[], T]) -> T | None:
        try:
            return build()
        except ManifestError as e:
            self.items.extend(e.problems)
            return None

    def expect(self, ok: bool, problem: str) -> bool:
        if not ok:
            self.items.append(problem)
        return ok

    def raise_any(self) -> None:
        if self.items:
            raise ManifestError(SOURCE, self.items)


def static_facts(data: Mapping[str, Any]) -> StaticFacts:
    """Decode the facts probe's result. Raises ``ManifestError`` (source ``probe output``) listing every
    missing or malformed section with its location (``platform``, ``packages[3].version``, ``env.PATH``)."""
    problems = _Problems()
    version = data.get("python_version")
    python_version = None
    if version is not None and problems.expect(
        isinstance(version, list)
        and len(version) >= 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in version),
        f"python_version: expected an array of integers (major, minor, micro), got {json_kind(version)}",
    ):
        python_version = tuple(version)
    platform = problems.section(lambda: platform_info(_required(data, "platform")))
    python = problems.section(lambda: python_info(_required(data, "python")))
    raw_packages = data.get("packages")
    packages = (
        problems.section(lambda: distributions(raw_packages or []))
        if problems.expect(
            raw_packages is None or isinstance(raw_packages, list),
            f"packages: expected an array, got {json_kind(raw_packages)}",
        )
        else None
    )
    raw_torch = data.get("torch")
    torch = (
        problems.section(lambda: torch_info(raw_torch or {}, None))
        if problems.expect(
            raw_torch is None or isinstance(raw_torch, dict),
            f"torch: expected an object, got {json_kind(raw_torch)}",
        )
        else None
    )
    env = problems.section(
        lambda: decode(dict[str, str], data.get("env") or {}, source=SOURCE, location="env")
    )
    raw_windows = data.get("windows")
    windows = (
        problems.section(lambda: decode(WindowsInfo, raw_windows, source=SOURCE, location="windows"))
        if raw_windows is not None
        else None
    )
    raw_install = data.get("install")
    install = (
        problems.section(lambda: decode(InstallFacts, raw_install, source=SOURCE, location="install"))
        if raw_install is not None
        else None
    )
    raw_checks = data.get("config_checks")
    config_checks = (
        problems.section(
            lambda: decode(list[ConfigCheck], raw_checks, source=SOURCE, location="config_checks")
        )
        if raw_checks is not None
        else None
    )
    problems.raise_any()
    assert platform is not None and python is not None and torch is not None and env is not None
    return StaticFacts(
        python_version=python_version,
        platform=platform,
        python=python,
        packages=packages or [],
        torch=torch,
        env=dict(sorted(env.items())),
        windows=windows,
        install=install,
        config_checks=config_checks,
    )


def runtime_facts(data: Mapping[str, Any]) -> RuntimeFacts:
    """Decode the runtime probe's result. Raises ``ManifestError`` listing every malformed location; a
    result that says ``done`` must hold what a finished probe writes (``torch_runtime`` and ``loaded``,
    unless ``torch_missing``)."""
    problems = _Problems()

    def optional(key: str, kind: type, what: str) -> Any:
        value = data.get(key)
        return (
            value
            if problems.expect(
                value is None or isinstance(value, kind), f"{key}: expected {what}, got {json_kind(value)}"
            )
            else None
        )

    raw_gpu = optional("gpu", dict, "an object")
    gpu = problems.section(lambda: gpu_driver(raw_gpu)) if raw_gpu is not None else None
    raw_runtime = optional("torch_runtime", dict, "an object")
    runtime = problems.section(lambda: torch_runtime(raw_runtime)) if raw_runtime is not None else None
    loaded = optional("loaded", list, "an array of paths")
    if loaded is not None:
        problems.expect(
            len(loaded) <= MAX_LOADED_LIBRARIES,
            f"loaded: {len(loaded)} libraries, more than any process maps ({MAX_LOADED_LIBRARIES})",
        )
        bad = [i for i, p in enumerate(loaded) if not isinstance(p, str) or not p or "\0" in p]
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            problems.expect(
                False, f"loaded[{bad[0]}]: expected a path, got {json_kind(loaded[bad[0]])}{more}"
            )
    pools = optional("threadpools", list, "an array of objects")
    for i, pool in enumerate(pools or []):
        where = f"threadpools[{i}]"
        if not problems.expect(isinstance(pool, dict), f"{where}: expected an object, got {json_kind(pool)}"):
            continue
        for key in ("user_api", "internal_api", "filepath"):
            problems.expect(
                isinstance(pool.get(key), str),
                f"{where}.{key}: expected a string, got {json_kind(pool.get(key))}",
            )
        problems.expect(
            pool.get("version") is None or isinstance(pool.get("version"), str),
            f"{where}.version: expected a string, got {json_kind(pool.get('version'))}",
        )
        threads = pool.get("num_threads")
        problems.expect(
            threads is None or (isinstance(threads, int) and not isinstance(threads, bool)),
            f"{where}.num_threads: expected an integer, got {json_kind(threads)}",
        )
    tail = optional("traceback_tail", str, "a string")
    stdlib = optional("stdlib_errors", dict, "an object")
    if stdlib is not None:
        problems.expect(
            all(isinstance(k, str) and isinstance(v, str) for k, v in stdlib.items()),
            "stdlib_errors: expected module names and error texts",
        )
    raw_load = optional("windows_load", dict, "an object")
    windows_load = None
    if raw_load is not None:
        shaped = {"loaded": raw_load.get("loaded"), "load_failure": raw_load.get("failure")}
        windows_load = problems.section(
            lambda: decode(WindowsInfo, shaped, source=SOURCE, location="windows_load")
        )
        if windows_load is not None and windows_load.loaded is not None:
            problems.expect(
                len(windows_load.loaded) <= MAX_LOADED_LIBRARIES,
                f"windows_load.loaded: more modules than any process loads ({MAX_LOADED_LIBRARIES})",
            )
    if data.get("done") is True and data.get("torch_missing") is not True:
        for key in ("torch_runtime", "loaded"):
            problems.expect(key in data, f"{key}: missing (the result says done, and torch is not missing)")
    problems.raise_any()
    return RuntimeFacts(
        gpu=gpu,
        torch_runtime=runtime,
        loaded=loaded,
        threadpools=pools,
        traceback_tail=tail,
        stdlib_errors=stdlib,
        windows_load=windows_load,
    )


def _required(data: Mapping[str, Any], key: str) -> Any:
    if key not in data:
        raise ManifestError(SOURCE, [f"{key}: missing"])
    return data[key]


def torch_variant(version: str | None, cuda: str | None, hip: str | None) -> str:
    """The build variant: ``cu121``, ``rocm6.1``, ``cpu`` (from the local label first, then version.py)."""
    local = version.partition("+")[2] if version else ""
    if re.fullmatch(r"cu\d+|cpu|rocm[\d.]+|xpu", local):
        return local
    if cuda:
        return "cu" + "".join(cuda.split(".")[:2])
    if hip:
        return "rocm" + ".".join(hip.split(".")[:2])
    return "cpu"


def python_info(raw: Mapping[str, Any]) -> PythonInfo:
    info = decode(PythonInfo, raw, source=SOURCE, location="python")
    if info.wheel_tags or info.implementation != "CPython":
        return info
    # The target has neither packaging nor pip: derive its tags here, from its version and this host's
    # platform tags (the target runs on this machine).
    from dataclasses import replace

    from packaging import tags

    found = re.match(r"(\d+)\.(\d+)", info.version)
    if found is None:
        raise ManifestError(SOURCE, [f"python.version: expected 'X.Y.Z', got {info.version[:40]!r}"])
    version = (int(found.group(1)), int(found.group(2)))
    wanted = list(tags.cpython_tags(python_version=version, platforms=list(tags.platform_tags())))
    return replace(info, wheel_tags=[str(t) for t in wanted[:12]])


def platform_info(raw: Mapping[str, Any]) -> PlatformInfo:
    return decode(PlatformInfo, raw, source=SOURCE, location="platform")


def distributions(raw: Sequence[Any]) -> list[Distribution]:
    dists = decode(list[Distribution], list(raw), source=SOURCE, location="packages")
    # sys.path order decides shadowing (kept by the probe); the manifest lists them by name for diffs.
    return sorted(dists, key=lambda d: (d.name.lower(), d.shadowed, d.location))


def torch_runtime(raw: Mapping[str, Any]) -> TorchRuntime:
    return decode(TorchRuntime, raw, source=SOURCE, location="torch_runtime")


def torch_info(raw: Mapping[str, Any], runtime: Mapping[str, Any] | None) -> TorchInfo:
    static_raw = raw.get("static")
    static = None
    if static_raw is not None and not isinstance(static_raw, Mapping):
        raise ManifestError(SOURCE, [f"torch.static: expected an object, got {json_kind(static_raw)}"])
    if isinstance(static_raw, Mapping):

        def text(key: str) -> str | None:  # a wrong type is left for decode to name
            value = static_raw.get(key)
            return value if isinstance(value, str) else None

        static = decode(
            TorchStatic,
            {**static_raw, "variant": torch_variant(text("version"), text("cuda"), text("hip"))},
            source=SOURCE,
            location="torch.static",
        )
    trees = decode(list[str], raw.get("trees", []), source=SOURCE, location="torch.trees")
    live = torch_runtime(runtime) if runtime else None
    return TorchInfo(trees=trees, static=static, runtime=live)


def gpu_driver(raw: Mapping[str, Any]) -> GpuDriver:
    full = {"driver_version": None, "cuda_driver_version": None, "gpus": [], **raw}
    return decode(GpuDriver, full, source=SOURCE, location="gpu")


class Owners:
    """Which distribution installed a file: built from every distribution's RECORD native files."""

    def __init__(self, packages: Sequence[Distribution]) -> None:
        import os.path

        self._by_path: dict[str, tuple[str, str | None]] = {}
        real: dict[str, str] = {}
        for dist in packages:
            # The loader reports real paths (/proc/self/maps): a venv reached through a linked folder lists
            # its files under the link, so each file is known by both names (one realpath per location,
            # on this machine: the owners are looked up only for the live target).
            if dist.location not in real:
                real[dist.location] = os.path.realpath(dist.location)
            for f in dist.native_files:
                entry = (dist.name, f.sha256)
                self._by_path[_normal(str(PurePath(dist.location, f.path)))] = entry
                if real[dist.location] != dist.location:
                    self._by_path.setdefault(_normal(str(PurePath(real[dist.location], f.path))), entry)

    def owner(self, path: str) -> tuple[str, str | None]:
        """``(distribution name, RECORD sha256)``, or ``("system", None)`` for a file no RECORD lists."""
        return self._by_path.get(_normal(path), ("system", None))


def _normal(path: str) -> str:
    import os.path

    return os.path.normcase(os.path.normpath(path))


def runtimes(
    loaded: Sequence[str],
    pools: Sequence[Mapping[str, Any]] | None,
    owners: Owners,
    identities: Mapping[str, str | None],
) -> Runtimes:
    libs = []
    for path in sorted(set(loaded)):
        owner, sha = owners.owner(path)
        identity = f"sha256:{sha}" if sha else identities.get(path)
        libs.append(LoadedLibrary(path=path, owner=owner, identity=identity))
    threadpools = [
        ThreadPool(
            user_api=str(p.get("user_api")),
            internal_api=str(p.get("internal_api")),
            filepath=str(p.get("filepath")),
            version=p.get("version") if isinstance(p.get("version"), str) else None,
            num_threads=p.get("num_threads") if isinstance(p.get("num_threads"), int) else None,
            owner=owners.owner(str(p.get("filepath")))[0],
        )
        for p in (pools if pools is not None else guess_pools(loaded))
    ]
    return Runtimes(
        loaded=libs,
        threadpools=sorted(threadpools, key=lambda t: (t.user_api, t.filepath)),
        threadpoolctl=pools is not None,
    )


# Without threadpoolctl in the target, recognise the runtimes by file name (renamed copies such as
# auditwheel's libgomp-a34b3233.so.1 included).
_POOL_NAMES = (
    (re.compile(r"^libgomp[-.]"), "openmp", "openmp"),
    (re.compile(r"^libiomp5(md)?[-.]"), "openmp", "openmp"),
    (re.compile(r"^libomp(140\.x86_64)?[-.]"), "openmp", "openmp"),
    (re.compile(r"^vcomp\d+\.dll$", re.I), "openmp", "openmp"),
    (re.compile(r"openblas"), "blas", "openblas"),
    (re.compile(r"^libmkl_rt[-.]|^mkl_rt\.\d\.dll$", re.I), "blas", "mkl"),
    (re.compile(r"^libblis[-.]"), "blas", "blis"),
    (re.compile(r"^libflexiblas[-.]"), "blas", "flexiblas"),
)


def guess_pools(loaded: Sequence[str]) -> list[dict[str, Any]]:
    out = []
    for path in loaded:
        name = PurePath(path).name
        for pattern, user_api, internal_api in _POOL_NAMES:
            if pattern.search(name):
                out.append(
                    {
                        "user_api": user_api,
                        "internal_api": internal_api,
                        "filepath": path,
                        "version": None,
                        "num_threads": None,
                    }
                )
                break
    return out
