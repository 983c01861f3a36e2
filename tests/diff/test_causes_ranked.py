"""Causes ranked by what actually broke: one broken import is one root cause, the cause of a failed import
leads the report, and remedies name the real fix (never an unset variable, never the OS for a file a
distribution ships). Real venvs (tests/venvs.py), real gates."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from diffdata import manifest, raw
from remedycheck import assert_no_unset_variable_remedies
from venvs import HAS_TORCH, clone_site_packages, make_venv, venv_site

import envcheck.inside
from envcheck.api import SuiteOptions, run_gate
from envcheck.app import flows
from envcheck.app.flows import Report
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.core.errors import ManifestError
from envcheck.core.findings import Finding
from envcheck.diff.causes import link
from envcheck.diff.engine import doctor
from envcheck.diff.policy import Policy
from envcheck.manifest.codec import decode
from envcheck.manifest.io import dumps, load, loads
from envcheck.manifest.model import FpControl, Manifest
from envcheck.native import scan_for_snapshot
from envcheck.report.interface import groups
from envcheck.verify.fp_mode import fp_setter

DEV_CPU = Path(__file__).resolve().parents[1] / "data" / "manifests" / "dev-cpu.json"
# The target package's folder's parent: ``python -S -c STARTUP_PROBE SITE`` imports the start-up facts
# without site (so a customize module in SITE is only found on sys.path, never run by site).
TARGET_PARENT = Path(envcheck.inside.__file__).resolve().parents[1]
STARTUP_PROBE = (
    "import json, sys; sys.path.insert(0, sys.argv[1]); "
    "from envcheck.inside.startup import startup_facts; print(json.dumps(startup_facts()))"
)


def gate(python: Path) -> Report:
    options = SuiteOptions(python=str(python), timeout=120.0)
    return run_gate(DEV_CPU, base=load(DEV_CPU), options=options, policy=Policy()).report


@pytest.mark.slow
def test_a_failed_import_is_one_root_cause(broken_torch_python: Path) -> None:
    report = gate(broken_torch_python)
    found = groups(report.findings)
    failing = [g for g in found if any(f.subject in ("import torch", "import_torch") for f in g.members)]
    # The missing libc10.so, the probe's failed import, the suite's and the checks it stopped: one root.
    assert len(failing) == 1
    (group,) = failing
    assert (group.root.rule, group.root.target) == ("ENV-NATIVE-MISSING", "missing: libc10.so")
    rules = [f.rule for f in group.consequences]
    assert {"ENV-PROBE-FAILED", "VERIFY-ERROR"} <= set(rules)
    (not_run,) = [f for f in group.consequences if f.rule == "VERIFY-SKIPPED"]
    assert not_run.subject == "checks not run" and not_run.base == "29 checks ran"
    assert not_run.message.startswith("29 checks that ran on the golden machine could not run: import torch")
    # No check that could not run is a root of its own.
    assert not [
        g for g in found if g.root.rule in ("VERIFY-SKIPPED", "VERIFY-ERROR") and g.root.severity != "info"
    ]
    # The error section has exactly that one root, first.
    assert [g.root.key for g in found if g.severity == "error"] == [group.root.key]
    # libc10.so is torch's own file: reinstall torch at its exact build, never "from OS packages".
    assert "OS packages" not in group.root.remedy and "operating system" not in group.root.remedy
    assert "--force-reinstall --no-deps 'torch==2.13.0+cpu' --index-url" in group.root.remedy
    assert_no_unset_variable_remedies(report.findings, os.environ)  # the target inherits this environment


def snapshot(python: Path | str) -> Manifest:
    return take_snapshot(
        SnapshotOptions(python=str(python), verify=False, timeout=120), native=scan_for_snapshot
    )


def rules_of(findings: list[Finding]) -> set[str]:
    return {f.rule for f in findings}


@pytest.fixture(scope="module")
def other_torch_first(venv_factory: Callable[[str], Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the test venv with a .pth whose import line puts another torch tree (a CUDA build whose
    import fails) first on sys.path."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    python = venv_factory("other-torch-first")
    site = clone_site_packages(python)
    other = tmp_path_factory.mktemp("other-tree")
    (other / "torch").mkdir()
    (other / "torch" / "__init__.py").write_text(
        "raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')\n",
        encoding="utf-8",
    )
    (other / "torch" / "version.py").write_text(
        "__version__ = '2.12.0+cu126'\ngit_version = 'abc'\ncuda = '12.6'\nhip = None\ndebug = False\n",
        encoding="utf-8",
    )
    (site / "zz-other-torch.pth").write_text(
        f"import sys; sys.path.insert(0, {str(other)!r})\n", encoding="utf-8"
    )
    return python


@pytest.mark.slow
def test_another_torch_tree_first_is_the_first_root_cause(other_torch_first: Path) -> None:
    target = snapshot(other_torch_first)
    report = flows.diff("dev-cpu", manifest("dev-cpu"), ("target", target), Policy())
    found = groups(report.findings)
    assert found[0].root.rule == "ENV-TORCH-TREES"
    under = {f.rule for f in found[0].consequences}
    # The version and variant are the other tree's, and its import is what failed: all under the tree.
    assert {"ENV-TORCH-VERSION", "ENV-TORCH-VARIANT", "ENV-PROBE-FAILED"} <= under
    assert [g.root.rule for g in found if g.severity == "error"] == ["ENV-TORCH-TREES"]
    assert_no_unset_variable_remedies(report.findings, target.env)


def test_import_failure_causes_rank_first_within_a_severity() -> None:
    def f(rule: str, subject: str = "x") -> Finding:
        return Finding(rule=rule, severity="error", subject=subject, message="", remedy="")

    ordered = sorted(
        [f("ENV-CUDA-NO-DRIVER"), f("ENV-PROBE-FAILED"), f("ENV-NATIVE-MISSING"), f("ENV-TORCH-TREES")],
        key=Finding.sort_key,
    )
    assert [x.rule for x in ordered] == [
        "ENV-TORCH-TREES",
        "ENV-NATIVE-MISSING",
        "ENV-PROBE-FAILED",
        "ENV-CUDA-NO-DRIVER",
    ]
    warning = dataclasses.replace(f("ENV-TORCH-TREES"), severity="warning")
    assert sorted([warning, f("ENV-CUDA-NO-DRIVER")], key=Finding.sort_key)[0].rule == "ENV-CUDA-NO-DRIVER"


@pytest.fixture(scope="module")
def sitecustomize_python(venv_factory: Callable[[str], Path]) -> Path:
    """A copy of the test venv whose site-packages holds a sitecustomize.py that turns flush-to-zero on."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    python = venv_factory("sitecustomize")
    site = clone_site_packages(python)
    (site / "sitecustomize.py").write_text("import torch\ntorch.set_flush_denormal(True)\n", encoding="utf-8")
    return python


@pytest.mark.slow
def test_a_sitecustomize_that_sets_flush_to_zero_is_named_not_a_fast_math_library(
    sitecustomize_python: Path,
) -> None:
    m = snapshot(sitecustomize_python)
    assert m.python.startup is not None
    (module,) = m.python.startup.customize
    assert module.name == "sitecustomize" and module.path.endswith("site-packages/sitecustomize.py")
    assert module.mentions == ["torch", "set_flush_denormal"] and module.read and not module.truncated
    runtime = m.torch.runtime
    assert runtime is not None and runtime.fp_control is not None
    assert runtime.fp_control.customize == [module.path]
    found = {f.rule: f for f in flows.doctor("sitecustomize", m, Policy()).findings}
    site = found["ENV-SITECUSTOMIZE"]
    assert (site.subject, site.target, site.severity) == ("sitecustomize", module.path, "warning")
    assert "set_flush_denormal" in site.message
    ftz = found["ENV-FTZ-DAZ"]
    assert ftz.caused_by == site.key and module.path in ftz.message
    assert not [f.key for f in found.values() if "fast-math" in f.message + f.remedy]
    # The suite's own record says the same (its import_torch check runs in a fresh interpreter).
    mode = fp_mode_of(sitecustomize_python)
    who, _ = fp_setter(mode)
    assert module.path in who and "fast-math" not in who


def fp_mode_of(python: Path) -> FpControl:
    """The floating-point record the target's ``fp_control`` makes in ``python`` after importing torch (the
    suite's import_torch check records the same)."""
    code = (
        "import json, torch; from envcheck.inside.fp_control import fp_control; "
        "print(json.dumps(fp_control([])))"
    )
    out = subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(TARGET_PARENT)},
        timeout=120,
    )
    return decode(FpControl, json.loads(out.stdout), source="fp_control")


def test_a_plain_venv_records_no_start_up_module(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "plain")
    m = take_snapshot(SnapshotOptions(python=str(python), probe=False, verify=False))
    assert m.python.startup is not None and m.python.startup.customize == []
    assert "ENV-SITECUSTOMIZE" not in {f.rule for f in doctor(m)}


def test_a_start_up_module_is_read_bounded_and_never_run(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "hostile")
    site = venv_site(python)
    marker = tmp_path / "ran"
    # Running it would create the marker; huge and not UTF-8 past the first bytes.
    body = f"open({str(marker)!r}, 'w').close()\n# torch.set_num_threads(1)\n".encode() + b"\xff" * (
        300 * 1024
    )
    (site / "sitecustomize.py").write_bytes(body)
    (site / "usercustomize.py").write_bytes(b"import torch\n")  # the user site is off in a venv: never run
    out = subprocess.run(
        [str(python), "-S", "-c", STARTUP_PROBE, str(site)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(TARGET_PARENT), "LD_PRELOAD": ""},
    )
    assert not marker.exists()
    facts = json.loads(out.stdout)
    (found,) = facts["customize"]
    assert found["name"] == "sitecustomize" and found["truncated"] is True
    assert found["mentions"] == ["torch", "set_num_threads"]


@pytest.mark.slow
def test_a_second_libgomp_on_ld_library_path_is_not_a_second_runtime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "gomp"
    folder.mkdir()
    system = Path("/lib/x86_64-linux-gnu/libgomp.so.1")
    if not system.exists():
        pytest.skip("no OS libgomp.so.1 at the Debian/Ubuntu path")
    shutil.copy(system, folder / "libgomp.so.1")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(folder))
    m = snapshot(sys.executable)
    assert m.native is not None and m.native.openmp is not None and len(m.native.openmp) == 2  # two files
    live = doctor(m)
    assert "ENV-OPENMP-MULTIPLE" not in rules_of(live)
    # The probe not finishing leaves the static tree's inventory: still one runtime.
    static = doctor(dataclasses.replace(m, runtimes=None))
    assert "ENV-OPENMP-MULTIPLE" not in rules_of(static)
    # What is said is which file loads: the copy on LD_LIBRARY_PATH, shadowing torch's own.
    (shadow,) = [f for f in live if f.rule == "ENV-NATIVE-SHADOWED" and f.subject == "libgomp.so.1"]
    assert shadow.target == f"{folder}/libgomp.so.1" and "The process loaded that copy." in shadow.message
    assert f"Remove {folder} from LD_LIBRARY_PATH" in shadow.remedy
    assert_no_unset_variable_remedies(live, m.env)


@pytest.mark.slow
def test_ld_preload_naming_a_link_is_linked_to_the_library_it_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    system = Path("/lib/x86_64-linux-gnu/libgomp.so.1")
    if not system.exists():
        pytest.skip("no OS libgomp.so.1 at the Debian/Ubuntu path")
    link = tmp_path / "preload" / "libgomp.so.1"
    link.parent.mkdir()
    link.symlink_to(system)
    monkeypatch.setenv("LD_PRELOAD", str(link))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    m = snapshot(sys.executable)
    assert m.python.startup is not None and m.python.startup.preload == {str(link): os.path.realpath(system)}
    report = flows.diff("dev-cpu", manifest("dev-cpu"), ("target", m), Policy())
    found = {f.key: f for f in report.findings}
    shadow = found["ENV-NATIVE-SHADOWED:libgomp.so.1"]
    assert shadow.target == os.path.realpath(system)
    assert shadow.caused_by == "ENV-VAR-CHANGED:LD_PRELOAD"
    # A consequence: its root's remedy (LD_PRELOAD changed back) is the one to run.
    assert shadow.remedy.startswith("Follows from ENV-VAR-CHANGED (LD_PRELOAD)") and not shadow.actions
    root = found["ENV-VAR-CHANGED:LD_PRELOAD"]
    assert [(a.kind, a.name) for a in root.actions] == [("variable", "LD_PRELOAD")]
    assert_no_unset_variable_remedies(report.findings, m.env)


def test_manifests_without_the_start_up_fields_are_written_without_them() -> None:
    for name in ("dev-cpu", "cuda", "twin-a"):
        text = (DEV_CPU.parent / f"{name}.json").read_text(encoding="utf-8")
        m = loads(text, source=name)
        assert m.python.startup is None
        written = dumps(m)  # the recorded files predate other optional fields, written as null
        assert '"startup"' not in written and dumps(loads(written)) == written
        assert [line for line in written.splitlines() if "customize" in line] == []


@pytest.mark.parametrize(
    ("startup", "where"),
    [
        ({"customize": [{"name": "evilcustomize", "path": "/x.py"}]}, "python.startup.customize[0].name"),
        ({"customize": [{"name": "sitecustomize", "path": 3}]}, "python.startup.customize[0].path"),
        ({"preload": {"/a": ["/b"]}}, "python.startup.preload"),
        ({"customize": "sitecustomize"}, "python.startup.customize"),
    ],
)
def test_a_malformed_start_up_record_is_refused_with_its_place(startup: dict[str, Any], where: str) -> None:
    data = copy.deepcopy(raw("dev-cpu"))
    data["python"]["startup"] = startup
    with pytest.raises(ManifestError, match=re.escape(where)):
        loads(json.dumps(data), source="hostile")


def test_fp_mode_blames_a_library_only_when_no_start_up_module_set_it() -> None:
    by_site = FpControl(
        flush_to_zero=True,
        denormals_are_zero=True,
        set_when="start-up",
        fast_math_libraries=["/usr/lib/libfast.so"],
        customize=["/venv/site-packages/sitecustomize.py"],
    )
    who, remedy = fp_setter(by_site)
    assert "/venv/site-packages/sitecustomize.py" in who and "fast-math" not in who + remedy
    by_library = dataclasses.replace(by_site, customize=None)
    assert "-ffast-math" in fp_setter(by_library)[0]


def _libpython_through_the_cache(d: dict[str, Any]) -> None:
    # An --enable-shared interpreter without an rpath: the loader cache finds the OS's libpython.
    d["env"].pop("LD_LIBRARY_PATH", None)
    d["python"].update(
        version="3.11.2",
        build_version="3.11.7",
        own_library="/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0",
        loaded_library="/opt/python/lib/libpython3.11.so.1.0",
    )


def _gomp_through_the_cache(d: dict[str, Any]) -> None:
    # torch's own libraries resolve libgomp.so.1 to a copy the loader cache names, LD_LIBRARY_PATH unset.
    d["env"].pop("LD_LIBRARY_PATH", None)
    for n in d["native"]["nodes"]:
        for dep in n.get("dependencies") or []:
            if dep["name"] == "libgomp.so.1" and n["owner"] == "torch":
                dep.update(target="/opt/gomp/libgomp.so.1", how="ld-so-cache", kind="redistributable")


def test_remedies_with_ld_library_path_unset_name_the_loader_cache() -> None:
    for edit in (_libpython_through_the_cache, _gomp_through_the_cache):
        target = manifest("dev-cpu", edit)
        assert "LD_LIBRARY_PATH" not in target.env
        report = flows.diff("dev-cpu", manifest("dev-cpu"), ("target", target), Policy())
        assert_no_unset_variable_remedies(report.findings, target.env)
        doctored = flows.doctor("target", target, Policy()).findings
        assert_no_unset_variable_remedies(doctored, target.env)
        named = [f for f in doctored if f.rule in ("ENV-PYTHON-LIBPYTHON", "ENV-NATIVE-SHADOWED")]
        assert named, edit.__name__
        assert all("ldconfig" in f.remedy and "/etc/ld.so.conf.d" in f.remedy for f in named)


def test_a_variable_unset_on_the_target_is_nothing_to_change_there() -> None:
    base = manifest(
        "dev-cpu", lambda d: d["env"].update(LD_LIBRARY_PATH="/opt/cuda/lib64", PYTHONPATH="/src")
    )
    target = manifest("dev-cpu")
    found = [
        f
        for f in flows.diff("base", base, ("target", target), Policy()).findings
        if f.rule == "ENV-VAR-CHANGED"
    ]
    assert {f.subject for f in found} >= {"LD_LIBRARY_PATH", "PYTHONPATH"}
    assert_no_unset_variable_remedies(found, target.env)
    assert all(
        f.remedy.startswith("Nothing to change on the target")
        for f in found
        if f.subject in ("LD_LIBRARY_PATH", "PYTHONPATH")
    )


def test_a_start_up_module_that_is_a_fifo_is_not_read(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "fifo")
    site = venv_site(python)
    os.mkfifo(site / "sitecustomize.py")  # a read would wait for a writer that never comes
    out = subprocess.run(
        [str(python), "-S", "-c", STARTUP_PROBE, str(site)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(TARGET_PARENT)},
        timeout=120,
    )
    # Python's finder takes only regular files for modules: nothing is found, nothing waits.
    assert json.loads(out.stdout)["customize"] == []


def test_the_reader_takes_only_regular_files_and_caps_them(tmp_path: Path) -> None:
    from envcheck.inside import startup

    os.mkfifo(tmp_path / "fifo.py")
    assert startup._read(str(tmp_path / "fifo.py")) == (None, False)  # returns at once: no writer needed
    assert startup._read(str(tmp_path / "absent.py")) == (None, False)
    big = tmp_path / "big.py"
    big.write_bytes(b"x" * (startup.MAX_BYTES + 10))
    text, truncated = startup._read(str(big))
    assert text is not None and len(text) == startup.MAX_BYTES and truncated


def _gomp_twice(first: str, second: str) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        d["platform"]["path_aliases"] = {"/lib": "/usr/lib"}
        d["runtimes"]["loaded"] = [x for x in d["runtimes"]["loaded"] if "gomp" not in x["path"]] + [
            {"path": first, "owner": "system", "identity": None}
        ]
        d["runtimes"]["threadpools"] = [
            {
                "user_api": "openmp",
                "internal_api": "openmp",
                "filepath": second,
                "version": None,
                "num_threads": 2,
                "owner": "system",
            }
        ]

    return edit


def test_one_loaded_file_under_two_spellings_is_one_runtime_two_files_are_two() -> None:
    one = manifest(
        "dev-cpu", _gomp_twice("/lib/x86_64-linux-gnu/libgomp.so.1", "/usr/lib/x86_64-linux-gnu/libgomp.so.1")
    )
    assert "ENV-OPENMP-MULTIPLE" not in rules_of(doctor(one))
    two = manifest("dev-cpu", _gomp_twice("/opt/a/libgomp.so.1", "/opt/b/libgomp.so.1"))
    (found,) = [f for f in doctor(two) if f.rule == "ENV-OPENMP-MULTIPLE"]
    assert found.target == "/opt/a/libgomp.so.1, /opt/b/libgomp.so.1"


def test_usercustomize_counts_only_where_the_user_site_is_on(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "user")
    folder = tmp_path / "user-site"
    folder.mkdir()
    (folder / "usercustomize.py").write_text("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n")
    code = (
        "import json, site, sys; sys.path.insert(0, sys.argv[1]); "
        "site.ENABLE_USER_SITE = sys.argv[2] == 'on'; "
        "from envcheck.inside.startup import customize_files; print(json.dumps(customize_files()))"
    )
    env = {**os.environ, "PYTHONPATH": str(TARGET_PARENT)}

    def found(user_site: str) -> list[dict[str, Any]]:
        out = subprocess.run(
            [str(python), "-S", "-c", code, str(folder), user_site],
            capture_output=True,
            text=True,
            check=True,
            env=env,
        )
        result: list[dict[str, Any]] = json.loads(out.stdout)
        return result

    assert found("off") == []
    (user,) = found("on")
    assert (user["name"], user["mentions"]) == ("usercustomize", ["torch", "allow_tf32"])


def _f(rule: str, subject: str, message: str = "", **kw: Any) -> Finding:
    return Finding(
        rule=rule, severity=kw.pop("severity", "error"), subject=subject, message=message, remedy="", **kw
    )


def test_link_folds_the_suite_under_the_probe_and_the_probe_under_what_its_error_names() -> None:
    error = "ImportError: libc10.so: cannot open shared object file"
    findings = [
        _f("ENV-NATIVE-MISSING", "_C.so", target="missing: libc10.so", base="torch:torch/_C.so"),
        _f("ENV-NATIVE-MISSING", "other.so", target="missing: libfoo.so", base="other:other.so"),
        _f("ENV-PROBE-FAILED", "import torch", f"The probe failed during import torch: {error}"),
        _f("VERIFY-ERROR", "import_torch", f"raised {error}"),
        _f("VERIFY-IMPORT", "import torch", f"raised {error}"),
        _f("VERIFY-SKIPPED", "checks not run", severity="warning", caused_by="VERIFY-ERROR:import_torch"),
    ]
    linked = {f.key: f.caused_by for f in link(findings)}
    root = "ENV-NATIVE-MISSING:_C.so"
    assert linked == {
        root: None,
        "ENV-NATIVE-MISSING:other.so": None,
        "ENV-PROBE-FAILED:import torch": root,
        "VERIFY-ERROR:import_torch": root,
        "VERIFY-IMPORT:import torch": root,
        "VERIFY-SKIPPED:checks not run": root,
    }
    # Without the probe (envcheck verify): the suite's failure is the root of the checks it stopped.
    alone = {f.key: f.caused_by for f in link(findings[3:4] + findings[5:])}
    assert alone == {
        "VERIFY-ERROR:import_torch": None,
        "VERIFY-SKIPPED:checks not run": "VERIFY-ERROR:import_torch",
    }
    # Another tree first explains the import before any library does; another machine's findings never do.
    tree = _f("ENV-TORCH-TREES", "torch")
    elsewhere = dataclasses.replace(findings[0], machine="node-2")
    relinked = {f.key: f.caused_by for f in link([elsewhere, *findings[2:3], tree])}
    assert relinked["ENV-PROBE-FAILED:import torch"] == "ENV-TORCH-TREES:torch"


def test_link_names_the_start_up_module_the_fp_mode_names() -> None:
    path = "/venv/lib/python3.11/site-packages/sitecustomize.py"
    site = _f("ENV-SITECUSTOMIZE", "sitecustomize", severity="warning", target=path)
    mode = _f(
        "VERIFY-FP-MODE",
        "import_torch.fp_control",
        f"flush-to-zero is on in this process, set at start-up by {path}",
    )
    other = _f(
        "VERIFY-FP-MODE", "import_torch.fp_control", "flush-to-zero is on, set by a library", machine="m2"
    )
    linked = {f.key: f.caused_by for f in link([site, mode, other])}
    assert linked["VERIFY-FP-MODE:import_torch.fp_control"] == site.key
    assert linked["VERIFY-FP-MODE:import_torch.fp_control@m2"] is None
