"""Process model: start method, threads against the CPU quota, and a probe that did not finish."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator

from envcheck.core.escape import one_line
from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Manual
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.manifest.model import Manifest

FAMILY = "process model"


@difference_rule(
    "ENV-MP-START-METHOD",
    family=FAMILY,
    severity="warning",
    title="the multiprocessing start method differs (fork / spawn / forkserver)",
    why=(
        "spawn re-imports __main__: DataLoader workers fail without the `if __name__ == '__main__'` guard; "
        "fork after CUDA initialisation fails ('Cannot re-initialize CUDA in forked subprocess')."
    ),
    fm=("FM-22",),
    evidence=("pytorch/tutorials#1661", "pyg-team/pytorch_geometric#3363", "vllm-project/vllm#8893"),
)
def mp_start_method(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.python.mp_start_method, target.python.mp_start_method
    if b and t and b != t:
        yield rule.finding(
            "multiprocessing start method",
            f"Worker processes start with {b} on the base and {t} on the target.",
            "Guard the entry point with `if __name__ == '__main__':`, keep worker state picklable, and test "
            f"a DataLoader with num_workers>0 under {t}.",
            base=b,
            target=t,
        )


def effective_cpus(m: Manifest) -> float | None:
    """The CPUs this process may use: affinity, then the cgroup quota (fractional), whichever is lower."""
    if m.platform is None:
        return None
    cpu = m.platform.cpu
    limits = [float(x) for x in (cpu.affinity_cpus, cpu.logical_cpus) if x]
    if cpu.cgroup_cpu_quota:
        limits.append(cpu.cgroup_cpu_quota)
    return min(limits) if limits else None


@single_rule(
    "ENV-THREADS-OVER-QUOTA",
    family=FAMILY,
    severity="warning",
    title="torch uses more threads than the CPUs this process may use",
    why=(
        "torch sizes its pool from the host's cores, not the container's quota: CFS throttling makes "
        "inference many times slower, silently."
    ),
    fm=("FM-23",),
    evidence=("kserve/kserve#1031", "Unity-Technologies/ml-agents#4471", "pytorch/pytorch#18013"),
)
def threads_over_quota(rule: Rule, m: Manifest) -> Iterator[Finding]:
    rt = m.torch.runtime
    cpus = effective_cpus(m)
    if rt is None or rt.num_threads is None or cpus is None:
        return
    allowed = max(1, math.ceil(cpus))
    if rt.num_threads > allowed:
        yield rule.finding(
            "torch.get_num_threads()",
            f"torch runs {rt.num_threads} intra-op threads but the process may use {cpus:g} CPU(s).",
            f"Set OMP_NUM_THREADS={allowed} (or call torch.set_num_threads({allowed})) in the service.",
            base=f"{cpus:g} CPUs",
            target=str(rt.num_threads),
        )


@difference_rule(
    "ENV-THREADS-CHANGED",
    family=FAMILY,
    severity="info",
    title="torch's thread counts differ",
    why="Reductions split differently (last-bit differences) and throughput changes.",
    fm=("FM-23", "FM-18"),
)
def threads_changed(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None:
        return
    b = (br.num_threads, br.num_interop_threads)
    t = (tr.num_threads, tr.num_interop_threads)
    if None not in b and None not in t and b != t:
        yield rule.finding(
            "torch threads",
            f"torch runs {b[0]} intra-op / {b[1]} inter-op threads on the base, {t[0]} / {t[1]} on the "
            "target.",
            "Pin OMP_NUM_THREADS (and torch.set_num_threads) in the service if results must match bit for "
            "bit.",
            base=f"{b[0]}/{b[1]}",
            target=f"{t[0]}/{t[1]}",
            caused_by=_threads_cause(base, target, t[0]),
        )


def _threads_cause(base: Manifest, target: Manifest, threads: int | None) -> str | None:
    """The environment variable that set the target's intra-op thread count, when it differs from the
    base's and torch runs exactly the count it names (torch reads OMP_NUM_THREADS, then MKL_NUM_THREADS)."""
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        value = target.env.get(name)
        if value is not None and value != base.env.get(name):
            return f"ENV-VAR-CHANGED:{name}" if value.strip() == str(threads) else None
        if value is not None:
            return None
    return None


@single_rule(
    "ENV-PROBE-FAILED",
    family=FAMILY,
    severity="error",
    title="the probe crashed, hung or failed to import torch",
    why=(
        "What the probe could not do, the application cannot either: a segfault, SIGILL or OMP abort at "
        "import."
    ),
    fm=("FM-02", "FM-04", "FM-15", "FM-13"),
    evidence=("pytorch/pytorch#37577", "pytorch/pytorch#131662"),
)
def probe_failed(rule: Rule, m: Manifest) -> Iterator[Finding]:
    o = m.meta.probe
    if o.status in ("ok", "not-run"):
        return
    where = f" during {o.stage}" if o.stage else ""
    detail = {
        "crashed": f"crashed{where} ({o.signal or f'exit code {o.exit_code}'})",
        "timeout": f"hung{where} and was killed after {o.timeout_s:g} s" if o.timeout_s else f"hung{where}",
        "error": f"failed{where}: {o.exception}",
    }.get(o.status, o.status)
    tail = (o.stderr_tail or "").strip().splitlines()
    step = _probe_step(o.status, o.stage, o.exception or (tail[-1] if tail else ""), o.signal)
    yield rule.finding(
        o.stage or "probe",
        f"The probe {detail}" + (f"; last output: {tail[-1][:200]}" if tail else "."),
        f"{step.text}.",
        target=o.status,
        actions=(step,),
    )


_NO_MODULE = re.compile(r"No module named '([^']+)'")
_NO_LIBRARY = re.compile(
    r"([\w.+-]+\.(?:so[.\d]*|dylib|dll))[^\n]*(?:cannot open shared object file|not found|image not found)"
    r"|Library not loaded: ([^\s,]+)|(?:DLL load failed|Error loading) [^\n]*?([\w.+-]+\.dll)",
    re.IGNORECASE,
)
_UNDEFINED = re.compile(r"undefined symbol: (\S+)")
_VERSION_NOT_FOUND = re.compile(r"version `([^']+)' not found \(required by ([^)]+)\)")


def _probe_step(status: str, stage: str | None, error: str, signal: str | None) -> Manual:
    """What to change, read from the error the probe met: the module to install, the library to make
    loadable, the builds to match; else the error itself, named. Usually a consequence: the root cause
    above it in the report (the native tree, glibc, the CPU) carries the command."""
    return Manual(text=one_line(_probe_change(status, stage or "the probe", error, signal)).replace("`", "'"))


def _probe_change(status: str, what: str, error: str, signal: str | None) -> str:
    shown = error.strip()[:300]
    if status == "timeout":
        return f"Find what the probe's {what} waits on (a lock, a network mount, a GPU that does not answer)"
    if status == "crashed" and signal == "SIGILL":
        return (
            f"Install a torch build made for this CPU: the probe's {what} died of SIGILL, an instruction the "
            "build uses that this CPU lacks (ENV-CPU-ISA names the instruction set)"
        )
    if not shown:
        return f"Run {what} in this environment to see why it {status}: the probe recorded no error message"
    if found := _NO_MODULE.search(error):
        module = found.group(1)
        top = module.split(".", 1)[0]
        if top != module:
            return (
                f"Reinstall the distribution that provides {top} for this interpreter: its {module} is "
                f"missing or not importable here ({shown})"
            )
        return f"Install the distribution that provides {module} into this environment ({shown})"
    if found := _VERSION_NOT_FOUND.search(error):
        return (
            f"Install a build of {found.group(2)} made for this system, or run on a system that provides "
            f"{found.group(1)} ({shown})"
        )
    if found := _NO_LIBRARY.search(error):
        library = next(g for g in found.groups() if g)
        return (
            f"Install the distribution that ships {library} (the native findings name it and what the loader "
            f"found instead): the probe's {what} cannot load it ({shown})"
        )
    if found := _UNDEFINED.search(error):
        return (
            f"Install builds that match: a library the probe's {what} loads was built against another build "
            f"of one it links (undefined symbol {found.group(1)}; {shown})"
        )
    return f"Change what the probe's {what} error names ({shown}): the other findings name it where known"


@difference_rule(
    "ENV-CONTAINER",
    family=FAMILY,
    severity="info",
    title="one side runs in a container, the other not (or another kind)",
    why="Containers bring a small /dev/shm (DataLoader bus errors), CPU quotas and no GPU without --gpus.",
    fm=("FM-22", "FM-23", "FM-05"),
    evidence=("nianticlabs/simplerecon#3", "NVIDIA/nvidia-docker#1234"),
)
def container(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    b, t = base.platform, target.platform
    if b is None or t is None or sorted(b.container) == sorted(t.container):
        return
    yield rule.finding(
        "container",
        f"Container signals: {', '.join(sorted(b.container)) or 'none'} on the base, "
        f"{', '.join(sorted(t.container)) or 'none'} on the target.",
        "In containers give DataLoader workers shared memory (`--shm-size` / `--ipc=host`), set thread "
        "counts to the CPU quota, and pass GPUs with `--gpus`.",
        base=", ".join(sorted(b.container)) or "none",
        target=", ".join(sorted(t.container)) or "none",
    )


# Docker's default /dev/shm is 64 MiB; DataLoader workers pass batches through it.
SMALL_SHM = 256 * 1024 * 1024


@single_rule(
    "ENV-SHM-SMALL",
    family=FAMILY,
    severity="warning",
    title="/dev/shm is small (Docker's 64 MB default)",
    why=(
        "DataLoader workers pass tensors through shared memory: 'DataLoader worker … killed by signal: "
        "Bus error'."
    ),
    fm=("FM-22",),
    evidence=("nianticlabs/simplerecon#3", "microsoft/RepPoints#18", "codalab/codalab-worksheets#1961"),
)
def shm_small(rule: Rule, m: Manifest) -> Iterator[Finding]:
    p = m.platform
    if p is None or p.system != "Linux" or p.shm_bytes is None or p.shm_bytes >= SMALL_SHM:
        return
    yield rule.finding(
        "/dev/shm",
        f"/dev/shm holds {p.shm_bytes // (1024 * 1024)} MiB: DataLoader workers (num_workers > 0) die with a "
        "bus error on real batches.",
        "Start the container with `--shm-size=2g` (or `--ipc=host`), or use num_workers=0.",
        target=f"{p.shm_bytes // (1024 * 1024)} MiB",
    )


@single_rule(
    "ENV-SITECUSTOMIZE",
    family=FAMILY,
    severity="warning",
    title="a sitecustomize or usercustomize module imports torch or changes its numerics at start-up",
    why=(
        "Python's site module runs sitecustomize.py (and usercustomize.py) in every process before the "
        "application: a torch.set_flush_denormal(True), set_default_dtype, set_num_threads or TF32 switch "
        "there changes every result and no application code shows it."
    ),
    fm=("FM-18",),
)
def sitecustomize(rule: Rule, m: Manifest) -> Iterator[Finding]:
    startup = m.python.startup
    for module in startup.customize if startup is not None else []:
        calls = module.changes_numerics
        if not calls and "torch" not in module.mentions:
            continue
        what = (
            f"calls {', '.join(calls)}: torch computes differently in every process of this interpreter"
            if calls
            else "imports torch (or names it) in every process of this interpreter, before the application"
        )
        yield rule.finding(
            module.name,
            f"{module.path} runs at start-up and {what}.",
            f"Move what {module.path} does to torch into the application where it is wanted (or delete the "
            "file), so that every machine runs the same code.",
            target=module.path,
        )
