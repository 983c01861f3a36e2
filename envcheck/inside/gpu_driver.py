"""The NVIDIA driver and its GPUs without torch: NVML, then libcuda, then ``nvidia-smi``."""

import os

from .system import run_text


def _nvml():
    import ctypes

    names = ["nvml.dll"] if os.name == "nt" else ["libnvidia-ml.so.1", "libnvidia-ml.dylib"]
    lib = None
    for name in names:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return None
    if lib.nvmlInit_v2() != 0:
        return {"found": False, "source": "nvml", "reason": "nvmlInit failed (no GPU visible to the driver?)"}
    try:
        buf = ctypes.create_string_buffer(96)
        status = lib.nvmlSystemGetDriverVersion(buf, 96)
        driver = buf.value.decode() if status == 0 else None
        cuda = ctypes.c_int()
        cuda_version = cuda.value if lib.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == 0 else None
        count = ctypes.c_uint()
        gpus = []
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) == 0:
            for i in range(count.value):
                handle = ctypes.c_void_p()
                if lib.nvmlDeviceGetHandleByIndex_v2(i, ctypes.byref(handle)) != 0:
                    continue
                name = ctypes.create_string_buffer(96)
                uuid = ctypes.create_string_buffer(96)
                lib.nvmlDeviceGetName(handle, name, 96)
                lib.nvmlDeviceGetUUID(handle, uuid, 96)

                class Memory(ctypes.Structure):
                    _fields_ = [
                        ("total", ctypes.c_ulonglong),
                        ("free", ctypes.c_ulonglong),
                        ("used", ctypes.c_ulonglong),
                    ]

                memory = Memory()
                total = (
                    memory.total if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) == 0 else None
                )
                major, minor = ctypes.c_int(), ctypes.c_int()
                cap = None
                if (
                    lib.nvmlDeviceGetCudaComputeCapability(handle, ctypes.byref(major), ctypes.byref(minor))
                    == 0
                ):
                    cap = "%d.%d" % (major.value, minor.value)
                gpus.append(
                    {
                        "index": i,
                        "name": name.value.decode(),
                        "uuid": uuid.value.decode() or None,
                        "memory_total": total,
                        "compute_capability": cap,
                    }
                )
        return {
            "found": True,
            "source": "nvml",
            "reason": None,
            "driver_version": driver,
            "cuda_driver_version": cuda_version,
            "gpus": gpus,
        }
    finally:
        lib.nvmlShutdown()


def _libcuda():
    import ctypes

    for name in ["nvcuda.dll"] if os.name == "nt" else ["libcuda.so.1", "libcuda.dylib"]:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        version = ctypes.c_int()
        if lib.cuDriverGetVersion(ctypes.byref(version)) != 0:
            return {"found": False, "source": "libcuda", "reason": "cuDriverGetVersion failed"}
        return {
            "found": True,
            "source": "libcuda",
            "reason": None,
            "driver_version": None,
            "cuda_driver_version": version.value,
            "gpus": [],
        }
    return None


def _nvidia_smi():
    text = run_text(
        [
            "nvidia-smi",
            "--query-gpu=driver_version,name,memory.total,uuid,compute_cap",
            "--format=csv,noheader,nounits",
        ],
        timeout=15,
    )
    if not text:
        return None
    gpus, driver = [], None
    for i, line in enumerate(text.splitlines()):
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        driver = parts[0]
        memory = int(float(parts[2]) * 1024 * 1024) if parts[2].replace(".", "").isdigit() else None
        gpus.append(
            {
                "index": i,
                "name": parts[1],
                "uuid": parts[3] or None,
                "memory_total": memory,
                "compute_capability": parts[4] or None,
            }
        )
    return {
        "found": True,
        "source": "nvidia-smi",
        "reason": None,
        "driver_version": driver,
        "cuda_driver_version": None,
        "gpus": gpus,
    }


def gpu_driver():
    for finder in (_nvml, _libcuda, _nvidia_smi):
        try:
            found = finder()
        except Exception as e:  # a broken driver library is a fact, not the probe's end
            found = {"found": False, "source": None, "reason": "%s: %s" % (type(e).__name__, e)}
        if found is not None and found.get("found"):
            return found
    return {
        "found": False,
        "source": None,
        "reason": "no NVIDIA driver: neither libnvidia-ml, libcuda nor nvidia-smi could be loaded",
    }
