"""Linking consequences to their root causes: one ``LD_LIBRARY_PATH`` and the libraries it moved, one torch
variant and the CUDA stack it drops, one library resolved elsewhere and its echoes.

``link(findings)`` is pure: it returns the findings, each consequence with ``caused_by`` set to the ``key``
of its root cause. Reports lead with root causes and fold their consequences under them. A finding is
linked only when the cause explains it: an unexplained finding stays a root.

Three steps:

1. **Echoes fold into what they echo.** Some rules see one fact from two sides: the static tree and the live
   process, one environment and the difference of two. When a finding of ``ECHOES`` meets, on the same
   subject (and machine), the finding that says the same thing better, it is dropped: a reader sees the
   move of libgomp once, not as SHADOWED + RESOLVED-ELSEWHERE + LOADED-FROM + REQUIRES. Findings that named
   a dropped echo as their cause name what it echoed instead.
2. **Causes are checked.** A cause that is absent (the policy ignored it, or a single-environment rule named
   the variable a diff would report) is dropped: the finding becomes a root. A variable named as the
   cause of a file's move must name that file's folder (or the file, for LD_PRELOAD) in its new value and
   not in its old one.
3. **Chains are flattened**: a consequence of a consequence names the root, so reports fold one level.

Before step 2, **an import of torch that failed is linked to what explains it** (``_import_causes``): the
smoke suite's ``import_torch`` failure and its ``VERIFY-IMPORT`` of torch to the probe's
(``ENV-PROBE-FAILED`` on ``import torch``: one failure, seen three times), and that to the first finding
of ``IMPORT_CAUSES`` that explains it (another torch tree first on sys.path; a native library of the
import that is missing, too old or replaced and that the error names). A ``VERIFY-FP-MODE`` that names a
start-up module is linked to its ``ENV-SITECUSTOMIZE``. The checks the failure kept from running are one
finding already, caused by it (``envcheck.verify.compare.not_run_finding``), so a report shows one root
for one broken import.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Sequence

from envcheck.core.findings import FIRST_CAUSES, Finding
from envcheck.diff.rules.windows import VC_RUNTIME_DLL

# echo rule -> the rules whose finding on the same subject says all it says. Order does not matter: a
# finding is dropped when any of its betters is present.
ECHOES: dict[str, tuple[str, ...]] = {
    # The static tree's own verdict (the wheel ships it, its files resolve the machine's copy) covers the
    # base-vs-target story of the same library, the live process's view of it, and the machine's new
    # requirement that follows from it.
    "ENV-NATIVE-RESOLVED-ELSEWHERE": ("ENV-NATIVE-SHADOWED",),
    "ENV-NATIVE-LOADED-FROM": (
        "ENV-NATIVE-SHADOWED",
        "ENV-NATIVE-RESOLVED-ELSEWHERE",
        "ENV-CUDA-LIB-SHADOWED",
        "ENV-PYTHON-LIBPYTHON",
    ),
    "ENV-NATIVE-REQUIRES": ("ENV-NATIVE-SHADOWED", "ENV-NATIVE-RESOLVED-ELSEWHERE"),
}

# Variables whose value is a list of folders (or files) that move libraries; a finding caused by one must
# have its file's folder newly named in it.
_SEARCH_PATHS = {"LD_LIBRARY_PATH": ":", "DYLD_LIBRARY_PATH": ":", "LD_PRELOAD": " :"}


def link(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` without their echoes, each consequence naming its root cause (see the module's
    docstring). Order is kept; nothing but echoes is dropped."""
    kept, redirect = _drop_echoes(findings)
    kept = _import_causes(kept)
    kept = _loader_causes(kept)
    by_key = {f.key: f for f in kept}
    causes: dict[str, str | None] = {}
    for f in kept:
        cause = redirect.get(f.caused_by, f.caused_by) if f.caused_by else None
        if cause is not None and (cause == f.key or not _explains(by_key.get(cause), f)):
            cause = None
        causes[f.key] = cause
    out = []
    for f in kept:
        root = _root(f.key, causes)
        out.append(f if root == f.caused_by else dataclasses.replace(f, caused_by=root))
    return out


# The smoke suite's findings for an ``import_torch`` that did not import, and the probe's.
_SUITE_IMPORT_FAILED = frozenset({"VERIFY-ERROR", "VERIFY-CRASH", "VERIFY-TIMEOUT"})
PROBE_IMPORT = ("ENV-PROBE-FAILED", "import torch")
# The suite's import check of torch alone (``VERIFY-IMPORT``): the same failure once more.
SUITE_IMPORT = ("VERIFY-IMPORT", "import torch")

# What can make ``import torch`` fail, most telling first: the roots a report leads with
# (``findings.FIRST_CAUSES``, in their order, less the failed import itself), then a library loaded from
# another file. Whether a finding of one of these explains a failed import is decided by
# ``_explains_import``.
IMPORT_CAUSES: tuple[str, ...] = (
    *(rule for rule in FIRST_CAUSES if rule != PROBE_IMPORT[0]),
    "ENV-NATIVE-SHADOWED",
    "ENV-CUDA-LIB-SHADOWED",
    "ENV-NATIVE-LOADED-FROM",
)


def _import_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with a failed import of torch linked to its explanation (see the module's docstring);
    a finding that already names a cause keeps it."""
    by_key = {f.key: f for f in findings}
    out = []
    for f in findings:
        cause: str | None = None
        if f.caused_by is None and (
            (f.rule in _SUITE_IMPORT_FAILED and f.subject == "import_torch")
            or (f.rule, f.subject) == SUITE_IMPORT
        ):
            probe = _key(*PROBE_IMPORT, f.machine)
            cause = probe if probe in by_key else _explanation(f, findings)
        elif f.caused_by is None and (f.rule, f.subject) == PROBE_IMPORT:
            cause = _explanation(f, findings)
        elif f.caused_by is None and f.rule == "VERIFY-FP-MODE":
            # The suite names the start-up module that set the mode (verify.fp_mode.fp_setter).
            cause = next(
                (
                    c.key
                    for c in findings
                    if c.rule == "ENV-SITECUSTOMIZE"
                    and c.machine == f.machine
                    and c.target
                    and c.target in f.message
                ),
                None,
            )
        out.append(f if cause is None else dataclasses.replace(f, caused_by=cause))
    return out


# The live loader's verdict on Windows (``envcheck.diff.rules.windows``): the static tree's findings of the
# same DLL, or of the same VC++ redistributable, are its consequences (``_loader_causes``).
LOADER_RULE = "ENV-WIN-DLL-NOT-FOUND"
OLD_RUNTIME_RULE = "ENV-WIN-VC-RUNTIME-OLD"
# How a DLL's start-up code faulting shows: ERROR_NOACCESS, ERROR_DLL_INIT_FAILED, or the process dying.
_START_UP_FAULTS = ("[WinError 998]", "[WinError 1114]", "crashed during import torch")
_LOADER_ECHOES = frozenset({"ENV-NATIVE-REQUIRES", "ENV-NATIVE-MISSING"})


def _loader_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with the static tree's ``ENV-NATIVE-REQUIRES`` / ``ENV-NATIVE-MISSING`` of a DLL that
    Windows' loader could not load (``LOADER_RULE``) linked to it: the same DLL, or a DLL of the same VC++
    redistributable (``MSVCP140.dll`` missing: ``VCRUNTIME140_1.dll`` is needed too, from the same
    installer); those of a VC++ runtime DLL are linked to an old runtime (``OLD_RUNTIME_RULE``) too. A
    finding that already names a cause keeps it."""
    roots = [f for f in findings if f.rule in (LOADER_RULE, OLD_RUNTIME_RULE)]
    if not roots:
        return findings

    def names(f: Finding) -> set[str]:
        if f.rule == "ENV-NATIVE-MISSING":
            return {n.lower() for n in (f.target or "").removeprefix("missing: ").split(", ") if n}
        return {f.subject.lower()}

    out = []
    for f in findings:
        cause = None
        if f.caused_by is None and f.rule in _LOADER_ECHOES:
            wanted = names(f)
            for root in roots:
                if root.machine != f.machine:
                    continue
                same = root.subject.lower() in wanted
                runtime = root.rule == OLD_RUNTIME_RULE or bool(VC_RUNTIME_DLL.match(root.subject))
                vc = runtime and any(VC_RUNTIME_DLL.match(n) for n in wanted)
                if same or vc:
                    cause = root.key
                    break
        out.append(f if cause is None else dataclasses.replace(f, caused_by=cause))
    return out


def _key(rule: str, subject: str, machine: str | None) -> str:
    return Finding(rule=rule, severity="info", subject=subject, message="", remedy="", machine=machine).key


def _explanation(failure: Finding, findings: Sequence[Finding]) -> str | None:
    """The key of the finding of the failure's machine that best explains it (``IMPORT_CAUSES`` order,
    then the report's), or None."""
    candidates = [
        f
        for f in findings
        if f.machine == failure.machine and f.rule in IMPORT_CAUSES and f.severity != "info"
    ]
    for rule in IMPORT_CAUSES:
        for f in candidates:
            if f.rule == rule and _explains_import(f, failure.message):
                return f.key
    return None


def _explains_import(cause: Finding, error: str) -> bool:
    """Whether ``cause`` explains an import of torch that failed with ``error``: another torch tree always
    does; a library finding when the error names its library (or version), or, for a missing library, when
    torch's own import closure lacks it."""
    if cause.rule in ("ENV-TORCH-TREES", "ENV-TORCH-SHADOWED"):
        return cause.subject.lower() == "torch" or cause.subject.lower().startswith("torch ")
    if cause.rule == LOADER_RULE:
        # The error names the DLL torch loaded (``Error loading "...\\c10.dll"``), the finding what it lacks.
        # Or, from an extension module, ``DLL load failed while importing _C`` (``_C.cp311-win_amd64.pyd``).
        failed = (cause.target or "").split(": ", 1)[0].lower()
        text = error.lower()
        return bool(failed) and (failed in text or f"while importing {failed.split('.', 1)[0]}" in text)
    if cause.rule == OLD_RUNTIME_RULE:
        # What an old msvcp140 does to DLLs built with a newer toolset: their start-up code faults.
        return any(sign in error for sign in _START_UP_FAULTS)
    if cause.rule == "ENV-NATIVE-MISSING":
        missing = (cause.target or "").removeprefix("missing: ").split(", ")
        return any(name and name in error for name in missing) or (cause.base or "").startswith("torch:")
    return bool(cause.subject) and cause.subject in error


def _drop_echoes(findings: Sequence[Finding]) -> tuple[list[Finding], dict[str, str]]:
    present = {(f.rule, f.subject, f.machine): f for f in findings}
    kept: list[Finding] = []
    redirect: dict[str, str] = {}
    for f in findings:
        better = next(
            (
                present[(rule, f.subject, f.machine)]
                for rule in ECHOES.get(f.rule, ())
                if (rule, f.subject, f.machine) in present
            ),
            None,
        )
        if better is None:
            kept.append(f)
        else:
            redirect[f.key] = better.key
    # An echo of an echo (LOADED-FROM of RESOLVED-ELSEWHERE of SHADOWED) points at the last one kept.
    for key, first in list(redirect.items()):
        last, seen = first, {key}
        while last in redirect and last not in seen:
            seen.add(last)
            last = redirect[last]
        redirect[key] = last
    return kept, redirect


def _explains(cause: Finding | None, consequence: Finding) -> bool:
    if cause is None:
        return False
    if cause.rule != "ENV-VAR-CHANGED" or cause.subject not in _SEARCH_PATHS:
        return True
    moved = consequence.target or ""
    if not moved.startswith("/"):
        return True  # not a path (a version, a count): the rule that named the variable vouches for it
    separators = _SEARCH_PATHS[cause.subject]
    new, old = _entries(cause.target, separators), _entries(cause.base, separators)
    wanted = moved if cause.subject == "LD_PRELOAD" else moved.rsplit("/", 1)[0]
    if cause.subject == "LD_PRELOAD" and consequence.rule in _PRELOAD_RESOLVED:
        # An entry may be a link to the loaded file: these rules named the variable after comparing the
        # files its entries resolve to (``native.loader_cause``), which the shown value cannot tell.
        return True
    return wanted in new and wanted not in old


# Rules that name ENV-VAR-CHANGED:LD_PRELOAD only for a file an entry of the target's value resolves to
# and the base's does not (``envcheck.diff.rules.native.loader_cause``, ``preloaded_files``).
_PRELOAD_RESOLVED = frozenset(
    {"ENV-NATIVE-LOADED-FROM", "ENV-NATIVE-SHADOWED", "ENV-NATIVE-RESOLVED-ELSEWHERE", "ENV-PYTHON-LIBPYTHON"}
)


def _entries(shown: str | None, separators: str) -> set[str]:
    """The entries of a variable's value as ENV-VAR-CHANGED shows it (``'a:b'`` quoted, or ``unset``)."""
    if not shown or shown == "unset":
        return set()
    try:
        value = ast.literal_eval(shown)
    except (ValueError, SyntaxError):
        return set()
    if not isinstance(value, str):
        return set()
    for sep in separators[1:]:
        value = value.replace(sep, separators[0])
    return {e.rstrip("/") or "/" for e in value.split(separators[0]) if e}


def _root(key: str, causes: dict[str, str | None]) -> str | None:
    """The root of ``key``'s chain of causes; None when ``key`` is a root, or when the chain loops (no
    finding of a loop is the root of the others: each stays one)."""
    cause = causes.get(key)
    seen = {key}
    while cause is not None:
        if cause in seen:
            return None
        seen.add(cause)
        nxt = causes.get(cause)
        if nxt is None:
            return cause
        cause = nxt
    return None
