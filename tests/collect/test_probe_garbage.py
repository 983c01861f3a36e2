"""A probe result is untrusted input: whatever JSON the target writes, a snapshot is a manifest that says
the result was malformed (runtime probe) or one clear error (facts probe), never a traceback.

The target is a fake interpreter: an executable Python script passed as ``--python``. It runs the real
interpreter on the real probe with the same arguments, then rewrites the result file it was given (the
one argument naming a file that does not exist yet in an existing folder) as ``spec.json`` beside it
says: ``set`` a value at a path of the real result, or ``replace`` the result (then the real probe does
not run at all: no ``import torch``). Only the public behaviour is used: ``take_snapshot`` and the CLI.
"""

from __future__ import annotations

import json
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envcheck.collect import facts
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.core.errors import ManifestError, ProbeError
from envcheck.manifest.io import load

FAKE_PYTHON = textwrap.dedent(
    """\
    #!{python}
    import json, os, subprocess, sys
    from pathlib import Path

    spec = json.loads((Path(__file__).parent / "spec.json").read_text())
    args = sys.argv[1:]
    stage = next((s for s in ("facts", "runtime") if s in args), "other")
    results = [
        a for a in args
        if os.path.isabs(a) and not os.path.exists(a) and os.path.isdir(os.path.dirname(a))
    ]
    plan = spec.get(stage, {{}})
    code = 0 if "replace" in plan else subprocess.run([sys.executable, *args]).returncode
    for out in results:
        data = plan["replace"] if "replace" in plan else json.loads(Path(out).read_text())
        for path, value in plan.get("set", []):
            node = data
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
        if "tee" in plan:
            Path(plan["tee"]).write_text(json.dumps(data))
        Path(out).write_text(json.dumps(data))
    sys.exit(code)
    """
)

Spec = dict[str, dict[str, Any]]


@pytest.fixture
def fake_python(tmp_path: Path) -> Callable[[Spec], str]:
    """A fake interpreter in ``tmp_path`` that follows a spec: ``{"facts": {...}, "runtime": {...}}``."""
    script = tmp_path / "fake-python"
    script.write_text(FAKE_PYTHON.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)

    def make(spec: Spec) -> str:
        (tmp_path / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        return str(script)

    return make


# The facts probe's result, corrupted one way each: every case is one clear ProbeError naming the place.
FACTS_GARBAGE: dict[str, tuple[Spec, str]] = {
    "only done": ({"facts": {"replace": {"done": True}}}, "platform: missing; python: missing"),
    "not an object": ({"facts": {"replace": [1, 2]}}, "facts"),
    "done is a string": ({"facts": {"set": [[["done"], "yes"]]}}, "done: expected true"),
    "python_version of strings": (
        {"facts": {"set": [[["python_version"], ["3", "8"]]]}},
        "python_version: expected an array of integers",
    ),
    "python_version of nulls": ({"facts": {"set": [[["python_version"], [None]]]}}, "python_version"),
    "platform an array": ({"facts": {"set": [[["platform"], [1]]]}}, "platform: expected an object"),
    "python a string": ({"facts": {"set": [[["python"], "x"]]}}, "python: expected an object"),
    "python version not a version": (
        {"facts": {"set": [[["python", "wheel_tags"], []], [["python", "version"], "three"]]}},
        "python.version: expected 'X.Y.Z'",
    ),
    "packages a number": ({"facts": {"set": [[["packages"], 5]]}}, "packages: expected an array"),
    "packages an object": ({"facts": {"set": [[["packages"], {"a": 1}]]}}, "packages: expected an array"),
    "package version a number": (
        {"facts": {"set": [[["packages", 0, "version"], 1]]}},
        "packages[0].version: expected a string",
    ),
    "torch an array": ({"facts": {"set": [[["torch"], [1]]]}}, "torch: expected an object"),
    "torch a string": ({"facts": {"set": [[["torch"], "x"]]}}, "torch: expected an object"),
    "torch.static a number": ({"facts": {"set": [[["torch", "static"], 5]]}}, "torch.static: expected"),
    "torch version a number": (
        {"facts": {"set": [[["torch", "static", "version"], 5]]}},
        "torch.static.version: expected a string",
    ),
    "torch trees a string": ({"facts": {"set": [[["torch", "trees"], "abc"]]}}, "torch.trees"),
    "env an array": ({"facts": {"set": [[["env"], [1, 2]]]}}, "env: expected an object"),
    "env value a number": ({"facts": {"set": [[["env"], {"OMP_NUM_THREADS": 4}]]}}, "env.OMP_NUM_THREADS"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(FACTS_GARBAGE))
def test_garbage_facts_result_is_one_clear_error(case: str, fake_python: Callable[[Spec], str]) -> None:
    spec, expected = FACTS_GARBAGE[case]
    python = fake_python(spec)
    with pytest.raises(ProbeError) as info:
        take_snapshot(SnapshotOptions(python=python, probe=False))
    assert expected in str(info.value)
    assert python in str(info.value)


# The runtime probe's result (no torch import: the fake replaces it): the manifest says it was malformed.
RUNTIME_GARBAGE: dict[str, tuple[Any, str]] = {
    "only done": ({"done": True}, "torch_runtime: missing"),
    "gpu an array": ({"done": True, "gpu": [1], "torch_missing": True}, "gpu: expected an object"),
    "gpu fields wrong": ({"done": True, "gpu": {"gpus": 5}, "torch_missing": True}, "gpu.gpus"),
    "torch_runtime empty": ({"done": True, "torch_runtime": {}, "loaded": []}, "torch_runtime.version"),
    "loaded not paths": (
        {"done": True, "torch_missing": True, "loaded": [1, "/lib/x.so"]},
        "loaded[0]: expected a path",
    ),
    "thread pool a number": (
        {"done": True, "torch_missing": True, "loaded": [], "threadpools": [1]},
        "threadpools[0]: expected an object",
    ),
    "thread pool fields wrong": (
        {"done": True, "torch_missing": True, "loaded": [], "threadpools": [{"filepath": [1]}]},
        "threadpools[0].filepath: expected a string",
    ),
    "traceback an object": (
        {"done": False, "exception": "boom", "traceback_tail": {"a": 1}},
        "traceback_tail: expected a string",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(RUNTIME_GARBAGE))
def test_garbage_runtime_result_is_recorded_as_malformed(
    case: str, fake_python: Callable[[Spec], str]
) -> None:
    result, expected = RUNTIME_GARBAGE[case]
    manifest = take_snapshot(SnapshotOptions(python=fake_python({"runtime": {"replace": result}})))
    probe = manifest.meta.probe
    assert probe.status == "error"
    assert probe.exception is not None and "malformed probe result" in probe.exception
    assert expected in probe.exception
    # The static facts (read by the real facts probe) stand; nothing from the bad result is kept.
    assert manifest.python.version == ".".join(str(v) for v in sys.version_info[:3])
    assert manifest.runtimes is None and manifest.gpu is None and manifest.torch.runtime is None


@pytest.mark.slow
def test_cli_garbage_facts_is_exit_2_and_one_line(fake_python: Callable[[Spec], str], tmp_path: Path) -> None:
    python = fake_python({"facts": {"replace": {"done": True}}})
    out = tmp_path / "m.json"
    result = run_bounded(
        envcheck_argv("snapshot", "--python", python, "--no-verify", "-o", str(out)), timeout=60
    )
    assert_bounded(result, timeout=60)
    assert result.returncode == 2 and not out.exists()
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: the target interpreter ") and "malformed facts result" in lines[0]
    assert all(line.startswith(("error:", "Tip:")) for line in lines)


@pytest.mark.slow
def test_cli_garbage_runtime_writes_a_manifest_that_loads(
    fake_python: Callable[[Spec], str], tmp_path: Path
) -> None:
    python = fake_python({"runtime": {"replace": {"done": True, "torch_runtime": "2.13"}}})
    out = tmp_path / "m.json"
    result = run_bounded(
        envcheck_argv("snapshot", "--python", python, "--no-verify", "-o", str(out)), timeout=60
    )
    assert_bounded(result, timeout=60)
    assert result.returncode == 0, result.stderr
    probe = load(out).meta.probe  # a round trip: what was written is a valid manifest
    assert probe.status == "error" and probe.exception is not None
    assert "torch_runtime: expected an object" in probe.exception


@pytest.mark.slow
def test_loaded_libraries_that_are_devices_or_fifos_are_not_read(
    fake_python: Callable[[Spec], str], tmp_path: Path
) -> None:
    """A target naming /dev/zero (through a link), a FIFO or a device as a mapped library: reading any of
    them would never end. They are recorded without an identity."""
    zero_link = tmp_path / "libzero.so"
    zero_link.symlink_to("/dev/zero")
    fifo = make_fifo(tmp_path / "libfifo.so")
    device = make_char_device(tmp_path / "liburandom.so", 1, 9)
    loaded = [str(zero_link), str(fifo), str(device)]
    python = fake_python({"runtime": {"replace": {"done": True, "torch_missing": True, "loaded": loaded}}})
    out = tmp_path / "m.json"
    result = run_bounded(
        envcheck_argv("snapshot", "--python", python, "--no-verify", "--timeout", "20", "-o", str(out)),
        timeout=20,
    )
    assert_bounded(result, timeout=20)
    assert result.returncode == 0, result.stderr
    runtimes = load(out).runtimes
    assert runtimes is not None
    assert {lib.path: lib.identity for lib in runtimes.loaded} == dict.fromkeys(loaded)


# ------------------------------------------------------------------------- fuzzing the pure decoders


@pytest.fixture(scope="module")
def real_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real facts result of this interpreter, and the shape of a real runtime result without torch."""
    folder = tmp_path_factory.mktemp("real-facts")
    script = folder / "fake-python"
    script.write_text(FAKE_PYTHON.format(python=sys.executable), encoding="utf-8")
    script.chmod(0o755)
    tee = folder / "facts.json"
    (folder / "spec.json").write_text(json.dumps({"facts": {"tee": str(tee)}}), encoding="utf-8")
    take_snapshot(SnapshotOptions(python=str(script), probe=False))
    return {
        "facts": json.loads(tee.read_text()),
        "runtime": {
            "done": True,
            "stage": None,
            "torch_missing": True,
            "gpu": {"found": False, "source": None, "reason": "no driver", "gpus": []},
            "loaded": ["/usr/lib/libc.so.6"],
            "threadpools": [
                {
                    "user_api": "openmp",
                    "internal_api": "openmp",
                    "filepath": "/usr/lib/libgomp.so.1",
                    "version": None,
                    "num_threads": 2,
                }
            ],
        },
    }


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10,
)


@st.composite
def corrupted(draw: st.DrawFn, result: Any) -> Any:
    """``result`` (deep-copied) with the value at one random path replaced by random JSON."""
    data = json.loads(json.dumps(result))
    node = data
    while True:
        keys = list(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        key = draw(st.sampled_from(keys))
        child = node[key]
        if not isinstance(child, dict | list) or not draw(st.booleans()):
            node[key] = draw(JSON)
            break
        node = child
    return data


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_corrupted_facts_result_decodes_or_is_a_manifest_error(
    real_results: dict[str, Any], data: st.DataObject
) -> None:
    result = data.draw(corrupted(real_results["facts"]))
    try:
        found = facts.static_facts(result)
    except ManifestError as e:
        assert e.problems and all(isinstance(p, str) and p for p in e.problems)
    else:
        assert found.packages is not None


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_corrupted_runtime_result_decodes_or_is_a_manifest_error(
    real_results: dict[str, Any], data: st.DataObject
) -> None:
    result = data.draw(corrupted(real_results["runtime"]))
    try:
        found = facts.runtime_facts(result)
    except ManifestError as e:
        assert e.problems
    else:
        owners = facts.Owners([])
        pools = facts.runtimes(found.loaded or [], found.threadpools, owners, {})
        assert all(isinstance(p.filepath, str) for p in pools.threadpools)


def test_the_fake_interpreter_runs_the_real_probe(fake_python: Callable[[Spec], str]) -> None:
    """The fake changes nothing unless told: a snapshot through it is the real interpreter's."""
    manifest = take_snapshot(SnapshotOptions(python=fake_python({}), probe=False))
    assert manifest.python.version == ".".join(str(v) for v in sys.version_info[:3])
    assert manifest.meta.target.endswith("fake-python")
