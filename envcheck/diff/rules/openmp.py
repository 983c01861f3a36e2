"""OpenMP and BLAS runtimes: duplicates in one process, the masking variable, vendor and version changes."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.manifest.identity import aliases, canonical
from envcheck.manifest.model import Manifest
from envcheck.manifest.query import library_key, omp_family

FAMILY = "OpenMP and BLAS runtimes"


def openmp_runtimes(m: Manifest) -> dict[str, str]:
    """Distinct OpenMP runtimes in the process -> family, from threadpoolctl or from the loaded list: one
    per loaded file by its canonical real path (both lists give real paths; the manifest's aliases join a
    merged /usr), so one file named twice is one runtime, while two files of the same bytes both mapped
    stay two (each has its own pool), named by the first spelling seen."""
    if m.runtimes is None:
        return {}
    table = aliases(m)
    found: dict[str, tuple[str, str]] = {}
    paths = [(pool.filepath, pool.user_api == "openmp") for pool in m.runtimes.threadpools]
    for path, openmp in [*paths, *((lib.path, True) for lib in m.runtimes.loaded)]:
        family = omp_family(path)
        if openmp and family:
            found.setdefault(canonical(path, table), (path, family))
    return dict(found.values())


def _static_runtimes(m: Manifest) -> dict[str, str]:
    """The native tree's OpenMP runtimes -> family, one per file name: two files of one name (torch's
    libgomp.so.1 and a copy on LD_LIBRARY_PATH) are one runtime, since the loader loads one file of a name;
    the one named is the file the tree's libraries resolve that name to (the loader's pick)."""
    assert m.native is not None and m.native.openmp
    names = {"gnu": "GNU", "intel": "Intel", "llvm": "LLVM", "msvc": "MSVC"}
    resolved = {dep.target for n in m.native.nodes or [] for dep in n.dependencies or [] if dep.target}
    by_name: dict[str, list[tuple[bool, str, str]]] = {}
    for o in m.native.openmp:
        # The file the tree resolves the name to sorts first; then by path (deterministic).
        by_name.setdefault(library_key(o.path).lower(), []).append((o.key not in resolved, o.path, o.family))
    return {path: names[family] for _, path, family in (min(files) for files in by_name.values())}


@single_rule(
    "ENV-OPENMP-MULTIPLE",
    family=FAMILY,
    severity="error",
    title="two OpenMP runtimes loaded in one process",
    why=(
        "'OMP: Error #15 … already initialized' aborts the process; Intel + LLVM on Linux crashes or "
        "deadlocks; two GNU runtimes oversubscribe the CPU (three times slower)."
    ),
    fm=("FM-04", "FM-14"),
    evidence=(
        "pytorch/pytorch#44282",
        "pytorch/pytorch#191367",
        "pytorch/pytorch#98836",
        "pytorch/pytorch#72400",
    ),
)
def openmp_multiple(rule: Rule, m: Manifest) -> Iterator[Finding]:
    runtimes = openmp_runtimes(m)
    static = False
    if m.runtimes is None and m.native is not None and m.native.openmp:
        # No live process to ask (the probe crashed, often of this very abort): the native tree's inventory
        # says which runtimes the closure would load.
        runtimes = _static_runtimes(m)
        static = True
    if len(runtimes) < 2:
        return
    families = sorted(set(runtimes.values()))
    only_gnu = families == ["GNU"]
    yield rule.finding(
        "OpenMP",
        f"{len(runtimes)} OpenMP runtimes are {'in the native tree' if static else 'loaded'} "
        f"({', '.join(families)}): "
        + ", ".join(sorted(runtimes))
        + (
            ". Two GNU runtimes each keep a worker pool, and an idle pool's threads spin on the cores the "
            "other needs: measured on 2 cores (scikit-learn's copy beside torch's), one more OpenMP thread "
            "and loops alternating the two 40-100x slower. Import torch first (its libgomp is loaded "
            "RTLD_GLOBAL, so modules imported after it use its pool) or set OMP_WAIT_POLICY=PASSIVE."
            if only_gnu
            else ". Mixing these initialises OpenMP twice: 'OMP: Error #15', crashes or deadlocks."
        ),
        "Keep one OpenMP family in the process: do not mix conda MKL numpy with pip torch (all pip or all "
        "conda, or `conda install nomkl`), align faiss/scikit-learn builds with torch. Never ship "
        "KMP_DUPLICATE_LIB_OK=TRUE.",
        target=", ".join(sorted(runtimes)),
        severity="warning" if only_gnu or (static and len(families) == 1) else None,
    )


@single_rule(
    "ENV-KMP-DUPLICATE-LIB-OK",
    family=FAMILY,
    severity="warning",
    title="KMP_DUPLICATE_LIB_OK is set",
    why=(
        "It silences Intel's Error #15 instead of fixing the duplicate OpenMP runtime: crashes, deadlocks "
        "and silently wrong results follow."
    ),
    fm=("FM-04",),
    evidence=("pytorch/pytorch#78490", "pytorch/pytorch#193520", "pytorch/pytorch#149201"),
)
def kmp_duplicate(rule: Rule, m: Manifest) -> Iterator[Finding]:
    value = m.env.get("KMP_DUPLICATE_LIB_OK")
    if value is None or value.strip().lower() in ("", "0", "false", "no"):
        return
    yield rule.finding(
        "KMP_DUPLICATE_LIB_OK",
        f"KMP_DUPLICATE_LIB_OK={value} masks a second OpenMP runtime rather than removing it.",
        "Unset it and remove the duplicate runtime (see ENV-OPENMP-MULTIPLE); threadpoolctl sets it at "
        "import, so import torch first.",
        target=value,
    )


def _runtime_set(m: Manifest) -> dict[str, str]:
    """user_api -> sorted internal APIs with versions (``openblas 0.3.27``)."""
    if m.runtimes is None:
        return {}
    out: dict[str, set[str]] = {}
    for pool in m.runtimes.threadpools:
        fam = omp_family(pool.filepath) if pool.user_api == "openmp" else None
        name = f"{pool.internal_api} ({fam})" if fam else pool.internal_api
        out.setdefault(pool.user_api, set()).add(name)
    return {k: ", ".join(sorted(v)) for k, v in out.items()}


@difference_rule(
    "ENV-BLAS-RUNTIME",
    family=FAMILY,
    severity="warning",
    title="the BLAS or OpenMP runtime family differs",
    why="Another BLAS (MKL vs OpenBLAS) or OpenMP changes float results, speed and thread behaviour.",
    fm=("FM-14", "FM-18"),
    evidence=("pytorch/pytorch#37377", "pytorch/pytorch#123097"),
)
def blas_runtime(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = _runtime_set(base), _runtime_set(target)
    if not b or not t:
        return
    for api in sorted(set(b) | set(t)):
        bv, tv = b.get(api, "none"), t.get(api, "none")
        if bv != tv:
            yield rule.finding(
                f"{api} runtime",
                f"The {api} runtime is {bv} on the base and {tv} on the target.",
                "Install the same builds of torch and numpy (same index or channel) on both sides.",
                base=bv,
                target=tv,
            )


@difference_rule(
    "ENV-MKL-ONEDNN-VERSION",
    family=FAMILY,
    severity="warning",
    title="torch's MKL or oneDNN version differs",
    why="oneDNN and MKL pick kernels by version and CPUID: CPU results drift beyond tight tolerances.",
    fm=("FM-18", "FM-14"),
    evidence=("pytorch/pytorch#18218", "pytorch/pytorch#134908", "pytorch/pytorch#123097"),
)
def mkl_onednn(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None:
        return
    for name, b, t in (
        ("MKL", br.mkl_version, tr.mkl_version),
        ("oneDNN", br.onednn_version, tr.onednn_version),
    ):
        if b != t and (b or t):
            yield rule.finding(
                f"torch {name}",
                f"torch uses {name} {b or 'none'} on the base and {t or 'none'} on the target: CPU "
                "numerics may drift.",
                "Use the same torch build on both sides, and compare outputs with `envcheck verify`.",
                base=b or "none",
                target=t or "none",
            )
