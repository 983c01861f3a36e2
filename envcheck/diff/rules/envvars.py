"""Environment variables that steer torch, its runtimes and the loader (only the allowlisted ones are
collected; credentials are redacted by the snapshot)."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule, Severity
from envcheck.core.redact import REDACTED, is_secret_name
from envcheck.diff.rules.base import difference_rule
from envcheck.inside.environment import CALLER_SHELL
from envcheck.manifest.model import Manifest

FAMILY = "environment variables"

# Prefixes whose change alters what loads or how numbers come out: a warning. Anything else collected
# (PATH, PIP_*, LANG) is info: it matters to installers and tools, not to the running model.
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
        "OMP_/MKL_/KMP_ thread and affinity settings, ATEN_CPU_CAPABILITY, CUBLAS_WORKSPACE_CONFIG, "
        "CUDA_VISIBLE_DEVICES, LD_LIBRARY_PATH and TORCH_* flags change what loads and what runs."
    ),
    fm=("FM-11", "FM-14", "FM-19", "FM-23", "FM-09"),
    evidence=("pytorch/pytorch#149422", "pytorch/pytorch#37377"),
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
        yield rule.finding(
            name,
            f"{name} is {_show(bv)} on the base and {_show(tv)} on the target.",
            _remedy(name, bv, tv),
            base=_show(bv),
            target=_show(tv),
            severity=_severity(name),
        )


# Search paths: a value the target does not set is nothing to change there; what the base's value made
# the base load is named by the findings about those libraries or packages.
_SEARCH_PATHS = frozenset(
    {"LD_LIBRARY_PATH", "LD_PRELOAD", "DYLD_LIBRARY_PATH", "DYLD_INSERT_LIBRARIES", "PYTHONPATH"}
)


def _remedy(name: str, base: str | None, target: str | None) -> str:
    """What to do about ``name`` differing; never "set it" or "remove it" on a side that does not set it."""
    if target is None and name in _SEARCH_PATHS:
        return (
            "Nothing to change on the target, which does not set it; if the target lacks something the "
            "base's value gave the base, the findings about those libraries or packages name what to install."
        )
    if base is None:
        return (
            f"Unset {name} in the target's service environment (the base runs without it), or set it on both."
        )
    return f"Set {name} the same way in the target's service environment, or remove it from both."


def _show(value: str | None) -> str:
    return "unset" if value is None else repr(value) if len(value) <= 120 else repr(value[:117] + "...")


def _same_path(base: Manifest, target: Manifest, b: str, t: str) -> bool:
    """PATH entries compared with each side's venv prefix replaced (an activated venv puts its bin first)."""
    bp, tp = base.python.prefix.rstrip("/"), target.python.prefix.rstrip("/")
    return b.replace(bp, "{prefix}") == t.replace(tp, "{prefix}")
