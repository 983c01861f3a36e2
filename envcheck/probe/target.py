"""The probe: runs *inside the target interpreter*, stdlib only, Python 3.8 and newer.

It is started by ``envcheck.probe.runner`` as ``python -c BOOT target.py OUT STAGE``; it never imports
envcheck (which may not be installed there) and imports torch, numpy and threadpoolctl only if the target
has them. Results go to the file OUT, rewritten atomically after every step, so a crash or a hang part-way
leaves everything learnt before it, plus ``stage`` naming the step that never finished.

Stages:
- ``facts``: interpreter, platform, distributions, torch's version file, environment variables. Imports
  nothing outside the standard library (except ``packaging.tags`` when the target has it).
- ``runtime``: GPU driver (NVML / libcuda / nvidia-smi, without torch), then ``import torch``, one small op,
  torch's build and numerics facts, the libraries mapped into the process, and the thread pools.

Keep this file compatible with Python 3.8: ``tests/test_probe_compat.py`` runs a minimum-version analyser
over it.
"""

import ast
import json
import math
import os
import platform
import re
import subprocess
import sys
import time

OUT = None  # set by main(): importing this module (envcheck reuses its redaction) has no side effects
_result = {"stage": None, "done": False}

# ---------------------------------------------------------------------------------------------- output


def emit():
    """Write the result so far, atomically: a crash in the next step leaves this on disk."""
    if OUT is None:
        return
    tmp = OUT + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(_result, f, default=str)
    os.replace(tmp, OUT)


def stage(name):
    _result["stage"] = name
    emit()


# ----------------------------------------------------------------------------------------- redaction

_SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|PRIVATE|AUTH|SESSION|COOKIE", re.I)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/@\s]+)@")
_QUERY_SECRET = re.compile(
    r"(?P<key>[?&;](?:[^=&;#\s]*(?:token|secret|passw|key|sig|auth)[^=&;#\s]*))=[^&;#\s]*", re.I
)
_TOKEN_SHAPES = re.compile(
    r"\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|"
    r"xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|sk-[A-Za-z0-9_-]{20,}|glpat-[A-Za-z0-9_-]{20,}|"
    r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,})"
)
REDACTED = "<redacted>"


def redact_text(value):
    # type: (str) -> str
    """Remove credentials from a free text: URL user-info, secret query parameters, known token shapes."""
    value = _URL_USERINFO.sub(lambda m: m.group("scheme") + REDACTED + "@", value)
    value = _QUERY_SECRET.sub(lambda m: m.group("key") + "=" + REDACTED, value)
    return _TOKEN_SHAPES.sub(REDACTED, value)


def redact_json(value):
    # type: (object) -> object
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_json(v) for v in value]
    if isinstance(value, dict):
        return {k: (REDACTED if _SECRET_NAME.search(k) else redact_json(v)) for k, v in value.items()}
    return value


# Names that change how torch loads or computes. Anything else, and every credential, stays behind.
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
    out = {}
    for name, value in os.environ.items():
        upper = name.upper()
        if upper not in ENV_NAMES and not upper.startswith(ENV_PREFIXES):
            continue
        out[name] = REDACTED if _SECRET_NAME.search(name) else redact_text(value)
    return out


# ------------------------------------------------------------------------------------------- python


def python_facts():
    implementation = platform.python_implementation()
    prefix = sys.prefix
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        environment = "conda"
    elif sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        environment = "venv"
    else:
        environment = "system"
    try:
        import site

        user_site = site.getusersitepackages()
        user_site_enabled = bool(site.ENABLE_USER_SITE)
    except Exception:
        user_site, user_site_enabled = None, False
    # The platform default (importing multiprocessing costs more than the rest of this function):
    # spawn on Windows and macOS (3.8+), forkserver on POSIX from 3.14, fork before.
    if os.name == "nt" or sys.platform == "darwin":
        start_method = "spawn"
    elif sys.version_info >= (3, 14):
        start_method = "forkserver"
    else:
        start_method = "fork"
    import sysconfig

    shared = None
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        name = sysconfig.get_config_var("LDLIBRARY") or ""
        if libdir and name:
            shared = os.path.join(libdir, name)
    elif os.name == "nt":
        candidate = os.path.join(sys.base_exec_prefix, "python%d%d.dll" % sys.version_info[:2])
        shared = candidate if os.path.exists(candidate) else None
    return {
        "implementation": implementation,
        "version": platform.python_version(),
        "abi_flags": getattr(sys, "abiflags", ""),
        "pointer_bits": 64 if sys.maxsize > 2**32 else 32,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "base_exec_prefix": getattr(sys, "base_exec_prefix", sys.exec_prefix),
        "environment": environment,
        "user_site_enabled": user_site_enabled,
        "user_site": user_site,
        "sys_path": [p for p in sys.path if p],
        "wheel_tags": wheel_tags(),
        "mp_start_method": start_method,
        "shared_library": shared,
    }


def wheel_tags(limit=12):
    """The first tags this interpreter accepts, via packaging (or pip's vendored copy) when present."""
    for module in ("packaging.tags", "pip._vendor.packaging.tags"):
        try:
            tags = __import__(module, fromlist=["sys_tags"])
        except Exception:
            continue
        out = []
        for tag in tags.sys_tags():
            out.append(str(tag))
            if len(out) >= limit:
                break
        return out
    return []


# ----------------------------------------------------------------------------------------- platform

ISA_FLAGS = re.compile(r"^(sse4_1|sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512\w*|amx\w*|asimd|sve\w*|neon)$")


def read(path, limit=1 << 20):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except (OSError, ValueError):
        return None


def cpu_facts():
    model, flags = None, []
    info = read("/proc/cpuinfo")
    if info:
        for line in info.splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if model is None and key in ("model name", "Hardware", "cpu model"):
                model = value.strip()
            elif not flags and key in ("flags", "Features"):
                flags = sorted({f for f in value.split() if ISA_FLAGS.match(f)})
            if model is not None and flags:
                break
    elif sys.platform == "darwin":
        model = run_text(["sysctl", "-n", "machdep.cpu.brand_string"])
        features = run_text(["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"]) or ""
        flags = sorted({f.lower().replace(".", "_") for f in features.split()} & {"avx1_0", "avx2", "fma"})
    else:
        model = platform.processor() or None
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "model": model,
        "isa_flags": flags,
        "logical_cpus": os.cpu_count(),
        "affinity_cpus": affinity,
        "cgroup_cpu_quota": cgroup_quota(),
    }


def cgroup_quota():
    """CPUs this container may use (cgroup v2 ``cpu.max`` or v1 CFS quota), or None when unlimited."""
    text = read("/sys/fs/cgroup/cpu.max")
    if text:
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and period:
            try:
                return round(int(quota) / int(period), 3)
            except ValueError:
                return None
        return None
    quota = read("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or read("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    period = read("/sys/fs/cgroup/cpu/cpu.cfs_period_us") or read(
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us"
    )
    try:
        if quota and period and int(quota) > 0:
            return round(int(quota) / int(period), 3)
    except ValueError:
        pass
    return None


def container_hints():
    hints = []
    if os.path.exists("/.dockerenv"):
        hints.append("docker")
    if os.path.exists("/run/.containerenv"):
        hints.append("podman")
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        hints.append("kubernetes")
    cgroup = read("/proc/1/cgroup") or ""
    for word in ("docker", "kubepods", "containerd", "lxc"):
        if word in cgroup and word not in hints:
            hints.append(word)
    if os.environ.get("container"):
        hints.append(os.environ["container"])
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
        hints.append("nvidia-devices")
    if os.environ.get("NVIDIA_VISIBLE_DEVICES"):
        hints.append("nvidia-container-runtime")
    return sorted(set(hints))


def shm_size():
    try:
        st = os.statvfs("/dev/shm")
    except (OSError, AttributeError):
        return None
    return st.f_frsize * st.f_blocks


def distro():
    text = read("/etc/os-release")
    if text:
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    if sys.platform == "darwin":
        return "macOS " + platform.mac_ver()[0]
    if os.name == "nt":
        return "Windows " + platform.release() + " build " + platform.version()
    return None


def platform_facts():
    libc_name, libc_version = platform.libc_ver()
    uname = platform.uname()
    return {
        "system": uname.system,
        "release": uname.release,
        "kernel": uname.version,
        "machine": uname.machine,
        "distro": distro(),
        "libc": {"name": libc_name or None, "version": libc_version or None},
        "cpu": cpu_facts(),
        "container": container_hints(),
        "shm_bytes": shm_size(),
        "hostname": uname.node,
    }


def run_text(argv, timeout=5):
    try:
        out = subprocess.run(
            argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", "replace").strip()


# ------------------------------------------------------------------------------------- distributions

NATIVE_SUFFIX = re.compile(r"\.(so(\.\d+)*|pyd|dll|dylib)$", re.I)
_NATIVE_HINTS = (".so", ".pyd", ".dll", ".dylib", ".PYD", ".DLL")


def metadata_headers(text):
    """Name, Version and Requires-Dist from a METADATA / PKG-INFO text.

    Only the header block is read: ``Distribution.metadata`` runs the email parser over the whole long
    description, three times per distribution when name, version and requires are asked for, which made
    it the slowest part of the static snapshot.
    """
    header = text.split("\n\n", 1)[0]
    name = version = None
    requires = []
    for line in header.splitlines():
        if line[:1] in (" ", "\t"):
            continue  # a folded continuation line: none of the fields read here use them
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "name" and name is None:
            name = value.strip()
        elif key == "version" and version is None:
            version = value.strip()
        elif key == "requires-dist":
            requires.append(value.strip())
    return name, version, requires


def dist_path(dist):
    # PathDistribution._path is the .dist-info folder; public API has no better way (3.8 - 3.13).
    path = getattr(dist, "_path", None)
    return str(path) if path is not None else None


def record_native_files(dist, location):
    return parse_record_natives(dist.read_text("RECORD") or "")


def _hinted_lines(text):
    """The lines of ``text`` holding a native suffix. torch's RECORD has ~15,000 lines and a few dozen
    native files: ``str.find`` jumps between hits, three times faster than testing every line."""
    starts = set()
    for hint in _NATIVE_HINTS:
        i = text.find(hint)
        while i != -1:
            starts.add(text.rfind("\n", 0, i) + 1)
            i = text.find(hint, i + len(hint))
    lines = []
    for start in sorted(starts):
        end = text.find("\n", start)
        lines.append((text[start:] if end == -1 else text[start:end]).rstrip("\r"))
    return lines


def parse_record_natives(text):
    # type: (str) -> list
    """The native files a RECORD lists: ``{"path", "sha256" (hex or None), "size" (or None)}`` each.
    envcheck's wheel scanner reuses it (``envcheck.native.scan``)."""
    out = []
    if not text:
        return out
    import base64
    import csv

    for row in csv.reader(_hinted_lines(text)):
        if not row or not NATIVE_SUFFIX.search(row[0]):
            continue
        digest = None
        if len(row) > 1 and row[1].startswith("sha256="):
            raw = row[1][len("sha256=") :]
            try:
                digest = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
            except (ValueError, TypeError):
                digest = None
        size = None
        if len(row) > 2 and row[2].isdigit():
            size = int(row[2])
        out.append({"path": row[0].replace("\\", "/"), "sha256": digest, "size": size})
    return out


def distributions():
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 is out of scope; say so instead of crashing
        return [], "importlib.metadata is unavailable"
    seen = set()
    out = []
    for dist in metadata.distributions():
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
        if not text:
            continue
        name, version, requires = metadata_headers(text)
        if not name or version is None:
            continue
        if not requires and dist.read_text("requires.txt"):  # egg-info keeps them apart
            requires = list(dist.requires or [])
        mdir = dist_path(dist)
        location = os.path.dirname(mdir) if mdir else ""
        canonical = re.sub(r"[-_.]+", "-", name).lower()
        wheel = dist.read_text("WHEEL") or ""
        direct_url = dist.read_text("direct_url.json")
        try:
            direct = redact_json(json.loads(direct_url)) if direct_url else None
        except ValueError:
            direct = None
        installer = dist.read_text("INSTALLER")
        out.append(
            {
                "name": name,
                "version": version,
                "installer": installer.strip() if installer else None,
                "requires": requires,
                "direct_url": direct,
                "wheel_tags": [
                    line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")
                ],
                "location": location,
                "metadata_dir": mdir or "",
                "shadowed": canonical in seen,
                "native_files": record_native_files(dist, location),
            }
        )
        seen.add(canonical)
    return out, None


# ------------------------------------------------------------------------------------ torch, static


def read_version_file(path):
    """Literal assignments of ``torch/version.py`` without executing it."""
    text = read(path)
    if text is None:
        return {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
    return values


def torch_static():
    trees = []
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "torch")
        if os.path.isfile(os.path.join(candidate, "__init__.py")) and candidate not in trees:
            trees.append(candidate)
    static = None
    if trees:
        values = read_version_file(os.path.join(trees[0], "version.py"))
        static = {
            "location": trees[0],
            "version": values.get("__version__"),
            "git_version": values.get("git_version"),
            "cuda": values.get("cuda"),
            "hip": values.get("hip"),
            "debug": values.get("debug"),
        }
    return {"trees": trees, "static": static}


def facts_stage():
    stage("python")
    _result["python"] = python_facts()
    stage("platform")
    _result["platform"] = platform_facts()
    stage("distributions")
    _result["packages"], _result["packages_error"] = distributions()
    stage("torch version file")
    _result["torch"] = torch_static()
    _result["env"] = collect_env()


# ------------------------------------------------------------------------------------------ driver


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


# ----------------------------------------------------------------------------------- torch, runtime


def attempt(fn, default=None):
    try:
        return fn()
    except Exception:
        return default


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


# --------------------------------------------------------------------------------- loaded libraries

_SHARED = re.compile(r"\.(so(\.\d+)*|dylib|dll|pyd)$|\.so\b", re.I)


def loaded_libraries():
    """Paths of the shared libraries mapped into this process, in load order where the OS tells it."""
    if sys.platform.startswith("linux"):
        seen, out = set(), []
        text = read("/proc/self/maps", 1 << 24) or ""
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if not path.startswith("/") or path in seen or not _SHARED.search(os.path.basename(path)):
                continue
            seen.add(path)
            out.append(path)
        return out
    if sys.platform == "darwin":
        import ctypes

        dyld = ctypes.CDLL(None)
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        return [
            dyld._dyld_get_image_name(i).decode("utf-8", "replace") for i in range(dyld._dyld_image_count())
        ]
    if os.name == "nt":
        import ctypes
        from ctypes import wintypes

        psapi = ctypes.WinDLL("psapi")
        kernel32 = ctypes.WinDLL("kernel32")
        process = kernel32.GetCurrentProcess()
        needed = wintypes.DWORD()
        modules = (wintypes.HMODULE * 4096)()
        psapi.EnumProcessModules(process, modules, ctypes.sizeof(modules), ctypes.byref(needed))
        out = []
        for i in range(min(needed.value // ctypes.sizeof(wintypes.HMODULE), 4096)):
            buf = ctypes.create_unicode_buffer(1024)
            if psapi.GetModuleFileNameExW(process, modules[i], buf, 1024):
                out.append(buf.value)
        return out
    return []


def thread_pools():
    """threadpoolctl's view, imported *after* torch and with KMP_DUPLICATE_LIB_OK restored: threadpoolctl
    sets it at import, which would hide Intel OpenMP's Error #15 from everything that runs later."""
    before = os.environ.get("KMP_DUPLICATE_LIB_OK")
    try:
        import threadpoolctl
    except Exception:
        return None
    finally:
        if before is None:
            os.environ.pop("KMP_DUPLICATE_LIB_OK", None)
        else:
            os.environ["KMP_DUPLICATE_LIB_OK"] = before
    try:
        info = threadpoolctl.threadpool_info()
    except Exception:
        return None
    return [
        {
            "user_api": str(p.get("user_api")),
            "internal_api": str(p.get("internal_api")),
            "filepath": str(p.get("filepath")),
            "version": p.get("version"),
            "num_threads": p.get("num_threads"),
        }
        for p in info
    ]


def runtime_stage():
    stage("gpu driver")
    _result["gpu"] = gpu_driver()
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        _result["torch_missing"] = True  # an environment without torch: nothing more to learn here
        return
    stage("import torch")
    started = time.perf_counter()
    import torch

    _result["import_seconds"] = time.perf_counter() - started
    stage("small op")
    ok = small_op(torch)
    stage("torch facts")
    runtime = torch_runtime(torch)
    runtime["small_op_ok"] = ok
    _result["torch_runtime"] = runtime
    stage("loaded libraries")
    _result["loaded"] = loaded_libraries()
    stage("thread pools")
    _result["threadpools"] = thread_pools()


def main():
    global OUT
    OUT = sys.argv[1] if len(sys.argv) > 1 else None
    stages = sys.argv[2].split(",") if len(sys.argv) > 2 else ["facts", "runtime"]
    _result["python_version"] = list(sys.version_info[:3])
    try:
        if "facts" in stages:
            facts_stage()
        if "runtime" in stages:
            runtime_stage()
    except BaseException as e:  # recorded; the parent turns it into the probe outcome
        import traceback

        _result["exception"] = "%s: %s" % (type(e).__name__, e)
        _result["traceback_tail"] = "".join(traceback.format_exc())[-4000:]
        emit()
        sys.exit(3)
    _result["done"] = True
    emit()
    # The result is on disk: skip interpreter teardown, which costs torch ~0.3 s of destructors and
    # thread joins and can itself crash on a broken build.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
