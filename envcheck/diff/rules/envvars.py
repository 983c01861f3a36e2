"""Environment variables that steer torch, its runtimes and the loader (only the allowlisted ones are
collected; credentials are redacted by the snapshot).

The catalog of what torch reads (``envcheck/data/runtime_config.json``, ``envcheck.manifest.runtime_config``)
decides what a difference is worth: a variable that makes a documented call or a load fail is an error, one
that changes numbers or what runs a warning, speed and logging info. A variable outside the catalog keeps
the prefix list below. The probe's live checks of the compilers and folders those variables name
(``Manifest.config_checks``) are ``ENV-CONFIG-TOOL`` and ``ENV-CONFIG-FOLDER``."""

from __future__ import annotations

import re
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule, Severity
from envcheck.core.redact import REDACTED, is_secret_name
from envcheck.core.remedy import Action, Manual, SetVariable, make
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.inside.environment import CALLER_SHELL
from envcheck.manifest.model import Manifest
from envcheck.manifest.remedy import remedy_text
from envcheck.manifest.runtime_config import Entry, consequence

FAMILY = "environment variables"

# Prefixes whose change alters what loads or how numbers come out: a warning. Anything else collected
# (PATH, PIP_*, LANG) is info: it matters to installers and tools, not to the running model. Used only for
# variables the catalog does not list.
_WARN_PREFIXES = (
    "OMP_",
    "MKL_",
    "KMP_",
    "GOMP_",
    "ATEN_",
    "ONEDNN_",
    "DNNL_",
    "CUBLAS_",
    "CUDA_",
    "NCCL_",
    "NVIDIA_",
    "TORCH_",
    "PYTORCH_",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "DYLD_",
    "PYTHONPATH",
    "PYTHONNOUSERSITE",
)
# The values differ between two copies of the same environment (the venv's location): never a finding.
_NEVER = frozenset({"VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV", "PWD", "OLDPWD", "HOME", "HOSTNAME"})


def _severity(name: str) -> Severity:
    return "warning" if name.startswith(_WARN_PREFIXES) else "info"


@difference_rule(
    "ENV-VAR-CHANGED",
    family=FAMILY,
    severity="warning",
    title="an environment variable that steers torch differs",
    why=(
        "The variables torch and its runtimes read change what a call does. The catalog of them "
        "(docs/runtime-config.md) grades a difference by its consequence: a documented call or load that "
        "fails (TORCH_FORCE_WEIGHTS_ONLY_LOAD, PYTORCH_JIT=0, TORCH_DEVICE_BACKEND_AUTOLOAD) is an error; "
        "changed numerics or kernels, threads and devices (ATEN_CPU_CAPABILITY, OMP_NUM_THREADS, "
        "CUDA_VISIBLE_DEVICES) a warning; speed and logging info. Others: OMP_/MKL_/KMP_, CUDA_, "
        "LD_LIBRARY_PATH and TORCH_* are warnings, the rest info."
    ),
    fm=("FM-11", "FM-14", "FM-19", "FM-23", "FM-09"),
    evidence=("pytorch/pytorch#149422", "pytorch/pytorch#37377"),
    fixes=("variable",),
)
def var_changed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.env, target.env
    # A side recorded from another interpreter's caller (--python) holds that caller's shell: PATH,
    # VIRTUAL_ENV... drift with the shell a check runs from, not with the environment.
    shell = base.env_caller is not None or target.env_caller is not None
    for name in sorted(set(b) | set(t)):
        if name in _NEVER or (shell and name.upper() in CALLER_SHELL):
            continue
        bv, tv = b.get(name), t.get(name)
        if bv == tv:
            continue
        if is_secret_name(name):
            # A manifest envcheck did not write may hold a credential under its name: the values differ,
            # and neither is shown.
            bv, tv = (None if v is None else REDACTED for v in (bv, tv))
        if name == "PATH" and bv and tv and _same_path(base, target, bv, tv):
            continue
        entry = None if is_secret_name(name) else consequence(name)
        if entry is not None:
            yield _cataloged(rule, entry, name, bv, tv, target)
            continue
        actions, note = _remedy(name, bv, tv)
        yield rule.finding(
            name,
            f"{name} is {_show(bv)} on the base and {_show(tv)} on the target.",
            remedy_text(actions, target, note=note),
            base=_show(bv),
            target=_show(tv),
            severity=_severity(name),
            actions=actions,
        )


def _what(entry: Entry) -> str:
    # "(1) makes ..." names the value that does it; the message names the value itself.
    return re.sub(r"^\([^)]*\)\s*", "", entry.what)


def _cataloged(
    rule: Rule, entry: Entry, name: str, bv: str | None, tv: str | None, target: Manifest
) -> Finding:
    """A difference in a variable the catalog knows: graded by its consequence, saying what it changes."""
    b_state, t_state = entry.state(bv), entry.state(tv)
    severity: Severity = entry.severity
    what = _what(entry)
    t_active = t_state not in (None, False)
    if b_state == t_state:
        severity = "info"
        message = (
            f"{name} is {_show(bv)} on the base and {_show(tv)} on the target, which torch reads the same "
            "way: no effect."
        )
    elif not entry.fails_on(t_active):
        # The failing side is the base's (it would fail there, not here): what runs differs, nothing breaks.
        severity = "warning"
        state = f"{name}={_show(tv)}" if t_active else f"{name} {'unset' if tv is None else _show(tv)}"
        message = (
            f"{state} on the target, {_show(bv)} on the base: {name} {what} ({entry.consequence} on the "
            "side that lacks it; here it changes what runs)."
        )
    elif t_active:
        where = "where the base leaves it unset" if bv is None else f"where the base has {_show(bv)}"
        message = f"{name}={_show(tv)} on the target {what}, {where} ({entry.consequence})."
    else:
        now = "unset" if tv is None else _show(tv)
        message = (
            f"{name} is {now} on the target, where on the base {name}={_show(bv)} {what}: the target runs "
            f"without that ({entry.consequence})."
        )
    actions = (_set_like(name, bv),)
    return rule.finding(
        name,
        message,
        remedy_text(actions, target, note=_AS_ON_BASE),
        base=_show(bv),
        target=_show(tv),
        severity=severity,
        actions=actions,
    )


_AS_ON_BASE = "in the target's service environment, as on the base (or change both)."


def _set_like(name: str, base_value: str | None) -> Action:
    """The target given the base's setting of ``name``: unset where the base runs without it, else the
    base's value (a manual step when the manifest holds it redacted, or it cannot be written)."""
    if base_value is not None and REDACTED in base_value:
        return Manual(
            text=f"Set {name} on the target as on the base (the manifest holds its value redacted)."
        )
    return make(lambda: SetVariable(name=name, value=base_value), f"set {name} as on the base")


# Search paths: a value the target does not set is nothing to change there; what the base's value made
# the base load is named by the findings about those libraries or packages.
_SEARCH_PATHS = frozenset(
    {"LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "PYTHONPATH"}
)


def _remedy(name: str, base: str | None, target: str | None) -> tuple[tuple[Action, ...], str]:
    """What to do about ``name`` differing, and a note; never "set it" or "remove it" on a side that does
    not set it. A search path is never copied from the base: its folders are the base machine's."""
    if target is None and name in _SEARCH_PATHS:
        return (), (
            "Nothing to change on the target, which does not set it; if the target lacks something the "
            "base's value gave the base, the findings about those libraries or packages name what to install."
        )
    if base is None:
        return (make(lambda: SetVariable(name=name), f"unset {name}"),), (
            "in the target's service environment (the base runs without it), or set it on both."
        )
    if name in _SEARCH_PATHS or name == "PATH":
        return (
            Manual(
                text=f"Set {name} on the target to the target's own folders for what the base's value "
                f"({_show(base)}) gives the base"
            ),
        ), ""
    return (_set_like(name, base),), _AS_ON_BASE


def _show(value: str | None) -> str:
    return "unset" if value is None else repr(value) if len(value) <= 120 else repr(value[:117] + "...")


def _same_path(base: Manifest, target: Manifest, b: str, t: str) -> bool:
    """PATH entries compared with each side's venv prefix replaced (an activated venv puts its bin first)."""
    bp, tp = base.python.prefix.rstrip("/"), target.python.prefix.rstrip("/")
    return b.replace(bp, "{prefix}") == t.replace(tp, "{prefix}")


# --- what the configuration names, checked live in the target ----------------------------------------------


# Variables whose documented call runs only on a torch built for a GPU: nvcc's host compiler (``-ccbin``,
# for the CUDA sources of torch.utils.cpp_extension) and Triton's assembler and cache (torch.compile's GPU
# kernels). On a CPU build no call runs what they name: torch.compile's C++ kernels run CXX.
_GPU_ONLY = frozenset({"CC", "TRITON_PTXAS_PATH", "TRITON_CACHE_DIR"})


def _cpu_build(m: Manifest) -> bool:
    static = m.torch.static
    return static is not None and static.cuda is None and static.hip is None


def _config_use(variable: str, entry: Entry | None, m: Manifest) -> tuple[Severity, str]:
    """The severity of a failed check of ``variable`` and what it breaks: an error where the catalog names
    a call that runs the tool or writes to the folder and that call can run here, a warning otherwise (only
    what the variable steers is lost: debug output, a GPU-only path). A CPU build's report so leads with the
    compiler torch.compile runs (CXX), not with nvcc's host compiler (CC)."""
    if entry is None or not entry.used_by:
        return "warning", ""
    if variable in _GPU_ONLY and _cpu_build(m):
        return "warning", f" {entry.used_by} uses it, which this torch, built for the CPU only, never runs."
    return "error", ""


def _unset(variable: str, note: str) -> tuple[tuple[Action, ...], str]:
    return (make(lambda: SetVariable(name=variable), f"unset {variable}"),), note


@single_rule(
    "ENV-CONFIG-TOOL",
    family=FAMILY,
    severity="error",
    title="a compiler a configuration variable names is missing or does not run",
    why=(
        "torch.compile's C++ kernels on the CPU run the compiler CXX names, torch.utils.cpp_extension runs "
        "CXX and (for CUDA sources) CC, Triton runs TRITON_PTXAS_PATH: a compiler that is not there or does "
        "not answer --version makes those calls fail at their first compile, long after start-up. An error "
        "where the catalog (docs/runtime-config.md) names the call that runs it and that call can run (CC "
        "and Triton's tools only with a GPU build of torch), a warning otherwise."
    ),
    fixes=("variable",),
)
def config_tool(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for check in m.config_checks or ():
        if check.kind != "compiler" or check.ok:
            continue
        entry = consequence(check.variable)
        severity, idle = _config_use(check.variable, entry, m)
        used = idle or (f" {entry.used_by} runs it, so that call fails." if entry and entry.used_by else "")
        actions, note = _unset(
            check.variable,
            f"where the application runs: torch then uses its default compiler; or install the compiler, or "
            f"point {check.variable} at one that answers --version.",
        )
        yield rule.finding(
            check.variable,
            f"{check.variable}={_show(check.value)} names a compiler: {check.detail or 'it fails'}.{used}",
            remedy_text(actions, m, note=note),
            target=_show(check.value),
            severity=severity,
            actions=actions,
        )


@single_rule(
    "ENV-CONFIG-FOLDER",
    family=FAMILY,
    severity="error",
    title="a folder a configuration variable names cannot be written",
    why=(
        "torch.compile writes its kernels under TORCHINDUCTOR_CACHE_DIR (Triton's under TRITON_CACHE_DIR), "
        "torch.utils.cpp_extension builds under TORCH_EXTENSIONS_DIR, torch.hub downloads under TORCH_HOME, "
        "and import torch opens TORCH_LOGS_OUT: a folder that does not exist and cannot be created, or "
        "cannot be written, makes that call fail. An error where the catalog (docs/runtime-config.md) names "
        "the call and that call can run (Triton's cache only with a GPU build of torch), a warning otherwise."
    ),
    fixes=("variable",),
)
def config_folder(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for check in m.config_checks or ():
        if check.kind != "folder" or check.ok:
            continue
        entry = consequence(check.variable)
        severity, idle = _config_use(check.variable, entry, m)
        used = idle or (
            f" {entry.used_by} writes there, so that call fails." if entry and entry.used_by else ""
        )
        actions, note = _unset(
            check.variable,
            f"where the application runs: torch then uses its default; or point {check.variable} at a folder "
            "the service can write.",
        )
        yield rule.finding(
            check.variable,
            f"{check.variable}={_show(check.value)}: {check.detail or 'cannot be written'}.{used}",
            remedy_text(actions, m, note=note),
            target=_show(check.value),
            severity=severity,
            actions=actions,
        )
