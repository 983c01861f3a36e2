"""The large healthy control of docs/broken-environments.md: a real venv with torch (the test environment's,
hard-linked in) and 25+ other distributions with native code installed by pip from the registry, gated
against its own snapshot by the default gate. It must exit 0 with no error, and every warning must be one
whose harm was measured on this venv:

- ``VERIFY-IMPORT-OPENMP``: scikit-learn bundles its own GNU libgomp beside torch's. Imported before torch,
  scikit-learn's OpenMP calls bind to its own copy, so two worker pools run, and an idle pool's threads
  spin on the cores the other needs: one more OpenMP thread (asserted below), and, measured on 2 cores,
  loops alternating torch ops with scikit-learn's Lloyd iteration 40-100x slower (12-32 ms an iteration
  against 0.2-0.4 ms with one pool, or with torch imported first, or with OMP_WAIT_POLICY=PASSIVE). The
  suite never asserts a time: the thread count is the assertion.

Everything else the control shows is info: numba's optional TBB threading layer (``libtbb.so.12`` is the
``tbb`` wheel's, which numba does not require), the CUDA checks of a CPU build.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from typer.testing import CliRunner
from venvs import HAS_TORCH, clone_site_packages, make_venv

from envcheck.cli import app

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the control is a Linux venv"),
]

# Versions that install for CPython 3.11 beside numpy 2 and torch 2.13.0; NumPy stays the test
# environment's own (the clone's), whatever release it resolved to.
PINS = [
    "scipy==1.17.1",
    "pandas==3.1.1",
    "scikit-learn==1.9.1",
    "opencv-python-headless==5.0.0.93",
    "pyarrow==26.0.1",
    "onnxruntime==1.32.0",
    "tokenizers==0.23.3",
    "pillow==13.0.0",
    "matplotlib==3.11.2",
    "kiwisolver==1.5.1",
    "contourpy==1.3.3",
    "lxml==6.1.3",
    "psutil==7.2.2",
    "pyyaml==6.0.4",
    "regex==2026.11.19",
    "safetensors==0.8.0",
    "h5py==3.16.0",
    "numba==0.68.1",
    "llvmlite==0.50.0",
    "msgpack==1.2.4",
    "orjson==3.13.0",
    "zstandard==0.25.0",
    "grpcio==1.85.3",
    "ujson==6.1.0",
    "cffi==2.1.1",
]
# The warnings justified above, and nothing else.
JUSTIFIED_WARNINGS = {"VERIFY-IMPORT-OPENMP"}
# What pip says when the registry cannot be reached (or does not hold a pinned release).
UNREACHABLE = (
    "Could not find a version",
    "No matching distribution",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "NewConnectionError",
    "ConnectTimeout",
    "Network is unreachable",
)


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("large-control")
    python = make_venv(root / "venv")
    clone_site_packages(python)
    pip = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-input",
            "--progress-bar=off",
            *PINS,
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if pip.returncode != 0:
        if any(s in pip.stdout + pip.stderr for s in UNREACHABLE):
            pytest.skip(f"the package registry cannot be reached: {pip.stderr.strip()[-300:]}")
        raise AssertionError(pip.stdout[-2000:] + pip.stderr[-2000:])

    env = {"ENVCHECK_CACHE_DIR": str(root / "cache")}
    reference = root / "reference.json"
    made = CliRunner().invoke(app, ["snapshot", "--python", str(python), "-o", str(reference), "-q"], env=env)
    assert made.exit_code == 0, made.output
    gated = CliRunner().invoke(
        app, ["gate", str(reference), "--python", str(python), "--format", "json", "-q"], env=env
    )
    assert "Traceback" not in gated.output, gated.output
    return {
        "python": python,
        "manifest": json.loads(reference.read_text(encoding="utf-8")),
        "code": gated.exit_code,
        "report": json.loads(gated.stdout),
        "stderr": gated.stderr,
    }


def test_the_control_is_large(control: dict[str, Any]) -> None:
    native = sorted(p["name"] for p in control["manifest"]["packages"] if p.get("native_files"))
    assert len(native) >= 25, native
    wanted = {"torch", "scipy", "scikit-learn", "pyarrow", "onnxruntime", "opencv-python-headless", "numba"}
    assert wanted <= {n.lower() for n in native}


def test_the_large_control_gates_clean_with_only_justified_warnings(control: dict[str, Any]) -> None:
    findings = control["report"]["findings"]
    errors = [(f["rule"], f["subject"], f["message"]) for f in findings if f["severity"] == "error"]
    assert errors == []
    assert control["code"] == 0, control["stderr"]
    assert {f["rule"] for f in findings if f["severity"] == "warning"} == JUSTIFIED_WARNINGS
    # The warning names the runtimes, the harm measured and the remedy that removes it.
    (omp,) = [f for f in findings if f["rule"] == "VERIFY-IMPORT-OPENMP"]
    assert omp["severity"] == "warning"
    assert "(GNU, scikit-learn's) loaded by `import sklearn`" in omp["message"]
    assert "(GNU, torch's) loaded by `import torch`" in omp["message"]
    assert "one more OpenMP thread" in omp["message"] and "slower" in omp["message"]
    assert "Import torch before `sklearn`" in omp["remedy"]
    # numba imports without TBB: its optional threading layer is no failed import.
    tbb = [f for f in findings if f["rule"] == "ENV-NATIVE-MISSING"]
    assert [(f["severity"], f["subject"].split(".")[0]) for f in tbb] in ([], [("info", "tbbpool")])
    # The default gate did its whole work: every module with native code was imported, none timed out.
    assert "imported in this order" in control["stderr"]
    assert not [f for f in findings if f["rule"] in ("VERIFY-TIMEOUT", "VERIFY-CRASH", "VERIFY-IMPORT")]


HARM = """
import os, sys
def threads():
    return len(os.listdir("/proc/self/task"))
if sys.argv[1] == "sklearn-first":
    from sklearn.cluster import KMeans
    import torch
else:
    import torch
    from sklearn.cluster import KMeans
import numpy as np
a = torch.randn(256, 256)
a @ a
after_torch = threads()
KMeans(8, n_init=1, max_iter=3, random_state=0).fit(np.random.default_rng(0).standard_normal((20000, 16)))
gomp = {line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line}
print(after_torch, threads(), len(gomp))
"""


@pytest.mark.parametrize(("order", "extra"), [("sklearn-first", 1), ("torch-first", 0)])
def test_the_measured_harm_two_pools_when_sklearn_comes_before_torch(
    control: dict[str, Any], order: str, extra: int
) -> None:
    """The warning's harm, as a thread count: with scikit-learn imported first its OpenMP loop starts a second
    pool (one more worker thread); imported after torch it runs on torch's pool. Both copies are mapped
    either way."""
    env = {"OMP_NUM_THREADS": "2", "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [str(control["python"]), "-c", HARM, order],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    after_torch, after_sklearn, copies = map(int, out.stdout.split())
    assert copies == 2
    assert after_sklearn - after_torch == extra
