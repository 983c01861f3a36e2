"""Every single-environment rule: triggered by a realistic edit of a real manifest, silent on the real one."""

from __future__ import annotations

from typing import Any

import pytest
from diffdata import Edit, dist_entry, manifest
from test_built_for_torch import cuda_build, old_abi_build
from test_interpreter_invariants import cp312_suffix_only, cp312_torch_in_311, venv_moved, venv_of_312
from test_windows_loader import old_runtime, windows

from envcheck.app.catalog import catalog, get_rule
from envcheck.core.findings import Severity
from envcheck.diff.engine import doctor

GiB = 1024**3


def gpu(capability: str, *, cuda_driver: int = 13000, driver: str = "580.65.06") -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["gpu"] = {
            "found": True,
            "source": "nvml",
            "reason": None,
            "driver_version": driver,
            "cuda_driver_version": cuda_driver,
            "gpus": [
                {
                    "index": 0,
                    "name": "NVIDIA Test GPU",
                    "uuid": None,
                    "memory_total": 24 * GiB,
                    "compute_capability": capability,
                }
            ],
        }

    return edit


def second_torch_tree(d: dict[str, Any]) -> None:
    d["torch"]["trees"].append("/root/.local/lib/python3.11/site-packages/torch")


def shadowed_torch(d: dict[str, Any]) -> None:
    old = dict(dist_entry(d, "torch"), version="2.12.0+cpu", shadowed=True)
    old["location"] = "/root/.local/lib/python3.11/site-packages"
    d["packages"].append(old)


def torch_without_metadata(d: dict[str, Any]) -> None:
    d["packages"] = [p for p in d["packages"] if p["name"] != "torch"]


def editable_filelock(d: dict[str, Any]) -> None:
    dist_entry(d, "filelock")["direct_url"] = {"url": "file:///src/filelock", "dir_info": {"editable": True}}


def old_torch_with_numpy2(d: dict[str, Any]) -> None:
    dist_entry(d, "torch")["version"] = "2.2.2+cpu"


def companion(version: str, pin: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        entry = dict(dist_entry(d, "filelock"), name="torchvision", version=version, requires=["numpy", pin])
        entry["native_files"] = []
        d["packages"].append(entry)

    return edit


def torchvision_without_pillow(d: dict[str, Any]) -> None:
    # torchvision 0.28's real Requires-Dist; pillow is not installed in the venv.
    companion("0.28.0+cpu", "torch==2.13.0")(d)
    dist_entry(d, "torchvision")["requires"] = ["numpy", "torch==2.13.0", "pillow!=8.3.*,>=5.3.0"]


def cudnn_version(version: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, "nvidia-cudnn-cu13")["version"] = version

    return edit


def nccl_cu12(d: dict[str, Any]) -> None:
    d["packages"].append(dict(dist_entry(d, "nvidia-nccl-cu13"), name="nvidia-nccl-cu12", version="2.27.3"))


def system_cudnn(d: dict[str, Any]) -> None:
    lib = next(x for x in d["runtimes"]["loaded"] if x["path"].endswith("/libcudnn.so.9"))
    lib["path"], lib["owner"] = "/usr/lib/x86_64-linux-gnu/libcudnn.so.9", "system"
    # Not reconciled with a native tree (--no-native, or a manifest from before): the rule decides alone.
    if d.get("native"):
        d["native"]["loaded"] = None


def libc10_missing(d: dict[str, Any]) -> None:
    d["native"]["missing"] = [
        {
            "root": "torch:torch/_C.cpython-311-x86_64-linux-gnu.so",
            "chain": ["torch:torch/_C.cpython-311-x86_64-linux-gnu.so", "torch:torch/lib/libtorch_python.so"],
            "missing": "libc10.so",
            "text": "_C.cpython-311-x86_64-linux-gnu.so → libtorch_python.so → libc10.so: MISSING",
            "from_extension": True,
        }
    ]


def glibcxx_too_new(d: dict[str, Any]) -> None:
    node = next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libtorch_python.so")
    node["version_needs"]["GLIBCXX"] = "3.4.32"


def gomp_from_system(d: dict[str, Any]) -> None:
    d["native"]["loaded"] = [
        {
            "kind": "elsewhere",
            "name": "libgomp.so.1",
            "loaded": "/usr/lib/x86_64-linux-gnu/libgomp.so.1",
            "loaded_owner": "system",
            "expected": "torch:torch/lib/libgomp.so.1",
        }
    ]


def old_glibc(d: dict[str, Any]) -> None:
    d["platform"]["libc"]["version"] = "2.27"


def intel_openmp_too(d: dict[str, Any]) -> None:
    path = "/opt/conda/lib/libiomp5.so"
    d["runtimes"]["loaded"].append({"path": path, "owner": "system", "identity": None})
    d["runtimes"]["threadpools"].append(
        {
            "user_api": "openmp",
            "internal_api": "openmp",
            "filepath": path,
            "version": None,
            "num_threads": 2,
            "owner": "system",
        }
    )


def env(name: str, value: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["env"][name] = value

    return edit


def deterministic_on_gpu(d: dict[str, Any]) -> None:
    d["torch"]["runtime"]["numerics"]["deterministic_algorithms"] = True
    d["torch"]["runtime"]["backends"]["cuda_available"] = True


def cpu_quota(d: dict[str, Any]) -> None:
    d["platform"]["cpu"]["cgroup_cpu_quota"] = 1.0


def probe_crashed(d: dict[str, Any]) -> None:
    d["meta"]["probe"] = {
        "status": "crashed",
        "stage": "import torch",
        "signal": "SIGILL",
        "exit_code": -4,
        "stderr_tail": "Illegal instruction (core dumped)",
    }


def docker_shm(d: dict[str, Any]) -> None:
    d["platform"]["shm_bytes"] = 64 * 1024 * 1024


def hand_copied_dll(d: dict[str, Any]) -> None:
    node = next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libgomp.so.1")
    node["integrity"] = "modified"
    node["identity"] = "sha256:" + "1" * 64


def gomp_deleted(d: dict[str, Any]) -> None:
    # What a snapshot records once torch/lib/libgomp.so.1 is deleted: the loader cache finds the OS's copy.
    os_gomp = "/lib/x86_64-linux-gnu/libgomp.so.1"
    node = next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libgomp.so.1")
    d["native"]["nodes"].append({**node, "key": os_gomp, "path": os_gomp, "owner": "system"})
    node.update(error="listed in RECORD but not on disk", format=None, soname=None, dependencies=None)
    for n in d["native"]["nodes"]:
        for dep in n.get("dependencies") or []:
            if dep["name"] == "libgomp.so.1":
                dep.update(target=os_gomp, how="ld-so-cache", kind="redistributable", via=None)


def record_escape(d: dict[str, Any]) -> None:
    d["native"]["refused"] = [
        {
            "path": "../../../../../etc/libx.so",
            "owner": "torch",
            "kind": "record-escape",
            "reason": "RECORD names /etc/libx.so, outside the environment: not read",
        }
    ]


def foreign_libpython(d: dict[str, Any]) -> None:
    # What the probe records when LD_LIBRARY_PATH puts Debian's libpython 3.11.2 under pyenv's 3.11.7.
    d["env"]["LD_LIBRARY_PATH"] = "/usr/lib/x86_64-linux-gnu"
    d["python"].update(
        version="3.11.2",
        build_version="3.11.7",
        own_library="/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
        loaded_library="/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
        stdlib_errors={
            "_ssl": "ImportError: _ssl.cpython-311-x86_64-linux-gnu.so: undefined symbol: _PyModule_Add"
        },
    )


def ssl_broken(d: dict[str, Any]) -> None:
    d["python"]["stdlib_errors"] = {"_ssl": "ImportError: libssl.so.3: cannot open shared object file"}


def fast_math(d: dict[str, Any]) -> None:
    d["torch"]["runtime"]["fp_control"] = {
        "flush_to_zero": True,
        "denormals_are_zero": True,
        "set_when": "start-up",
        "fast_math_libraries": [],
        "preloaded": [],
        "method": "arithmetic",
    }


def sitecustomize(d: dict[str, Any]) -> None:
    d["python"]["startup"] = {
        "customize": [
            {
                "name": "sitecustomize",
                "path": "/srv/venv/sitecustomize.py",
                "mentions": ["torch", "set_num_threads"],
            }
        ]
    }


def failed_config_check(variable: str, value: str, kind: str, detail: str) -> Edit:
    """What the probe's live check of a configuration variable records when it fails."""

    def edit(d: dict[str, Any]) -> None:
        d["config_checks"] = [
            {"variable": variable, "value": value, "kind": kind, "ok": False, "detail": detail}
        ]

    return edit


SITE = "/root/venvs/dev/lib/python3.11/site-packages"


def numpy_twice(d: dict[str, Any]) -> None:
    old = dict(dist_entry(d, "numpy"), version="1.26.4", metadata_dir=f"{SITE}/numpy-1.26.4.dist-info")
    d["packages"].append(dict(old, shadowed=True))


def install_facts(**facts: Any) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["install"] = {
            "stashes": [],
            "orphans": [],
            "shared": [],
            "walked": 20000,
            "truncated": False,
            **facts,
        }

    return edit


interrupted_torch = install_facts(
    stashes=[
        {"path": f"{SITE}/~orch", "kind": "package", "name": "torch", "files": 15000},
        {
            "path": f"{SITE}/~orch-2.13.0+cpu.dist-info",
            "kind": "dist-info",
            "name": "torch",
            "version": "2.13.0+cpu",
        },
    ]
)
numpy_orphans = install_facts(
    orphans=[
        {
            "folder": f"{SITE}/numpy",
            "count": 7,
            "examples": ["numpy/core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so"],
            "modules": 7,
            "likely": "unknown",
            "owners": ["numpy==2.4.6"],
        }
    ]
)
shared_by_a_fork = install_facts(
    shared=[
        {
            "owners": [f"{SITE}/numpy-2.4.6.dist-info", f"{SITE}/filelock-4.3.1.dist-info"],
            "count": 2,
            "examples": ["numpy/__init__.py", "numpy/version.py"],
        }
    ]
)


files_gone = install_facts(
    missing=[
        {
            "owner": f"{SITE}/numpy-2.4.6.dist-info",
            "count": 2,
            "examples": ["numpy/linalg/linalg.py", "numpy/version.py"],
            "modules": 2,
        }
    ]
)
source_gone = install_facts(
    sources_missing=[{"name": "filelock", "version": "4.3.1", "path": "/src/filelock"}]
)


def other_version_file(d: dict[str, Any]) -> None:
    d["torch"]["static"]["version"] = "2.12.1+cpu"


# rule id -> (manifest, edits, expected severity, expected subject)
TRIGGERS: dict[str, tuple[str, tuple[Edit, ...], Severity, str]] = {
    # Real venvs broken for real: tests/diff/test_install_invariants.py.
    "ENV-DIST-DUPLICATE": ("dev-cpu", (numpy_twice,), "error", "numpy"),
    "ENV-INSTALL-INTERRUPTED": ("dev-cpu", (interrupted_torch,), "error", "torch"),
    "ENV-FILE-ORPHAN": ("dev-cpu", (numpy_orphans,), "error", "numpy"),
    "ENV-FILE-SHARED": ("dev-cpu", (shared_by_a_fork,), "error", "filelock, numpy"),
    "ENV-VERSION-FILE": ("dev-cpu", (other_version_file,), "error", "torch"),
    "ENV-FILE-GONE": ("dev-cpu", (files_gone,), "error", "numpy"),
    "ENV-SOURCE-GONE": ("dev-cpu", (source_gone,), "error", "filelock"),
    "ENV-TORCH-TREES": ("dev-cpu", (second_torch_tree,), "error", "torch"),
    "ENV-TORCH-SHADOWED": ("dev-cpu", (shadowed_torch,), "error", "torch"),
    "ENV-TORCH-NO-METADATA": ("dev-cpu", (torch_without_metadata,), "warning", "torch"),
    "ENV-GPU-UNUSED": ("dev-cpu", (gpu("8.9"),), "error", "torch"),
    "ENV-NUMPY-TORCH-ABI": ("dev-cpu", (old_torch_with_numpy2,), "error", "numpy"),
    # Real binaries for both: tests/diff/test_built_for_torch.py.
    "ENV-BUILT-FOR-ABI": ("dev-cpu", (old_abi_build,), "error", "abiops"),
    "ENV-BUILT-FOR-VARIANT": ("dev-cpu", (cuda_build,), "error", "visionops"),
    "ENV-COMPANION-PIN": ("dev-cpu", (companion("0.27.0+cpu", "torch==2.12.0"),), "error", "torchvision"),
    "ENV-COMPANION-VARIANT": (
        "dev-cpu",
        (companion("0.28.0+cu130", "torch==2.13.0"),),
        "error",
        "torchvision",
    ),
    "ENV-PKG-UNMET": ("dev-cpu", (torchvision_without_pillow,), "error", "pillow"),
    "ENV-PKG-DIRECT": ("cuda", (editable_filelock,), "info", "filelock"),
    "ENV-DRIVER-TOO-OLD": (
        "cuda",
        (gpu("8.9", cuda_driver=12080, driver="570.86.10"),),
        "error",
        "NVIDIA driver",
    ),
    "ENV-CUDA-NO-DRIVER": ("cuda", (), "info", "NVIDIA driver"),
    "ENV-GPU-ARCH-MISSING": ("cuda", (gpu("6.1"),), "error", "NVIDIA Test GPU"),
    "ENV-NVIDIA-PINS": ("cuda", (cudnn_version("9.20.0.48"),), "error", "nvidia-cudnn-cu13"),
    "ENV-NVIDIA-MIXED-CUDA": ("cuda", (nccl_cu12,), "error", "nvidia-* wheels"),
    "ENV-CUDA-LIB-SHADOWED": ("cuda", (system_cudnn,), "error", "libcudnn.so.9"),
    "ENV-NATIVE-MISSING": ("dev-cpu", (libc10_missing,), "error", "_C.cpython-311-x86_64-linux-gnu.so"),
    "ENV-SYMBOL-VERSION": ("dev-cpu", (glibcxx_too_new,), "error", "GLIBCXX_3.4.32"),
    "ENV-NATIVE-SHADOWED": ("dev-cpu", (gomp_from_system,), "error", "libgomp.so.1"),
    "ENV-PYTHON-LIBPYTHON": ("dev-cpu", (foreign_libpython,), "error", "libpython3.11.so.1.0"),
    "ENV-PYTHON-STDLIB": ("dev-cpu", (ssl_broken,), "warning", "python stdlib"),
    "ENV-NATIVE-TAMPERED": ("dev-cpu", (hand_copied_dll,), "error", "torch:torch/lib/libgomp.so.1"),
    "ENV-NATIVE-FILE-MISSING": ("dev-cpu", (gomp_deleted,), "error", "torch:torch/lib/libgomp.so.1"),
    "ENV-FTZ-DAZ": ("dev-cpu", (fast_math,), "warning", "floating-point mode"),
    "ENV-NATIVE-RECORD-ESCAPE": ("dev-cpu", (record_escape,), "error", "torch:../../../../../etc/libx.so"),
    "ENV-GLIBC-TOO-OLD": ("dev-cpu", (old_glibc,), "error", "torch"),
    "ENV-OPENMP-MULTIPLE": ("dev-cpu", (intel_openmp_too,), "error", "OpenMP"),
    "ENV-KMP-DUPLICATE-LIB-OK": (
        "dev-cpu",
        (env("KMP_DUPLICATE_LIB_OK", "TRUE"),),
        "warning",
        "KMP_DUPLICATE_LIB_OK",
    ),
    "ENV-DETERMINISM-CUBLAS": ("cuda", (deterministic_on_gpu,), "error", "CUBLAS_WORKSPACE_CONFIG"),
    "ENV-THREADS-OVER-QUOTA": ("dev-cpu", (cpu_quota,), "warning", "torch.get_num_threads()"),
    # The installation runs on its interpreter (FM-28): tests/diff/test_interpreter_invariants.py.
    "ENV-WHEEL-TAG": ("dev-cpu", (cp312_torch_in_311,), "error", "torch"),
    "ENV-EXT-SUFFIX": ("dev-cpu", (cp312_suffix_only,), "error", "torch"),
    "ENV-VENV-INTERPRETER": ("dev-cpu", (venv_of_312,), "error", "pyvenv.cfg"),
    "ENV-SCRIPT-BROKEN": ("dev-cpu", (venv_moved,), "error", "#!/build/.venv/bin/python"),
    "ENV-PROBE-FAILED": ("dev-cpu", (probe_crashed,), "error", "import torch"),
    "ENV-SHM-SMALL": ("dev-cpu", (docker_shm,), "warning", "/dev/shm"),
    "ENV-SITECUSTOMIZE": ("dev-cpu", (sitecustomize,), "warning", "sitecustomize"),
    "ENV-CONFIG-TOOL": (
        "dev-cpu",
        (failed_config_check("CXX", "/opt/missing/g++", "compiler", "/opt/missing/g++ does not exist"),),
        "error",
        "CXX",
    ),
    "ENV-CONFIG-FOLDER": (
        "dev-cpu",
        (failed_config_check("TORCHINDUCTOR_CACHE_DIR", "/etc/hosts/cache", "folder", "cannot be created"),),
        "error",
        "TORCHINDUCTOR_CACHE_DIR",
    ),
    # A Windows customer machine's facts (the probe's answer after import torch failed), as
    # tests/diff/test_windows_loader.py builds them; tests/windows records them for real under Wine.
    "ENV-WIN-DLL-NOT-FOUND": ("dev-cpu", (windows(),), "error", "MSVCP140.dll"),
    "ENV-WIN-VC-RUNTIME-OLD": ("dev-cpu", (old_runtime("14.34.31931.0"),), "error", "VC++ runtime"),
}


def test_every_single_environment_rule_has_a_trigger() -> None:
    singles = {r.id for r in catalog() if r.kind == "single"}
    assert singles == set(TRIGGERS)


@pytest.mark.slow
@pytest.mark.parametrize("rule_id", sorted(TRIGGERS))
def test_rule_triggers_on_an_edited_real_manifest(rule_id: str) -> None:
    name, edits, severity, subject = TRIGGERS[rule_id]
    rule = get_rule(rule_id)
    assert rule is not None
    found = [f for f in doctor(manifest(name, *edits)) if f.rule == rule_id]
    assert [(f.severity, f.subject) for f in found][:1] == [(severity, subject)]
    assert all(f.message and f.remedy for f in found)


@pytest.mark.parametrize("rule_id", sorted(TRIGGERS))
def test_rule_is_silent_on_the_real_manifest(rule_id: str) -> None:
    # The CPU venv is clean; the CUDA venv is clean too except that it has no driver to run on.
    clean = "dev-cpu" if rule_id == "ENV-CUDA-NO-DRIVER" else TRIGGERS[rule_id][0]
    assert [f for f in doctor(manifest(clean)) if f.rule == rule_id] == []


def test_driver_of_the_same_major_but_older_minor_is_a_warning() -> None:
    found = doctor(manifest("cuda", gpu("8.9", cuda_driver=13000 - 0, driver="580.1")))
    assert not [f for f in found if f.rule == "ENV-DRIVER-TOO-OLD"]
    newer_torch = manifest(
        "cuda", gpu("8.9", cuda_driver=13000), lambda d: d["torch"]["static"].update(cuda="13.2")
    )
    (f,) = [f for f in doctor(newer_torch) if f.rule == "ENV-DRIVER-TOO-OLD"]
    assert f.severity == "warning"


def test_a_newer_gpu_of_a_built_major_runs_and_ptx_covers_newer_ones() -> None:
    # sm_89 runs sm_86 cubins (same major); an sm_121 runs sm_120's.
    for capability in ("8.9", "12.1", "9.0"):
        found = doctor(manifest("cuda", gpu(capability)))
        assert not [f for f in found if f.rule == "ENV-GPU-ARCH-MISSING"], capability


def test_two_gnu_openmp_runtimes_are_only_a_warning() -> None:
    def second_gomp(d: dict[str, Any]) -> None:
        path = "/root/venvs/dev/lib/python3.11/site-packages/scikit_learn.libs/libgomp-a34b3233.so.1.0.0"
        d["runtimes"]["loaded"].append({"path": path, "owner": "scikit-learn", "identity": None})

    (f,) = [f for f in doctor(manifest("dev-cpu", second_gomp)) if f.rule == "ENV-OPENMP-MULTIPLE"]
    assert f.severity == "warning"


def test_an_optional_plugin_that_cannot_load_is_info() -> None:
    def plugin(d: dict[str, Any]) -> None:
        libc10_missing(d)
        d["native"]["missing"][0]["from_extension"] = False

    (f,) = [f for f in doctor(manifest("dev-cpu", plugin)) if f.rule == "ENV-NATIVE-MISSING"]
    assert f.severity == "info"


def test_a_stray_native_file_is_a_warning() -> None:
    def stray(d: dict[str, Any]) -> None:
        node = dict(next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libgomp.so.1"))
        node.update(key="unowned:torch/lib/libiomp5.so", owner="unowned", integrity="computed")
        node["path"] = node["path"].replace("libgomp.so.1", "libiomp5.so")
        d["native"]["nodes"].append(node)

    (f,) = [f for f in doctor(manifest("dev-cpu", stray)) if f.rule == "ENV-NATIVE-TAMPERED"]
    assert (f.severity, f.subject) == ("warning", "unowned:torch/lib/libiomp5.so")
