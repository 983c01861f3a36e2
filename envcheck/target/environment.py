"""The environment variables that change how torch loads or computes (DESIGN §5.8: an allowlist).

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
)


def collect_env():
    """The allowlisted variables of this process, by name, values as they are (``emit`` redacts them)."""
    out = {}
    for name, value in os.environ.items():
        upper = name.upper()
        if upper in ENV_NAMES or upper.startswith(ENV_PREFIXES):
            out[name] = value
    return out
