"""The environment variables that change how torch loads or computes (an allowlist).

Everything else stays behind. Values are redacted with the rest of the result by ``result.emit``; a name
that looks like a credential (``TORCH_ACCESS_KEY``) loses its value there, whatever its prefix.
"""

import os

ENV_PREFIXES = (
    "CUDA_",
    "CUDNN_",
    "CUBLAS_",
    "CUBLASLT_",
    "NCCL_",
    "NVIDIA_",
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "MKLDNN_",
    "ONEDNN_",
    "DNNL_",
    "OPENBLAS_",
    "BLIS_",
    "VECLIB_",
    "ATEN_",
    "TORCH_",
    "PYTORCH_",
    "TORCHINDUCTOR_",
    "TORCHDYNAMO_",
    "TRITON_",
    "HIP_",
    "ROCM_",
    "HSA_",
    "XPU_",
    "ZE_",
    "PIP_",
    "UV_",
    "CONDA_",
)
ENV_NAMES = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LD_BIND_NOW",
    "DYLD_LIBRARY_PATH",
    "DYLD_FALLBACK_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONNOUSERSITE",
    "PYTHONUSERBASE",
    "PYTHONHASHSEED",
    "PYTHONSAFEPATH",
    "VIRTUAL_ENV",
    "TMPDIR",
    "LANG",
    "LC_ALL",
    "MALLOC_ARENA_MAX",
    "CC",
    "CXX",
    "NUMEXPR_MAX_THREADS",
    # The tools and build settings torch.compile, torch.utils.cpp_extension and setuptools read
    # (envcheck/data/runtime_config.json).
    "CUDACXX",
    "CFLAGS",
    "CPPFLAGS",
    "LDFLAGS",
    "LDSHARED",
    "MAX_JOBS",
)

# Variables that describe the shell envcheck was started from, not the environment: where it stands, how
# deep it is nested, which venv or conda environment it activated, its PATH. A target started with
# --python from another shell inherits them from that shell (``Manifest.env_caller`` then names them).
CALLER_SHELL = (
    "PATH",
    "VIRTUAL_ENV",
    "VIRTUAL_ENV_PROMPT",
    "PWD",
    "OLDPWD",
    "SHLVL",
    "_",
    "CONDA_PREFIX",
    "CONDA_DEFAULT_ENV",
    "CONDA_SHLVL",
    "CONDA_PROMPT_MODIFIER",
    "CONDA_EXE",
    "CONDA_PYTHON_EXE",
)


def collect_env():
    """The allowlisted variables of this process, by name, values as they are (``emit`` redacts them)."""
    out = {}
    for name, value in os.environ.items():
        upper = name.upper()
        if upper in ENV_NAMES or upper.startswith(ENV_PREFIXES):
            out[name] = value
    return out
