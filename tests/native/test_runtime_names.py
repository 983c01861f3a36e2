"""Which DLL names are the VC++ 2015-2022 runtime: every file the redistributable installs that real wheels
import (torch 2.14's Windows build imports ``vcruntime140_threads.dll``), and nothing that merely looks
like one. ``VCRUNTIME140.dll`` and ``VCRUNTIME140_1.dll`` ship beside python.exe: the interpreter provides
them, also on a machine without the redistributable."""

from __future__ import annotations

import pytest

from envcheck.native.oslibs import INTERPRETER_VC_RUNTIME, classify_name

VC = "Microsoft Visual C++ 2015-2022 Redistributable"


@pytest.mark.parametrize(
    "name",
    [
        "MSVCP140.dll",
        "msvcp140_1.dll",
        "msvcp140_atomic_wait.dll",
        "vcruntime140_threads.dll",
        "concrt140.dll",
    ],
)
def test_the_vc_runtime_is_a_redistributable(name: str) -> None:
    assert classify_name(name, "pe") == ("redistributable", VC)


@pytest.mark.parametrize("name", ["VCRUNTIME140.dll", "vcruntime140_1.dll"])
def test_the_runtime_beside_python_exe_is_the_interpreters(name: str) -> None:
    assert classify_name(name, "pe") == ("interpreter", INTERPRETER_VC_RUNTIME)


@pytest.mark.parametrize("name", ["vcruntime140_2x.dll", "msvcp140x.dll", "vcruntime140.dll.bak"])
def test_look_alikes_are_not(name: str) -> None:
    found = classify_name(name, "pe")
    assert found is None or found[1] != VC
