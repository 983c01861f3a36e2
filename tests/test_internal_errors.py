"""Ordinary conditions are one line on stderr and exit 2 (or a finding), never "internal error" nor a
traceback (issue "Sealed", parts 5 and 6):

- a resolver that exits 0 without writing its answer, or leaves a FIFO or a link to ``/dev/zero`` where
  it should be (uv's lock, pip's ``--report``, pip-compile's lock): read only as a regular file,
  non-blocking, bounded; the command ends within its ``--timeout``;
- ``--timeout`` values no deadline can be made of (``inf``, ``nan``, ``1e12``, negative), refused at parse
  by every command that takes one;
- a ``Requires-Dist`` marker value holding both quote characters, which packaging reads and cannot write
  back (``ValueError``): doctor, diff, a lock's inputs and ``lock --check``;
- ``envcheck.api``'s jobs called with arguments of the wrong type: ``UsageError`` naming the parameter;
- ``-o X --junit X``: refused, not one report silently replacing the other;
- a name or version of an untrusted manifest that is no pin never reaches pip-compile's input;
- a predicted manifest spells names as the distributions' metadata does, whichever resolver ran.

The faults are injected with fakes (a ``uv`` script, a pip entry, a ``piptools`` package); everything
else is envcheck's real code.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import math
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envcheck import api
from envcheck.api._common import MAX_TIMEOUT_S
from envcheck.app import flows
from envcheck.cli import COMMANDS, app, build
from envcheck.core.errors import UsageError
from envcheck.diff.policy import Policy
from envcheck.lock import compile as lock_compile
from envcheck.lock.compile import LockError
from envcheck.lock.inputs import lock_inputs
from envcheck.manifest.io import load
from envcheck.manifest.native import NativeSection
from envcheck.predict import parse_target
from envcheck.predict.build import predicted_manifest
from envcheck.predict.fetch import TreeScan
from envcheck.predict.resolve import Resolution, ResolvedWheel

TESTS = Path(__file__).resolve().parent
CPU = TESTS.parent / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
DEV_CPU = TESTS / "data" / "manifests" / "dev-cpu.json"


def _diffdata() -> Any:
    """``tests/diff/diffdata.py`` (a plain module beside the diff tests): real manifests, edited."""
    if "diffdata" not in sys.modules:
        spec = importlib.util.spec_from_file_location("diffdata", TESTS / "diff" / "diffdata.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["diffdata"] = module
        spec.loader.exec_module(module)
    return sys.modules["diffdata"]


def _small_manifest(tmp: Path, *dists: tuple[str, str]) -> Path:
    """The example CPU manifest with only ``dists`` installed, each a pure wheel from an index."""
    data = json.loads(CPU.read_text(encoding="utf-8"))
    template = {**data["packages"][0], "requires": [], "native_files": [], "wheel_tags": ["py3-none-any"]}
    template["direct_url"] = None
    data["packages"] = [{**template, "name": n, "version": v} for n, v in dists]
    path = tmp / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _offline_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        XDG_CACHE_HOME=str(tmp / "cache"),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        TMPDIR=str(tmp / "tmp"),
        PIP_NO_INDEX="1",
    )
    return env


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + textwrap.dedent(body), encoding="utf-8")
    path.chmod(0o755)
    return path


def _one_error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    return errors[0]


# --- 1. uv exits 0 and writes no lock -----------------------------------------------------------------------


@pytest.mark.parametrize("resolver", ["uv", "auto"])
def test_uv_exiting_0_without_a_lock_is_one_line(
    resolver: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decided: with --resolver auto too, a uv that claims success and answers nothing is an error, never
    # a silent fall-back to pip (which would hide a broken or planted uv).
    fake = _script(tmp_path / "uv", "exit 0\n")
    monkeypatch.setattr("envcheck.predict.uv.uv_binary", lambda: str(fake))
    argv = [
        "predict",
        str(CPU),
        "--platform",
        "win_amd64",
        "--python-version",
        "3.11",
        "--resolver",
        resolver,
    ]
    result = CliRunner().invoke(app, argv, env=_offline_env(tmp_path))
    assert result.exit_code == 2, result.output
    line = _one_error_line(result.stderr)
    assert "uv's lock is missing" in line and "exited 0" in line


@pytest.mark.skipif(
    hasattr(sysconfig, "_CONFIG_VARS_LOCK"),
    reason="sysconfig fills its variables under a lock from Python 3.12: no race to reproduce",
)
def test_targets_resolved_in_parallel_before_anything_read_sysconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI failed so: `predict --platform A --platform B` in a process that had not read sysconfig yet. Both
    # resolving threads asked uv's find_uv_bin for the binary, whose "uv" + get_config_var("EXE") read the
    # dictionary the other thread had published but not filled: "internal error: TypeError". The slow fill
    # holds that window open, as a busy machine does by chance; the real uv then finds no index.
    fill = sysconfig._init_posix  # type: ignore[attr-defined]

    def slow_fill(variables: dict[str, Any]) -> None:
        time.sleep(0.3)
        fill(variables)

    monkeypatch.setattr(sysconfig, "_CONFIG_VARS", None)
    monkeypatch.setattr(sysconfig, "_init_posix", slow_fill)
    argv = ["predict", str(CPU), "--platform", "win_amd64", "--platform", "manylinux_2_28_x86_64"]
    argv += ["--python-version", "3.11", "--resolver", "uv", "--index-url", "http://127.0.0.1:9/simple"]
    result = CliRunner().invoke(app, argv, env=_offline_env(tmp_path))
    assert result.exit_code == 2, result.output
    assert "cannot be reached" in _one_error_line(result.stderr)


# --- 2. a FIFO or a link to /dev/zero where a tool's answer should be ---------------------------------------

_WITH_FAKES = (
    "import os, pathlib, envcheck.predict.uv as u, envcheck.predict.resolve as r\n"
    "if 'FAKE_UV' in os.environ: u.uv_binary = lambda: os.environ['FAKE_UV']\n"
    "if 'FAKE_PIP' in os.environ: r._PIP_ENTRY = pathlib.Path(os.environ['FAKE_PIP'])\n"
    "from envcheck.cli import main\n"
    "main()\n"
)
# The fake tools plant their answer's path: the argument after ``-o`` (uv) or ``--report`` (pip).
_UV_PLANTS_FIFO = 'while [ "$1" != "-o" ]; do shift; done\nmkfifo "$2"\nexit 0\n'
_UV_PLANTS_ZERO = 'while [ "$1" != "-o" ]; do shift; done\nln -s /dev/zero "$2"\nexit 0\n'
_PIP_PLANTS_FIFO = (
    "import os, sys\nargs = sys.argv\nos.mkfifo(args[args.index('--report') + 1])\nsys.exit(0)\n"
)
TIMEOUT = 5


def _bounded(argv: list[str], env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, env=env, timeout=TIMEOUT + 20, check=False
        )
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"still running {TIMEOUT + 20} s after a --timeout of {TIMEOUT} s: {e.stderr!r}")
    return done, time.monotonic() - start


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fake", "resolver", "said"),
    [
        ("uv-fifo", "uv", "is a FIFO"),
        ("uv-dev-zero", "uv", "symbolic link"),
        ("pip-fifo", "pip", "is a FIFO"),
    ],
)
def test_a_resolver_answer_that_is_no_regular_file_ends_predict_within_its_timeout(
    fake: str, resolver: str, said: str, tmp_path: Path
) -> None:
    env = _offline_env(tmp_path)
    if fake == "uv-fifo":
        env["FAKE_UV"] = str(_script(tmp_path / "uv", _UV_PLANTS_FIFO))
    elif fake == "uv-dev-zero":
        env["FAKE_UV"] = str(_script(tmp_path / "uv", _UV_PLANTS_ZERO))
    else:
        (tmp_path / "pip_entry.py").write_text(_PIP_PLANTS_FIFO, encoding="utf-8")
        env["FAKE_PIP"] = str(tmp_path / "pip_entry.py")
    manifest = _small_manifest(tmp_path, ("six", "1.16.0"))
    argv = [sys.executable, "-c", _WITH_FAKES, "predict", str(manifest), "--platform", "win_amd64"]
    argv += ["--python-version", "3.11", "--resolver", resolver, "--timeout", str(TIMEOUT)]
    done, wall = _bounded(argv, env)
    assert wall < TIMEOUT + 5, f"{wall:.1f} s"
    assert done.returncode == 2, done.stderr
    assert said in _one_error_line(done.stderr)


@pytest.mark.slow
def test_pip_compile_leaving_a_fifo_ends_lock_within_its_timeout(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "piptools"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("", encoding="utf-8")
    (fake / "__main__.py").write_text("import os\nos.mkfifo('lock.txt')\n", encoding="utf-8")
    env = {**_offline_env(tmp_path), "PYTHONPATH": str(fake.parent)}
    manifest = _small_manifest(tmp_path, ("six", "1.16.0"))
    argv = [sys.executable, "-m", "envcheck", "lock", str(manifest), "--timeout", str(TIMEOUT)]
    done, wall = _bounded(argv, env)
    assert wall < TIMEOUT + 5, f"{wall:.1f} s"
    assert done.returncode == 2, done.stderr
    assert "pip-compile's lock is a FIFO" in _one_error_line(done.stderr)


# --- 3. --timeout values no deadline can be made of ---------------------------------------------------------


def _timeout_commands() -> list[tuple[str, list[str]]]:
    """Every command with a --timeout, with placeholders for what it requires (parse only)."""
    out = []
    for name, command in _click_commands().items():
        if not any(p.name == "timeout" for p in command.params):
            continue
        args: list[str] = []
        for param in command.params:
            if param.required and param.param_type_name == "argument":
                args.append("placeholder.json")
            elif param.required:
                args += [param.opts[0], "win_amd64"]
        out.append((name, args))
    return out


def _click_commands() -> dict[str, Any]:
    import typer.main

    group = typer.main.get_command(build())
    return {name: group.commands[name] for name in COMMANDS}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("command", "args"), _timeout_commands(), ids=lambda v: v if isinstance(v, str) else ""
)
@pytest.mark.parametrize("value", ["inf", "nan", "1e12", "1e400", "-1", "0"])
def test_every_commands_timeout_is_refused_at_parse_outside_its_range(
    command: str, args: list[str], value: str
) -> None:
    result = CliRunner().invoke(app, [command, "--timeout", value, *args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    error = [line for line in result.stderr.splitlines() if line.startswith("Error: ")]
    assert len(error) == 1 and "--timeout" in error[0] and f"at most {MAX_TIMEOUT_S:g}" in error[0], error


def test_the_timeout_commands_are_all_of_them() -> None:
    found = {name for name, _ in _timeout_commands()}
    assert {"snapshot", "diff", "doctor", "verify", "gate", "scan", "lock", "predict", "cluster"} <= found


# --- 4. a marker value holding both quote characters --------------------------------------------------------

# packaging 26 reads each (an escape inside a quoted string) and cannot write it back: ValueError.
BOTH_QUOTES = (
    r"""quoted-dep>=1; platform_release == "a\x22b'c" """.strip(),
    r"""quoted-dep>=1; extra == "a\x27b\x22c" """.strip(),
    r"""numpy>=99; os_name == 'posix' and platform_version != "1\x22'2" """.strip(),
)


def _with_both_quotes(data: dict[str, Any]) -> None:
    torch = _diffdata().dist_entry(data, "torch")
    torch["requires"] = [*torch["requires"], *BOTH_QUOTES]


def test_a_marker_value_holding_both_quotes_in_doctor_diff_and_lock_inputs() -> None:
    dd = _diffdata()
    quoted, base = dd.manifest("dev-cpu", _with_both_quotes), dd.manifest("dev-cpu")
    flows.doctor("quoted", quoted, Policy())
    flows.diff("base", base, ("quoted", quoted), Policy())
    flows.diff("quoted", quoted, ("base", base), Policy())
    inputs = lock_inputs(quoted)
    assert "torch" in inputs.pinned and "quoted-dep" not in inputs.markers


def test_a_marker_value_holding_both_quotes_in_a_doctor_command(tmp_path: Path) -> None:
    data = json.loads(DEV_CPU.read_text(encoding="utf-8"))
    _with_both_quotes(data)
    path = tmp_path / "quoted.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    result = CliRunner().invoke(app, ["doctor", str(path), "-f", "json"])
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.output


def test_a_lock_line_whose_marker_holds_both_quotes_is_one_line(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text('six==1.16.0 ; platform_release == "a\\x22b\'c"\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["lock", "--check", str(lock)])
    assert result.exit_code == 2, result.output
    assert "not a requirement" in _one_error_line(result.stderr)


# --- 5. the API's argument types ----------------------------------------------------------------------------

INF = math.inf
_BAD_CALLS: list[tuple[str, str, Callable[[], object]]] = [
    ("snapshot", "options", lambda: api.snapshot(3)),  # type: ignore[arg-type]
    ("snapshot", "options.timeout", lambda: api.snapshot(api.SnapshotOptions(timeout=INF))),
    ("snapshot_this_machine", "timeout", lambda: api.snapshot_this_machine(timeout=INF)),
    ("diff", "base", lambda: api.diff([str(DEV_CPU)])),  # type: ignore[arg-type]
    ("diff", "policy", lambda: api.diff(DEV_CPU, DEV_CPU, policy=3)),  # type: ignore[arg-type]
    ("diff_targets", "targets", lambda: api.diff_targets(DEV_CPU, str(DEV_CPU))),
    ("fleet_diff", "targets", lambda: api.fleet_diff(DEV_CPU, None)),  # type: ignore[arg-type]
    ("doctor", "timeout", lambda: api.doctor(DEV_CPU, timeout=float("nan"))),
    ("expand_targets", "targets", lambda: api.expand_targets(str(DEV_CPU))),
    ("verify", "options.timeout", lambda: api.verify(options=api.SuiteOptions(timeout=1e12))),
    ("verify", "against", lambda: api.verify(against=[DEV_CPU])),  # type: ignore[arg-type]
    ("gate", "manifest", lambda: api.gate(None)),  # type: ignore[arg-type]
    ("run_gate", "options", lambda: api.run_gate(DEV_CPU, options=3)),  # type: ignore[arg-type]
    ("scan", "path", lambda: api.scan([str(TESTS)])),  # type: ignore[arg-type]
    ("scan", "timeout", lambda: api.scan(str(TESTS), timeout=INF)),
    ("lock", "manifest", lambda: api.lock(None)),  # type: ignore[arg-type]
    ("lock", "timeout", lambda: api.lock(CPU, timeout=INF)),
    ("check_lock", "lock", lambda: api.check_lock(3)),  # type: ignore[arg-type]
    ("predict", "platforms", lambda: api.predict(CPU, platforms=None)),  # type: ignore[arg-type]
    ("predict", "platforms", lambda: api.predict(CPU, platforms="win_amd64")),
    ("predict", "timeout", lambda: api.predict(CPU, platforms=["win_amd64"], timeout=INF)),
    ("export", "fmt", lambda: api.export(CPU, fmt="cyclonedx")),  # type: ignore[arg-type]
    ("cluster_check", "policy", lambda: api.cluster_check(policy=3)),  # type: ignore[arg-type]
    ("load_policy", "path", lambda: api.load_policy(3)),  # type: ignore[arg-type]
    ("load_policy", "disabled", lambda: api.load_policy(disabled="yes")),  # type: ignore[arg-type]
    ("load_manifest", "path", lambda: api.load_manifest(3)),  # type: ignore[arg-type]
    ("dump_manifest", "manifest", lambda: api.dump_manifest("not a manifest")),  # type: ignore[arg-type]
    ("get_rule", "rule_id", lambda: api.get_rule(None)),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("job", "param", "call"), _BAD_CALLS, ids=[f"{j}-{p}" for j, p, _ in _BAD_CALLS])
def test_a_wrong_argument_type_is_a_usage_error_naming_the_parameter(
    job: str, param: str, call: Callable[[], object]
) -> None:
    with pytest.raises(UsageError) as raised:
        call()
    assert str(raised.value).startswith(f"{job}(): {param} "), str(raised.value)


def test_every_public_job_checks_every_parameter() -> None:
    from envcheck.api._common import _hints

    jobs = [n for n in api._JOBS if callable(getattr(api, n)) and not isinstance(getattr(api, n), type)]
    for name in jobs:
        job = getattr(api, name)
        assert hasattr(job, "__wrapped__"), f"{name} is not @public"
        params = set(inspect.signature(job).parameters)
        unresolved = params - set(_hints(job.__wrapped__))
        assert not unresolved, f"{name}: annotations that do not evaluate: {unresolved}"


# --- 6. -o X --junit X --------------------------------------------------------------------------------------


@pytest.mark.parametrize("link", [False, True], ids=["same-path", "through-a-link"])
def test_one_file_for_the_report_and_the_junit_report_is_refused(tmp_path: Path, link: bool) -> None:
    report = tmp_path / "report.xml"
    given = report
    if link:
        report.write_text("old", encoding="utf-8")
        given = tmp_path / "link.xml"
        given.symlink_to(report)
    args = ["doctor", str(DEV_CPU), "-o", str(given), "--junit", str(report)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "name the same file" in _one_error_line(result.stderr)
    assert not link or report.read_text(encoding="utf-8") == "old"


# --- 7. a name or version that is no pin, from an untrusted manifest ----------------------------------------


@pytest.mark.parametrize(
    ("name", "version"),
    [("six\n", "1.16.0"), ("six", "1.16.0\n"), ("six", " 1.16.0"), ("six\n--index-url", "1.0")],
)
def test_a_name_or_version_that_is_no_pin_never_reaches_pip_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, version: str
) -> None:
    def reached(*_args: object, **_kwargs: object) -> object:
        raise AssertionError("the manifest's value reached pip-compile's input")

    monkeypatch.setattr(lock_compile, "_run_compile", reached)
    path = _small_manifest(tmp_path, (name, version), ("tabulate", "0.9.0"))
    with pytest.raises(LockError, match="is not a distribution name and version that a lock can pin"):
        api.lock(path)


# --- 8. names spelled as the metadata spells them -----------------------------------------------------------


def test_a_uv_resolution_keeps_the_source_manifests_spelling() -> None:
    source = load(CPU)
    spelled = {d.name.lower(): d.name for d in source.packages}
    assert spelled["typing_extensions"] == "typing_extensions" and spelled["jinja2"] == "Jinja2"

    def wheel(name: str, version: str) -> ResolvedWheel:
        return ResolvedWheel(
            name=name,
            version=version,
            url=f"https://example.invalid/{name}-{version}-py3-none-any.whl",
            sha256="0" * 64,
            filename=f"{name}-{version}-py3-none-any.whl",
            requires=(),
            requested=False,
        )

    # uv's lock normalises names (typing-extensions, jinja2); pip's report keeps METADATA's.
    wheels = (wheel("typing-extensions", "4.15.0"), wheel("jinja2", "3.1.6"), wheel("not-in-source", "1"))
    resolution = Resolution(
        target=parse_target("win_amd64", "3.11"), wheels=wheels, unavailable=(), left_out=(), seconds=0.0
    )
    tree = TreeScan(section=NativeSection(nodes=[]), torch_version=None, cached=True)
    predicted = predicted_manifest(source, resolution, tree, indexes=[])
    assert [d.name for d in predicted.packages] == ["typing_extensions", "Jinja2", "not-in-source"]


def test_a_policy_with_every_kind_of_entry_passes_the_apis_argument_check(tmp_path: Path) -> None:
    """The API's check reaches into the options it is given: a real policy's tuples of (selector,
    severity) pairs, intended entries and imports are what the annotations say, not wrong types."""
    from envcheck import api

    policy_file = tmp_path / "p.toml"
    policy_file.write_text(
        'ignore = ["ENV-PKG-ADDED", "ENV-VAR-CHANGED:PIP_*"]\nimports = ["json"]\nnot_imported = ["x"]\n'
        '[severity]\n"ENV-NUMERICS-SWITCH" = "error"\n'
        '[[intended]]\nrule = "ENV-TORCH-VARIANT"\nreason = "CPU-only by design"\nmachine = "prod-*"\n',
        encoding="utf-8",
    )
    policy = api.load_policy(policy_file)
    data = Path(__file__).parent / "data" / "manifests"
    report = api.diff(data / "cuda.json", data / "dev-cpu.json", policy=policy)
    assert report.findings
