"""The catalog of the configuration torch reads (envcheck/data/runtime_config.json, docs/runtime-config.md):
its shape, its rules (ENV-VAR-CHANGED graded by consequence, ENV-CONFIG-TOOL, ENV-CONFIG-FOLDER), the
probe's live checks under hostile compilers, and, for each consequence class, real breakages on the
installed torch: the variable's effect shown by running torch with and without it, and the finding the
real CLI gives between two real snapshots that differ only in it. A real gate closes it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_torch
from diffdata import manifest

from envcheck.core.errors import ManifestError
from envcheck.core.redact import is_secret_name
from envcheck.core.remedy import Manual, SetVariable, render
from envcheck.diff.engine import diff, doctor
from envcheck.inside import config_checks as probe_checks
from envcheck.inside.environment import ENV_NAMES, ENV_PREFIXES
from envcheck.manifest.runtime_config import CONSEQUENCES, SEVERITY, catalog, consequence, parse

ROOT = Path(__file__).parents[2]
TIMEOUT = 300


# ------------------------------------------------------------------------------------------ the catalog


def test_every_entry_has_a_consequence_of_the_set_a_source_and_a_unique_name() -> None:
    entries = catalog().entries
    assert len(entries) >= 60
    names = [e.name for e in entries]
    assert len(names) == len(set(names))
    for e in entries:
        assert e.consequence in CONSEQUENCES, e.name
        assert e.source.startswith("https://") and " " not in e.source, e.name
        assert e.what.strip() and "\n" not in e.what, e.name
    assert set(SEVERITY) == set(CONSEQUENCES)
    # Every class is used.
    assert {e.consequence for e in entries} == set(CONSEQUENCES)


def test_every_entry_is_collected_by_the_probe_and_none_looks_like_a_credential() -> None:
    for e in catalog().entries:
        stem = e.name[:-1] if e.is_prefix else e.name
        collected = stem.startswith(ENV_PREFIXES) or (not e.is_prefix and stem in ENV_NAMES)
        assert collected, f"{e.name} is in the catalog but the probe's allowlist does not collect it"
        assert not is_secret_name(stem), e.name


def test_the_probe_checks_exactly_what_the_catalog_says_to_check() -> None:
    by_check: dict[str, set[str]] = {"compiler": set(), "folder": set(), "file": set()}
    for e in catalog().entries:
        if e.check is not None:
            by_check[e.check].add(e.name)
    assert by_check["compiler"] == set(probe_checks.COMPILERS)
    assert by_check["folder"] == set(probe_checks.FOLDERS)
    assert by_check["file"] == set(probe_checks.FILES)


def test_the_docs_list_every_entry() -> None:
    text = (ROOT / "docs" / "runtime-config.md").read_text(encoding="utf-8")
    missing = [e.name for e in catalog().entries if f"| `{e.name}` |" not in text]
    assert missing == []


def test_the_torch_sources_cited_read_the_variable(torch_python: str) -> None:
    # A citation of torch's own source names the file that reads the variable in the installed torch.
    import importlib.util

    spec = importlib.util.find_spec("torch")
    assert spec is not None and spec.origin is not None
    site = Path(spec.origin).parents[1]
    # Torch's Python sources are installed; its C++ ones (aten/, c10/) are not.
    prefix = "https://github.com/pytorch/pytorch/blob/main/"
    cited = [e for e in catalog().entries if e.source.startswith(prefix + "torch/")]
    assert len(cited) >= 30
    for e in cited:
        path = site / e.source.removeprefix(prefix)
        assert path.is_file(), e.source
        assert e.name in path.read_text(encoding="utf-8"), f"{e.name} not in {e.source}"


def test_lookup_exact_then_longest_prefix_and_unknown_is_none() -> None:
    entry = consequence("TORCH_FORCE_WEIGHTS_ONLY_LOAD")
    assert entry is not None and entry.consequence == "call-fails"
    nccl = consequence("NCCL_SOCKET_IFNAME")
    assert nccl is not None and nccl.name == "NCCL_*"
    assert consequence("MY_APP_SETTING") is None
    assert consequence("TORCH_SOMETHING_NEW") is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (b"{", "not JSON"),
        (b"[]", '"version": 1'),
        (
            b'{"version": 1, "entries": [{"name": "X", "consequence": "bad", "what": "w", "source": "https://a"}]}',
            "consequence",
        ),
        (b'{"version": 1, "entries": [{"name": "X", "consequence": "speed", "what": "w"}]}', "source"),
        (
            b'{"version": 1, "entries": [{"name": "X", "consequence": "speed", "what": "w", "source": "http://a"}]}',
            "https",
        ),
        (
            b'{"version": 1, "entries": ['
            b'{"name": "X", "consequence": "speed", "what": "w", "source": "https://a"},'
            b'{"name": "X", "consequence": "speed", "what": "w", "source": "https://a"}]}',
            "listed twice",
        ),
        (
            b'{"version": 1, "entries": [{"name": "x y", "consequence": "speed", "what": "w", "source": "https://a"}]}',
            "variable name",
        ),
        (b" " * (2 << 20), "larger than"),
    ],
)
def test_a_broken_catalog_is_refused_naming_the_problem(text: bytes, problem: str) -> None:
    with pytest.raises(ManifestError) as e:
        parse(text, "runtime_config.json")
    assert problem in str(e.value)


# ------------------------------------------------------------------ ENV-VAR-CHANGED graded by consequence


def env(**values: str) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["env"].update(values)

    return edit


def env_drop(*names: str) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for name in names:
            d["env"].pop(name, None)

    return edit


def var_findings(base_edits: tuple[Any, ...], target_edits: tuple[Any, ...]) -> dict[str, Any]:
    found = diff(manifest("dev-cpu", *base_edits), manifest("dev-cpu", *target_edits))
    return {f.subject: f for f in found if f.rule == "ENV-VAR-CHANGED"}


@pytest.mark.parametrize(
    ("name", "value", "severity"),
    [
        ("TORCH_FORCE_WEIGHTS_ONLY_LOAD", "1", "error"),
        ("PYTORCH_JIT", "0", "error"),
        # Failure-class switches whose absence fails (``fails_when: unset``): set on the target only, they
        # change what runs; dropped from the base's environment, they fail (next test).
        ("TORCH_DEVICE_BACKEND_AUTOLOAD", "0", "warning"),
        ("KMP_DUPLICATE_LIB_OK", "TRUE", "warning"),
        ("ATEN_CPU_CAPABILITY", "default", "warning"),
        ("MKL_CBWR", "COMPATIBLE", "warning"),
        ("CUDA_VISIBLE_DEVICES", "", "warning"),
        ("TORCH_COMPILE_DISABLE", "1", "warning"),
        ("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1", "info"),
        ("CUDA_LAUNCH_BLOCKING", "1", "info"),
        ("TORCH_LOGS", "+dynamo", "info"),
        ("TORCH_SHOW_CPP_STACKTRACES", "1", "info"),
        ("NCCL_DEBUG", "INFO", "warning"),  # a prefix entry
        # Outside the catalog: today's treatment.
        ("TORCH_MY_OWN_FLAG", "1", "warning"),
        ("TORCHINDUCTOR_SOME_TUNING", "1", "info"),
        ("PIP_DEFAULT_TIMEOUT", "5", "info"),
    ],
)
def test_severity_follows_the_consequence(name: str, value: str, severity: str) -> None:
    found = var_findings((env_drop(name),), (env(**{name: value}),))
    assert found[name].severity == severity
    assert found[name].message and found[name].remedy


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("KMP_DUPLICATE_LIB_OK", "TRUE"),
        ("TORCH_DEVICE_BACKEND_AUTOLOAD", "0"),
        ("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1"),
    ],
)
def test_a_switch_whose_absence_fails_is_an_error_when_the_target_drops_it(name: str, value: str) -> None:
    found = var_findings((env(**{name: value}),), (env_drop(name),))
    assert found[name].severity == "error"
    set_only = var_findings((env_drop(name),), (env(**{name: value}),))
    assert set_only[name].severity == "warning"


def test_the_message_says_what_it_changes_and_the_remedy_is_a_command() -> None:
    found = var_findings(
        (env_drop("TORCH_FORCE_WEIGHTS_ONLY_LOAD"),), (env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="1"),)
    )
    f = found["TORCH_FORCE_WEIGHTS_ONLY_LOAD"]
    assert f.message.startswith(
        "TORCH_FORCE_WEIGHTS_ONLY_LOAD='1' on the target makes torch.load use weights_only=True"
    )
    assert "where the base leaves it unset" in f.message and "(call-fails)" in f.message
    assert f.actions == (SetVariable(name="TORCH_FORCE_WEIGHTS_ONLY_LOAD"),)
    assert shlex.split(f.remedy.split("`")[1]) == ["unset", "TORCH_FORCE_WEIGHTS_ONLY_LOAD"]

    dropped = var_findings(
        (env(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"),), (env_drop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"),)
    )
    g = dropped["TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]
    assert g.severity == "error"
    assert g.message.startswith("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD is unset on the target, where on the base")
    assert "the target runs without that" in g.message
    assert g.actions == (SetVariable(name="TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", value="1"),)
    assert shlex.split(g.remedy.split("`")[1]) == ["export", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"]


def test_values_torch_reads_the_same_way_are_info() -> None:
    # "0" and unset both leave the switch off; "YES" and "1" both turn it on.
    found = var_findings(
        (env_drop("TORCH_FORCE_WEIGHTS_ONLY_LOAD"),), (env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="0"),)
    )
    assert found["TORCH_FORCE_WEIGHTS_ONLY_LOAD"].severity == "info"
    assert "no effect" in found["TORCH_FORCE_WEIGHTS_ONLY_LOAD"].message
    found = var_findings(
        (env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="1"),), (env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="YES"),)
    )
    assert found["TORCH_FORCE_WEIGHTS_ONLY_LOAD"].severity == "info"
    found = var_findings((env_drop("PYTORCH_JIT"),), (env(PYTORCH_JIT="1"),))
    assert found["PYTORCH_JIT"].severity == "info"


@pytest.mark.skipif(os.name == "nt", reason="runs the remedy in a POSIX shell")
@pytest.mark.parametrize("value", ["a\nb", "$(touch pwned)", "x'; touch pwned; '", "`touch pwned` && echo *"])
def test_a_hostile_base_value_is_one_escaped_word_in_the_remedy(value: str, tmp_path: Path) -> None:
    found = var_findings((env(ATEN_CPU_CAPABILITY=value),), (env(ATEN_CPU_CAPABILITY="default"),))
    f = found["ATEN_CPU_CAPABILITY"]
    (action,) = f.actions
    assert "\n" not in f.remedy
    if "\n" in value:
        # A control character is never written into a command: a manual step says so.
        assert isinstance(action, Manual) and "does not write it as a command" in action.text
        return
    remedy = render(action, "posix")
    assert remedy is not None and remedy.startswith("export ATEN_CPU_CAPABILITY='")
    assert f.remedy.startswith(f"`{remedy}`")
    # Pasted into a shell, it sets the variable and runs nothing else.
    done = subprocess.run(
        ["sh", "-c", remedy + '\nprintf %s "$ATEN_CPU_CAPABILITY"'],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
        check=True,
    )
    assert not (tmp_path / "pwned").exists()
    assert done.stdout == value


def test_a_windows_target_gets_powershell() -> None:
    def on_windows(d: dict[str, Any]) -> None:
        d["platform"]["system"] = "Windows"

    found = diff(
        manifest("dev-cpu", env(PYTORCH_JIT="0")), manifest("dev-cpu", on_windows, env_drop("PYTORCH_JIT"))
    )
    (f,) = [f for f in found if f.rule == "ENV-VAR-CHANGED" and f.subject == "PYTORCH_JIT"]
    assert f.remedy.startswith("`$env:PYTORCH_JIT = '0'`")


# -------------------------------------------------------------------- ENV-CONFIG-TOOL / ENV-CONFIG-FOLDER


def checks(*records: dict[str, Any]) -> Any:
    def edit(d: dict[str, Any]) -> None:
        d["config_checks"] = list(records)

    return edit


def check(variable: str, value: str, kind: str, ok: bool, detail: str | None = None) -> dict[str, Any]:
    return {"variable": variable, "value": value, "kind": kind, "ok": ok, "detail": detail}


def test_config_rules_are_errors_where_a_call_uses_it_and_warnings_otherwise() -> None:
    m = manifest(
        "dev-cpu",
        checks(
            check("CXX", "/opt/missing/g++", "compiler", False, "/opt/missing/g++ does not exist"),
            check("CUDACXX", "/opt/missing/nvcc", "compiler", False, "/opt/missing/nvcc does not exist"),
            check("CC", "gcc", "compiler", True, "gcc 12"),
            check(
                "TORCH_HOME",
                "/etc/hosts/torch",
                "folder",
                False,
                "cannot be created: /etc/hosts is not a folder",
            ),
            check("TORCH_COMPILE_DEBUG_DIR", "/etc/hosts/d", "folder", False, "cannot be created"),
            check("TORCHINDUCTOR_CACHE_DIR", "/tmp/new", "folder", True, "does not exist yet"),
        ),
    )
    found = {(f.rule, f.subject): f for f in doctor(m) if f.rule.startswith("ENV-CONFIG-")}
    assert {k: f.severity for k, f in found.items()} == {
        ("ENV-CONFIG-TOOL", "CXX"): "error",
        ("ENV-CONFIG-TOOL", "CUDACXX"): "warning",
        ("ENV-CONFIG-FOLDER", "TORCH_HOME"): "error",
        ("ENV-CONFIG-FOLDER", "TORCH_COMPILE_DEBUG_DIR"): "warning",
    }
    cxx = found[("ENV-CONFIG-TOOL", "CXX")]
    assert "torch.compile" in cxx.message and "/opt/missing/g++ does not exist" in cxx.message
    assert cxx.actions == (SetVariable(name="CXX"),) and cxx.remedy.startswith("`unset CXX`")
    assert "torch.hub.load" in found[("ENV-CONFIG-FOLDER", "TORCH_HOME")].message


# ------------------------------------------------------------------------- the probe's live checks


def script(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n", encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.mark.slow  # runs into the 2 s deadline
@pytest.mark.skipif(os.name == "nt", reason="POSIX shell scripts")
def test_a_compiler_that_hangs_is_cut_at_the_deadline_with_its_children(tmp_path: Path) -> None:
    marker = tmp_path / "child.pid"
    hang = script(tmp_path, "hang-cxx", f"sleep 300 & echo $! > {marker}\nwait")
    started = time.monotonic()
    (record,) = probe_checks.config_checks({"CXX": str(hang)})
    took = time.monotonic() - started
    assert took < probe_checks.RUN_TIMEOUT + 3, took
    assert record["ok"] is False and "did not answer --version" in record["detail"]
    child = int(marker.read_text())
    time.sleep(0.2)
    assert not Path(f"/proc/{child}").exists() or "Z" in Path(f"/proc/{child}/stat").read_text().split()[2]


@pytest.mark.slow  # runs into the 2 s deadline
@pytest.mark.skipif(os.name == "nt", reason="POSIX shell scripts")
def test_a_compiler_that_prints_endlessly_is_bounded(tmp_path: Path) -> None:
    loud = script(tmp_path, "loud-cxx", "yes 'g++ (hostile) 99.0'")
    started = time.monotonic()
    (record,) = probe_checks.config_checks({"CXX": str(loud)})
    assert time.monotonic() - started < probe_checks.RUN_TIMEOUT + 3
    assert record["ok"] is False
    assert len(json.dumps(record)) < 1000


@pytest.mark.skipif(os.name == "nt", reason="POSIX shell scripts")
def test_compilers_missing_failing_and_real_under_an_unusual_name(tmp_path: Path) -> None:
    failing = script(tmp_path, "broken-cxx", "echo 'cc1plus: fatal error' >&2; exit 4")
    real = tmp_path / "bin" / "my-c++-17"
    real.parent.mkdir()
    gxx = next((p for p in ("/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++") if Path(p).exists()), None)
    env_vars = {
        "CXX": "/nonexistent/g++",
        "CC": str(failing),
        "CUDACXX": "no-such-nvcc-on-path",
    }
    if gxx is not None:
        real.symlink_to(gxx)
        env_vars["TRITON_PTXAS_PATH"] = str(real)
    found = {r["variable"]: r for r in probe_checks.config_checks(env_vars)}
    assert found["CXX"]["ok"] is False and "does not exist" in found["CXX"]["detail"]
    assert found["CC"]["ok"] is False and "status 4" in found["CC"]["detail"]
    assert found["CUDACXX"]["ok"] is False and "not on PATH" in found["CUDACXX"]["detail"]
    if gxx is not None:
        assert found["TRITON_PTXAS_PATH"]["ok"] is True, found["TRITON_PTXAS_PATH"]


def test_folders_writable_creatable_under_a_file_and_a_log_file_without_its_folder(tmp_path: Path) -> None:
    a_file = tmp_path / "plain"
    a_file.write_text("x", encoding="utf-8")
    found = {
        r["variable"]: r
        for r in probe_checks.config_checks(
            {
                "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "not" / "yet"),
                "TORCH_EXTENSIONS_DIR": str(a_file / "ext"),
                "TORCH_HOME": str(a_file),
                "TRITON_CACHE_DIR": str(tmp_path),
                "TORCH_LOGS_OUT": str(tmp_path / "missing" / "log.txt"),
                "PATH": "/usr/bin",  # never checked
                "TORCH_COMPILE_DEBUG_DIR": "",  # empty: nothing to check
            }
        )
    }
    assert set(found) == {
        "TORCHINDUCTOR_CACHE_DIR",
        "TORCH_EXTENSIONS_DIR",
        "TORCH_HOME",
        "TRITON_CACHE_DIR",
        "TORCH_LOGS_OUT",
    }
    assert found["TORCHINDUCTOR_CACHE_DIR"]["ok"] is True
    assert found["TRITON_CACHE_DIR"]["ok"] is True
    assert (
        found["TORCH_EXTENSIONS_DIR"]["ok"] is False
        and "not a folder" in found["TORCH_EXTENSIONS_DIR"]["detail"]
    )
    assert found["TORCH_HOME"]["ok"] is False
    assert found["TORCH_LOGS_OUT"]["ok"] is False and "does not exist" in found["TORCH_LOGS_OUT"]["detail"]


@pytest.mark.skipif(os.name == "nt" or os.geteuid() == 0, reason="root writes anywhere; POSIX modes")
def test_a_read_only_folder_is_not_writable(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        (a,) = probe_checks.config_checks({"TORCHINDUCTOR_CACHE_DIR": str(ro)})
        (b,) = probe_checks.config_checks({"TORCHINDUCTOR_CACHE_DIR": str(ro / "sub")})
    finally:
        ro.chmod(0o755)
    assert a["ok"] is False and "not writable" in a["detail"]
    assert b["ok"] is False and "not writable" in b["detail"]


# ------------------------------------------------------------ real breakages, one class after another


def clean_env(**values: str | None) -> dict[str, str]:
    """This process's environment without any variable the catalog knows, plus ``values`` (None: unset)."""
    out = {k: v for k, v in os.environ.items() if consequence(k) is None}
    out.pop("PYTHONPATH", None)
    for k, v in values.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def run_torch(code: str, environ: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run by the test environment's interpreter (torch 2.13) with exactly ``environ``."""
    (cwd / "case.py").write_text(textwrap.dedent(code), encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(cwd / "case.py")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environ,
        cwd=cwd,
        check=False,
    )


def snapshot(out: Path, environ: dict[str, str]) -> Path:
    """A real static snapshot of the test environment (the facts stage: env and config checks)."""
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "snapshot", "--no-probe", "--no-verify", "-q", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environ,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


def real_diff(tmp: Path, base: dict[str, str | None], target: dict[str, str | None]) -> dict[str, Any]:
    """``envcheck diff`` of two real snapshots differing only in ``base`` / ``target``: findings by key."""
    b = snapshot(tmp / "base.json", clean_env(**base))
    t = snapshot(tmp / "target.json", clean_env(**target))
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "diff", str(b), str(t), "--format", "json", "-q", "--no-policy"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=clean_env(),
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    report = json.loads(done.stdout)
    return {f"{f['rule']}:{f['subject']}": f for f in report["findings"]}


def doctor_of(tmp: Path, target: dict[str, str | None]) -> dict[str, Any]:
    t = snapshot(tmp / "target.json", clean_env(**target))
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "doctor", str(t), "--format", "json", "-q", "--no-policy"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=clean_env(),
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return {f"{f['rule']}:{f['subject']}": f for f in json.loads(done.stdout)["findings"]}


PICKLED_MODULE = """
import sys, warnings
import torch
warnings.simplefilter("ignore")
torch.save(torch.nn.Linear(2, 2), "model.pt")  # a whole nn.Module, pickled
try:
    torch.load("model.pt"{args})
except Exception as e:
    print("FAILED", type(e).__name__)
    sys.exit(1)
print("LOADED")
"""


def assert_real(fails: subprocess.CompletedProcess[str], works: subprocess.CompletedProcess[str]) -> None:
    assert works.returncode == 0, works.stdout[-1000:] + works.stderr[-2000:]
    assert fails.returncode != 0, fails.stdout[-1000:] + fails.stderr[-2000:]


def assert_finding(found: dict[str, Any], name: str, severity: str) -> None:
    f = found[f"ENV-VAR-CHANGED:{name}"]
    entry = consequence(name)
    assert entry is not None and f["severity"] == severity == SEVERITY[entry.consequence]
    assert name in f["message"] and f["remedy"]


@needs_torch
@pytest.mark.slow
def test_call_fails_forced_weights_only_refuses_an_explicit_full_load(tmp_path: Path) -> None:
    code = PICKLED_MODULE.format(args=", weights_only=False")
    assert_real(
        run_torch(code, clean_env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="1"), tmp_path),
        run_torch(code, clean_env(), tmp_path),
    )
    assert consequence("TORCH_FORCE_WEIGHTS_ONLY_LOAD").consequence == "call-fails"  # type: ignore[union-attr]
    found = real_diff(tmp_path, {}, {"TORCH_FORCE_WEIGHTS_ONLY_LOAD": "1"})
    assert_finding(found, "TORCH_FORCE_WEIGHTS_ONLY_LOAD", "error")


@needs_torch
@pytest.mark.slow
def test_call_fails_dropping_the_bases_no_weights_only_override(tmp_path: Path) -> None:
    # torch 2.13 defaults to weights_only=True; the base's TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 loaded the
    # pickled module, the target without it refuses it.
    code = PICKLED_MODULE.format(args="")
    assert_real(
        run_torch(code, clean_env(), tmp_path),
        run_torch(code, clean_env(TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD="1"), tmp_path),
    )
    found = real_diff(tmp_path, {"TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1"}, {})
    assert_finding(found, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "error")
    remedy = found["ENV-VAR-CHANGED:TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD"]["remedy"]
    assert shlex.split(remedy.split("`")[1]) == ["export", "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1"]


@needs_torch
@pytest.mark.slow
def test_call_fails_pytorch_jit_0_makes_torch_jit_save_fail(tmp_path: Path) -> None:
    code = """
    import io, torch
    def f(x):
        return x * 2 + 1
    torch.jit.save(torch.jit.script(f), io.BytesIO())
    print("SAVED")
    """
    assert_real(run_torch(code, clean_env(PYTORCH_JIT="0"), tmp_path), run_torch(code, clean_env(), tmp_path))
    assert_finding(real_diff(tmp_path, {}, {"PYTORCH_JIT": "0"}), "PYTORCH_JIT", "error")


@needs_torch
@pytest.mark.slow
def test_load_fails_a_broken_backend_plugin_unless_autoload_is_off(tmp_path: Path) -> None:
    # A real torch.backends entry point (an installed distribution's entry_points.txt) whose hook raises:
    # import torch runs it by default, and TORCH_DEVICE_BACKEND_AUTOLOAD=0 (the base) skips it.
    plugins = tmp_path / "plugins"
    info = plugins / "broken_backend-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: broken-backend\nVersion: 1.0\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[torch.backends]\nbroken = broken_backend:init\n", encoding="utf-8"
    )
    (plugins / "broken_backend.py").write_text(
        "def init():\n    raise RuntimeError('device runtime missing')\n", encoding="utf-8"
    )
    code = "import torch\nprint('IMPORTED')\n"
    with_plugin = {"PYTHONPATH": str(plugins)}
    fails = run_torch(code, {**clean_env(), **with_plugin}, tmp_path)
    assert_real(
        fails, run_torch(code, {**clean_env(TORCH_DEVICE_BACKEND_AUTOLOAD="0"), **with_plugin}, tmp_path)
    )
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in fails.stderr
    found = real_diff(tmp_path, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}, {})
    assert_finding(found, "TORCH_DEVICE_BACKEND_AUTOLOAD", "error")


def _intel_openmp() -> Path | None:
    given = os.environ.get("ENVCHECK_TEST_WHEELS")
    base = os.environ.get("XDG_CACHE_HOME", "")
    folder = (
        Path(given)
        if given
        else (Path(base) if base else Path.home() / ".cache") / "envcheck" / "test-wheels"
    )
    found = sorted(folder.glob("intel_openmp-*-manylinux*_x86_64.whl"))
    return found[0] if found else None


@pytest.mark.slow
@pytest.mark.skipif(sys.platform != "linux", reason="Linux wheel of Intel's OpenMP runtime")
def test_load_fails_a_second_intel_openmp_aborts_unless_kmp_duplicate_lib_ok(tmp_path: Path) -> None:
    wheel = _intel_openmp()
    if wheel is None:
        pytest.skip(
            "no intel_openmp wheel in the test-wheel cache (tests/verify/test_app_imports.py downloads it)"
        )
    with zipfile.ZipFile(wheel) as z:
        name = next(n for n in z.namelist() if n.endswith("/lib/libiomp5.so"))
        data = z.read(name)
    copies = []
    for i in (1, 2):
        (tmp_path / f"omp{i}").mkdir()
        copies.append(tmp_path / f"omp{i}" / "libiomp5.so")
        copies[-1].write_bytes(data)
    code = f"""
    import ctypes
    a = ctypes.CDLL({str(copies[0])!r}); b = ctypes.CDLL({str(copies[1])!r})
    a.omp_get_max_threads(); b.omp_get_max_threads()
    print("SURVIVED")
    """
    fails = run_torch(code, clean_env(), tmp_path)
    assert_real(fails, run_torch(code, clean_env(KMP_DUPLICATE_LIB_OK="TRUE"), tmp_path))
    assert "OMP: Error #15" in fails.stderr
    assert_finding(real_diff(tmp_path, {"KMP_DUPLICATE_LIB_OK": "TRUE"}, {}), "KMP_DUPLICATE_LIB_OK", "error")


NUMERICS = """
import hashlib, torch
torch.manual_seed(0)
a, b = torch.randn(301, 517), torch.randn(517, 263)
x, w = torch.randn(2, 16, 33, 33), torch.randn(32, 16, 3, 3)
v = torch.randn(4096)
h = lambda t: hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:12]
conv = torch.nn.functional.conv2d(x, w)
print(torch.backends.cpu.get_cpu_capability(), h(a @ b), h(conv), h(torch.exp(v)), h(torch.tanh(v)))
"""


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value"),
    [("ATEN_CPU_CAPABILITY", "default"), ("MKL_CBWR", "COMPATIBLE"), ("ONEDNN_MAX_CPU_ISA", "AVX2")],
)
def test_numerics_the_same_code_gives_other_bits(tmp_path: Path, name: str, value: str) -> None:
    plain = run_torch(NUMERICS, clean_env(), tmp_path)
    changed = run_torch(NUMERICS, clean_env(**{name: value}), tmp_path)
    assert plain.returncode == changed.returncode == 0, plain.stderr[-2000:] + changed.stderr[-2000:]
    if plain.stdout.split()[0] not in ("AVX512", "AVX2") or (
        name == "ONEDNN_MAX_CPU_ISA" and "AVX512" not in plain.stdout
    ):
        pytest.skip(f"this CPU ({plain.stdout.split()[0]}) has nothing above what {name}={value} asks for")
    assert plain.stdout.split()[1:] != changed.stdout.split()[1:], "the results did not change"
    assert_finding(real_diff(tmp_path, {}, {name: value}), name, "warning")


@needs_torch
@pytest.mark.slow
def test_what_runs_omp_num_threads_sets_torchs_threads(tmp_path: Path) -> None:
    if (os.cpu_count() or 1) < 2:
        pytest.skip("one CPU: torch runs one thread either way")
    code = "import torch\nprint(torch.get_num_threads())\n"
    assert run_torch(code, clean_env(OMP_NUM_THREADS="1"), tmp_path).stdout.strip() == "1"
    assert run_torch(code, clean_env(), tmp_path).stdout.strip() != "1"
    assert_finding(real_diff(tmp_path, {}, {"OMP_NUM_THREADS": "1"}), "OMP_NUM_THREADS", "warning")


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE"])
def test_what_runs_compile_disabled_skips_the_backend(tmp_path: Path, name: str) -> None:
    code = """
    import torch
    calls = []
    def backend(gm, inputs):
        calls.append(1)
        return gm.forward
    f = torch.compile(lambda x: torch.sin(x) + 1, backend=backend)
    f(torch.ones(3))
    print("COMPILED" if calls else "EAGER")
    """
    assert run_torch(code, clean_env(), tmp_path).stdout.strip() == "COMPILED"
    assert run_torch(code, clean_env(**{name: "1"}), tmp_path).stdout.strip() == "EAGER"
    assert_finding(real_diff(tmp_path, {}, {name: "1"}), name, "warning")


@needs_torch
@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "value", "read"),
    [
        ("TORCHINDUCTOR_FORCE_DISABLE_CACHES", "1", "torch._inductor.config.force_disable_caches"),
        ("TORCHINDUCTOR_COMPILE_THREADS", "1", "torch._inductor.config.compile_threads"),
    ],
)
def test_speed_inductor_reads_the_variable(tmp_path: Path, name: str, value: str, read: str) -> None:
    code = f"import torch, torch._inductor.config\nprint({read})\n"
    plain = run_torch(code, clean_env(), tmp_path)
    changed = run_torch(code, clean_env(**{name: value}), tmp_path)
    assert plain.returncode == changed.returncode == 0, changed.stderr[-2000:]
    assert plain.stdout != changed.stdout
    assert_finding(real_diff(tmp_path, {}, {name: value}), name, "info")


@needs_torch
@pytest.mark.slow
def test_logging_cpp_stack_traces_and_torch_logs_change_only_the_output(tmp_path: Path) -> None:
    code = """
    import torch
    try:
        torch.ones(2) + torch.ones(3)
    except RuntimeError as e:
        print("CPP" if "Exception raised from" in str(e) else "PLAIN")
    """
    assert run_torch(code, clean_env(), tmp_path).stdout.strip() == "PLAIN"
    assert run_torch(code, clean_env(TORCH_SHOW_CPP_STACKTRACES="1"), tmp_path).stdout.strip() == "CPP"
    compiled = (
        "import torch\nprint(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)).tolist())\n"
    )
    quiet, loud = (run_torch(compiled, clean_env(**v), tmp_path) for v in ({}, {"TORCH_LOGS": "dynamo"}))
    assert quiet.stdout == loud.stdout and len(loud.stderr) > len(quiet.stderr)
    found = real_diff(tmp_path, {}, {"TORCH_SHOW_CPP_STACKTRACES": "1", "TORCH_LOGS": "dynamo"})
    assert_finding(found, "TORCH_SHOW_CPP_STACKTRACES", "info")
    assert_finding(found, "TORCH_LOGS", "info")


@needs_torch
@pytest.mark.slow
def test_a_log_file_whose_folder_is_missing_fails_import_torch_and_env_config_folder(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such" / "torch.log")
    code = "import torch\nprint('IMPORTED')\n"
    assert_real(
        run_torch(code, clean_env(TORCH_LOGS_OUT=missing), tmp_path), run_torch(code, clean_env(), tmp_path)
    )
    found = doctor_of(tmp_path, {"TORCH_LOGS_OUT": missing})
    f = found["ENV-CONFIG-FOLDER:TORCH_LOGS_OUT"]
    assert f["severity"] == "error" and "import torch" in f["message"]


@needs_torch
@pytest.mark.slow
def test_a_missing_cxx_makes_torch_compile_fail_and_env_config_tool_says_so(tmp_path: Path) -> None:
    # Inductor's C++ codegen on the CPU runs CXX: the first compile fails. (A healthy compile takes 15-35 s;
    # the failure comes at the first compiler call.)
    code = """
    import torch
    f = torch.compile(lambda x: torch.sin(x) * 2 + 1)
    f(torch.randn(64))
    print("COMPILED")
    """
    fails = run_torch(code, clean_env(CXX="/nonexistent/g++"), tmp_path)
    assert fails.returncode != 0 and "COMPILED" not in fails.stdout
    found = doctor_of(tmp_path, {"CXX": "/nonexistent/g++"})
    f = found["ENV-CONFIG-TOOL:CXX"]
    assert f["severity"] == "error" and "does not exist" in f["message"]


# ----------------------------------------------------------------------------------------- a real gate


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real reference snapshot of the test environment (probe and goldens), recorded in a clean env."""
    ref = tmp_path_factory.mktemp("runtime-config") / "ref.json"
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "snapshot", "--python", sys.executable, "-o", str(ref), "-q"],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=clean_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return ref


GATE = (sys.executable, "-m", "envcheck", "gate")


def gate(ref: Path, environ: dict[str, str]) -> tuple[int, list[dict[str, Any]]]:
    done = subprocess.run(
        [
            *GATE,
            str(ref),
            "--python",
            sys.executable,
            "--no-imports",
            "--no-policy",
            "--format",
            "json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=environ,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    return done.returncode, json.loads(done.stdout)["findings"]


@needs_torch
@pytest.mark.slow
def test_the_gate_fails_on_forced_weights_only_and_leads_with_it(reference: Path) -> None:
    code, findings = gate(reference, clean_env(TORCH_FORCE_WEIGHTS_ONLY_LOAD="1"))
    assert code == 1
    roots = [f for f in findings if f["caused_by"] is None]
    assert (roots[0]["rule"], roots[0]["subject"], roots[0]["severity"]) == (
        "ENV-VAR-CHANGED",
        "TORCH_FORCE_WEIGHTS_ONLY_LOAD",
        "error",
    )
    assert "torch.load" in roots[0]["message"]


@needs_torch
@pytest.mark.slow
def test_the_gate_fails_on_a_missing_compiler(reference: Path) -> None:
    code, findings = gate(reference, clean_env(CXX="/nonexistent/g++"))
    assert code == 1
    (tool,) = [f for f in findings if f["rule"] == "ENV-CONFIG-TOOL"]
    assert tool["subject"] == "CXX" and tool["severity"] == "error"
    assert findings[0]["rule"] == "ENV-CONFIG-TOOL"


@needs_torch
@pytest.mark.slow
@pytest.mark.skipif(os.name == "nt", reason="a symlink to the system's g++")
def test_the_gate_passes_a_healthy_unusual_configuration(reference: Path, tmp_path: Path) -> None:
    gxx = next((p for p in ("/usr/bin/g++", "/usr/bin/c++") if Path(p).exists()), None)
    if gxx is None:
        pytest.skip("no g++ on this machine")
    (tmp_path / "toolchain").mkdir()
    cxx = tmp_path / "toolchain" / "x86_64-custom-g++"
    cxx.symlink_to(gxx)
    environ = clean_env(
        CXX=str(cxx),
        TORCH_LOGS="recompiles",
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache" / "not-yet-made"),
    )
    code, findings = gate(reference, environ)
    assert code == 0, [f for f in findings if f["severity"] == "error"]
    mine = {f["subject"]: f["severity"] for f in findings if f["rule"] == "ENV-VAR-CHANGED"}
    assert mine == {"CXX": "warning", "TORCH_LOGS": "info", "TORCHINDUCTOR_CACHE_DIR": "info"}
    assert not [f for f in findings if f["rule"].startswith("ENV-CONFIG-")]
