#!/usr/bin/env python3
"""envcheck's speed budgets (docs/budgets.md), measured against the anchors in the same run.

    python ci/bench.py [--python TARGET] [-n 5] [--check] [--only NAME ...]
    python ci/bench.py --breakdown [-n 5]     (where the gate's time goes, step by step: wall and CPU)
    python ci/bench.py --only gate --ml-venv ~/.cache/envcheck/ml-venv   (the large venv's gate alone)

Runs N alternating repetitions of each command (alternating, so a noisy neighbour hurts all of them alike)
in the target environment, prints the median wall time of each, and the ratios the budgets are written in:

    full snapshot            <= 1.10 x  python -c "import torch"   (--no-verify; with goldens: reported)
    predict (warm cache, --resolver pip) <= 1.10 x  pip install --dry-run --report of the same set
    predict (warm cache, --resolver uv)  <= 2 s   (uv pip compile of the same set: reported beside it;
        both resolvers cold, with an empty wheel cache, once each: reported)
    snapshot --no-probe      <= 0.80 x  pip freeze
    diff (500 pkgs, 500 libs) <= 0.25 s (CLI start included)
    verify (CPU suite)       <= import torch + 5 s   (--no-imports; the default, with the imports: reported)
    gate (default: the app's imports and the RECORD check, warm hash cache) <= 2 x import torch
        (cold hash cache, and the imports' share: reported; --breakdown: each step alone)
    gate of a large ML venv (--ml-venv PATH: torch, scipy, pandas, scikit-learn, opencv, pyarrow,
        onnxruntime, tokenizers, matplotlib, h5py, lxml and more, 25+ modules with native code)
        <= 2 x the CPU of importing those modules once, in one process
    fleet diff (1,000 x 500/500, 90% identical) per manifest <= 0.10 x  diff 500/500;
        peak memory of its whole process tree < 300 MB
    RECORD check of the live snapshot (gate, doctor): with a warm hash cache, the native walk's extra time
        <= 0.05 x  import torch (cold, no cache, and doctor's end-to-end times: reported)
    invariant checks (the installation's, the interpreter's, what is built against torch, the configuration:
        their facts in the target and their rules), warm  <= 0.10 x  import torch

Absolute times are noisy on shared machines; quote the ratios. ``--check`` exits 1 when a budget is missed.
The target interpreter needs torch; envcheck runs from the interpreter running this script.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def envcheck_cmd() -> list[str]:
    script = Path(sys.executable).with_name("envcheck")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envcheck"]


# As on a user's machine, bytecode is cached: a PYTHONDONTWRITEBYTECODE in the caller's environment (CI
# images set it) would recompile envcheck, pip and torch's Python on every run and measure that instead.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# CPU seconds (user + system) of each command's whole process tree, by name: on a shared machine wall times
# swing with the neighbours' load, the CPU a command spends much less.
CPU: dict[str, list[float]] = {}


def _children_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: Sequence[str], cwd: Path, name: str = "") -> float:
    cpu = _children_cpu()
    start = time.perf_counter()
    result = subprocess.run(
        argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False
    )
    elapsed = time.perf_counter() - start
    if name:
        CPU.setdefault(name, []).append(_children_cpu() - cpu)
    if result.returncode not in (0, 1):  # diff exits 1 on findings: that is its job, not a failure
        sys.exit(f"bench: {' '.join(argv)} exited {result.returncode}:\n{result.stderr.decode()[-2000:]}")
    return elapsed


def _tree_rss_kb(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (Linux /proc), in KiB. Shared pages count in
    every process that maps them: an upper bound on what the tree holds."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        proc = Path(f"/proc/{pid}")
        try:
            total += int((proc / "statm").read_text().split()[1]) * page_kb
            for task in proc.glob("task/*/children"):  # a child may be forked by any thread
                todo += [int(child) for child in task.read_text().split()]
        except (OSError, ValueError, IndexError):
            continue  # the process ended between two reads
    return total


def timed_tree(argv: Sequence[str], cwd: Path) -> tuple[float, float]:
    """``timed``, and the peak resident memory (MB) of the command's whole process tree, workers included,
    sampled every 20 ms (Linux; elsewhere the largest single process's peak, from ``ru_maxrss``)."""
    import resource
    import threading

    peak_kb = 0
    done = threading.Event()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def sample() -> None:
        nonlocal peak_kb
        while not done.wait(0.02):
            peak_kb = max(peak_kb, _tree_rss_kb(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    if Path("/proc/self/task").is_dir():
        sampler.start()
    _, stderr = proc.communicate()
    elapsed = time.perf_counter() - start
    done.set()
    if sampler.is_alive():
        sampler.join()
    else:
        peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if proc.returncode not in (0, 1):
        sys.exit(f"bench: {' '.join(argv)} exited {proc.returncode}:\n{stderr.decode()[-2000:]}")
    return elapsed, peak_kb / 1024


# predict's budget: the dev box's CPU manifest predicted for Windows with a warm wheel cache (the warm-up
# run fills it; "predict (cold)" times a fresh cache once), against the same set resolved by pip alone.
PREDICT_MANIFEST = HERE.parent / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"


def image_commands(layout: Path, work: Path, ec: Sequence[str]) -> dict[str, list[str]]:
    """``snapshot --image`` of the OCI layout ``layout``, and its floor: ``tar`` extracting the image's
    layers, in order, into an empty folder (what any reader of the image must at least do)."""
    index = json.loads((layout / "index.json").read_text(encoding="utf-8"))

    def blob(digest: str) -> Path:
        algorithm, _, hexdigest = digest.partition(":")
        return layout / "blobs" / algorithm / hexdigest

    manifest = json.loads(blob(index["manifests"][0]["digest"]).read_text(encoding="utf-8"))
    layers = " ".join(shlex.quote(str(blob(layer["digest"]))) for layer in manifest["layers"])
    folder = shlex.quote(str(work / "image-root"))
    untar = f'rm -rf {folder} && mkdir {folder} && for l in {layers}; do tar -xf "$l" -C {folder}; done'
    return {
        "snapshot --image": [
            *ec,
            "snapshot",
            "--image",
            str(layout),
            "-o",
            str(work / "image.json"),
            "--force",
        ],
        "tar -x the layers": ["sh", "-c", untar],
    }


# The large ML venv of the gate's second budget: real wheels from the registry, 25 or more top-level
# modules with native code (torch's own index for torch is the caller's pip configuration: on stock PyPI
# Linux torch is the CUDA build; PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu gets the CPU one).
ML_PACKAGES = (
    "torch",
    "scipy",
    "pandas",
    "scikit-learn",
    "opencv-python-headless",
    "pyarrow",
    "onnxruntime",
    "tokenizers",
    "matplotlib",
    "h5py",
    "lxml",
    "pillow",
    "psutil",
    "pyyaml",
    "regex",
    "safetensors",
    "orjson",
    "msgpack",
    "charset-normalizer",
    "markupsafe",
    "pydantic",
    "zstandard",
    "ujson",
)


def ml_venv(path: Path) -> str:
    """The interpreter of the venv at ``path``, made and filled with ``ML_PACKAGES`` by pip if it has none."""
    python = path / "bin" / "python"
    if not python.exists():
        print(f"note: building the large ML venv at {path} (pip install of {len(ML_PACKAGES)} projects)")
        subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check", *ML_PACKAGES]
        subprocess.run(pip, check=True, env=ENV)
    return str(python)


def ml_commands(py: str, work: Path, ec: Sequence[str]) -> dict[str, list[str]]:
    """The default gate of the large ML venv ``py`` against its own snapshot, and its anchor: one process
    importing once every module with native code the gate imports (the plan's modules, torch included;
    one that fails is passed over, as the gate reports it)."""
    from envcheck.process.runner import run_target
    from envcheck.verify.imports import APP_IMPORTS_MODULE

    plan = run_target(py, module=APP_IMPORTS_MODULE, args=[json.dumps({"mode": "plan"})], timeout=60)
    modules = [row[0] for row in plan.data.get("found") or [] if isinstance(row, list) and row]
    print(f"note: the large ML venv has {len(modules)} modules with native code: {', '.join(modules)}")
    ref = work / "ml-ref.json"
    subprocess.run([*ec, "snapshot", "--python", py, "-o", str(ref)], check=True, capture_output=True)
    imports = "".join(f"try:\n    import {m}\nexcept Exception:\n    pass\n" for m in modules)
    return {
        "ML venv: import its native modules": [py, "-c", imports],
        "ML venv: gate": [*ec, "gate", str(ref), "--python", py],
    }


def predict_commands(work: Path, ec: Sequence[str]) -> dict[str, list[str]]:
    """``pip install --dry-run --report`` of the set ``envcheck predict`` resolves (the same pins,
    constraints, target options and markers), and ``envcheck predict`` itself."""
    from envcheck.manifest.io import load
    from envcheck.predict import IndexOptions, parse_target
    from envcheck.predict.resolve import pip_command, uv_command
    from envcheck.predict.uv import uv_platform

    target = parse_target("win_amd64", "3.11")
    anchor = pip_command(load(PREDICT_MANIFEST), target, IndexOptions(), work / "predict-anchor")
    predict = [*ec, "predict", str(PREDICT_MANIFEST), "--platform", "win_amd64", "--python-version", "3.11"]
    commands = {
        "pip dry-run report": anchor,
        "predict (warm, pip)": [*predict, "--quiet", "--resolver", "pip"],
    }
    try:  # uv: the envcheck[uv] extra or uv on PATH
        uv = uv_command(load(PREDICT_MANIFEST), target, IndexOptions(), work / "predict-uv-anchor")
    except Exception as e:  # no uv: its lines are left out, saying why
        print(f"note: uv lines skipped ({e})", file=sys.stderr)
        return commands
    extra = (uv_platform(target) or ("", {}))[1]
    commands["uv pip compile"] = ["env", *(f"{k}={v}" for k, v in extra.items()), *uv]
    commands["predict (warm, uv)"] = [*predict, "--quiet", "--resolver", "uv"]
    return commands


def predict_cold(work: Path, ec: Sequence[str], resolver: str) -> tuple[float, float]:
    """One ``envcheck predict`` with an empty wheel cache (downloads and scans included): wall and CPU
    seconds. The resolver's own caches (pip's HTTP cache, uv's) stay as they are."""
    env = {**ENV, "XDG_CACHE_HOME": str(work / f"cold-cache-{resolver}")}
    argv = [*ec, "predict", str(PREDICT_MANIFEST), "--platform", "win_amd64", "--python-version", "3.11"]
    argv += ["--resolver", resolver]
    cpu = _children_cpu()
    start = time.perf_counter()
    subprocess.run(argv, cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - start, _children_cpu() - cpu


def integrity_commands(work: Path, ec: Sequence[str], py: str) -> dict[str, list[str]]:
    """The live snapshot's RECORD check (gate, doctor and diff do it by default), timed through ``doctor``:
    without it (``ENVCHECK_INTEGRITY=0``), with no hash cache (every RECORD-listed native file hashed: the
    cold cost) and with a warm one (the warm-up run fills it)."""
    doctor = [*ec, "doctor", "--python", py]
    return {
        "doctor, no integrity": ["env", "ENVCHECK_INTEGRITY=0", *doctor],
        "doctor, integrity cold": ["env", "ENVCHECK_CACHE_DIR=off", *doctor],
        "doctor, integrity warm": ["env", f"ENVCHECK_CACHE_DIR={work / 'hash-cache'}", *doctor],
    }


def integrity_walk(py: str, work: Path, n: int) -> dict[str, float]:
    """Median seconds of the native walk of ``py``'s environment in this process (the part of a snapshot the
    RECORD check adds to), without the check, with it and no hash cache (cold), with a warm cache."""
    from envcheck.collect.launch import SnapshotOptions
    from envcheck.collect.snapshot import take_snapshot
    from envcheck.native import scan_for_snapshot

    manifest = take_snapshot(SnapshotOptions(python=py, probe=False, verify=False))
    runs = {
        "walk": ("off", False),
        "walk, cold": ("off", True),
        "walk, warm": (str(work / "walk-cache"), True),
    }
    times: dict[str, list[float]] = {name: [] for name in runs}
    saved = os.environ.get("ENVCHECK_CACHE_DIR")
    try:
        for rep in range(n + 1):  # the first round warms the page cache and the hash cache
            for name, (cache, integrity) in runs.items():
                os.environ["ENVCHECK_CACHE_DIR"] = cache
                start = time.perf_counter()
                scan_for_snapshot(manifest, SnapshotOptions(probe=False, integrity=integrity))
                if rep:
                    times[name].append(time.perf_counter() - start)
    finally:
        if saved is None:
            os.environ.pop("ENVCHECK_CACHE_DIR", None)
        else:
            os.environ["ENVCHECK_CACHE_DIR"] = saved
    return {name: statistics.median(ts) for name, ts in times.items()}


# The installation and configuration invariants' own facts, timed in the target interpreter itself: what the
# facts probe does for them beyond reading the distributions (every RECORD read and the package folders
# walked; wheel tags, pyvenv.cfg and the console scripts; the compilers and folders torch's variables name).
INVARIANT_FACTS = r"""
import json, statistics, sys, time
sys.path.insert(0, sys.argv[1])
from envcheck.inside.config_checks import config_checks
from envcheck.inside.distributions import distributions
from envcheck.inside.environment import collect_env
from envcheck.inside.install_facts import install_facts
from envcheck.inside.venv_facts import venv_facts
packages, _ = distributions()
env = collect_env()
steps = {"install facts": lambda: install_facts(packages), "venv facts": lambda: venv_facts(packages),
         "config checks": lambda: config_checks(env)}
times = {name: [] for name in steps}
for rep in range(int(sys.argv[2]) + 1):
    for name, step in steps.items():
        start = time.perf_counter()
        step()
        if rep:
            times[name].append(time.perf_counter() - start)
print(json.dumps({name: statistics.median(ts) for name, ts in times.items()}))
"""

# The rule families of the invariants, run over the live snapshot's manifest in this process.
INVARIANT_FAMILIES = ("installation", "interpreter", "built against torch", "environment variables")


def invariant_checks(py: str, work: Path, n: int) -> dict[str, float]:
    """Median seconds of each invariant fact in the target (``INVARIANT_FACTS``) and of their rules over
    the live snapshot (warm: the second run on)."""
    from envcheck.app.catalog import catalog
    from envcheck.collect.launch import SnapshotOptions
    from envcheck.collect.snapshot import take_snapshot
    from envcheck.diff.engine import doctor

    argv = [py, "-c", INVARIANT_FACTS, str(HERE.parent), str(n)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, env=ENV, cwd=work)
    medians: dict[str, float] = json.loads(out.stdout)
    manifest = take_snapshot(SnapshotOptions(python=py, probe=False, verify=False))
    rules = [r for r in catalog() if r.family in INVARIANT_FAMILIES and r.single is not None]
    times = []
    for rep in range(n + 1):
        start = time.perf_counter()
        doctor(manifest, rules=rules)
        if rep:
            times.append(time.perf_counter() - start)
    medians["their rules"] = statistics.median(times)
    return medians


def _cpu_now() -> float:
    """CPU seconds (user + system) of this process and of its children it has waited for."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + _children_cpu()


def gate_breakdown(py: str, work: Path, n: int) -> dict[str, tuple[float, float]]:
    """Where the default gate's time goes: each step of ``run_gate`` alone, in this process, ``n``
    alternating rounds after a warm-up, beside ``import torch`` and a bare interpreter start. Median wall
    and CPU seconds (this process and its targets) of each. The live snapshot has a warm hash cache and
    its own runtime probe (as diff and doctor take it); the gate runs that probe in the suite's process
    ("smoke suite + probe"). "imports (all steps)": the plan, each module alone, then all together."""
    from envcheck.api._snapshot import snapshot_this_machine
    from envcheck.api._verify import SuiteOptions, run_gate
    from envcheck.diff.policy import Policy
    from envcheck.manifest.io import load
    from envcheck.process.runner import run_target
    from envcheck.verify.imports import APP_IMPORTS_MODULE, run_imports
    from envcheck.verify.runner import RuntimeProbe, run_suite

    ref = work / "breakdown-ref.json"
    snapshot = [*envcheck_cmd(), "snapshot", "--python", py, "-o", str(ref)]
    subprocess.run(snapshot, check=True, capture_output=True)
    base = load(ref)
    held: dict[str, Any] = {}

    def together() -> object:
        passed = [r.module for r in held["imports"].results if r.status == "passed"]
        config = json.dumps({"mode": "all", "modules": [*passed, "torch"], "path": str(work)})
        return run_target(py, module=APP_IMPORTS_MODULE, args=[config], timeout=120)

    def flow() -> object:
        from envcheck.app import flows

        live, suite, imports = held["live"], held["suite"], held["imports"]
        return flows.gate("ref", base, live, suite, Policy(), strict=False, imports=imports)

    steps: dict[str, Callable[[], object]] = {
        "interpreter start": lambda: subprocess.run([py, "-c", "pass"], check=True),
        "import torch": lambda: subprocess.run([py, "-c", "import torch"], check=True),
        "facts probe": lambda: run_target(py, args=["facts"], timeout=120),
        "runtime probe": lambda: run_target(py, args=["runtime"], timeout=120),
        "live snapshot": lambda: snapshot_this_machine(py, timeout=120.0),
        "native walk + RECORD": lambda: _walk_once(py, held),
        "smoke suite": lambda: run_suite(py, timeout=120.0),
        # What the gate runs: the runtime probe first in the suite's main process (one import torch).
        "smoke suite + probe": lambda: run_suite(py, timeout=120.0, runtime_probe=RuntimeProbe()),
        "imports: plan": lambda: run_target(
            py, module=APP_IMPORTS_MODULE, args=[json.dumps({"mode": "plan"})], timeout=60
        ),
        "imports (all steps)": lambda: run_imports(
            py, timeout=120.0, alone_elsewhere={"torch": "the smoke suite's import_torch check"}
        ),
        "imports: together": together,
        "diff + compare": flow,
        "gate, in-process": lambda: run_gate(ref, base=base, options=SuiteOptions(python=py)),
    }
    keys = {"live snapshot": "live", "smoke suite": "suite", "imports (all steps)": "imports"}
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in steps}
    for rep in range(n + 1):  # the first round warms the page cache, the .pyc files and the hash cache
        for name, step in steps.items():
            cpu, start = _cpu_now(), time.perf_counter()
            value = step()
            if name in keys:
                held[keys[name]] = value
            if rep:
                times[name].append((time.perf_counter() - start, _cpu_now() - cpu))
    return {
        name: (statistics.median(w for w, _ in ts), statistics.median(c for _, c in ts))
        for name, ts in times.items()
    }


def _walk_once(py: str, held: dict[str, Any]) -> object:
    """The native walk with the RECORD check, warm hash cache, of the live snapshot's manifest."""
    from envcheck.collect.launch import SnapshotOptions
    from envcheck.native import scan_for_snapshot

    return scan_for_snapshot(held["live"], SnapshotOptions(probe=False, integrity=True))


def print_breakdown(rows: dict[str, tuple[float, float]]) -> None:
    torch_wall, torch_cpu = rows["import torch"]
    print("gate breakdown (each step alone, medians; x: of import torch):\n")
    print(f"  {'step':<24} {'wall s':>7} {'x':>5}   {'cpu s':>7} {'x':>5}")
    for name, (wall, cpu) in rows.items():
        print(f"  {name:<24} {wall:7.3f} {wall / torch_wall:5.2f}   {cpu:7.3f} {cpu / torch_cpu:5.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--python", default=sys.executable, help="target interpreter (must have torch)")
    parser.add_argument("-n", type=int, default=5, help="repetitions of each command")
    parser.add_argument("--check", action="store_true", help="exit 1 when a budget is missed")
    parser.add_argument("--skip", action="append", default=[], help="skip a command by name")
    parser.add_argument(
        "--only", action="append", default=[], help="run only these commands by name (and the anchors)"
    )
    parser.add_argument("--fleet", type=int, default=1000, help="manifests in the fleet diff (0: skip it)")
    parser.add_argument(
        "--breakdown", action="store_true", help="only where the gate's time goes, step by step"
    )
    parser.add_argument(
        "--image",
        type=Path,
        help="an OCI image layout folder: snapshot --image of it, against tar extracting its layers",
    )
    parser.add_argument(
        "--ml-venv",
        type=Path,
        help="a large ML venv (built there with ML_PACKAGES when it has no interpreter): its gate's CPU "
        "against importing its native modules once",
    )
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="envcheck-bench-"))
    if args.breakdown:
        try:
            print_breakdown(gate_breakdown(args.python, work, args.n))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        return 0
    fleet_truth: dict[str, list[str]] = {}
    py = args.python
    ec = envcheck_cmd()
    commands: dict[str, list[str]] = {
        "import torch": [py, "-c", "import torch"],
        "collect_env": [py, "-m", "torch.utils.collect_env"],
        "pip freeze": [py, "-m", "pip", "freeze", "--disable-pip-version-check"],
        "pip inspect": [py, "-m", "pip", "inspect", "--disable-pip-version-check"],
        "snapshot": [*ec, "snapshot", "--no-verify", "--python", py, "-o", str(work / "full.json")],
        # The default snapshot also runs the smoke suite for goldens: reported, its budget is verify's.
        "snapshot + goldens": [*ec, "snapshot", "--python", py, "-o", str(work / "goldens.json")],
        "snapshot --no-probe": [
            *ec,
            "snapshot",
            "--no-probe",
            "--no-verify",
            "--python",
            py,
            "-o",
            str(work / "static.json"),
        ],
    }
    # The diff budget is for manifests of 500 packages and 500 libraries: grow a real one into such a pair.
    subprocess.run(
        [*ec, "snapshot", "--no-verify", "--python", py, "-o", str(work / "seed.json")],
        check=True,
        capture_output=True,
    )
    sys.path.insert(0, str(HERE))
    try:
        from synth import synthesize  # ci/synth.py

        base, target = synthesize(work / "seed.json", packages=500, libraries=500)
        (work / "big-a.json").write_text(json.dumps(base, indent=2, sort_keys=True))
        (work / "big-b.json").write_text(json.dumps(target, indent=2, sort_keys=True))
        commands["diff 500/500"] = [*ec, "diff", str(work / "big-a.json"), str(work / "big-b.json")]
        if args.fleet > 0:  # the same seed grown into a fleet: 90% identical, the rest in a few groups
            from synth import write_fleet

            fleet_truth = write_fleet(work / "seed.json", work / "fleet", machines=args.fleet)
            fleet_argv = [*ec, "diff", str(work / "fleet" / "base.json"), str(work / "fleet" / "machines")]
            commands["fleet diff"] = [*fleet_argv, "--format", "json", "-o", str(work / "fleet.json")]
    except ImportError as e:
        print(f"note: diff benchmark skipped ({e})", file=sys.stderr)
    # The suite's budget is for the suite: the application's imports are measured apart, in the gate.
    commands["verify (CPU)"] = [*ec, "verify", "--python", py, "--no-imports"]
    commands["verify + imports"] = [*ec, "verify", "--python", py]
    # The gate against goldens of this same environment, as CI runs it: by default it also imports every
    # installed module with native code (each alone, then all together); --no-imports is that step's cost.
    gate_ref = work / "gate-ref.json"
    subprocess.run([*ec, "snapshot", "--python", py, "-o", str(gate_ref)], check=True, capture_output=True)
    commands["gate"] = [*ec, "gate", str(gate_ref), "--python", py]
    commands["gate --no-imports"] = [*ec, "gate", str(gate_ref), "--python", py, "--no-imports"]
    # The same gate with no hash cache: every RECORD-listed native file is hashed, as on a first run.
    commands["gate (cold hashes)"] = [
        "env",
        "ENVCHECK_CACHE_DIR=off",
        *ec,
        "gate",
        str(gate_ref),
        "--python",
        py,
    ]
    commands.update(predict_commands(work, ec))
    commands.update(integrity_commands(work, ec, py))
    if args.image is not None:
        commands.update(image_commands(args.image, work, ec))
    if args.ml_venv is not None:
        commands.update(ml_commands(ml_venv(args.ml_venv.absolute()), work, ec))
    for name in args.skip:
        commands.pop(name, None)
    if args.only:
        keep = {*args.only, "import torch", *(name for name in commands if name.startswith("ML venv: "))}
        commands = {name: argv for name, argv in commands.items() if name in keep}

    times: dict[str, list[float]] = {name: [] for name in commands}
    for argv in commands.values():  # warm-up: page cache, .pyc files
        timed(argv, work)
    fleet_rss: list[float] = []
    for _ in range(args.n):
        for name, argv in commands.items():
            if name == "fleet diff":
                seconds, peak = timed_tree(argv, work)
                times[name].append(seconds)
                fleet_rss.append(peak)
            else:
                times[name].append(timed(argv, work, name))
    medians = {name: statistics.median(ts) for name, ts in times.items()}

    print(f"target: {py}\nenvcheck: {' '.join(ec)}\nrepetitions: {args.n} (alternating), medians:\n")
    for name, median in medians.items():
        spread = f"{min(times[name]):.3f}-{max(times[name]):.3f}"
        cpu = f"   cpu {statistics.median(CPU[name]):7.3f} s" if CPU.get(name) else ""
        print(f"  {name:<22} {median:7.3f} s   (range {spread}){cpu}")

    budgets: list[tuple[str, float, float, str]] = []
    missed = False
    if "snapshot" in medians and "import torch" in medians:
        budgets.append(("snapshot / import torch", medians["snapshot"] / medians["import torch"], 1.10, "x"))
    if "snapshot --no-probe" in medians and "pip freeze" in medians:
        ratio = medians["snapshot --no-probe"] / medians["pip freeze"]
        budgets.append(("snapshot --no-probe / pip freeze", ratio, 0.80, "x"))
    if "snapshot + goldens" in medians and "import torch" in medians:
        ratio = medians["snapshot + goldens"] / medians["import torch"]
        budgets.append(("snapshot + goldens / import torch", ratio, float("inf"), "x"))
    if "snapshot" in medians and "collect_env" in medians:
        budgets.append(
            ("snapshot / collect_env", medians["snapshot"] / medians["collect_env"], float("inf"), "x")
        )
    if "diff 500/500" in medians:
        budgets.append(("diff 500/500 (seconds)", medians["diff 500/500"], 0.25, "s"))
    if "fleet diff" in medians and "diff 500/500" in medians:
        per_manifest = medians["fleet diff"] / args.fleet
        print(f"\nfleet diff: {args.fleet} manifests, {1000 * per_manifest:.1f} ms per manifest")
        ratio = per_manifest / medians["diff 500/500"]
        budgets.append(("fleet per manifest / diff 500/500", ratio, 0.10, "x"))
        budgets.append(("fleet peak RSS, process tree (MB)", max(fleet_rss), 300.0, ""))
        report = json.loads((work / "fleet.json").read_text(encoding="utf-8"))
        found = sorted(sorted(g["members"]) for g in report["groups"])
        right = found == sorted(sorted(labels) for labels in fleet_truth.values())
        missed |= not right
        print(f"fleet diff: {len(found)} groups, {'as synthesized' if right else 'NOT as synthesized'}")
    if "predict (warm, pip)" in medians and "pip dry-run report" in medians:
        ratio = medians["predict (warm, pip)"] / medians["pip dry-run report"]
        budgets.append(("predict (warm, pip) / pip dry-run", ratio, 1.10, "x"))
        pip_cpu = statistics.median(CPU["predict (warm, pip)"]) / statistics.median(CPU["pip dry-run report"])
        budgets.append(("  the same in CPU time", pip_cpu, float("inf"), "x"))
    if "predict (warm, uv)" in medians:
        budgets.append(("predict (warm, uv) (seconds)", medians["predict (warm, uv)"], 2.0, "s"))
        uv_cpu = statistics.median(CPU["predict (warm, uv)"])
        budgets.append(("  its CPU time (s)", uv_cpu, float("inf"), "s"))
        if "uv pip compile" in medians:
            ratio = medians["predict (warm, uv)"] / medians["uv pip compile"]
            budgets.append(("predict (warm, uv) / uv pip compile", ratio, float("inf"), "x"))
    if "verify (CPU)" in medians and "import torch" in medians:
        extra = medians["verify (CPU)"] - medians["import torch"]
        budgets.append(("verify - import torch (seconds)", extra, 5.0, "s"))
    if "verify + imports" in medians and "import torch" in medians:
        extra = medians["verify + imports"] - medians["import torch"]
        budgets.append(("verify + imports - import torch (s)", extra, float("inf"), "s"))
    if "gate" in medians and "import torch" in medians:
        # The default gate, imports and RECORD check included, with a warm hash cache: <= 2 x import torch.
        budgets.append(("gate / import torch", medians["gate"] / medians["import torch"], 2.0, "x"))
    if "gate (cold hashes)" in medians and "import torch" in medians:
        ratio = medians["gate (cold hashes)"] / medians["import torch"]
        budgets.append(("gate, cold hashes / import torch", ratio, float("inf"), "x"))
    if "gate" in medians and "gate --no-imports" in medians:
        extra = medians["gate"] - medians["gate --no-imports"]
        budgets.append(("gate: the app's imports (seconds)", extra, float("inf"), "s"))
        imports_cpu = statistics.median(CPU["gate"]) - statistics.median(CPU["gate --no-imports"])
        budgets.append(("gate: the app's imports (CPU s)", imports_cpu, float("inf"), "s"))

    ml_gate, ml_anchor = "ML venv: gate", "ML venv: import its native modules"
    if ml_gate in medians and ml_anchor in medians:
        # The large ML venv's gate: <= 2 x the CPU of importing its native modules once, in one process.
        ratio = statistics.median(CPU[ml_gate]) / statistics.median(CPU[ml_anchor])
        budgets.append(("ML venv: gate / its imports, CPU", ratio, 2.0, "x"))
        budgets.append(("  the same in wall time", medians[ml_gate] / medians[ml_anchor], float("inf"), "x"))

    if "snapshot --image" in medians and "tar -x the layers" in medians:
        ratio = medians["snapshot --image"] / medians["tar -x the layers"]
        budgets.append(("snapshot --image / tar -x its layers", ratio, 2.0, "x"))

    if "doctor, no integrity" in medians and "import torch" in medians:
        for label, name in (
            ("doctor: RECORD check, cold / import torch", "doctor, integrity cold"),
            ("doctor: RECORD check, warm / import torch", "doctor, integrity warm"),
        ):
            if name in medians:
                extra = medians[name] - medians["doctor, no integrity"]
                budgets.append((label, extra / medians["import torch"], float("inf"), "x"))
        walk = integrity_walk(py, work, args.n)
        print("\nnative walk: " + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in walk.items()))
        for label, name, limit in (
            ("walk: RECORD check, cold / import torch", "walk, cold", float("inf")),
            ("walk: RECORD check, warm / import torch", "walk, warm", 0.05),
        ):
            extra = walk[name] - walk["walk"]
            budgets.append((label, extra / medians["import torch"], limit, "x"))

    if "import torch" in medians and "invariants" not in args.skip:
        # The invariants (installation, interpreter, built against torch, configuration), warm: their facts
        # in the target and their rules add <= 0.1 x import torch to the gate.
        invariants = invariant_checks(py, work, args.n)
        print("\ninvariants: " + ", ".join(f"{name} {seconds:.3f} s" for name, seconds in invariants.items()))
        total = sum(invariants.values())
        budgets.append(("invariant checks / import torch", total / medians["import torch"], 0.10, "x"))

    if "predict (cold)" not in args.skip:
        for resolver in ("pip", "uv"):
            if f"predict (warm, {resolver})" in medians:
                wall, cold_cpu = predict_cold(work, ec, resolver)
                shown = f"{wall:.3f} s, cpu {cold_cpu:.3f} s"
                print(f"\npredict --resolver {resolver} (cold wheel cache, once): {shown}")

    print("\nbudgets:")
    for label, value, limit, unit in budgets:
        ok = value <= limit
        missed |= not ok
        shown = "" if limit == float("inf") else f"budget <= {limit:g}{unit}  {'ok' if ok else 'MISSED'}"
        print(f"  {label:<34} {value:6.3f}{unit}   {shown}")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if (missed and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
