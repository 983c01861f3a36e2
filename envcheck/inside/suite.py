# mypy: ignore-errors
# ruff: noqa: UP004, UP031, PTH100, PTH105, PTH118, PTH120, PTH123, PLW0603, SIM101
"""The smoke-suite harness's entry module: ``python -c BOOT FOLDER envcheck_target.suite OUT CONFIG_JSON``.

Runs *inside the target interpreter* (stdlib + torch, numpy if present, Python 3.8) and never imports
envcheck. It imports the check families of ``checks/`` (``runtime``, ``cpu``, ``training``, ``cuda``) one
by one, plus the user's checks (``checks_file`` or the ``envcheck.checks`` entry-point group), imports
torch once, runs the checks of one *group* in order and writes OUT through ``result.emit`` (redacted,
atomic) before and after each check. ``current`` names the check in progress, so when the process crashes
or hangs the runner knows which check did it and reruns the rest in a fresh process.

A check is ``fn(ctx)`` (or ``fn()``) that records outputs with ``ctx.output(name, tensor)`` or returns a
tensor / number / dict / list / tuple of them, calls ``ctx.skip(reason)`` when it cannot run here, and
``ctx.fail(message)`` when a self-consistency condition breaks.  Outputs are summarised compactly (shape,
dtype, sha256 of the bytes, sum, abs-sum and a deterministic sample of at most ``SAMPLE_MAX`` elements).
"""

import faulthandler
import gc
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import sys
import time
import traceback

from .result import Growing
from .result import emit as _emit
from .result import finish as _finish

OUT = None
_result = {"stage": "start", "done": False, "current": None, "planned": [], "results": []}
# The child forked after ``import torch`` (``_fork_children``): the pid of the imports together's.
_children = {"forked": False, "together": None}
FAMILIES = ("runtime", "cpu", "training", "cuda")
SAMPLE_HEAD = 8
SAMPLE_STRIDED = 16
MAX_ERROR_CHARS = 2000


# The results only grow, one entry a check: each is redacted and encoded once.
_GROWING = Growing(("results",))


def emit():
    _emit(OUT, _result, _GROWING)


class Skip(Exception):
    pass


class Fail(Exception):
    pass


class Check(object):
    """One check: ``name`` is unique in the suite; ``group`` picks the process it runs in."""

    def __init__(self, name, fn, family, group="main", device="cpu", exact=False, ref=None, tolerance=None):
        self.name = name
        self.fn = fn
        self.family = family
        self.group = group
        self.device = device
        self.exact = exact
        self.ref = ref
        self.tolerance = tolerance


class Ctx(object):
    """What a check sees: torch, numpy (or None), its device, and the recorders."""

    def __init__(self, torch, check, config):
        self.torch = torch
        self.check = check
        self.device = check.device
        self.config = config
        self.outputs = {}
        self.info = {}
        self.metrics = {}
        try:
            import numpy
        except Exception:
            numpy = None
        self.numpy = numpy

    def output(self, name, value):
        self.outputs[name] = summarise(self.torch, value)

    def skip(self, reason):
        raise Skip(reason)

    def fail(self, message):
        raise Fail(message)

    def seed(self, n=0):
        self.torch.manual_seed(n)
        return self.torch.Generator().manual_seed(n)

    def randn(self, *shape, **kwargs):
        """Seeded input with mean 0 and variance 1, made on the CPU so every device gets the same numbers.

        Uniform, not normal: ``torch.randn`` takes a vectorised path that differs by a few ULPs between CPU
        capabilities (AVX512 vs default), which would blur every operator check with input drift; the
        uniform stream is the same everywhere (``random_stream`` checks both, bit for bit).
        """
        gen = self.torch.Generator().manual_seed(kwargs.pop("seed", 0))
        dtype = kwargs.pop("dtype", None)
        device = kwargs.pop("device", None)
        t = (self.torch.rand(*shape, generator=gen, dtype=self.torch.float32) * 2 - 1) * 1.7320508
        if dtype is not None:
            t = t.to(dtype)
        return t.to(device) if device is not None else t

    def expect_equal(self, name, expected, got):
        """Fail with the worst element unless ``got`` equals ``expected`` bit for bit."""
        torch = self.torch
        if tuple(expected.shape) != tuple(got.shape) or expected.dtype != got.dtype:
            self.fail(
                "%s: expected %s %s, got %s %s"
                % (name, tuple(expected.shape), expected.dtype, tuple(got.shape), got.dtype)
            )
        e = expected.detach().cpu().reshape(-1)
        g = got.detach().cpu().reshape(-1)
        if torch.equal(e, g) or (
            e.is_floating_point()
            and torch.equal(e.isnan(), g.isnan())
            and torch.equal(e.nan_to_num(), g.nan_to_num())
        ):
            return
        diff = (e.double() - g.double()).abs().nan_to_num(float("inf"))
        i = int(diff.argmax())
        self.fail("%s: element %d expected %r, got %r" % (name, i, e[i].item(), g[i].item()))


# -------------------------------------------------------------------------------------- summaries


def _number(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def sample_index(n):
    """First and last SAMPLE_HEAD elements plus SAMPLE_STRIDED evenly strided ones (deterministic)."""
    if n <= 2 * SAMPLE_HEAD + SAMPLE_STRIDED:
        return list(range(n))
    idx = set(range(SAMPLE_HEAD)) | set(range(n - SAMPLE_HEAD, n))
    step = n / float(SAMPLE_STRIDED + 1)
    idx |= {int(step * (k + 1)) for k in range(SAMPLE_STRIDED)}
    return sorted(idx)


def _sha256(as_bytes):
    """sha256 of a flat uint8 tensor, in chunks (a user's check may return a large tensor)."""
    digest = hashlib.sha256()
    step = 1 << 22
    for start in range(0, as_bytes.numel(), step):
        chunk = as_bytes[start : start + step]
        try:
            digest.update(chunk.numpy().tobytes())
        except Exception:  # torch without NumPy
            digest.update(bytes(chunk.tolist()))
    return digest.hexdigest()


def summarise(torch, value):
    if isinstance(value, bool) or isinstance(value, (int, float)):
        value = torch.tensor(value, dtype=torch.float64 if isinstance(value, float) else torch.int64)
    if not isinstance(value, torch.Tensor):
        raise TypeError("a check output must be a tensor or a number, got %s" % type(value).__name__)
    t = value.detach()
    if t.is_sparse or t.is_quantized:
        t = t.dequantize() if t.is_quantized else t.to_dense()
    for resolve in ("resolve_conj", "resolve_neg"):  # lazy conjugate / negative views (torch >= 1.10)
        if hasattr(t, resolve):
            t = getattr(t, resolve)()
    t = t.cpu().contiguous()
    flat = t.reshape(-1)
    as_bytes = flat.to(torch.uint8) if t.dtype == torch.bool else flat.view(torch.uint8)
    if t.is_complex():
        flat = torch.view_as_real(flat).reshape(-1)
    wide = flat.double() if (flat.is_floating_point() or flat.dtype == torch.bool) else flat.long().double()
    index = sample_index(wide.numel())
    values = wide[index].tolist() if index else []
    return {
        "dtype": str(t.dtype).replace("torch.", ""),
        "shape": list(t.shape),
        "sha256": _sha256(as_bytes),
        "sum": _number(wide.sum()) if wide.numel() else 0.0,
        "abs_sum": _number(wide.abs().sum()) if wide.numel() else 0.0,
        "index": index,
        "values": [_number(v) for v in values],
    }


def record_return(ctx, value, prefix="out"):
    if value is None:
        return
    if isinstance(value, dict):
        for k in value:
            record_return(ctx, value[k], str(k))
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            record_return(ctx, v, "%s%d" % (prefix, i) if prefix != "out" or len(value) > 1 else prefix)
    else:
        ctx.output(prefix, value)


# ------------------------------------------------------------------------------------------ loading


def _load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _custom_from_module(module, prefix):
    checks = []
    for attr in sorted(vars(module)):
        fn = getattr(module, attr)
        if attr.startswith("check_") and callable(fn) and getattr(fn, "__module__", None) == module.__name__:
            checks.append(
                Check(
                    prefix + attr[len("check_") :],
                    fn,
                    "custom",
                    group="custom",
                    exact=bool(getattr(fn, "exact", False)),
                    tolerance=getattr(fn, "tolerance", None),
                )
            )
    return checks


def _entry_points():
    try:
        from importlib import metadata
    except ImportError:  # Python 3.7 and older: no entry points
        return []
    eps = metadata.entry_points()
    group = eps.select(group="envcheck.checks") if hasattr(eps, "select") else eps.get("envcheck.checks", [])
    return sorted(group, key=lambda e: e.name)


def _has_entry_points():
    return bool(_entry_points())


def custom_checks(config):
    """The user's checks: ``check_*`` functions of --checks FILE, then of each ``envcheck.checks`` entry
    point (a module, or one function named by the entry point)."""
    checks = []
    if config.get("checks_file"):
        module = _load_module(config["checks_file"], "envcheck_user_checks")
        checks.extend(_custom_from_module(module, "custom/"))
    if config.get("entry_points", True):
        for ep in _entry_points():
            obj = ep.load()
            if inspect.ismodule(obj):
                checks.extend(_custom_from_module(obj, "custom/%s/" % ep.name))
            else:
                checks.append(
                    Check(
                        "custom/" + ep.name,
                        obj,
                        "custom",
                        group="custom",
                        exact=bool(getattr(obj, "exact", False)),
                        tolerance=getattr(obj, "tolerance", None),
                    )
                )
    return checks


def family_checks(torch, config, family):
    # Relative to this package, whatever name the copy was given.
    module = importlib.import_module(".checks." + family, __package__)
    return module.checks(torch, config, Check)


# -------------------------------------------------------------------------------------------- running


def _call(check, ctx):
    try:
        params = inspect.signature(check.fn).parameters
    except (TypeError, ValueError):
        params = {"ctx": None}
    return check.fn(ctx) if len(params) >= 1 else check.fn()


def run_one(torch, check, config):
    ctx = Ctx(torch, check, config)
    entry = {
        "name": check.name,
        "family": check.family,
        "device": check.device,
        "exact": check.exact,
        "ref": check.ref,
        "tolerance": check.tolerance,
    }
    started = time.monotonic()
    try:
        record_return(ctx, _call(check, ctx))
        entry["status"] = "passed"
    except Skip as e:
        entry["status"] = "skipped"
        entry["reason"] = str(e)
    except Fail as e:
        entry["status"] = "failed"
        entry["error"] = str(e)[:MAX_ERROR_CHARS]
    except Exception as e:
        entry["status"] = "error"
        entry["error"] = ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR_CHARS]
        entry["traceback"] = traceback.format_exc()[-MAX_ERROR_CHARS:]
    entry["duration_s"] = round(time.monotonic() - started, 4)
    entry["outputs"] = ctx.outputs
    entry["info"] = ctx.info
    entry["metrics"] = ctx.metrics
    return entry


def _fork_children(torch, config, before):
    """Right after ``import torch``, before any of torch's operators ran in this process (a child forked
    after OpenMP's threads started hangs in its first parallel region): fork the child that imports the
    application's modules together beside the checks (``together``), when ``before`` is not None."""
    _children["forked"] = True
    if before is not None:
        from .together import fork as fork_together

        _children["together"] = fork_together(config, before, torch)


def _collector_back():
    """After ``import torch``, in the groups other than ``main``: the cyclic collector on again, with what
    the import made frozen (never walked again: it lives as long as the process)."""
    gc.freeze()
    gc.enable()


def _progress(path, line):
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")


def main(argv):
    global OUT
    OUT = argv[1]
    # A segfault or abort in native code then leaves the Python stack in the stderr tail the runner keeps.
    faulthandler.enable()
    config = json.loads(argv[2])
    group = config["group"]
    # The application's imports together may run in a child forked after `import torch` (``together``):
    # the libraries mapped before it, so the child can tell which ones torch brought.
    before = None
    if config.get("together"):
        from .loaded_libraries import loaded_libraries

        before = loaded_libraries()
    exclude = set(config.get("exclude") or ())
    progress = config.get("progress")
    _result["group"] = group
    if (
        group == "custom"
        and not config.get("checks_file")
        and not (config.get("entry_points", True) and _has_entry_points())
    ):
        # No custom checks: done without paying for `import torch`.
        _result["stage"] = "done"
        _result["done"] = True
        emit()
        return 0
    # The cyclic collector is off in this short-lived process: its passes over the half a million objects
    # torch and torch.export's first run create cost a quarter of the suite's time (0.12 s of import
    # torch, 0.45 s of torch.export, torch 2.13) to free some 10,000 of them (a few MB: 342 MB of RSS
    # either way). The process leaves through os._exit, so nothing waits on a collection. The other
    # groups get it back after import torch (``_collector_back``): the user's checks, as their programs
    # have it, and torch.compile, whose 15-35 s of graph and SymPy work would otherwise keep every cycle.
    gc.disable()
    # import torch is itself the first check of the main group: a crash here is a result, not a mystery.
    first = group == "main" and "import_torch" not in exclude
    _result["current"] = "import_torch" if first else group + "/import"
    _result["stage"] = "import torch"
    emit()
    _progress(progress, "importing torch (%s group)\tcpu" % group)
    started = time.monotonic()
    probed = None
    if first and config.get("probe_out"):
        # The snapshot's runtime probe, first and in this process: one `import torch` for both. It notes
        # the floating-point mode before torch itself, and writes its own result file; the runner reruns
        # the group in a fresh process if this one ends inside the probe.
        from .probe import runtime_beside

        _result["stage"] = "runtime probe"
        emit()
        probed = runtime_beside(config["probe_out"], lambda torch: _fork_children(torch, config, before))
        _result["stage"] = "import torch"
        emit()
    else:
        # The floating-point mode before torch: import_torch then tells who turned flush-to-zero on.
        from .fp_control import note_start

        note_start()
    try:
        import torch
    except Exception as e:
        _result["import_error"] = "%s: %s" % (type(e).__name__, e)
        _result["stage"] = "import torch failed"
        emit()
        return 0
    seconds = probed.get("import_seconds") if probed else None
    _result["import_s"] = round(seconds if seconds is not None else time.monotonic() - started, 4)
    if not _children["forked"]:
        _fork_children(torch, config, before)
    child = _children["together"]
    if config.get("threads"):
        torch.set_num_threads(int(config["threads"]))
    if group != "main":
        _collector_back()
    # Checks are loaded family by family, each just before it runs: finding the CUDA devices initialises
    # the driver, which can crash or hang; by then every CPU result is already on disk.
    if group == "custom":
        batches = [("custom/load", lambda: custom_checks(config))]
    else:
        batches = [
            (
                "cuda/detect" if family == "cuda" else family + "/load",
                lambda family=family: [c for c in family_checks(torch, config, family) if c.group == group],
            )
            for family in FAMILIES
        ]
    number = 0
    total = 0
    for load_name, load in batches:
        _result["current"] = load_name
        _result["stage"] = "load " + load_name
        emit()
        try:
            checks = load()
        except Exception as e:
            _result["results"].append(
                {
                    "name": load_name,
                    "family": load_name.split("/")[0],
                    "device": "cpu",
                    "status": "error",
                    "error": ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR_CHARS],
                    # The frame in the user's file names the line of a failed import exactly.
                    "traceback": traceback.format_exc()[-MAX_ERROR_CHARS:],
                }
            )
            _result["planned"].append([load_name, "cpu"])
            continue
        _result["planned"].extend([c.name, c.device] for c in checks)
        _result["current"] = None
        emit()
        todo = [c for c in checks if c.name not in exclude]
        total += len(todo)
        for check in todo:
            number += 1
            _result["current"] = check.name
            _result["stage"] = "check " + check.name
            emit()
            _progress(progress, "%s\t%s\t%d/%d" % (check.name, check.device, number, total))
            entry = run_one(torch, check, config)
            if check.name == "import_torch":
                entry["duration_s"] = _result["import_s"]
            _result["results"].append(entry)
            _result["current"] = None
            emit()
    if child is not None:
        from .together import wait as wait_together

        # The checks are over and final on disk: a kill while the child imports is none of theirs.
        _result["stage"] = "done"
        _result["done"] = True
        emit()
        wait_together(child, config)
    _finish(OUT, _result, _GROWING)  # exits
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
