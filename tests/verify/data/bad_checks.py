"""Custom checks for the tests: one good, one that raises, one that segfaults, one that runs after the
crash, one that hangs, and one after the hang (run in name order)."""

import ctypes
import time

import torch


def check_a_forward():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    return model(torch.arange(8, dtype=torch.float32).reshape(2, 4))


def check_b_raises():
    raise RuntimeError("the model file is missing")


def check_c_segfaults():
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def check_d0_after_crash(ctx):
    ctx.output("ones", torch.ones(3) * 2)


check_d0_after_crash.tolerance = {"rtol": 1e-3, "atol": 1e-3}


def check_d_hangs():
    time.sleep(3600)


def check_e_after_hang(ctx):
    ctx.output("ones", torch.ones(3))
