"""Interpreter and platform: Python version, OS and architecture, glibc, CPU instruction sets."""

from __future__ import annotations

import re
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.diff.rules.loader import loader_cause, loader_fix
from envcheck.manifest.identity import aliases, canonical, foreign_libpython
from envcheck.manifest.model import Manifest
from envcheck.manifest.query import release

FAMILY = "interpreter and platform"


@difference_rule(
    "ENV-PYTHON-VERSION",
    family=FAMILY,
    severity="error",
    title="Python version or ABI differs",
    why=(
        "Compiled wheels are built per Python minor (cp311) and implementation: they do not import under "
        "another one. A patch release difference is info."
    ),
    fm=("FM-24", "FM-03"),
    evidence=("pytorch/pytorch#144024", "pytorch/pytorch#9263"),
)
def python_version(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.python, target.python
    b_abi = (b.implementation, b.pointer_bits, b.abi_flags)
    t_abi = (t.implementation, t.pointer_bits, t.abi_flags)
    if b_abi != t_abi:
        yield rule.finding(
            "python ABI",
            "The interpreters differ in implementation, pointer size or ABI flags: no compiled wheel of "
            "one loads in the other.",
            "Use the same Python build on the target.",
            base=f"{b.implementation} {b.pointer_bits}-bit {b.abi_flags or '-'}",
            target=f"{t.implementation} {t.pointer_bits}-bit {t.abi_flags or '-'}",
        )
    if b.version == t.version:
        return
    minor = release(b.version, 2) != release(t.version, 2)
    # The version a process reports is its libpython's: when the target's executable was built as the
    # base's version but runs another libpython, that library is the cause, not another install.
    foreign = foreign_libpython(target)
    cause = (
        f"ENV-PYTHON-LIBPYTHON:{foreign}"
        if foreign is not None and foreign_libpython(base) is None and t.build_version in (None, b.version)
        else None
    )
    yield rule.finding(
        "python",
        f"Python {b.version} on the base, {t.version} on the target"
        + (": every compiled wheel must be reinstalled for the new minor." if minor else ".")
        + (f" The target's executable was built as {t.build_version}." if cause and t.build_version else ""),
        (
            "Run the target's interpreter with its own libpython (see ENV-PYTHON-LIBPYTHON)."
            if cause
            else f"Use Python {b.version} on the target, or rebuild the environment for {t.version} from the "
            "lock file."
        ),
        base=b.version,
        target=t.version,
        severity=None if minor else "info",
        caused_by=cause,
    )


@single_rule(
    "ENV-PYTHON-LIBPYTHON",
    family=FAMILY,
    severity="error",
    title="the interpreter runs a libpython other than its own",
    why=(
        "An executable built with --enable-shared loads libpythonX.Y.so through the loader's search path: "
        "LD_LIBRARY_PATH naming a distribution's folder puts that build (3.11.2) under an installation "
        "of another (3.11.7). sys.version then lies, and stdlib extension modules built against the "
        "installation fail with 'undefined symbol' (import ssl)."
    ),
    fm=("FM-11", "FM-24"),
)
def python_library(rule: Rule, m: Manifest) -> Iterator[Finding]:
    name = foreign_libpython(m)
    if name is None:
        return
    py = m.python
    loaded = py.loaded_library or name
    errors = py.stdlib_errors or {}
    own = f" instead of its own {py.own_library}" if py.own_library else ""
    versions = (
        f" (Python {py.version}; the installation is {py.build_version})"
        if py.build_version and py.build_version != py.version
        else ""
    )
    broken = (
        f" Stdlib modules fail to import: {', '.join(f'{k} ({v})' for k, v in sorted(errors.items()))}."
        if errors
        else ""
    )
    path = canonical(loaded, aliases(m))
    fix = loader_fix(m, path).replace("for this application", "for this interpreter")
    yield rule.finding(
        name,
        f"{py.executable} runs {loaded}{own}{versions}.{broken}",
        fix[:1].upper() + fix[1:] + " (or run the interpreter whose library that is).",
        base=py.own_library or py.build_version,
        target=loaded,
        caused_by=loader_cause(m, path.rsplit("/", 1)[0], path),
    )


@single_rule(
    "ENV-PYTHON-STDLIB",
    family=FAMILY,
    severity="warning",
    title="standard-library extension modules fail to import",
    why=(
        "A stdlib module that does not import (_ssl without its libssl, _ctypes, _sqlite3) breaks every "
        "package that needs it: pip over HTTPS, torch.hub downloads, ctypes-based loaders."
    ),
)
def stdlib_broken(rule: Rule, m: Manifest) -> Iterator[Finding]:
    errors = m.python.stdlib_errors or {}
    if not errors or foreign_libpython(m) is not None:
        return  # with a foreign libpython, ENV-PYTHON-LIBPYTHON names them with their cause
    yield rule.finding(
        "python stdlib",
        "Standard-library modules fail to import: "
        + "; ".join(f"{k}: {v}" for k, v in sorted(errors.items()))
        + ".",
        "Install the system libraries they link (libssl, libffi, libsqlite3) or reinstall the interpreter.",
        target=", ".join(sorted(errors)),
    )


@difference_rule(
    "ENV-PLATFORM-OS",
    family=FAMILY,
    severity="error",
    title="operating system or CPU architecture differs",
    why=(
        "Native wheels are per OS and architecture; features differ by platform (no NCCL on Windows, spawn "
        "instead of fork, no torch.compile / FlashAttention on Windows, no CUDA on macOS)."
    ),
    fm=("FM-24", "FM-16", "FM-22", "FM-02"),
    evidence=("pytorch/pytorch#114602", "pytorch/pytorch#136361"),
)
def platform_os(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.platform, target.platform
    if b is None or t is None:
        return
    if (b.system, b.machine) != (t.system, t.machine):
        yield rule.finding(
            "platform",
            f"{b.system} {b.machine} on the base, {t.system} {t.machine} on the target: another set of "
            "wheels, loaders and features.",
            "Validate on the target platform (envcheck gate there) and install the wheels built for it.",
            base=f"{b.system} {b.machine}",
            target=f"{t.system} {t.machine}",
        )


@difference_rule(
    "ENV-PLATFORM-LIBC",
    family=FAMILY,
    severity="warning",
    title="the C library differs (older glibc, or musl)",
    why="Wheels built for a newer glibc fail to import: 'version GLIBC_2.28 not found'.",
    fm=("FM-13",),
    evidence=("pytorch/pytorch#156215", "mlverse/torch#1414"),
)
def platform_libc(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.platform, target.platform
    if b is None or t is None or b.libc == t.libc or not t.libc.name:
        return
    older = b.libc.name == t.libc.name and (release(t.libc.version, 2) or (0, 0)) < (
        release(b.libc.version, 2) or (0, 0)
    )
    other = b.libc.name != t.libc.name
    yield rule.finding(
        "libc",
        f"{b.libc.name} {b.libc.version} on the base, {t.libc.name} {t.libc.version} on the target"
        + (": wheels built for the base may need symbols the target lacks." if older or other else "."),
        "Use a base image with at least the base's glibc (manylinux_2_28 wheels need glibc 2.28+).",
        base=f"{b.libc.name} {b.libc.version}",
        target=f"{t.libc.name} {t.libc.version}",
        severity="error" if other else None if older else "info",
    )


_MANYLINUX = re.compile(r"manylinux_(\d+)_(\d+)_")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def _wheel_glibc(tags: list[str]) -> tuple[int, int] | None:
    """The lowest glibc any of a wheel's tags accepts (a wheel tagged for several takes the smallest)."""
    found: list[tuple[int, int]] = []
    for tag in tags:
        match = _MANYLINUX.search(tag)
        if match:
            found.append((int(match.group(1)), int(match.group(2))))
            continue
        for legacy, version in _LEGACY.items():
            if f"-{legacy}_" in tag:
                found.append(version)
    return min(found) if found else None


@single_rule(
    "ENV-GLIBC-TOO-OLD",
    family=FAMILY,
    severity="error",
    title="an installed wheel needs a newer glibc than the machine has",
    why="'version `GLIBC_2.28` not found (required by …/libtorch_python.so)' at import.",
    fm=("FM-13",),
    evidence=("pytorch/pytorch#156215", "pytorch/pytorch#123649", "pytorch/pytorch#150724"),
)
def glibc_too_old(rule: Rule, m: Manifest) -> Iterator[Finding]:
    p = m.platform
    if p is None or p.libc.name != "glibc":
        return
    have = release(p.libc.version, 2)
    if have is None:
        return
    for dist in sorted(m.packages, key=lambda d: d.name.lower()):
        need = _wheel_glibc(dist.wheel_tags)
        if need is not None and need > (have[0], have[1]):
            yield rule.finding(
                dist.name,
                f"{dist.name} {dist.version} is a manylinux_{need[0]}_{need[1]} wheel; this machine has "
                f"glibc {p.libc.version}: its native code fails to load.",
                f"Use a base OS with glibc ≥ {need[0]}.{need[1]}, or an older {dist.name} built for this "
                "glibc.",
                base=f"glibc {need[0]}.{need[1]}",
                target=f"glibc {p.libc.version}",
            )


# The instruction sets torch's CPU dispatch and bundled libraries (oneDNN, MKL, FBGEMM) use.
ISA_THAT_MATTERS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
    "asimd",
    "sve",
)
_BASELINE = ("avx", "avx2", "fma", "sse4_2")


@difference_rule(
    "ENV-CPU-ISA",
    family=FAMILY,
    severity="warning",
    title="the target CPU lacks instruction sets the base CPU has",
    why=(
        "Other kernels run (numerics drift, FBGEMM needs AVX2); builds that leak AVX/AVX2/AVX-512 outside "
        "dispatch die with 'Illegal instruction'. The CPU model alone never matters."
    ),
    fm=("FM-15", "FM-18", "FM-21"),
    evidence=(
        "pytorch/pytorch#37577",
        "pytorch/pytorch#43300",
        "pytorch/pytorch#145702",
        "pytorch/pytorch#155423",
    ),
)
def cpu_isa(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.platform, target.platform
    if b is None or t is None or not t.cpu.isa_flags:
        return
    lost = [f for f in ISA_THAT_MATTERS if f in b.cpu.isa_flags and f not in t.cpu.isa_flags]
    if not lost:
        return
    baseline = [f for f in lost if f in _BASELINE]
    yield rule.finding(
        "CPU instruction sets",
        f"The target CPU lacks {', '.join(lost)}"
        + (
            ": torch's AVX2 kernels, FBGEMM and builds with leaked AVX code crash with 'Illegal instruction'."
            if baseline
            else ": other (slower) kernels run and float results drift."
        ),
        "Run on a CPU with the same instruction sets (in a VM, pass the host CPU through: `-cpu host`), and "
        "compare outputs with `envcheck verify`.",
        base=", ".join(lost),
        target="missing",
        severity="error" if baseline else None,
    )
