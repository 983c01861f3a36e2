"""The smoke suite's rules: every ``VERIFY-*`` id that ``verify`` and ``gate`` can emit, registered in the
one catalog (``envcheck.core.findings``) beside the diff rules, so ``envcheck rules VERIFY-SPEED`` explains
it and a policy naming a VERIFY id is checked like any other."""

from __future__ import annotations

from envcheck.core.findings import registrar

_verify = registrar("verify", "smoke suite")


_verify(
    "VERIFY-NUMERICS",
    "error",
    "An output differs from the golden beyond its tolerance",
    "The same seeded inputs gave other numbers than on the machine the goldens were recorded on: another "
    "BLAS or oneDNN kernel, another CPU capability, TF32, flush-to-zero, or a different torch build.",
    "Compare the two environments with `envcheck diff`; the cause is usually a library or setting it names.",
    ("FM-17", "FM-18"),
)
_verify(
    "VERIFY-WITHIN-TOLERANCE",
    "info",
    "An output differs from the golden, within tolerance",
    "Expected drift between builds or devices (reduction order, vectorised paths): reported so a reader "
    "knows the numbers are not bit-identical.",
    "Nothing to do unless the application needs bit-identical results.",
)
_verify(
    "VERIFY-FAILED",
    "error",
    "A check's own consistency test failed",
    "The check compares torch against itself or a reference (e.g. a round trip, a known value) and the "
    "two disagree on this machine, whatever the golden says.",
    "Read the check's message; run `envcheck doctor` for the environment's traps.",
)
_verify(
    "VERIFY-ERROR",
    "error",
    "A check raised",
    "The operation the check exercises does not work here: a missing backend, an unsupported dtype, or "
    "a library that fails to load.",
    "Read the error and its innermost frame; `envcheck doctor` names a missing or foreign library.",
    ("FM-02", "FM-07"),
)
_verify(
    "VERIFY-CRASH",
    "error",
    "A check killed its process",
    "A segmentation fault, an abort (OpenMP's Error #15 aborts) or an illegal instruction: the rest of "
    "the suite ran in a fresh process, but the application would die here.",
    "Run `envcheck doctor`: two OpenMP runtimes, a CPU without the instructions the build needs, or a "
    "foreign library loaded in place of the wheel's.",
    ("FM-04", "FM-15"),
)
_verify(
    "VERIFY-TIMEOUT",
    "error",
    "A check did not finish before the deadline",
    "A hang (a deadlock between thread pools, a driver that does not answer) or a machine far slower than "
    "the golden's; the whole target session was killed at --timeout.",
    "Rerun with a larger --timeout to tell slow from hung; a hang in import or CUDA init points at the "
    "driver or OpenMP.",
)
_verify(
    "VERIFY-SKIPPED",
    "warning",
    "A check did not run here",
    "It ran on the golden machine but cannot here (no GPU, no NCCL, a missing optional package), so what "
    "it guards is unverified. Info when the golden did not run it either; an error with --strict.",
    'Provide what the skip reason names, or accept it in a policy (`[[intended]] rule = "VERIFY-SKIPPED"`).',
)
_verify(
    "VERIFY-NO-GOLDEN",
    "info",
    "No golden to compare with",
    "The manifest holds no output for this check (recorded with --no-verify, by an older envcheck, or the "
    "check is new): it ran, but nothing says what it should give.",
    "Record goldens on the dev box: `envcheck snapshot` (without --no-verify).",
)
_verify(
    "VERIFY-NOT-RUN",
    "info",
    "Read statically: nothing ran",
    "The environment was read from a container image's files (`--image`): its facts were checked against "
    "the base, but no smoke suite, no `import torch` and none of the application's imports ran in it.",
    "Run `envcheck gate REF` inside the container for the smoke suite and the imports.",
)
_verify(
    "VERIFY-INFO",
    "info",
    "A setting the suite records changed",
    "The CPU capability torch dispatches to, the quantized engine or the thread count differ from the "
    "golden machine's: numbers may drift within tolerance because of it.",
    "Nothing to do unless a VERIFY-NUMERICS finding sits beside it.",
    ("FM-18", "FM-21"),
)
_verify(
    "VERIFY-SPEED",
    "warning",
    "Much slower than the golden machine",
    "The matmul throughput is below what the golden recorded, beyond the noise the golden itself showed: "
    "fewer threads, a lower CPU capability, or another BLAS. Never an error: machines are shared.",
    "Check `envcheck diff` for thread settings (OMP_NUM_THREADS, cgroup quota) and the BLAS in use.",
    ("FM-23",),
)
_verify(
    "VERIFY-FP-MODE",
    "warning",
    "Flush-to-zero or denormals-are-zero is on in the process",
    "The CPU's floating-point control (MXCSR on x86-64, FPCR on arm64) turns subnormal numbers into zero "
    "for every thread of the process. A library built with -ffast-math sets it when it is loaded (GCC's "
    "crtfastmath, gcc.gnu.org/PR55522), whatever the application asked; torch.set_flush_denormal(True) sets "
    "it on purpose. An error when it explains a numeric difference (those fold under it).",
    "Take the library the finding names out of the process (LD_PRELOAD) or rebuild it without -ffast-math; "
    "if the application wants the mode, record the goldens with it on.",
    ("FM-18",),
)
_verify(
    "VERIFY-IMPORT",
    "error",
    "A module the application imports fails to import",
    "verify and gate import every installed module with native code, and the application's own entry "
    "modules (--import), each in a process of its own: one that raises here breaks the application at "
    "start-up, whatever the smoke suite says. An extension compiled against NumPy 1.x under NumPy 2 (or "
    "the reverse) fails this way ('numpy.dtype size changed', 'compiled using NumPy 1.x cannot be run in "
    "NumPy 2'): in a gate whose base had the other NumPy major, it is a consequence of ENV-NUMPY-MAJOR.",
    "Read the error; for a NumPy ABI break install the NumPy major the module was built for, or a release "
    "of the module built for the installed one. A module the application never imports can be skipped "
    'with `not_imported = ["name"]` in the policy.',
    ("FM-08",),
    fixes=("install",),
)
_verify(
    "VERIFY-IMPORT-OPENMP",
    "error",
    "The application's imports load two OpenMP runtimes",
    "Imported together, in order, the application's modules bring a second OpenMP runtime beside torch's "
    "(Intel's libiomp5 from an MKL build beside GNU libgomp): the probe, which imports torch alone, never "
    "sees it. Two runtimes in one process crash, deadlock or abort ('OMP: Error #15'); two GNU copies "
    "oversubscribe the CPU (a warning).",
    "Keep one OpenMP family in the process; the finding names the import that loaded each runtime.",
    ("FM-04", "FM-14"),
)
