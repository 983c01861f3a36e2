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
import re
from collections.abc import Sequence

from envcheck.core.findings import FIRST_CAUSES, SEVERITY_RANK, Finding, Severity
from envcheck.diff.rules.windows import VC_RUNTIME_DLL
from envcheck.manifest.native import build_kind_of_library, links_torch
from envcheck.manifest.query import canon
from envcheck.manifest.runtime_config import consequence

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
    # Two dist-info folders of one project in one folder: the installation invariant says it, with its
    # remedy; the older "metadata folders" warning of the same project is its echo.
    "ENV-TORCH-SHADOWED": ("ENV-DIST-DUPLICATE",),
}

# Variables whose value is a list of folders (or files) that move libraries; a finding caused by one must
# have its file's folder newly named in it.
_SEARCH_PATHS = {"LD_LIBRARY_PATH": ":", "DYLD_LIBRARY_PATH": ":", "LD_PRELOAD": " :"}


def link(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` without their echoes, each consequence naming its root cause (see the module's
    docstring). Order is kept; nothing but echoes is dropped."""
    kept, redirect = _drop_echoes(findings)
    kept = _interpreter_causes(kept)
    kept = _install_causes(kept)
    kept = built_for_causes(kept)
    kept = _requirement_causes(kept)
    kept = _numerics_causes(kept)
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


# The installation invariants (``envcheck/diff/rules/install.py``): a project installed twice, an install
# interrupted, files no RECORD owns or two RECORDs claim. A failed import or check that names the module
# they are about is their consequence (``_install_causes``).
INSTALL_ROOTS = frozenset(
    {
        "ENV-DIST-DUPLICATE",
        "ENV-INSTALL-INTERRUPTED",
        "ENV-FILE-ORPHAN",
        "ENV-FILE-SHARED",
        "ENV-VERSION-FILE",
        "ENV-FILE-GONE",
        "ENV-SOURCE-GONE",
    }
)
# What fails when an installation is broken: an import (the probe's, the suite's, the application's) or a
# smoke check.
_INSTALL_CONSEQUENCES = frozenset(
    {
        "ENV-PROBE-FAILED",
        "VERIFY-IMPORT",
        "VERIFY-ERROR",
        "VERIFY-CRASH",
        "VERIFY-TIMEOUT",
        "VERIFY-FAILED",
        # A console script its distribution declares, gone with the files of the interrupted install.
        "ENV-SCRIPT-BROKEN",
    }
)


# What a broken installation of a project shows about that project (the finding's subject names it): its
# metadata missing or another version, its files failing their RECORD or missing, a library it needs.
_INSTALL_SUBJECTS = frozenset(
    {
        "ENV-TORCH-NO-METADATA",
        "ENV-TORCH-MISSING",
        "ENV-TORCH-VERSION",
        "ENV-TORCH-VARIANT",
        "ENV-TORCH-BUILD",
        "ENV-PKG-MISSING",
        "ENV-PKG-VERSION",
        "ENV-NUMPY-MAJOR",
        "ENV-NATIVE-TAMPERED",
        "ENV-NATIVE-FILE-MISSING",
        "ENV-NATIVE-MISSING",
        "ENV-NATIVE-ADDED",
        "ENV-VERSION-FILE",
    }
)


def _install_modules(root: Finding) -> set[str]:
    """The module names an installation finding is about: the project's (``opencv-python``: ``opencv_python``,
    ``cv2`` from the files' folder), lower-case."""
    names: set[str] = set()
    if root.rule == "ENV-FILE-ORPHAN" and ("/" in root.subject or "\\" in root.subject):
        names.add(root.subject.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1])
    else:
        for part in root.subject.split(","):
            names.add(part.strip().replace("-", "_").replace(".", "_"))
    if root.rule in ("ENV-FILE-SHARED", "ENV-FILE-GONE"):
        names.update(_TOP_IN_MESSAGE.findall(root.message))
    return {n.lower() for n in names if n}


_TOP_IN_MESSAGE = re.compile(r"(?:^|[\s(,])([A-Za-z_]\w*)/")


def _install_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with a failed import or smoke check linked to the installation invariant whose module it
    names (a word of its subject or message); a finding that already names a cause keeps it. Linear: each
    root indexed once by the module names it is about."""
    by_name: dict[tuple[str | None, str], str] = {}
    gone: dict[tuple[str | None, str], str] = {}  # a file ENV-FILE-GONE names, by its file name
    for root in findings:
        # Errors, and files gone (a warning until an import fails for want of them).
        if root.rule in INSTALL_ROOTS and (root.severity == "error" or root.rule == "ENV-FILE-GONE"):
            for name in _install_modules(root):
                by_name.setdefault((root.machine, name), root.key)
        if root.rule == "ENV-FILE-GONE":
            for path in _PATH_IN_MESSAGE.findall(root.message):
                name = path.rstrip(".").rsplit("/", 1)[-1].lower()  # the sentence's full stop is not a name's
                gone.setdefault((root.machine, name), root.key)
    if not by_name:
        return findings
    out = []
    for f in findings:
        cause = None
        if f.caused_by is None and f.rule in _GONE_ECHOES:
            # The library is one of the files gone: what the loader then does (nothing found, another
            # copy found) is their consequence.
            names = _native_names(f)
            keys = {gone.get((f.machine, n)) for n in names}
            if names and None not in keys and len(keys) == 1:
                cause = keys.pop()
        if (
            cause is None
            and f.caused_by is None
            and (f.rule in _INSTALL_CONSEQUENCES or f.rule in _INSTALL_SUBJECTS)
        ):
            text = f"{f.subject} {f.message}" if f.rule in _INSTALL_CONSEQUENCES else f.subject
            words = sorted({w.lower() for w in _WORD.findall(text)})
            cause = next((by_name[(f.machine, w)] for w in words if (f.machine, w) in by_name), None)
        out.append(f if cause is None else dataclasses.replace(f, caused_by=cause))
    return out


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The native tree's findings about one library, and the library's file names in them (``_native_names``).
_GONE_ECHOES = frozenset({"ENV-NATIVE-MISSING", "ENV-NATIVE-RESOLVED-ELSEWHERE", "ENV-NATIVE-FILE-MISSING"})
# A file of a distribution as ENV-FILE-GONE shows it (``torch/lib/libgomp.so.1``).
_PATH_IN_MESSAGE = re.compile(r"[\w.+-]+(?:/[\w.+-]+)+")


def _native_names(f: Finding) -> set[str]:
    """The file names of the libraries a native finding is about: those ENV-NATIVE-MISSING found missing,
    the one ENV-NATIVE-RESOLVED-ELSEWHERE or ENV-NATIVE-REQUIRES names, the file ENV-NATIVE-FILE-MISSING's
    key ends with."""
    if f.rule == "ENV-NATIVE-MISSING":
        return {n.lower() for n in (f.target or "").removeprefix("missing: ").split(", ") if n}
    return {f.subject.rsplit("/", 1)[-1].lower()}


# "NAME VERSION requires ..." in an ENV-PKG-UNMET message: the distributions that need what is unmet.
_REQUIRER = re.compile(r"(?:^|; )([A-Za-z0-9][A-Za-z0-9._-]*) \S+ requires ")


# A distribution's native code built for another torch (``envcheck/diff/rules/builtfor.py``; the release it
# was built for is ENV-COMPANION-PIN's): the roots of what that makes fail, in the order they explain it.
BUILT_FOR_ROOTS = ("ENV-BUILT-FOR-VARIANT", "ENV-BUILT-FOR-ABI", "ENV-COMPANION-PIN")
# How an import fails when its native code was built for another torch: a library of the other build is
# missing, a symbol it calls is not defined, an operator it registers is not there.
_BUILD_MISMATCH_ERROR = re.compile(
    r"undefined symbol|cannot open shared object file|DLL load failed|Symbol not found|Library not loaded|"
    r"operator \S+ does not exist",
    re.IGNORECASE,
)
# ``import visionops`` (visionops 0.3.0+cu130): the distribution a VERIFY-IMPORT names (ImportResult.who).
_IMPORTED_DIST = re.compile(r"^`import [\w.]+` \(([^ )]+) ")


def built_for_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with the consequences of a distribution built for another torch linked to that root
    (``BUILT_FOR_ROOTS``, same distribution and machine): the ENV-NATIVE-MISSING of its module when every
    library missing is one a torch build or its CUDA / ROCm wheels ship (``libc10_cuda.so``,
    ``libcudart.so.13``), ENV-COMPANION-VARIANT of its label (the same variant, seen from the name), and its
    VERIFY-IMPORT when the error is a native load failure. A finding that already names a cause keeps it."""
    roots: dict[tuple[str, str, str | None], str] = {}
    for f in findings:
        if f.rule in BUILT_FOR_ROOTS and f.severity == "error":
            roots.setdefault((f.rule, canon(f.subject), f.machine), f.key)
    if not roots:
        return findings

    def root(dist: str, machine: str | None, rules: Sequence[str]) -> str | None:
        return next((k for r in rules if (k := roots.get((r, canon(dist), machine))) is not None), None)

    out = []
    for f in findings:
        cause = None
        if f.caused_by is not None:
            pass
        elif f.rule == "ENV-NATIVE-MISSING" and ":" in (f.base or ""):
            names = [n for n in (f.target or "").removeprefix("missing: ").split(", ") if n]
            if names and all(links_torch(n) or build_kind_of_library(n) for n in names):
                cause = root((f.base or "").split(":", 1)[0], f.machine, BUILT_FOR_ROOTS[:1])
        elif f.rule == "ENV-COMPANION-VARIANT":
            cause = root(f.subject, f.machine, BUILT_FOR_ROOTS[:1])
        elif f.rule in ("ENV-NATIVE-SHADOWED", "ENV-CUDA-LIB-SHADOWED") and ":" in (f.base or ""):
            # A CUDA or ROCm library the mismatched build bundles or needs, found elsewhere: the build's.
            if build_kind_of_library(f.subject):
                cause = root((f.base or "").split(":", 1)[0], f.machine, BUILT_FOR_ROOTS[:1])
        elif f.rule == "VERIFY-IMPORT" and _BUILD_MISMATCH_ERROR.search(f.message):
            named = _IMPORTED_DIST.match(f.message)
            cause = root(named.group(1), f.machine, BUILT_FOR_ROOTS) if named else None
        out.append(f if cause is None else dataclasses.replace(f, caused_by=cause))
    return out


def _requirement_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with what an unmet requirement (``ENV-PKG-UNMET``, an error) explains linked to it: an
    import or a check that failed naming the unmet distribution's module (``cannot import name 'TypeIs'
    from 'typing_extensions'``), the requirer's own failed import, and the change of that distribution's
    version on this side. A finding that already names a cause keeps it; ``import torch`` itself is
    ``_import_causes``' to link. Linear: each root indexed once by its module and its requirers."""
    by_module: dict[tuple[str | None, str], str] = {}
    by_requirer: dict[tuple[str | None, str], str] = {}
    for root in findings:
        if root.rule == "ENV-PKG-UNMET" and root.severity == "error":
            by_module.setdefault((root.machine, _module_name(root.subject)), root.key)
            for name in _REQUIRER.findall(root.message):
                by_requirer.setdefault((root.machine, _module_name(name)), root.key)
    if not by_module:
        return findings
    present = {f.key for f in findings}
    out = []
    for f in findings:
        cause = None
        # A cause that is not in the report (the policy ignored it, or it was never found) is none.
        if (f.caused_by is None or f.caused_by not in present) and (f.rule, f.subject) != PROBE_IMPORT:
            if f.rule == "ENV-PKG-VERSION":
                cause = by_module.get((f.machine, _module_name(f.subject)))
            elif f.rule in _INSTALL_CONSEQUENCES and f.subject not in ("import_torch", SUITE_IMPORT[1]):
                words = {w.lower() for w in _WORD.findall(f"{f.subject} {f.message}")}
                cause = next(
                    (by_module[(f.machine, w)] for w in sorted(words) if (f.machine, w) in by_module), None
                )
                if cause is None and f.rule == "VERIFY-IMPORT":
                    # The requirer's own import ("import cyclonedx" under "cyclonedx-python-lib requires").
                    imported = f.subject.removeprefix("import ").split(".", 1)[0].lower()
                    cause = by_requirer.get((f.machine, imported)) or next(
                        (
                            key
                            for (machine, name), key in by_requirer.items()
                            if machine == f.machine and name.startswith(imported + "_")
                        ),
                        None,
                    )
        out.append(f if cause is None else dataclasses.replace(f, caused_by=cause))
    return out


def _module_name(name: str) -> str:
    """A distribution's name as a module name reads it (``typing-extensions``: ``typing_extensions``)."""
    return name.lower().replace("-", "_").replace(".", "_")


# The smoke suite's findings of numbers that moved, kernels that changed and speed, which a variable whose
# documented consequence is numerics or what runs (``envcheck/data/runtime_config.json``) explains.
_NUMERIC_CONSEQUENCES = frozenset(
    {"VERIFY-NUMERICS", "VERIFY-WITHIN-TOLERANCE", "VERIFY-SPEED", "VERIFY-INFO", "ENV-CPU-CAPABILITY"}
)
# Differences that move numbers by themselves: with one of them in the report, the variable is not the only
# explanation and nothing is linked to it.
_OTHER_NUMERIC_CAUSES = frozenset(
    {
        "ENV-TORCH-VERSION",
        "ENV-TORCH-VARIANT",
        "ENV-TORCH-BUILD",
        "ENV-NUMERICS-SWITCH",
        "ENV-CPU-ISA",
        "ENV-SITECUSTOMIZE",
        "VERIFY-FP-MODE",
        "ENV-FTZ-DAZ",
    }
)


def _numerics_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with the smoke suite's moved numbers (and the CPU capability, the speed and the import
    notes that go with them) linked to the variable that explains them: an ``ENV-VAR-CHANGED`` of a
    variable the runtime-configuration catalog documents as changing numerics (``ATEN_CPU_CAPABILITY``,
    ``ONEDNN_DEFAULT_FPMATH_MODE``), or what runs when none does; only when no other difference in the
    report moves numbers by itself. A finding that already names a cause keeps it."""
    if any(f.rule in _OTHER_NUMERIC_CAUSES for f in findings):
        return findings
    variables = [f for f in findings if f.rule == "ENV-VAR-CHANGED" and f.caused_by is None]
    ranked = sorted(
        ((_NUMERIC_RANK.get(_consequence(f.subject) or "", 9), f) for f in variables),
        key=lambda pair: pair[0],
    )
    by_machine: dict[str | None, Finding] = {}
    for rank, f in ranked:
        if rank < 9:
            by_machine.setdefault(f.machine, f)
    if not by_machine:
        return findings
    out = []
    for f in findings:
        cause = by_machine.get(f.machine)
        linked = cause is not None and f.caused_by is None and f.rule in _NUMERIC_CONSEQUENCES
        out.append(dataclasses.replace(f, caused_by=cause.key) if linked and cause is not None else f)
    return out


_NUMERIC_RANK = {"numerics": 0, "what-runs": 1}


def _consequence(name: str) -> str | None:
    entry = consequence(name)
    return entry.consequence if entry is not None else None


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
    # A requirement torch declares, unmet (an old typing_extensions: "cannot import name 'TypeIs'").
    "ENV-PKG-UNMET",
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


# The installation on another interpreter (``envcheck/diff/rules/interpreter.py``): an extension module
# whose file suffix the interpreter never imports (``ENV-EXT-SUFFIX``, its ``target`` the RECORD paths of
# the files), and a venv run by another Python minor than it was made with (``ENV-VENV-INTERPRETER`` with
# ``base`` / ``target`` the two versions): its site-packages is off ``sys.path``.
WRONG_SUFFIX_RULE = "ENV-EXT-SUFFIX"
VENV_RULE = "ENV-VENV-INTERPRETER"
# What a venv's packages vanishing from sys.path looks like beside a base.
_VANISHED = frozenset({"ENV-PKG-MISSING", "ENV-TORCH-MISSING"})


def _interpreter_causes(findings: list[Finding]) -> list[Finding]:
    """``findings`` with each failed import (``VERIFY-IMPORT`` of a module, the probe's ``import torch``)
    linked to the ``ENV-EXT-SUFFIX`` finding, of the same machine, that names a file of that module's
    top-level package (the file has another interpreter's suffix), and the packages a diff finds missing
    linked to an ``ENV-VENV-INTERPRETER`` of another minor (they are installed under the other minor's
    lib folder). A finding that already names a cause keeps it."""
    suffix_roots = [f for f in findings if f.rule == WRONG_SUFFIX_RULE]
    venv_roots = [
        f
        for f in findings
        if f.rule == VENV_RULE and f.base and f.target and f.base.split(".")[:2] != f.target.split(".")[:2]
    ]
    if not suffix_roots and not venv_roots:
        return findings

    def packages(f: Finding) -> set[str]:
        return {p.split("/", 1)[0].split(".", 1)[0] for p in (f.target or "").split(", ") if p}

    tops = [(root, packages(root)) for root in suffix_roots]
    out = []
    for f in findings:
        cause = None
        if f.caused_by is not None:
            pass
        elif f.rule in ("VERIFY-IMPORT", PROBE_IMPORT[0]) and f.subject.startswith("import "):
            top = f.subject.removeprefix("import ").split(".", 1)[0]
            cause = next((r.key for r, tops_of in tops if r.machine == f.machine and top in tops_of), None)
        elif f.rule in _VANISHED:
            cause = next((r.key for r in venv_roots if r.machine == f.machine), None)
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

    out = []
    for f in findings:
        cause = None
        if f.caused_by is None and f.rule in _LOADER_ECHOES:
            wanted = _native_names(f)
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
    if (
        cause.rule in _REPLACED_LIBRARY
        and (cause.base or "").startswith("torch:")
        and "undefined symbol" in error
    ):
        # A library of torch's own (``torch:torch/lib/libc10.so``) that loads from elsewhere: the other
        # build lacks what torch's libraries link against, and the import dies on the first symbol.
        return True
    if cause.rule == "ENV-PKG-UNMET":
        module = cause.subject.lower().replace("-", "_").replace(".", "_")
        return bool(module) and module in {w.lower() for w in _WORD.findall(error)}
    if cause.rule == "ENV-NATIVE-MISSING":
        missing = (cause.target or "").removeprefix("missing: ").split(", ")
        return any(name and name in error for name in missing) or (cause.base or "").startswith("torch:")
    return bool(cause.subject) and cause.subject in error


# Findings that say a library loads (or would load) from another file than the environment's own.
_REPLACED_LIBRARY = frozenset({"ENV-NATIVE-SHADOWED", "ENV-NATIVE-LOADED-FROM", "ENV-CUDA-LIB-SHADOWED"})


def escalate(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` (linked) with each root cause at least as severe as its worst consequence: a variable
    change that makes ``import torch`` fail is an error, whatever its rule's default. Intended findings are
    left as the policy declared them."""
    worst: dict[str, int] = {}
    for f in findings:
        if f.caused_by is not None:
            rank = SEVERITY_RANK[f.severity]
            worst[f.caused_by] = min(worst.get(f.caused_by, rank), rank)
    out = []
    for f in findings:
        worse = worst.get(f.key, SEVERITY_RANK[f.severity])
        raise_it = f.caused_by is None and f.intended is None and worse < SEVERITY_RANK[f.severity]
        out.append(dataclasses.replace(f, severity=_SEVERITIES[worse]) if raise_it else f)
    return out


_SEVERITIES: dict[int, Severity] = {rank: severity for severity, rank in SEVERITY_RANK.items()}


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
# and the base's does not (``envcheck.diff.rules.loader.loader_cause``, ``preloaded_files``).
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
