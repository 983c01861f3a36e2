"""The floating-point mode of one environment: flush-to-zero / denormals-are-zero after ``import torch``."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.model import Manifest
from envcheck.verify.fp_mode import describe_fp_mode, fp_setter

FAMILY = "numerics switches"


@single_rule(
    "ENV-FTZ-DAZ",
    family=FAMILY,
    severity="warning",
    title="flush-to-zero or denormals-are-zero is on after import torch",
    why=(
        "The CPU's floating-point control turns subnormal numbers into zero for every thread of the process. "
        "A library built with -ffast-math sets it as soon as it is loaded (GCC's crtfastmath), whatever the "
        "application asked; torch.set_flush_denormal(True) sets it on purpose. Results near zero change, "
        "and goldens recorded without it no longer match."
    ),
    fm=("FM-18",),
    evidence=("https://gcc.gnu.org/bugzilla/show_bug.cgi?id=55522",),
)
def ftz_daz(rule: Rule, manifest: Manifest) -> Iterator[Finding]:
    runtime = manifest.torch.runtime
    mode = runtime.fp_control if runtime is not None else None
    if mode is None or not mode.flushes:
        return
    who, remedy = fp_setter(mode)
    state = describe_fp_mode(mode)
    both = mode.flush_to_zero and mode.denormals_are_zero
    startup = manifest.python.startup
    setter = next(
        (
            c.name
            for c in (startup.customize if startup is not None else [])
            if c.path in (mode.customize or [])
        ),
        None,
    )
    yield rule.finding(
        "floating-point mode",
        f"{state} {'are' if both else 'is'} on after import torch, {who}: subnormal floats become zero.",
        remedy,
        target=state,
        caused_by=f"ENV-SITECUSTOMIZE:{setter}" if setter else None,  # the start-up module that set it
    )
