"""The floating-point control state: read by behaviour in real processes, with real -ffast-math libraries
built by gcc, recorded by a real snapshot and decoded like every probe fact."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import needs_torch

from envcheck.collect.facts import torch_runtime
from envcheck.core.errors import ManifestError
from envcheck.inside.fp_control import fp_control, fp_flags
from envcheck.manifest.io import load

linux_gcc = pytest.mark.skipif(
    not sys.platform.startswith("linux") or shutil.which("gcc") is None, reason="needs gcc on Linux"
)
EXAMPLES = Path(__file__).parents[2] / "manifests" / "examples"

# What a target does: note the state, load something, describe the state (the probe's order).
TARGET = """
import ctypes, json, sys
from envcheck.inside import fp_control as m
from envcheck.inside.loaded_libraries import loaded_libraries
m.note_start()
if len(sys.argv) > 1:
    ctypes.CDLL(sys.argv[1])
print(json.dumps(m.fp_control(loaded_libraries())))
"""


def _build(tmp_path: Path, name: str, *flags: str) -> Path:
    source = tmp_path / f"{name}.c"
    source.write_text(f"int {name}(void) {{ return 1; }}\n", encoding="utf-8")
    lib = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", *flags, "-o", str(lib), str(source)], check=True)
    return lib


@pytest.fixture(scope="module")
def fast_math_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not sys.platform.startswith("linux") or shutil.which("gcc") is None:
        pytest.skip("needs gcc on Linux")
    lib = _build(tmp_path_factory.mktemp("fastmath"), "fastmath", "-ffast-math")
    env = {**os.environ, "LD_PRELOAD": str(lib)}
    state = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json; from envcheck.inside.fp_control import fp_flags; print(json.dumps(fp_flags()))",
        ],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    if not json.loads(state.stdout)["flush_to_zero"]:
        pytest.skip("this gcc does not link crtfastmath.o into shared libraries (GCC 13 and newer)")
    return lib


def _target(env: dict[str, str] | None = None, *args: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", TARGET, *args], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout)  # type: ignore[no-any-return]


def test_this_process_computes_with_ieee_subnormals() -> None:
    assert fp_flags() == {"flush_to_zero": False, "denormals_are_zero": False}
    # Off: nothing is scanned and nothing is blamed.
    state = fp_control(["/nonexistent/libx.so"])
    assert state["set_when"] is None and state["fast_math_libraries"] == [] and state["preloaded"] == []


@linux_gcc
def test_a_preloaded_fast_math_library_is_named_as_the_setter_from_start_up(fast_math_lib: Path) -> None:
    state = _target({**os.environ, "LD_PRELOAD": str(fast_math_lib)})
    assert state["flush_to_zero"] is True and state["denormals_are_zero"] is True
    assert state["set_when"] == "start-up"
    assert state["fast_math_libraries"] == [str(fast_math_lib)]
    assert state["preloaded"] == [str(fast_math_lib)]


@linux_gcc
def test_a_library_loaded_after_start_up_is_told_apart(fast_math_lib: Path, tmp_path: Path) -> None:
    plain = _build(tmp_path, "plain", "-O2")
    assert _target(None, str(plain))["flush_to_zero"] is False
    state = _target(None, str(fast_math_lib))
    assert state["flush_to_zero"] is True
    assert state["set_when"] == "import torch"  # in the probe, what runs after note_start is import torch
    assert state["fast_math_libraries"] == [str(fast_math_lib)]
    assert state["preloaded"] == []


@linux_gcc
def test_the_symbol_scan_reads_only_elf_symbol_tables(fast_math_lib: Path, tmp_path: Path) -> None:
    from envcheck.inside.fp_control import _has_fast_math_symbol

    assert _has_fast_math_symbol(str(fast_math_lib))
    assert not _has_fast_math_symbol(str(_build(tmp_path, "plain", "-O2")))
    stripped = tmp_path / "libstripped.so"
    shutil.copy(fast_math_lib, stripped)
    if shutil.which("strip"):
        subprocess.run(["strip", str(stripped)], check=True)
        assert not _has_fast_math_symbol(str(stripped))  # stripped: the symbol is gone, nothing is guessed
    text = tmp_path / "notes.so"
    text.write_text("set_fast_math\n", encoding="utf-8")
    assert not _has_fast_math_symbol(str(text))
    truncated = tmp_path / "libtruncated.so"
    truncated.write_bytes(fast_math_lib.read_bytes()[:80])
    assert not _has_fast_math_symbol(str(truncated))
    assert not _has_fast_math_symbol(str(tmp_path / "missing.so"))


def test_the_state_decodes_with_the_runtime_facts_and_old_manifests_lack_it() -> None:
    manifest = load(EXAMPLES / "torch-2.13.0-cpu-linux.json")
    runtime = manifest.torch.runtime
    assert runtime is not None and runtime.fp_control is None
    from envcheck.manifest.codec import encode

    raw = encode(runtime)
    raw["fp_control"] = {
        "flush_to_zero": True,
        "denormals_are_zero": False,
        "set_when": "import torch",
        "fast_math_libraries": [],
        "preloaded": [],
        "method": "arithmetic",
    }
    decoded = torch_runtime(raw).fp_control
    assert decoded is not None and decoded.flushes and decoded.set_when == "import torch"
    raw["fp_control"] = {"flush_to_zero": "yes", "denormals_are_zero": False}
    with pytest.raises(ManifestError, match=r"torch_runtime\.fp_control\.flush_to_zero"):
        torch_runtime(raw)


@pytest.mark.slow
@needs_torch
@linux_gcc
def test_a_snapshot_records_the_mode_and_the_library_that_set_it(fast_math_lib: Path, tmp_path: Path) -> None:
    out = tmp_path / "lock.json"
    envcheck = Path(sys.executable).with_name("envcheck")
    env = {**os.environ, "LD_PRELOAD": str(fast_math_lib)}
    done = subprocess.run(
        [str(envcheck), "snapshot", "--no-verify", "-o", str(out)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    runtime = load(out).torch.runtime
    assert runtime is not None and runtime.fp_control is not None
    mode = runtime.fp_control
    assert mode.flush_to_zero and mode.denormals_are_zero and mode.set_when == "start-up"
    assert mode.fast_math_libraries == [str(fast_math_lib)]
