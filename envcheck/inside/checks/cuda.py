# mypy: ignore-errors
# ruff: noqa: UP031
"""CUDA checks on every visible device (target side, Python 3.8, stdlib + torch).

Without a usable device each check is one ``skipped`` result (device ``cuda``) with the reason. Checks with
a ``ref`` use the CPU check's exact inputs, so a CUDA result can be compared with a CPU golden under the
cross-device tolerances when the golden machine had no GPU.
"""


def _tf32_switches(ctx):
    torch = ctx.torch
    ctx.info["matmul.allow_tf32"] = bool(torch.backends.cuda.matmul.allow_tf32)
    ctx.info["cudnn.allow_tf32"] = bool(torch.backends.cudnn.allow_tf32)
    ctx.info["float32_matmul_precision"] = torch.get_float32_matmul_precision()


def cuda_init(ctx):
    torch = ctx.torch
    index = int(ctx.device.split(":")[1])
    props = torch.cuda.get_device_properties(index)
    ctx.info["name"] = props.name
    ctx.info["capability"] = "%d.%d" % (props.major, props.minor)
    ctx.info["total_memory"] = int(props.total_memory)
    ctx.info["arch_list"] = list(torch.cuda.get_arch_list())
    ctx.output("zeros", torch.zeros(4, device=ctx.device).cpu())
    torch.cuda.synchronize(index)


def _mm(ctx, dtype):
    torch = ctx.torch
    a = ctx.randn(64, 96, seed=1, dtype=dtype, device=ctx.device)
    b = ctx.randn(96, 48, seed=2, dtype=dtype, device=ctx.device)
    ctx.output("mm", torch.mm(a, b))


def cuda_matmul_fp32(ctx):
    _tf32_switches(ctx)
    _mm(ctx, ctx.torch.float32)


def cuda_matmul_fp16(ctx):
    _mm(ctx, ctx.torch.float16)


def cuda_matmul_bf16(ctx):
    torch = ctx.torch
    if not torch.cuda.is_bf16_supported():
        ctx.skip("bfloat16 is not supported on %s" % torch.cuda.get_device_name(ctx.device))
    _mm(ctx, torch.bfloat16)


def cuda_conv2d(ctx):
    torch = ctx.torch
    ctx.info["cudnn_version"] = torch.backends.cudnn.version()
    _tf32_switches(ctx)
    x = ctx.randn(2, 3, 16, 16, seed=6, device=ctx.device)
    w = ctx.randn(8, 3, 3, 3, seed=7, device=ctx.device) / 4
    ctx.output("conv", torch.nn.functional.conv2d(x, w, padding=1, stride=1))


def cuda_tf32_probe(ctx):
    """A @ I == A exactly unless the fp32 matmul rounds its inputs to TF32's 10-bit mantissa (FM-17)."""
    torch = ctx.torch
    _tf32_switches(ctx)
    a = ctx.randn(64, 64, seed=30, device=ctx.device)
    got = a @ torch.eye(64, device=ctx.device)
    ctx.info["tf32_active"] = not torch.equal(got, a)
    ctx.output("identity", got)


def cuda_autocast(ctx):
    torch = ctx.torch
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Linear(20, 3)).to(
        ctx.device
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = (
        torch.amp.GradScaler("cuda")
        if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler")
        else torch.cuda.amp.GradScaler()
    )
    x = ctx.randn(8, 10, seed=20, device=ctx.device)
    with torch.autocast("cuda", dtype=torch.float16):
        loss = model(x).float().pow(2).mean()
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
    ctx.output("fp16_weight", model[0].weight.detach())
    ctx.info["scale"] = float(scaler.get_scale())
    if torch.cuda.is_bf16_supported():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            ctx.output("bf16_forward", model(x))


def cuda_nccl(ctx):
    torch = ctx.torch
    dist = torch.distributed
    available = bool(dist.is_available() and dist.is_nccl_available())
    ctx.info["nccl_available"] = available
    if not available:
        # Windows and macOS builds have no NCCL by design: a skip, which becomes a warning when the
        # golden machine had it (FM-16).
        ctx.skip("NCCL is not available in this torch build")
    version = torch.cuda.nccl.version()
    ctx.info["nccl_version"] = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)


CUDA_CHECKS = [
    ("cuda_init", cuda_init, None),
    ("matmul_fp32", cuda_matmul_fp32, "matmul_fp32"),
    ("matmul_fp16", cuda_matmul_fp16, None),
    ("matmul_bf16", cuda_matmul_bf16, "matmul_bf16"),
    ("conv2d", cuda_conv2d, "conv2d"),
    ("tf32_probe", cuda_tf32_probe, None),
    ("autocast_fp16_gradscaler", cuda_autocast, None),
    ("nccl", cuda_nccl, None),
]


def _no_device_reason(torch):
    if torch.version.cuda is None:
        return "torch %s is built without CUDA" % torch.__version__
    try:
        if not torch.cuda.is_available():
            return "no CUDA device visible (torch built for CUDA %s)" % torch.version.cuda
    except Exception as e:
        return "CUDA initialisation failed: %s: %s" % (type(e).__name__, e)
    return None


def checks(torch, config, Check):
    reason = _no_device_reason(torch)
    if reason is not None:

        def skipped(ctx, reason=reason):
            ctx.skip(reason)

        return [Check("cuda/" + name, skipped, "cuda", device="cuda") for name, _, _ in CUDA_CHECKS]
    out = []
    for index in range(torch.cuda.device_count()):
        device = "cuda:%d" % index
        for name, fn, ref in CUDA_CHECKS:
            out.append(Check("%s/%s" % (device, name), fn, "cuda", device=device, ref=ref))
    return out
