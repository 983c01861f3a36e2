"""What only a live torch knows: build configuration, backends, devices, numerics switches."""

import math
import re

from .system import attempt

CONFIG_PATTERNS = {
    "mkl_version": r"Math Kernel Library Version ([\w.]+)",
    "onednn_version": r"(?:MKL-DNN|oneDNN) v([\w.]+)",
    "openmp": r"OpenMP (\d+[^\n]*)",
}


def torch_runtime(torch):
    import warnings

    warnings.simplefilter("ignore")
    backends = torch.backends
    config = attempt(lambda: torch.__config__.show(), "") or ""
    found = {
        k: (re.search(p, config).group(1).strip() if re.search(p, config) else None)
        for k, p in CONFIG_PATTERNS.items()
    }
    cuda_built = attempt(lambda: backends.cuda.is_built())
    cuda_available = attempt(lambda: torch.cuda.is_available(), False)
    devices = []
    count = attempt(lambda: torch.cuda.device_count(), 0) if cuda_available else 0
    for i in range(count or 0):
        props = attempt(lambda i=i: torch.cuda.get_device_properties(i))
        if props is None:
            continue
        devices.append(
            {
                "kind": "cuda",
                "index": i,
                "name": props.name,
                "capability": "%d.%d" % (props.major, props.minor),
                "total_memory": getattr(props, "total_memory", None),
                "multi_processor_count": getattr(props, "multi_processor_count", None),
            }
        )
    nccl = None
    if cuda_built:
        version = attempt(lambda: torch.cuda.nccl.version())
        if isinstance(version, tuple):
            nccl = ".".join(str(v) for v in version)
        elif version is not None:
            nccl = str(version)
    dist = getattr(torch, "distributed", None)
    dist_ok = bool(attempt(lambda: dist.is_available(), False))
    return {
        "version": torch.__version__,
        "file": torch.__file__,
        "cudnn_version": attempt(lambda: backends.cudnn.version()) if cuda_built else None,
        "nccl_version": nccl,
        "mkl_version": found["mkl_version"],
        "onednn_version": found["onednn_version"],
        "openmp": found["openmp"],
        "cxx11_abi": attempt(lambda: bool(torch._C._GLIBCXX_USE_CXX11_ABI)),
        "cpu_capability": attempt(lambda: backends.cpu.get_cpu_capability()),
        "cuda_arch_list": attempt(lambda: list(torch.cuda.get_arch_list()), []) or [],
        "num_threads": attempt(torch.get_num_threads),
        "num_interop_threads": attempt(torch.get_num_interop_threads),
        "parallel_info": attempt(lambda: torch.__config__.parallel_info()),
        "quantized_engines": [
            str(e) for e in attempt(lambda: backends.quantized.supported_engines, []) or []
        ],
        "quantized_engine": attempt(lambda: str(backends.quantized.engine)),
        "numerics": {
            "allow_tf32_matmul": attempt(lambda: bool(backends.cuda.matmul.allow_tf32)),
            "allow_tf32_cudnn": attempt(lambda: bool(backends.cudnn.allow_tf32)),
            "float32_matmul_precision": attempt(torch.get_float32_matmul_precision),
            "deterministic_algorithms": attempt(torch.are_deterministic_algorithms_enabled),
            "cudnn_enabled": attempt(lambda: bool(backends.cudnn.enabled)),
            "cudnn_benchmark": attempt(lambda: bool(backends.cudnn.benchmark)),
            "cudnn_deterministic": attempt(lambda: bool(backends.cudnn.deterministic)),
        },
        "backends": {
            "cuda_built": cuda_built,
            "cuda_available": cuda_available,
            "cuda_device_count": count,
            "mps_built": attempt(lambda: backends.mps.is_built()),
            "mps_available": attempt(lambda: backends.mps.is_available()),
            "xpu_available": attempt(lambda: torch.xpu.is_available()),
            "mkldnn_available": attempt(lambda: backends.mkldnn.is_available()),
            "mkl_available": attempt(lambda: backends.mkl.is_available()),
            "openmp_available": attempt(lambda: backends.openmp.is_available()),
            "distributed_available": dist_ok,
            "nccl_available": attempt(lambda: dist.is_nccl_available()) if dist_ok else False,
            "gloo_available": attempt(lambda: dist.is_gloo_available()) if dist_ok else False,
            "mpi_available": attempt(lambda: dist.is_mpi_available()) if dist_ok else False,
        },
        "devices": devices,
        "build_config": config or None,
    }


def small_op(torch):
    """One matmul and one parallel reduction: loads the BLAS and OpenMP runtimes torch dispatches to."""
    gen = torch.Generator().manual_seed(0)
    a = torch.rand(128, 128, generator=gen)
    value = float((a @ a).sum()) + float(torch.rand(1 << 18, generator=gen).sum())
    return not math.isnan(value)
