"""The floating-point mode of one environment: flush-to-zero / denormals-are-zero after ``import torch``."""

from __future__ import annotations

from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.core.redact import REDACTED
from envcheck.core.remedy import Action, EditFile, Manual, SetVariable, make
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.model import FpControl, Manifest
from envcheck.manifest.remedy import remedy_text
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
    fixes=("variable", "edit"),
)
def ftz_daz(rule: Rule, manifest: Manifest) -> Iterator[Finding]:
    runtime = manifest.torch.runtime
    mode = runtime.fp_control if runtime is not None else None
    if mode is None or not mode.flushes:
        return
    who, remedy = fp_setter(mode)
    actions = _actions(mode, manifest)
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
        # fp_setter's sentence names the start-up file to edit; a variable's command comes first.
        remedy_text(actions, manifest, note=f"where the application runs. {remedy}")
        if any(isinstance(a, SetVariable) for a in actions)
        else remedy,
        target=state,
        caused_by=f"ENV-SITECUSTOMIZE:{setter}" if setter else None,  # the start-up module that set it
        actions=actions,
    )


def _actions(mode: FpControl, m: Manifest) -> tuple[Action, ...]:
    """What ``fp_setter`` says to change, as actions: the start-up files that call
    torch.set_flush_denormal edited, or LD_PRELOAD set without the -ffast-math libraries it names (the
    rest kept, in order). Nothing where no one file or variable is the setter (a library torch links)."""
    if mode.customize:
        return tuple(_edit(path) for path in mode.customize)
    fast = set(mode.fast_math_libraries)
    if not fast & set(mode.preloaded):
        return ()
    value = m.env.get("LD_PRELOAD")
    # The probe resolved each entry of LD_PRELOAD in order (spaces or colons: glibc reads both).
    entries = (value or "").replace(":", " ").split()
    if value is None or REDACTED in value or len(entries) != len(mode.preloaded):
        return (Manual(text=f"take {', '.join(sorted(fast & set(mode.preloaded)))} out of LD_PRELOAD"),)
    kept = [entry for entry, real in zip(entries, mode.preloaded, strict=True) if real not in fast]
    return (make(lambda: SetVariable(name="LD_PRELOAD", value=":".join(kept) or None), "set LD_PRELOAD"),)


def _edit(path: str) -> Action:
    change = "remove its torch.set_flush_denormal call"
    return make(lambda: EditFile(path=path, change=change), f"edit {path}: {change}")
