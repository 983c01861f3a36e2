"""The words for a floating-point mode (``FpControl``): what is on, and who set it with what to do about
it. Shared by the smoke suite's VERIFY-FP-MODE and the single-environment rule ENV-FTZ-DAZ, so the two say
the same thing about the same record."""

from __future__ import annotations

from envcheck.manifest.model import FpControl


def describe_fp_mode(mode: FpControl) -> str:
    """``flush-to-zero and denormals-are-zero`` / one of them / ``IEEE subnormals`` (neither)."""
    on = [
        name
        for name, flag in (
            ("flush-to-zero", mode.flush_to_zero),
            ("denormals-are-zero", mode.denormals_are_zero),
        )
        if flag
    ]
    return " and ".join(on) if on else "IEEE subnormals"


def fp_setter(mode: FpControl) -> tuple[str, str]:
    """Who set the mode, as far as the record tells, and what to do about it. A start-up module
    (sitecustomize) that calls torch.set_flush_denormal is named before any library: a library's
    ``set_fast_math`` symbol says it could set the mode, not that it did."""
    if mode.customize:
        files = ", ".join(mode.customize)
        return (
            f"set at start-up by {files}, which calls torch.set_flush_denormal (Python's site module runs "
            "it before the application)",
            f"Remove the torch.set_flush_denormal call from {files} (or the file itself), or record the "
            "goldens with the mode on if the application wants it.",
        )
    preloaded = [p for p in mode.fast_math_libraries if p in mode.preloaded]
    if preloaded:
        libs = ", ".join(preloaded)
        return (
            f"set at start-up by {libs} from LD_PRELOAD, built with -ffast-math (it carries GCC's "
            "set_fast_math, which turns the mode on when the library is loaded)",
            f"Take {libs} out of LD_PRELOAD, or rebuild it without -ffast-math (GCC 13 and newer no longer "
            "link set_fast_math into shared libraries).",
        )
    if mode.fast_math_libraries:
        libs = ", ".join(mode.fast_math_libraries)
        when = f" ({mode.set_when})" if mode.set_when else ""
        return (
            f"set{when} by a library built with -ffast-math: {libs} carries GCC's set_fast_math",
            f"Rebuild {libs} without -ffast-math (GCC 13 and newer no longer link set_fast_math into "
            "shared libraries), or keep it out of this process.",
        )
    if mode.set_when == "import torch":
        return (
            "turned on while importing torch (torch.set_flush_denormal(True), or a library torch loaded)",
            "Find the code that calls torch.set_flush_denormal(True) or the library that sets the mode; "
            "if the application wants it, record the goldens with it on.",
        )
    if mode.set_when == "start-up":
        where = f" (LD_PRELOAD: {', '.join(mode.preloaded)})" if mode.preloaded else ""
        return (
            f"already on at start-up{where}, by a library whose symbols do not say it",
            "Look for a library built with -ffast-math among the preloaded or linked ones; if the "
            "application wants the mode, record the goldens with it on.",
        )
    return (
        "set by something the record does not name",
        "Find the library built with -ffast-math or the call of torch.set_flush_denormal(True).",
    )
