# mypy: ignore-errors
# ruff: noqa: UP031
"""Autograd, optimizer and autocast checks (target side, Python 3.8, stdlib + torch)."""


def _mlp(torch):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Tanh(), torch.nn.Linear(20, 3))


def _loss(ctx, model, seed):
    torch = ctx.torch
    x = ctx.randn(8, 10, seed=seed)
    target = ctx.randn(8, 3, seed=seed + 100)
    return torch.nn.functional.mse_loss(model(x), target)


def _grads(ctx, model, prefix=""):
    for name, p in model.named_parameters():
        ctx.output(prefix + name, p.grad)


def autograd_mlp(ctx):
    model = _mlp(ctx.torch)
    _loss(ctx, model, 20).backward()
    _grads(ctx, model)


def grad_accumulation(ctx):
    model = _mlp(ctx.torch)
    for seed in (21, 22, 23):  # no zero_grad: .grad accumulates across backward calls
        _loss(ctx, model, seed).backward()
    _grads(ctx, model)


def _step(ctx, make_opt):
    model = _mlp(ctx.torch)
    opt = make_opt(model.parameters())
    for seed in (24, 25):
        opt.zero_grad()
        _loss(ctx, model, seed).backward()
        opt.step()
    for name, p in model.named_parameters():
        ctx.output(name, p.detach())


def optim_sgd(ctx):
    _step(ctx, lambda p: ctx.torch.optim.SGD(p, lr=0.1, momentum=0.9))


def optim_adamw(ctx):
    _step(ctx, lambda p: ctx.torch.optim.AdamW(p, lr=1e-2, weight_decay=0.01))


def clip_grad_norm(ctx):
    torch = ctx.torch
    model = _mlp(torch)
    (_loss(ctx, model, 26) * 50).backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
    ctx.output("total_norm", norm)
    _grads(ctx, model, "clipped.")


def autocast_cpu_bf16(ctx):
    torch = ctx.torch
    model = _mlp(torch)
    x = ctx.randn(8, 10, seed=27)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = model(x)
    if y.dtype != torch.bfloat16:
        ctx.fail("autocast on CPU produced %s, expected bfloat16" % y.dtype)
    ctx.output("forward", y)


def checks(torch, config, Check):
    return [
        Check("autograd_mlp", autograd_mlp, "training"),
        Check("grad_accumulation", grad_accumulation, "training"),
        Check("optim_sgd", optim_sgd, "training"),
        Check("optim_adamw", optim_adamw, "training"),
        Check("clip_grad_norm", clip_grad_norm, "training"),
        Check("autocast_cpu_bf16", autocast_cpu_bf16, "training"),
    ]
