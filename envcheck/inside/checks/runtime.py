# mypy: ignore-errors
# ruff: noqa: UP031, PTH118, PTH119, PTH123, PLW0108, E731
"""Runtime checks (target side, Python 3.8, stdlib + torch): import, NumPy, the random stream,
serialisation, TorchScript, torch.export, ONNX, quantization, DataLoader workers, Gloo, torch.compile,
and the speed sanity check. Loaded by ``suite.py``; ``checks()`` lists them."""

import io
import os
import shutil
import subprocess
import sys
import tempfile
import time

# Variables that change how the backends compute (a fixed list of names: no value here can be a secret).
NUMERICS_ENV = (
    "ATEN_CPU_CAPABILITY",
    "ONEDNN_DEFAULT_FPMATH_MODE",
    "DNNL_DEFAULT_FPMATH_MODE",
    "ONEDNN_MAX_CPU_ISA",
    "DNNL_MAX_CPU_ISA",
    "MKL_CBWR",
    "MKL_ENABLE_INSTRUCTIONS",
    "MKL_NUM_THREADS",
    "OMP_NUM_THREADS",
    "NVIDIA_TF32_OVERRIDE",
    "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE",
    "CUBLAS_WORKSPACE_CONFIG",
)


def _small_model(torch, seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8)).eval()


def import_torch(ctx):
    torch = ctx.torch
    ctx.info["version"] = torch.__version__
    ctx.info["cpu_capability"] = _attempt(lambda: torch.backends.cpu.get_cpu_capability())
    ctx.info["threads"] = torch.get_num_threads()
    ctx.info["quantized_engine"] = _attempt(lambda: torch.backends.quantized.engine)
    ctx.info["loaded"] = _loaded_libraries()
    ctx.info["float32_matmul_precision"] = _attempt(lambda: torch.get_float32_matmul_precision())
    ctx.info["mkldnn_enabled"] = _attempt(lambda: bool(torch.backends.mkldnn.enabled))
    ctx.info["deterministic_algorithms"] = _attempt(lambda: torch.are_deterministic_algorithms_enabled())
    ctx.info["numerics_env"] = {k: os.environ[k] for k in sorted(os.environ) if k in NUMERICS_ENV}
    ctx.info["fp_control"] = _fp_control()
    ctx.output("ones", torch.ones(4) + 1)


def _attempt(fn):
    try:
        return fn()
    except Exception as e:
        return "unavailable: %s" % type(e).__name__


def _fp_control():
    """Flush-to-zero / denormals-are-zero now, when they came on, and the libraries that carry GCC's
    ``set_fast_math`` (``fp_control``): the denormals check's cause when it flushes."""
    from ..fp_control import fp_control
    from ..loaded_libraries import loaded_libraries

    return fp_control(loaded_libraries())


def _loaded_libraries():
    """Basenames of the shared libraries mapped into this process (Linux /proc/self/maps only)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
    except OSError:
        return None
    names = {os.path.basename(p) for p in paths if ".so" in os.path.basename(p)}
    # The interpreter's own extension modules vary with what the stdlib imported; torch's tree does not.
    return sorted(n for n in names if not n.startswith("_") and "cpython" not in n)


def numpy_interop(ctx):
    np = ctx.numpy
    torch = ctx.torch
    if np is None:
        ctx.skip("numpy is not installed in the target")
    a = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    t = torch.from_numpy(a)
    a[0, 0] = 42.0  # from_numpy shares memory (FM-08: a NumPy ABI mismatch breaks exactly this)
    if float(t[0, 0]) != 42.0:
        ctx.fail("torch.from_numpy does not share memory with the array")
    back = (t * 3).numpy()
    ctx.info["numpy"] = np.__version__
    ctx.output("from_numpy", t)
    ctx.output("to_numpy", torch.from_numpy(np.ascontiguousarray(back)))
    ctx.output("int64", torch.from_numpy(np.arange(5, dtype=np.int64)) * 3)


def random_stream(ctx):
    torch = ctx.torch
    torch.manual_seed(1234)
    ctx.output("rand", torch.rand(257))
    ctx.output("randn", torch.randn(257))
    ctx.output("randint", torch.randint(0, 1000, (64,)))
    ctx.output("randperm", torch.randperm(50))
    ctx.output("normal", torch.normal(2.0, 3.0, size=(33,)))
    ctx.output("bernoulli", torch.bernoulli(torch.full((64,), 0.3)))
    ctx.output("multinomial", torch.multinomial(torch.tensor([0.1, 0.2, 0.3, 0.4]), 16, replacement=True))
    ctx.output("dropout", torch.nn.functional.dropout(torch.ones(64), 0.5, training=True))


def save_load(ctx):
    torch = ctx.torch
    model = _small_model(torch)
    buf = io.BytesIO()
    torch.save({"state": model.state_dict(), "step": 3}, buf)
    buf.seek(0)
    loaded = torch.load(buf, map_location="cpu")  # this version's weights_only default, as an app would
    clone = _small_model(torch, seed=99)
    clone.load_state_dict(loaded["state"], strict=True)
    x = ctx.randn(4, 16)
    with torch.no_grad():
        ctx.expect_equal("reloaded forward", model(x), clone(x))
        ctx.output("forward", clone(x))
    import inspect

    default = inspect.signature(torch.load).parameters.get("weights_only")
    ctx.info["weights_only_default"] = None if default is None else repr(default.default)
    ctx.info["weights_only_env"] = os.environ.get("TORCH_FORCE_WEIGHTS_ONLY_LOAD")


def jit_trace(ctx):
    torch = ctx.torch
    model = _small_model(torch)
    x = ctx.randn(4, 16)
    with torch.no_grad():
        # torch's own check_trace re-traces and compares through torch.testing, which imports
        # torch.distributed.tensor and sympy (0.6 s): the comparison below is the check's own.
        traced = torch.jit.trace(model, x, check_trace=False)
        buf = io.BytesIO()
        torch.jit.save(traced, buf)
        buf.seek(0)
        loaded = torch.jit.load(buf, map_location="cpu")
        ctx.expect_equal("traced vs eager", model(x), loaded(x))
        ctx.output("forward", loaded(x))


def _scripted_fn(torch):
    @torch.jit.script
    def fn(x, n: int):
        y = x
        for _ in range(n):
            y = torch.tanh(y) * 1.5 + x
        return y

    return fn


def jit_script(ctx):
    torch = ctx.torch
    fn = _scripted_fn(torch)
    buf = io.BytesIO()
    torch.jit.save(fn, buf)
    buf.seek(0)
    loaded = torch.jit.load(buf)
    x = ctx.randn(5, 7)
    ctx.expect_equal("scripted vs loaded", fn(x, 3), loaded(x, 3))
    ctx.output("forward", loaded(x, 3))


def torch_export(ctx):
    torch = ctx.torch
    if not hasattr(torch, "export") or not hasattr(torch.export, "export"):
        ctx.skip("torch.export is not available in torch %s" % torch.__version__)
    model = _small_model(torch)
    x = ctx.randn(4, 16)
    program = torch.export.export(model, (x,))
    with torch.no_grad():
        ctx.output("forward", program.module()(x))
        ctx.expect_equal("exported vs eager", model(x), program.module()(x))


def onnx_export(ctx):
    torch = ctx.torch
    try:
        import onnx
    except ImportError:
        ctx.skip("onnx is not installed in the target")
    model = _small_model(torch)
    x = ctx.randn(4, 16)
    buf = io.BytesIO()
    try:
        torch.onnx.export(model, (x,), buf, dynamo=False)
    except TypeError:  # torch older than 2.5 has no `dynamo` switch
        torch.onnx.export(model, (x,), buf)
    proto = onnx.load_from_string(buf.getvalue())
    onnx.checker.check_model(proto)
    ctx.info["onnx"] = onnx.__version__
    ctx.info["ops"] = sorted({n.op_type for n in proto.graph.node})
    try:
        import onnxruntime
    except ImportError:
        return
    session = onnxruntime.InferenceSession(buf.getvalue(), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    ctx.output("onnxruntime", torch.from_numpy(out))


def quant_dynamic(ctx):
    torch = ctx.torch
    ctx.info["engine"] = torch.backends.quantized.engine
    ctx.info["supported_engines"] = list(torch.backends.quantized.supported_engines)
    model = _small_model(torch)
    try:
        from torch.ao.quantization import quantize_dynamic
    except ImportError:
        quantize_dynamic = torch.quantization.quantize_dynamic
    q = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    with torch.no_grad():
        ctx.output("forward", q(ctx.randn(4, 16)))


def dataloader(ctx):
    torch = ctx.torch
    import multiprocessing

    from torch.utils.data import DataLoader, TensorDataset

    # TensorDataset pickles by reference, so this works under spawn (Windows, macOS) as well as fork (FM-22).
    x = torch.arange(64, dtype=torch.float32).reshape(32, 2)
    loader = DataLoader(
        TensorDataset(x, x.sum(1)),
        batch_size=4,
        num_workers=2,
        shuffle=True,
        generator=torch.Generator().manual_seed(7),
        timeout=60,
    )
    ctx.info["start_method"] = multiprocessing.get_start_method(allow_none=False)
    batches = [b for b, _ in loader]
    ctx.output("order", torch.cat(batches))


GLOO_RANK = r"""
import datetime, sys, torch, torch.distributed as dist
init, rank = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2,
                        timeout=datetime.timedelta(seconds=60))
t = torch.arange(8, dtype=torch.float32) * (rank + 1)
dist.all_reduce(t)
ok = torch.equal(t, torch.arange(8, dtype=torch.float32) * 3)
dist.destroy_process_group()
sys.exit(0 if ok else 3)
"""


def _gloo_child(init):
    sys.argv = ["gloo", init, "1"]
    try:
        exec(compile(GLOO_RANK, "<gloo rank 1>", "exec"), {"__name__": "__gloo__"})
    except SystemExit as e:
        os._exit(int(e.code or 0))
    os._exit(0)


def gloo_all_reduce(ctx):
    torch = ctx.torch
    import multiprocessing

    dist = torch.distributed
    if not dist.is_available() or not dist.is_gloo_available():
        ctx.skip("torch.distributed with Gloo is not available in this build")
    # Inside the work folder the runner made (the target's cwd): a target killed at the deadline or by an
    # interrupt leaves nothing behind in the system temp folder, as the runner removes that folder.
    tmp = tempfile.mkdtemp(prefix="envcheck-gloo-", dir=os.getcwd())
    init = "file://" + os.path.join(tmp, "store").replace("\\", "/")
    if "fork" in multiprocessing.get_all_start_methods():
        # fork: rank 1 need not import torch again; nothing here has started OpenMP threads yet.
        child = multiprocessing.get_context("fork").Process(target=_gloo_child, args=(init,))
        child.start()
        wait = lambda: (child.join(90), child.exitcode)[1]
    else:
        proc = subprocess.Popen([sys.executable, "-c", GLOO_RANK, init, "1"])
        wait = lambda: proc.wait(90)
    try:
        import datetime

        dist.init_process_group(
            "gloo", init_method=init, rank=0, world_size=2, timeout=datetime.timedelta(seconds=60)
        )
        t = torch.arange(8, dtype=torch.float32)
        dist.all_reduce(t)
        dist.destroy_process_group()
        code = wait()
        if code != 0:
            ctx.fail("Gloo rank 1 exited with %r" % (code,))
        ctx.output("all_reduce", t)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _compiler():
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++", "cl"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def torch_compile(ctx):
    torch = ctx.torch
    if not ctx.config.get("compile"):
        ctx.skip("opt-in: pass --compile (torch.compile takes 15-35 s on 2 cores)")
    if not hasattr(torch, "compile"):
        ctx.skip("torch.compile is not available in torch %s" % torch.__version__)
    compiler = _compiler()
    if compiler is None:
        ctx.skip("no C++ compiler found (inductor needs one)")
    ctx.info["compiler"] = os.path.basename(compiler)
    model = _small_model(torch)
    compiled = torch.compile(model)
    x = ctx.randn(4, 16)
    with torch.no_grad():
        eager = model(x)
        got = compiled(x)
    ctx.output("forward", got)
    err = float((eager - got).abs().max())
    ctx.info["max_abs_vs_eager"] = err
    if err > 1e-4:
        ctx.fail("compiled output differs from eager by %g" % err)


# The speed check's sampling: ROUNDS rounds, each giving every measurement SLICE seconds in turn, so a
# burst of other work on the machine hits all of them alike; about 0.15 s in all with the set-up (the
# budget in README.md's Speed table: the whole CPU suite within `import torch` + 5 s). Each slice holds
# dozens of calls of a millisecond: the best of them is what a golden keeps, and a drop is judged
# against the golden's own spread (``compare.speed_threshold``).
SPEED_ROUNDS = 3
SPEED_SLICE = 0.015


def _rates(fn, work, seconds):
    """Throughputs (``work`` / s / 1e9) of single calls for ``seconds`` (at least one call): a slice
    never outlasts ``seconds`` by more than one call, however slow the machine is right now."""
    out = []
    deadline = time.perf_counter() + seconds
    while True:
        started = time.perf_counter()
        fn()
        ended = time.perf_counter()
        out.append(work / max(ended - started, 1e-9) / 1e9)
        if ended >= deadline:
            return out


def speed_matmul(ctx):
    """Throughput with every intra-op thread and with one, sampled repeatedly: the golden keeps the best
    of each (the least disturbed by the rest of the machine) and its spread (``1 - median / best``: the
    noise the golden itself showed), and ``compare`` warns only beyond it.

    - ``gflops``: fp32 matmul, all threads. On a machine whose other cores are busy OpenMP's barriers make
      it collapse, so it is judged against the thread count and the one-thread numbers;
    - ``gflops_1thread``: fp32 matmul on one thread: the CPU and the BLAS, barely touched by other work;
    - ``sum_1thread``: G elements/s of a float32 sum on one thread: torch's own vectorised kernels, which
      follow the CPU capability (``ATEN_CPU_CAPABILITY=default`` makes it several times slower).
    """
    torch = ctx.torch
    n = 256
    a = ctx.randn(n, n)
    b = ctx.randn(n, n, seed=1)
    x = ctx.randn(1 << 20, seed=2)
    threads = torch.get_num_threads()
    ctx.info["threads"] = threads
    work = {
        "gflops": (threads, lambda: torch.mm(a, b), 2.0 * n**3),
        "gflops_1thread": (1, lambda: torch.mm(a, b), 2.0 * n**3),
        "sum_1thread": (1, lambda: x.sum(), float(x.numel())),
    }
    samples = {key: [] for key in work}
    try:
        for round_ in range(SPEED_ROUNDS):
            for key, (count, fn, amount) in work.items():
                torch.set_num_threads(count)
                if round_ == 0:
                    fn()  # warm-up: the first call allocates and starts the pool
                samples[key].extend(_rates(fn, amount, SPEED_SLICE))
    finally:
        torch.set_num_threads(threads)
    for key, values in samples.items():
        values.sort()
        best = values[-1]
        ctx.metrics[key] = round(best, 3)
        ctx.metrics[key + "_spread"] = round(1.0 - values[len(values) // 2] / best, 3)
        ctx.metrics[key + "_samples"] = float(len(values))


def checks(torch, config, Check):
    # One process for the whole CPU suite pays `import torch` once (README.md, Speed). The DataLoader and
    # Gloo checks fork right after the import, before any OpenMP pool exists: forking a process whose GNU
    # OpenMP pool is running can deadlock the child (https://github.com/pytorch/pytorch/issues/17199).
    return [
        Check("import_torch", import_torch, "runtime"),
        Check("dataloader", dataloader, "runtime", exact=True),
        Check("gloo_all_reduce", gloo_all_reduce, "runtime", exact=True),
        Check("numpy_interop", numpy_interop, "runtime", exact=True),
        Check("random_stream", random_stream, "runtime", exact=True),
        Check("save_load", save_load, "runtime"),
        Check("jit_trace", jit_trace, "runtime"),
        Check("jit_script", jit_script, "runtime"),
        Check("quant_dynamic", quant_dynamic, "runtime"),
        Check("torch_export", torch_export, "runtime"),
        Check("onnx_export", onnx_export, "runtime"),
        Check("speed_matmul", speed_matmul, "runtime"),
        # torch.compile gets its own process and timeout: a cold inductor compile is slow.
        Check("torch_compile", torch_compile, "runtime", group="compile"),
    ]
