"""The invariant "the installation can run on its interpreter" (FM-28), with real breakages of each class.

- **Wheel tags and extension suffixes** (``ENV-WHEEL-TAG``, ``ENV-EXT-SUFFIX``): a real cp312 wheel's files
  copied into a 3.11 venv's site-packages, as a multi-stage image copies a builder stage's; a real aarch64
  wheel copied into an x86_64 venv. Healthy: a real ``cp39-abi3`` wheel installed by pip (a stable-ABI
  ``.abi3.so`` is legal on every CPython >= 3.9).
- **The venv and its interpreter** (``ENV-VENV-INTERPRETER``): ``pyvenv.cfg``'s version from another minor
  (a base-image bump under a kept venv); ``home`` deleted under a ``--copies`` venv that still starts.
  Healthy: a ``--system-site-packages`` venv, a venv made by uv (``version_info``).
- **Scripts** (``ENV-SCRIPT-BROKEN``): a venv moved to another path; one moved from a path so long that pip
  wrote its ``#!/bin/sh`` + ``'''exec'`` launcher; a venv copied beside its original (the scripts run the
  original's python); a script deleted. Healthy: ``uv venv --relocatable`` moved elsewhere.

The real wheels come from the registry (``pip download``), cached in a temporary folder for the session
(or taken from ``$ENVCHECK_TEST_WHEELS`` when it holds them); without a registry those tests skip and say why.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from diffdata import dist_entry, manifest
from venvs import HAS_TORCH, _link_or_copy, clone_site_packages, site_packages, venv_site

from envcheck.core.findings import Finding
from envcheck.diff.causes import link
from envcheck.diff.engine import doctor
from envcheck.diff.rules.interpreter import _extension_file
from envcheck.inside.venv_facts import declared_scripts, interpreter_line, stdlib_supported

TIMEOUT = 600
BASE_PYTHON = Path(getattr(sys, "_base_executable", sys.executable))
RULES = ("ENV-WHEEL-TAG", "ENV-EXT-SUFFIX", "ENV-VENV-INTERPRETER", "ENV-SCRIPT-BROKEN")
needs_linux_x86_64 = pytest.mark.skipif(
    not (sys.platform == "linux" and os.uname().machine == "x86_64" and sys.version_info[:2] == (3, 11)),
    reason="the real wheels are chosen for a CPython 3.11 on Linux x86_64 (the test environment's)",
)


# ------------------------------------------------------------------------- edits of a real manifest
# (TRIGGERS of tests/diff/test_diff_single_rules.py imports these)


def cp312_torch_in_311(d: dict[str, Any]) -> None:
    """A multi-stage image: the builder stage's Python 3.12 torch copied into a 3.11 venv."""
    torch = dist_entry(d, "torch")
    torch["wheel_tags"] = ["cp312-cp312-manylinux_2_28_x86_64"]
    for native in torch["native_files"]:
        native["path"] = native["path"].replace(".cpython-311-", ".cpython-312-")
    d["python"]["extension_suffixes"] = [".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"]
    d["python"]["wheel_support"] = {
        "source": "packaging.tags",
        "checked": len(d["packages"]),
        "count": 1,
        "unsupported": [
            {
                "name": "torch",
                "version": torch["version"],
                "metadata_dir": torch["metadata_dir"],
                "tags": torch["wheel_tags"],
            }
        ],
    }


def cp312_suffix_only(d: dict[str, Any]) -> None:
    """Only the files are another interpreter's (a hand copy over a right wheel's metadata)."""
    for native in dist_entry(d, "torch")["native_files"]:
        native["path"] = native["path"].replace(".cpython-311-", ".cpython-312-")
    d["python"]["extension_suffixes"] = [".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"]


def venv_of_312(d: dict[str, Any]) -> None:
    """A base-image bump under a kept venv: pyvenv.cfg says 3.12, 3.11 runs it."""
    d["python"]["venv_config"] = {
        "path": "/root/venvs/dev/pyvenv.cfg",
        "home": "/usr/local/bin",
        "home_exists": True,
        "home_python": "/usr/local/bin/python3.11",
        "version": "3.12.3",
    }


def venv_moved(d: dict[str, Any]) -> None:
    """The venv built at /build/.venv and copied to /root/venvs/dev: its scripts name the old python."""
    d["python"]["scripts"] = {
        "folder": "/root/venvs/dev/bin",
        "declared": 3,
        "checked": 3,
        "count": 2,
        "broken": [
            {
                "name": name,
                "kind": "console",
                "distribution": "torch",
                "version": "2.13.0+cpu",
                "path": f"/root/venvs/dev/bin/{name}",
                "problem": "interpreter-missing",
                "interpreter": "/build/.venv/bin/python",
            }
            for name in ("torchrun", "torchfrtrace")
        ],
    }


# --------------------------------------------------------------------------------------- fast cases


def test_the_launcher_forms_are_read() -> None:
    assert interpreter_line(b"#!/app/.venv/bin/python\n# -*- coding: utf-8 -*-\n") == (
        "path",
        "/app/.venv/bin/python",
    )
    long = "/srv/" + "x" * 150 + "/bin/python"
    pip_form = f"#!/bin/sh\n'''exec' {long} \"$0\" \"$@\"\n' '''\n".encode()
    assert interpreter_line(pip_form) == ("path", long)
    quoted = b"#!/bin/sh\n'''exec' \"/srv/with space/bin/python\" \"$0\" \"$@\"\n' '''\n"
    assert interpreter_line(quoted) == ("path", "/srv/with space/bin/python")
    uv_form = (
        b"#!/bin/sh\n'''exec' \"$(dirname -- \"$(realpath -- \"$0\")\")\"/'python' \"$0\" \"$@\"\n' '''\n"
    )
    assert interpreter_line(uv_form) == ("relocatable", "python")
    assert interpreter_line(b"#!/usr/bin/env python3\n") == ("env", "python3")
    assert interpreter_line(b"import sys\n") == ("none", None)
    assert interpreter_line(b"#!\n") == ("none", None)


def test_declared_scripts_are_the_console_and_gui_sections_only() -> None:
    text = (
        "[console_scripts]\ntorchrun = torch.distributed.run:main\n# a comment\n\n"
        "[gui_scripts]\nviewer = app:gui [extra]\n"
        "[torch.plugins]\nnot_a_script = x:y\n"
        "[console_scripts]\n../../evil = x:y\n"
    )
    assert declared_scripts(text) == [("console", "torchrun"), ("gui", "viewer")]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("torch/_C.cpython-312-x86_64-linux-gnu.so", ("torch._C", ".cpython-312-x86_64-linux-gnu.so")),
        (
            "_cffi_backend.cpython-311-x86_64-linux-gnu.so",
            ("_cffi_backend", ".cpython-311-x86_64-linux-gnu.so"),
        ),
        ("bcrypt/_bcrypt.abi3.so", ("bcrypt._bcrypt", ".abi3.so")),
        ("torch/_C.cp312-win_amd64.pyd", ("torch._C", ".cp312-win_amd64.pyd")),
        ("yaml/_yaml.pyd", ("yaml._yaml", ".pyd")),
        ("torch/lib/libtorch_cpu.so", None),  # a shared library, loaded by path
        ("numpy.libs/libgfortran-040039e1.so.5.0.0", None),
        (
            "markupsafe/_speedups.so",
            None,
        ),  # a plain .so names no interpreter: every CPython on Linux takes it
        ("../../../lib/libfoo.cpython-312-x86_64-linux-gnu.so", None),
    ],
)
def test_only_python_tagged_files_count_as_extension_modules(
    path: str, expected: tuple[str, str] | None
) -> None:
    assert _extension_file(path) == expected


def test_the_stdlib_tag_check_never_refuses_a_tag_packaging_accepts() -> None:
    from packaging import tags

    supported = stdlib_supported()
    assert supported is not None
    assert all(supported(str(t)) for t in tags.sys_tags())
    major, minor = sys.version_info[:2]
    other = f"cp{major}{minor + 1}"
    assert not supported(f"{other}-{other}-manylinux_2_17_x86_64")
    assert not supported("py2-none-any")
    assert not supported("pp310-pypy310_pp73-manylinux_2_17_x86_64")
    assert supported(f"cp{major}{minor - 2}-abi3-{next(iter(tags.sys_tags())).platform}")


def test_each_rule_fires_on_its_edit_and_the_chain_has_one_root() -> None:
    found = {f.rule: f for f in doctor(manifest("dev-cpu", cp312_torch_in_311)) if f.rule in RULES}
    assert set(found) == {"ENV-WHEEL-TAG", "ENV-EXT-SUFFIX"}
    assert found["ENV-WHEEL-TAG"].severity == "error"
    assert "cp312" in found["ENV-WHEEL-TAG"].message and "3.11.7" in found["ENV-WHEEL-TAG"].message
    assert found["ENV-EXT-SUFFIX"].caused_by == found["ENV-WHEEL-TAG"].key
    assert "--force-reinstall --no-deps 'torch==2.13.0+cpu'" in found["ENV-WHEEL-TAG"].remedy

    (alone,) = [f for f in doctor(manifest("dev-cpu", cp312_suffix_only)) if f.rule in RULES]
    assert (alone.rule, alone.caused_by, alone.subject) == ("ENV-EXT-SUFFIX", None, "torch")
    assert "torch/_C.cpython-312-x86_64-linux-gnu.so" in (alone.target or "")

    (venv,) = [f for f in doctor(manifest("dev-cpu", venv_of_312)) if f.rule in RULES]
    assert (venv.rule, venv.base, venv.target) == ("ENV-VENV-INTERPRETER", "3.12.3", "3.11.7")
    assert "python3.11 -m venv --clear '/root/venvs/dev'" in venv.remedy

    (moved,) = [f for f in doctor(manifest("dev-cpu", venv_moved)) if f.rule in RULES]
    assert (moved.rule, moved.subject) == ("ENV-SCRIPT-BROKEN", "#!/build/.venv/bin/python")
    assert "torchfrtrace, torchrun" in moved.message


def test_a_manifest_from_before_says_nothing() -> None:
    assert [f for f in doctor(manifest("dev-cpu")) if f.rule in RULES] == []


def test_failed_imports_of_a_wrong_suffix_fold_under_the_wheel() -> None:
    wheel = Finding(rule="ENV-WHEEL-TAG", severity="error", subject="cffi", message="m", remedy="r")
    suffix = Finding(
        rule="ENV-EXT-SUFFIX",
        severity="error",
        subject="cffi",
        message="m",
        remedy="r",
        target="_cffi_backend.cpython-312-x86_64-linux-gnu.so",
        caused_by=wheel.key,
    )
    failed = Finding(
        rule="VERIFY-IMPORT",
        severity="error",
        subject="import _cffi_backend",
        message="`import _cffi_backend` (cffi 2.1.1) raised ModuleNotFoundError",
        remedy="r",
    )
    other = dataclass_replace(failed, subject="import yaml", message="`import yaml` raised ImportError")
    linked = {f.subject + f.rule: f.caused_by for f in link([wheel, suffix, failed, other])}
    assert linked["import _cffi_backendVERIFY-IMPORT"] == wheel.key
    assert linked["cffiENV-EXT-SUFFIX"] == wheel.key
    assert linked["import yamlVERIFY-IMPORT"] is None


def test_packages_gone_fold_under_a_venv_of_another_minor_only() -> None:
    def venv(made: str) -> Finding:
        return Finding(
            rule="ENV-VENV-INTERPRETER",
            severity="error",
            subject="pyvenv.cfg",
            message="m",
            remedy="r",
            base=made,
            target="3.11.7",
        )

    missing = Finding(rule="ENV-PKG-MISSING", severity="warning", subject="numpy", message="m", remedy="r")
    (_, gone) = link([venv("3.10.14"), missing])
    assert gone.caused_by == "ENV-VENV-INTERPRETER:pyvenv.cfg"
    (_, kept) = link([venv("3.11.2"), missing])  # a patch release: the packages are where they were
    assert kept.caused_by is None


def dataclass_replace(f: Finding, **changes: Any) -> Finding:
    import dataclasses

    return dataclasses.replace(f, **changes)


# ----------------------------------------------------------------------------------- real venvs


def run(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


def report(*args: str | Path) -> tuple[int, list[dict[str, Any]]]:
    done = run(*args, "--format", "json", "--quiet")
    assert done.returncode in (0, 1), done.stderr[-3000:]
    found: list[dict[str, Any]] = json.loads(done.stdout)["findings"]
    return done.returncode, found


def ours(found: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(f["rule"], f["severity"], f["subject"]) for f in found if f["rule"] in RULES]


def roots(found: list[dict[str, Any]]) -> list[str]:
    return [f["rule"] for f in found if f["caused_by"] is None and f["severity"] == "error"]


def snapshot(python: Path, out: Path) -> Path:
    done = run("snapshot", "--python", python, "--no-verify", "-q", "-o", out)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def venv(root: Path, *options: str, base: Path = BASE_PYTHON) -> Path:
    """A real venv made by ``base -m venv`` (no pip)."""
    subprocess.run([str(base), "-m", "venv", "--without-pip", *options, str(root)], check=True)
    return root / "bin" / "python"


def with_pip(python: Path) -> Path:
    """``python``'s venv with the test environment's pip linked in (pip's vendored packaging answers the
    probe's tag question), as ``python -m venv`` with ensurepip leaves it, in milliseconds."""
    site = venv_site(python)
    for entry in site_packages().iterdir():
        if entry.name == "pip" or (entry.name.startswith("pip-") and entry.name.endswith(".dist-info")):
            shutil.copytree(entry, site / entry.name, copy_function=_link_or_copy, symlinks=True)
    return python


def pip(python: Path, *args: str | Path) -> None:
    """The test environment's pip, installing into ``python``'s environment (offline)."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def demo_wheel(folder: Path, name: str = "envdemo", version: str = "1.0") -> Path:
    """A pure-Python wheel that declares two console scripts and a GUI script (pip and uv write them)."""
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": "def main():\n    print('ok')\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
        f"{info}/entry_points.txt": (
            f"[console_scripts]\n{name} = {name}:main\n{name}-x = {name}:main\n\n[gui_scripts]\n"
            f"{name}-gui = {name}:main\n"
        ),
    }
    rows = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        rows.append(f"{path},sha256={digest},{len(text.encode())}")
    rows.append(f"{info}/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as z:
        for path, text in files.items():
            z.writestr(path, text)
        z.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return out


def copy_in(wheel: Path, python: Path) -> None:
    """The wheel's files as a copied site-packages leaves them: unpacked, metadata and all, no scripts."""
    with zipfile.ZipFile(wheel) as z:
        z.extractall(venv_site(python))


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """``wheels(requirement, python_version, platform)``: a real wheel from the registry for that
    interpreter, downloaded once per session (``$ENVCHECK_TEST_WHEELS`` is looked in first)."""
    folder = tmp_path_factory.mktemp("wheels")

    @functools.cache
    def get(requirement: str, python_version: str, platform: str) -> Path | str:
        name, version = requirement.split("==")
        tag, arch = f"cp{python_version.replace('.', '')}", platform.split("_", 1)[-1]

        def fits(w: Path) -> bool:
            return w.name.endswith("-any.whl") or (
                arch in w.name and (f"-{tag}-" in w.name or "abi3" in w.name)
            )

        def look(where: Path) -> Path | None:
            return next((w for w in sorted(where.glob(f"{name}-{version}-*.whl")) if fits(w)), None)

        given = os.environ.get("ENVCHECK_TEST_WHEELS")
        found = look(Path(given)) if given else None
        if found is not None or (found := look(folder)) is not None:
            return found
        argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:"]
        argv += ["--python-version", python_version, "--platform", platform, requirement, "-d", str(folder)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        except subprocess.TimeoutExpired:
            return f"pip download {requirement} did not finish within 300 s"
        found = look(folder)
        if done.returncode != 0 or found is None:
            return f"pip download {requirement} ({python_version}, {platform}) failed: {done.stderr[-200:]}"
        return found

    def wheel(requirement: str, python_version: str = "3.11", platform: str = "manylinux2014_x86_64") -> Path:
        got = get(requirement, python_version, platform)
        if isinstance(got, str):
            pytest.skip(got)
        return got

    return wheel


CFFI = "cffi==2.1.1"  # its _cffi_backend has no pure-Python fallback: a wrong suffix fails the import
PYCPARSER = "pycparser==2.23"
MARKUPSAFE = "markupsafe==3.0.4"
BCRYPT = "bcrypt==4.3.0"  # cp39-abi3: one .abi3.so for every CPython >= 3.9


@pytest.mark.slow
@needs_linux_x86_64
def test_a_cp312_wheel_copied_into_a_311_venv(tmp_path: Path, wheels: Callable[..., Path]) -> None:
    # No pip in this venv (as uv makes them): the probe's stdlib tag check answers.
    python = venv(tmp_path / "v")
    copy_in(wheels(CFFI, "3.12"), python)
    pip(python, "install", "--no-index", "--no-deps", wheels(PYCPARSER, "3.12"))
    code, found = report("doctor", "--python", python)
    assert code == 1
    by_rule = {f["rule"]: f for f in found if f["rule"] in RULES and f["severity"] == "error"}
    assert set(by_rule) == {"ENV-WHEEL-TAG", "ENV-EXT-SUFFIX"}
    assert by_rule["ENV-WHEEL-TAG"]["subject"] == "cffi" and "cp312" in by_rule["ENV-WHEEL-TAG"]["message"]
    assert by_rule["ENV-EXT-SUFFIX"]["caused_by"] == "ENV-WHEEL-TAG:cffi"
    assert roots(found)[0] == "ENV-WHEEL-TAG"


@pytest.mark.slow
@needs_linux_x86_64
def test_an_aarch64_wheel_copied_into_an_x86_64_venv(tmp_path: Path, wheels: Callable[..., Path]) -> None:
    # The same Python minor, another CPU: the builder stage ran on arm64. pip is here: packaging answers.
    python = with_pip(venv(tmp_path / "v"))
    copy_in(wheels(MARKUPSAFE, "3.11", "manylinux2014_aarch64"), python)
    _, found = report("doctor", "--python", python)
    errors = {(f["rule"], f["subject"]) for f in found if f["rule"] in RULES and f["severity"] == "error"}
    assert errors == {("ENV-WHEEL-TAG", "MarkupSafe"), ("ENV-EXT-SUFFIX", "MarkupSafe")}
    (suffix,) = [f for f in found if f["rule"] == "ENV-EXT-SUFFIX"]
    assert "aarch64-linux-gnu.so" in suffix["target"]


@pytest.mark.slow
@needs_linux_x86_64
def test_an_abi3_wheel_and_a_right_wheel_are_healthy(tmp_path: Path, wheels: Callable[..., Path]) -> None:
    python = with_pip(venv(tmp_path / "v"))
    pip(python, "install", "--no-index", "--no-deps", wheels(BCRYPT), wheels(MARKUPSAFE))
    site = venv_site(python)
    assert list(site.glob("bcrypt/*.abi3.so")), "the control needs a stable-ABI extension"
    done = subprocess.run([str(python), "-c", "import bcrypt, markupsafe._speedups"], check=False)
    assert done.returncode == 0
    _, found = report("doctor", "--python", python)
    # pip was linked in without its scripts (pip, pip3): said as info, never an error.
    assert [f for f in ours(found) if f[1] != "info"] == []


@pytest.mark.slow
@needs_linux_x86_64
def test_the_gate_leads_with_the_wheel_and_folds_the_failed_import(
    tmp_path: Path, wheels: Callable[..., Path]
) -> None:
    python = with_pip(venv(tmp_path / "v"))
    pip(python, "install", "--no-index", "--no-deps", wheels(CFFI), wheels(PYCPARSER))
    reference = snapshot(python, tmp_path / "ref.json")
    # The image is rebuilt from a builder stage on Python 3.12: its cffi lands in the 3.11 venv.
    pip(python, "uninstall", "-y", "cffi")
    copy_in(wheels(CFFI, "3.12"), python)
    code, found = report("gate", reference, "--python", python)
    assert code == 1
    assert roots(found)[0] == "ENV-WHEEL-TAG", roots(found)
    (failed,) = [f for f in found if f["rule"] == "VERIFY-IMPORT" and f["subject"] == "import _cffi_backend"]
    assert failed["caused_by"] == "ENV-WHEEL-TAG:cffi"
    code, found = report("doctor", "--python", python)
    assert code == 1 and ("ENV-WHEEL-TAG", "error", "cffi") in ours(found)


@pytest.mark.slow
def test_a_kept_venv_under_a_bumped_base(tmp_path: Path) -> None:
    # A venv made by Python 3.(Y-1), its packages under lib/python3.(Y-1); the base image now brings 3.Y
    # and the venv's python link runs it: pyvenv.cfg still says 3.(Y-1), every package is off sys.path.
    python = venv(tmp_path / "v")
    pip(python, "install", "--no-index", demo_wheel(tmp_path / "dist"))
    reference = snapshot(python, tmp_path / "ref.json")
    major, minor = sys.version_info[:2]
    cfg = tmp_path / "v" / "pyvenv.cfg"
    made = f"{major}.{minor - 1}"
    cfg.write_text(cfg.read_text().replace(f"version = {major}.{minor}.", f"version = {made}."))
    lib = venv_site(python).parent
    lib.rename(lib.with_name(f"python{made}"))
    code, found = report("gate", reference, "--python", python)
    assert code == 1
    assert roots(found)[0] == "ENV-VENV-INTERPRETER", roots(found)
    (missing,) = [f for f in found if f["rule"] == "ENV-PKG-MISSING"]
    assert (missing["subject"], missing["caused_by"]) == ("envdemo", "ENV-VENV-INTERPRETER:pyvenv.cfg")
    code, found = report("doctor", "--python", python)
    assert code == 1 and ours(found) == [("ENV-VENV-INTERPRETER", "error", "pyvenv.cfg")]
    (f,) = [f for f in found if f["rule"] in RULES]
    assert (f["base"], f["target"]) == (f"{made}.{sys.version_info[2]}", platform_version())
    assert f"python{major}.{minor} -m venv --clear" in f["remedy"]


def platform_version() -> str:
    import platform

    return platform.python_version()


@pytest.mark.slow
def test_a_venv_whose_home_was_deleted(tmp_path: Path) -> None:
    # The base interpreter copied to a folder of its own (it still finds its stdlib from its build prefix),
    # a --copies venv made from it, the base deleted: the venv starts, its home is gone.
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    real = Path(os.path.realpath(BASE_PYTHON))
    shutil.copy2(real, base / real.name)
    if subprocess.run([str(base / real.name), "-c", "pass"], check=False).returncode != 0:
        pytest.skip(f"a copy of {real} does not start outside its installation")
    python = venv(tmp_path / "v", "--copies", base=base / real.name)
    shutil.rmtree(tmp_path / "base")
    if subprocess.run([str(python), "-c", "pass"], check=False).returncode != 0:
        pytest.skip("this interpreter does not start once its venv's home is gone")
    code, found = report("doctor", "--python", python)
    assert code == 1
    (f,) = [f for f in found if f["rule"] in RULES]
    assert f["rule"] == "ENV-VENV-INTERPRETER" and "does not exist" in f["message"]


@pytest.mark.slow
def test_unusual_but_legal_venvs_are_healthy(tmp_path: Path) -> None:
    system = venv(tmp_path / "system", "--system-site-packages")
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "-q", "--python", str(BASE_PYTHON), str(tmp_path / "uv")], check=True)
    for python in (system, tmp_path / "uv" / "bin" / "python"):
        _, found = report("doctor", "--python", python)
        assert ours(found) == [], python


def _scripts(python: Path) -> list[str]:
    return sorted(p.name for p in python.parent.glob("envdemo*"))


@pytest.mark.slow
def test_a_moved_venv(tmp_path: Path) -> None:
    python = venv(tmp_path / "build" / "venv")
    pip(python, "install", "--no-index", demo_wheel(tmp_path / "dist"))
    assert _scripts(python) == ["envdemo", "envdemo-gui", "envdemo-x"]
    reference = snapshot(python, tmp_path / "ref.json")
    (tmp_path / "app").mkdir()
    shutil.move(tmp_path / "build" / "venv", tmp_path / "app" / "venv")
    moved = tmp_path / "app" / "venv" / "bin" / "python"
    with pytest.raises(FileNotFoundError):  # bash says "bad interpreter: No such file or directory"
        subprocess.run([str(moved.parent / "envdemo")], capture_output=True, check=False)
    code, found = report("gate", reference, "--python", moved)
    assert code == 1
    assert roots(found)[0] == "ENV-SCRIPT-BROKEN", roots(found)
    code, found = report("doctor", "--python", moved)
    assert code == 1
    assert ours(found) == [("ENV-SCRIPT-BROKEN", "error", f"#!{python}")]


@pytest.mark.slow
def test_a_moved_venv_with_pips_long_path_launchers(tmp_path: Path) -> None:
    # Past 127 bytes a #! line is cut by the kernel: pip writes #!/bin/sh and an '''exec' line instead.
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "venv"
    python = venv(deep)
    pip(python, "install", "--no-index", demo_wheel(tmp_path / "dist"))
    head = (python.parent / "envdemo").read_bytes()[:200]
    assert head.startswith(b"#!/bin/sh\n'''exec' "), head
    _, found = report("doctor", "--python", python)
    assert ours(found) == []
    shutil.move(deep, tmp_path / "venv")
    _, found = report("doctor", "--python", tmp_path / "venv" / "bin" / "python")
    assert ours(found) == [("ENV-SCRIPT-BROKEN", "error", f"#!{python}")]


@pytest.mark.slow
def test_a_venv_copied_beside_its_original(tmp_path: Path) -> None:
    # cp -a of a venv: the original is still there, so the copy's scripts run, with the original's packages.
    python = venv(tmp_path / "one")
    pip(python, "install", "--no-index", demo_wheel(tmp_path / "dist"))
    shutil.copytree(tmp_path / "one", tmp_path / "two", symlinks=True)
    _, found = report("doctor", "--python", tmp_path / "two" / "bin" / "python")
    (f,) = [f for f in found if f["rule"] in RULES]
    assert (f["rule"], f["severity"], f["subject"]) == ("ENV-SCRIPT-BROKEN", "error", f"#!{python}")
    assert "another environment" in f["message"]


@pytest.mark.slow
def test_a_deleted_script(tmp_path: Path) -> None:
    python = venv(tmp_path / "v")
    pip(python, "install", "--no-index", demo_wheel(tmp_path / "dist"))
    (python.parent / "envdemo-x").unlink()
    _, found = report("doctor", "--python", python)
    assert ours(found) == [("ENV-SCRIPT-BROKEN", "error", "envdemo-x")]
    (f,) = [f for f in found if f["rule"] in RULES]
    # Installed from a wheel file: the reinstall takes the wheel its direct_url.json recorded.
    assert "--force-reinstall --no-deps 'envdemo @ file://" in f["remedy"]


@pytest.fixture(scope="session")
def relocatable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path]]:
    """A ``uv venv --relocatable`` with a console script installed by uv, moved to another folder, then
    given torch (the test environment's, linked, its scripts written for where it is now) and
    snapshotted: ``(python, reference)``."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    root = tmp_path_factory.mktemp("relocatable")
    uv = shutil.which("uv") or str(Path(sys.executable).parent / "uv")
    subprocess.run(
        [uv, "venv", "-q", "--relocatable", "--python", str(BASE_PYTHON), str(root / "a")], check=True
    )
    wheel = demo_wheel(root / "dist")
    done = subprocess.run(
        [uv, "pip", "install", "-q", "--offline", "--python", str(root / "a" / "bin" / "python"), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shutil.move(root / "a", root / "b")
    python = root / "b" / "bin" / "python"
    clone_site_packages(python)
    yield python, snapshot(python, root / "ref.json")


@pytest.mark.slow
def test_a_relocatable_uv_venv_moved_is_healthy(relocatable: tuple[Path, Path]) -> None:
    python, reference = relocatable
    assert subprocess.run([str(python.parent / "envdemo")], capture_output=True, check=False).returncode == 0
    assert (python.parent / "envdemo").read_bytes().startswith(b"#!/bin/sh\n'''exec' \"$(dirname")
    _, found = report("doctor", "--python", python)
    assert ours(found) == []
    code, found = report("gate", reference, "--python", python)
    assert [f["rule"] for f in found if f["severity"] == "error"] == []
    assert code == 0
