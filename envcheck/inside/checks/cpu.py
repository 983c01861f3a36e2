# mypy: ignore-errors
# ruff: noqa: UP031
"""Operator checks on the CPU (target side, Python 3.8, stdlib + torch). Inputs are seeded and small; the
same inputs are used by the CUDA checks that name one of these as their ``ref``."""


def _mm(ctx, dtype):
    torch = ctx.torch
    a = ctx.randn(64, 96, seed=1, dtype=dtype, device=ctx.device)
    b = ctx.randn(96, 48, seed=2, dtype=dtype, device=ctx.device)
    ctx.output("mm", torch.mm(a, b))


def matmul_fp32(ctx):
    _mm(ctx, ctx.torch.float32)


def matmul_fp64(ctx):
    _mm(ctx, ctx.torch.float64)


def matmul_bf16(ctx):
    _mm(ctx, ctx.torch.bfloat16)


def linear(ctx):
    torch = ctx.torch
    w = ctx.randn(24, 40, seed=3) / 6
    b = ctx.randn(24, seed=4)
    ctx.output("linear", torch.nn.functional.linear(ctx.randn(16, 40, seed=5), w, b))


def conv2d(ctx):
    torch = ctx.torch
    x = ctx.randn(2, 3, 16, 16, seed=6, device=ctx.device)
    w = ctx.randn(8, 3, 3, 3, seed=7, device=ctx.device) / 4
    ctx.output("conv", torch.nn.functional.conv2d(x, w, padding=1, stride=1))


def softmax(ctx):
    F = ctx.torch.nn.functional
    x = ctx.randn(8, 128, seed=8) * 4
    ctx.output("softmax", F.softmax(x, dim=-1))
    ctx.output("log_softmax", F.log_softmax(x, dim=-1))


def layer_norm(ctx):
    F = ctx.torch.nn.functional
    x = ctx.randn(16, 64, seed=9) * 3 + 1
    ctx.output("layer_norm", F.layer_norm(x, (64,), ctx.randn(64, seed=10), ctx.randn(64, seed=11)))


def batch_norm(ctx):
    torch = ctx.torch
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm2d(4)
    x = ctx.randn(8, 4, 5, 5, seed=12) * 2 + 0.5
    bn.train()
    ctx.output("train", bn(x))
    ctx.output("running_mean", bn.running_mean)
    ctx.output("running_var", bn.running_var)
    bn.eval()
    with torch.no_grad():
        ctx.output("eval", bn(x))


def gelu(ctx):
    F = ctx.torch.nn.functional
    x = ctx.randn(4096, seed=13) * 3
    ctx.output("gelu", F.gelu(x))
    ctx.output("gelu_tanh", F.gelu(x, approximate="tanh"))


def denormals(ctx):
    """Subnormal float32 arithmetic: flush-to-zero (a ``-ffast-math`` library loaded into the process sets
    FTZ/DAZ for everyone; ``torch.set_flush_denormal``) turns these into zeros."""
    torch = ctx.torch
    tiny = torch.tensor([1.0e-39, 3.0e-40, 5.0e-42, 1.17e-38], dtype=torch.float32)
    ctx.output("scaled", tiny * 0.5 + tiny)
    ctx.output("product", torch.tensor([1.0e-20], dtype=torch.float32) * torch.tensor([1.0e-20]))


def attention(ctx):
    torch = ctx.torch
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, batch_first=True)
    layer.eval()
    x = ctx.randn(3, 10, 32, seed=14)
    pad = torch.zeros(3, 10, dtype=torch.bool)
    pad[1, 7:] = True
    pad[2, 4:] = True
    F = torch.nn.functional
    q, k, v = (ctx.randn(3, 4, 10, 8, seed=s) for s in (15, 16, 17))
    with torch.no_grad():
        # eval() + no_grad() is where the Transformer fast path (nested tensors) takes over (FM-26).
        out = layer(x, src_key_padding_mask=pad)
        ctx.output("encoder", out.masked_fill(pad.unsqueeze(-1), 0.0))
        if not hasattr(F, "scaled_dot_product_attention"):  # torch < 2.0
            ctx.info["sdpa"] = "not in torch %s" % torch.__version__
            return
        mask = ~pad[:, None, None, :]
        ctx.output("sdpa", F.scaled_dot_product_attention(q, k, v, attn_mask=mask))


def lstm(ctx):
    torch = ctx.torch
    torch.manual_seed(0)
    rnn = torch.nn.LSTM(12, 16, num_layers=2, batch_first=True)
    with torch.no_grad():
        out, (h, c) = rnn(ctx.randn(3, 9, 12, seed=18))
    ctx.output("out", out)
    ctx.output("h", h)
    ctx.output("c", c)


def reductions(ctx):
    torch = ctx.torch
    # Large enough that the intra-op pool splits it: the summation order depends on the thread count.
    x = ctx.randn(300000, seed=19) * 100 + 3
    ctx.info["threads"] = torch.get_num_threads()
    ctx.output("sum", x.sum())
    ctx.output("mean", x.mean())
    ctx.output("std", x.std())
    ctx.output("norm", x.norm())
    ctx.output("cumsum", x[:4096].cumsum(0))
    ctx.output("sum64", x.double().sum())


def checks(torch, config, Check):
    return [
        Check("matmul_fp32", matmul_fp32, "cpu"),
        Check("matmul_fp64", matmul_fp64, "cpu"),
        Check("matmul_bf16", matmul_bf16, "cpu"),
        Check("linear", linear, "cpu"),
        Check("conv2d", conv2d, "cpu"),
        Check("softmax", softmax, "cpu"),
        Check("layer_norm", layer_norm, "cpu"),
        Check("batch_norm", batch_norm, "cpu"),
        Check("gelu", gelu, "cpu"),
        Check("denormals", denormals, "cpu"),
        Check("attention", attention, "cpu"),
        Check("lstm", lstm, "cpu"),
        Check("reductions", reductions, "cpu"),
    ]
