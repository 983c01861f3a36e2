"""Turn the probe's raw JSON into manifest sections. Pure functions: no I/O beyond what is passed in.

The probe's output is untrusted in the same way a manifest is (it comes from another interpreter, maybe
another Python version), so every section goes through ``codec.decode`` and a malformed answer becomes a
``ManifestError`` naming the location, never a ``KeyError``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from envcheck.manifest.codec import decode
from envcheck.manifest.model import (
    Distribution,
    GpuDriver,
    LoadedLibrary,
    PlatformInfo,
    PythonInfo,
    Runtimes,
    ThreadPool,
    TorchInfo,
    TorchRuntime,
    TorchStatic,
)

SOURCE = "probe output"


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

    version = tuple(int(p) for p in info.version.split(".")[:2])
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
    if isinstance(static_raw, Mapping):
        static = decode(
            TorchStatic,
            {
                **static_raw,
                "variant": torch_variant(
                    static_raw.get("version"), static_raw.get("cuda"), static_raw.get("hip")
                ),
            },
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
        self._by_path: dict[str, tuple[str, str | None]] = {}
        for dist in packages:
            for f in dist.native_files:
                full = str(PurePath(dist.location, f.path))
                self._by_path[_normal(full)] = (dist.name, f.sha256)

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
