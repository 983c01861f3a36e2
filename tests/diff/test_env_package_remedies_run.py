"""The remedies of the variable, provenance and package rules, run for real: each test builds the broken
environment (real venvs, real installs from the registry, a real folder another copy lives in, a real
variable that breaks a real torch call), takes envcheck's report, runs what the remedy says against that
environment's own interpreter (``tests/remedyrun.py``), and runs envcheck again: the finding is gone and
the symptom with it (an import takes the environment's own copy, the call works, the module imports).

A folder outside the environment that holds another copy (a team-shared folder on PYTHONPATH or in a
``.pth`` file) is never changed by a remedy: each such test records the folder's files, inodes and
modification times before and asserts them equal after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from conftest import needs_torch
from remedyrun import BASH, applied, roots, run_actions, run_script, variables
from venvs import _link_or_copy, clone_site_packages, make_venv, site_packages, venv_site, venv_with_pip
from wheels import wheel

from envcheck import api
from envcheck.core.findings import Finding
from envcheck.core.remedy import Action, EditFile, Install, Manual, SetVariable, Uninstall, render
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest
from envcheck.manifest.provenance import take_off, take_off_remedy
from envcheck.report import Report
from envcheck.verify.imports import import_findings, run_imports

TIMEOUT = 600
H5PY = "h5py==3.10.0"  # built against NumPy 1: its import fails under NumPy 2
NUMPY1 = "numpy==1.26.4"


# ------------------------------------------------------------------------------------------- helpers


def pip(python: Path | str, *args: str, env: Mapping[str, str] | None = None) -> None:
    """``python -m pip ARGS`` (the registry the machine's pip is configured with)."""
    done = subprocess.run(
        [str(python), "-m", "pip", "-q", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(env if env is not None else os.environ),
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@contextmanager
def environment(values: Mapping[str, str | None]) -> Iterator[None]:
    """This process's environment with ``values`` set (None: unset), restored after: the snapshot's
    target inherits it, as a service's interpreter inherits its shell's."""
    saved = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def snap(python: Path | str, values: Mapping[str, str | None] | None = None) -> Manifest:
    with environment(values or {}):
        return api.snapshot_this_machine(str(python), timeout=TIMEOUT)


def doctor(m: Manifest) -> Report:
    return api.doctor(m, policy=Policy(disabled=True))


def diff(base: Manifest, target: Manifest) -> Report:
    return api.diff(base, target, policy=Policy(disabled=True))


def of(report: Report, rule: str) -> dict[str, Finding]:
    return {f.subject: f for f in report.findings if f.rule == rule}


def loud(report: Report) -> list[str]:
    return [f.key for f in report.findings if f.severity in ("error", "warning")]


def run(
    python: Path | str, code: str, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=dict(env if env is not None else os.environ),
        check=False,
    )


def run_commands(actions: Sequence[Action], python: Path, cwd: Path) -> list[str]:
    """The actions' commands, rendered for bash with ``python`` and run there (variables excluded)."""
    lines = [line for a in actions if (line := render(a, "posix", str(python))) is not None]
    assert lines, f"no command in {actions}"
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-e", "-c", "\n".join(lines)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, "\n".join(lines) + done.stdout + done.stderr
    return lines


def state(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every file and folder under ``folder``: inode, size, modification time (a remedy that touched
    any of them changes this)."""
    out = {}
    for path in sorted([folder, *folder.rglob("*")]):
        st = path.lstat()
        out[str(path.relative_to(folder))] = (st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def shared_idna(root: Path) -> Path:
    """A team-shared folder holding idna 3.6 (``pip install --target``), another release than the venv's."""
    pip(sys.executable, "install", "--no-deps", "--target", str(root), "idna==3.6")
    assert (root / "idna-3.6.dist-info").is_dir()
    return root


WHICH_IDNA = "import idna, idna.package_data as p; print(p.__version__, idna.__file__)"


# -------------------------------------------------------------------- another copy first: .pth, PYTHONPATH


@pytest.mark.slow
@pytest.mark.remedy("ENV-TORCH-SHADOWED")
def test_a_pth_line_adding_a_shared_copy_is_deleted_and_the_shared_folder_is_left(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-deps", "idna==3.20")
    site = venv_site(python)
    shared = shared_idna(tmp_path / "shared")
    pth = site / "team.pth"
    pth.write_text(f"# the team's shared packages\n{shared}\n", encoding="utf-8")
    before = state(shared)

    m = snap(python)
    report = doctor(m)
    shadow = of(report, "ENV-TORCH-SHADOWED")["idna"]
    assert str(shared) in shadow.message and str(pth) in shadow.message
    remedy = take_off_remedy(m, str(shared), "idna")
    assert remedy is not None
    (edit,) = remedy.actions
    assert isinstance(edit, EditFile) and (edit.path, edit.remove_line) == (str(pth), str(shared))
    text = take_off(m, str(shared), "idna")
    assert text is not None and text in shadow.remedy  # the finding says what the actions do
    assert not any(isinstance(a, (Install, Uninstall)) for f in report.findings for a in f.actions)
    run_script(report, tmp_path)  # the report's own script: nothing in it touches the shared folder

    run_commands(remedy.actions, python, tmp_path)
    assert pth.read_text(encoding="utf-8") == "# the team's shared packages\n"
    again = doctor(snap(python))
    assert "ENV-TORCH-SHADOWED:idna" not in {f.key for f in again.findings} and loud(again) == []
    version, where = run(python, WHICH_IDNA).stdout.split()
    assert version == "3.20" and where.startswith(str(site))
    assert state(shared) == before


@pytest.mark.slow
def test_a_pth_import_line_ahead_of_site_packages_is_an_edit_by_hand(tmp_path: Path) -> None:
    # An ``import`` line inserts the folder ahead of site-packages; the manifest holds the folder, not the
    # line's text, so the edit names the file and the folder and runs nothing.
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-deps", "idna==3.20")
    shared = shared_idna(tmp_path / "shared")
    pth = venv_site(python) / "team.pth"
    pth.write_text(f"import sys; sys.path.insert(0, {str(shared)!r})\n", encoding="utf-8")
    m = snap(python)
    assert run(python, WHICH_IDNA).stdout.split()[0] == "3.6"  # the shared copy is imported
    remedy = take_off_remedy(m, str(shared), "idna")
    assert remedy is not None
    (edit,) = remedy.actions
    assert isinstance(edit, EditFile) and edit.remove_line is None and edit.path == str(pth)
    assert render(edit, "posix") is None and str(shared) in edit.change


@pytest.mark.slow
@pytest.mark.remedy("ENV-TORCH-SHADOWED")
def test_a_shared_copy_on_pythonpath_is_taken_off_pythonpath_and_never_uninstalled(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-deps", "idna==3.20")
    site = venv_site(python)
    shared = shared_idna(tmp_path / "shared")
    keep = tmp_path / "lib"
    keep.mkdir()
    service = {**os.environ, "PYTHONPATH": f"{shared}:{keep}"}
    assert run(python, WHICH_IDNA, service).stdout.split()[0] == "3.6"  # the symptom: the shared copy
    before = state(shared)

    m = snap(python, {"PYTHONPATH": service["PYTHONPATH"]})
    report = doctor(m)
    shadow = of(report, "ENV-TORCH-SHADOWED")["idna"]
    assert f"{shared} (PYTHONPATH)" in shadow.message
    remedy = take_off_remedy(m, str(shared), "idna")
    assert remedy is not None and remedy.actions == (SetVariable(name="PYTHONPATH", value=str(keep)),)
    assert shadow.remedy.startswith(f"`export PYTHONPATH='{keep}'`")
    # The report's script, run in the service's own shell (PYTHONPATH set), changes nothing there.
    run_script(report, tmp_path, env=service)
    assert state(shared) == before

    fixed = applied(remedy.actions, service)
    again = doctor(snap(python, {"PYTHONPATH": fixed["PYTHONPATH"]}))
    assert "ENV-TORCH-SHADOWED:idna" not in {f.key for f in again.findings} and loud(again) == []
    version, where = run(python, WHICH_IDNA, fixed).stdout.split()
    assert version == "3.20" and where.startswith(str(site))
    assert state(shared) == before


# ------------------------------------------------------------------ variables that break a torch call


PICKLED_MODULE = """
import sys, torch
torch.save(torch.nn.Linear(2, 2), "model.pt")  # a whole nn.Module, pickled
try:
    torch.load("model.pt", weights_only=False)
except Exception as e:
    print("FAILED", type(e).__name__)
    sys.exit(1)
print("LOADED")
"""


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("ENV-VAR-CHANGED")
def test_forced_weights_only_is_unset_and_the_full_load_works(tmp_path: Path) -> None:
    name = "TORCH_FORCE_WEIGHTS_ONLY_LOAD"
    service = {k: v for k, v in os.environ.items() if k != name}
    broken = {**service, name: "1"}
    fails = subprocess.run(
        [sys.executable, "-c", PICKLED_MODULE],
        capture_output=True,
        text=True,
        env=broken,
        cwd=tmp_path,
        timeout=TIMEOUT,
        check=False,
    )
    assert fails.returncode != 0 and "FAILED" in fails.stdout, fails.stdout + fails.stderr

    base, target = snap(sys.executable, {name: None}), snap(sys.executable, {name: "1"})
    report = diff(base, target)
    f = of(report, "ENV-VAR-CHANGED")[name]
    assert f.severity == "error" and f.caused_by is None and f in roots(report)
    assert f.actions == (SetVariable(name=name),) and f.remedy.startswith(f"`unset {name}`")

    fixed = variables([f], broken)
    works = subprocess.run(
        [sys.executable, "-c", PICKLED_MODULE],
        capture_output=True,
        text=True,
        env=fixed,
        cwd=tmp_path,
        timeout=TIMEOUT,
        check=False,
    )
    assert works.returncode == 0 and "LOADED" in works.stdout, works.stdout + works.stderr
    after = diff(base, snap(sys.executable, {name: fixed.get(name)}))
    assert name not in of(after, "ENV-VAR-CHANGED")


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("ENV-CONFIG-FOLDER")
def test_a_log_file_under_a_missing_folder_is_unset_and_import_torch_works(tmp_path: Path) -> None:
    missing = str(tmp_path / "no" / "such" / "torch.log")
    broken = {**os.environ, "TORCH_LOGS_OUT": missing}
    assert run(sys.executable, "import torch", broken).returncode != 0  # the symptom: import torch fails

    report = doctor(snap(sys.executable, {"TORCH_LOGS_OUT": missing}))
    f = of(report, "ENV-CONFIG-FOLDER")["TORCH_LOGS_OUT"]
    assert f.severity == "error" and f.actions == (SetVariable(name="TORCH_LOGS_OUT"),)

    fixed = variables([f], broken)
    assert run(sys.executable, "import torch; print('IMPORTED')", fixed).stdout.strip() == "IMPORTED"
    again = doctor(snap(sys.executable, {"TORCH_LOGS_OUT": fixed.get("TORCH_LOGS_OUT")}))
    assert "TORCH_LOGS_OUT" not in of(again, "ENV-CONFIG-FOLDER")


# inductor's own lookup of the C++ compiler torch.compile runs on the CPU (CXX, else g++): its first
# compile calls it, and fails there when the compiler is missing.
INDUCTOR_CXX = "from torch._inductor.cpp_builder import get_cpp_compiler; print('CXX', get_cpp_compiler())"


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("ENV-CONFIG-TOOL")
def test_the_report_leads_with_the_compiler_torch_compile_runs_and_unsetting_it_fixes_the_call(
    tmp_path: Path,
) -> None:
    broken_values = {"CC": "/nonexistent/gcc", "CXX": "/nonexistent/g++"}
    broken = {**os.environ, **broken_values}
    fails = run(sys.executable, INDUCTOR_CXX, broken)
    assert fails.returncode != 0 and "InvalidCxxCompiler" in fails.stderr, fails.stderr[-2000:]
    # CC alone breaks no call of this CPU build: inductor's lookup takes CXX.
    assert run(sys.executable, INDUCTOR_CXX, {**os.environ, "CC": "/nonexistent/gcc"}).returncode == 0

    m = snap(sys.executable, broken_values)
    assert m.torch.static is not None and m.torch.static.cuda is None  # the test environment: CPU torch
    report = doctor(m)
    tools = [f for f in report.findings if f.rule == "ENV-CONFIG-TOOL"]
    assert [(f.subject, f.severity) for f in tools] == [("CXX", "error"), ("CC", "warning")]
    assert "never runs" in tools[1].message
    # The first root's remedy, and the first command of the report's script, unset CXX.
    first = next(f for f in roots(report) if f.rule.startswith("ENV-CONFIG-"))
    assert first.subject == "CXX" and first.remedy.startswith("`unset CXX`")
    script = run_script(report, tmp_path, env=broken)
    assert script.index("unset CXX") < script.index("unset CC")

    fixed = variables(tools, broken)
    assert "CXX" not in fixed and "CC" not in fixed
    works = run(sys.executable, INDUCTOR_CXX, fixed)
    assert works.returncode == 0 and works.stdout.startswith("CXX "), works.stderr[-2000:]
    again = doctor(snap(sys.executable, {"CC": None, "CXX": None}))
    assert of(again, "ENV-CONFIG-TOOL") == {}


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("ENV-FTZ-DAZ")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="LD_PRELOAD and GCC's crtfastmath")
def test_a_preloaded_fast_math_library_is_taken_out_of_ld_preload(tmp_path: Path) -> None:
    source = tmp_path / "fastmath.c"
    source.write_text("int fastmath(void) { return 1; }\n", encoding="utf-8")
    lib = tmp_path / "libfastmath.so"
    built = subprocess.run(
        ["gcc", "-shared", "-fPIC", "-ffast-math", "-o", str(lib), str(source)],
        capture_output=True,
        check=False,
    )
    if built.returncode != 0:
        pytest.skip("no gcc to build a -ffast-math library")
    subnormal = "import torch; print((torch.tensor([1e-39]) * 1.0).item() != 0.0)"
    broken = {**os.environ, "LD_PRELOAD": str(lib)}
    if run(sys.executable, subnormal, broken).stdout.strip() != "False":
        pytest.skip("this gcc does not link crtfastmath.o into shared libraries (GCC 13 and newer)")

    report = doctor(snap(sys.executable, {"LD_PRELOAD": str(lib)}))
    f = of(report, "ENV-FTZ-DAZ")["floating-point mode"]
    assert f.actions == (SetVariable(name="LD_PRELOAD"),) and f.remedy.startswith("`unset LD_PRELOAD`")

    fixed = variables([f], broken)
    assert run(sys.executable, subnormal, fixed).stdout.strip() == "True"  # subnormals survive again
    again = doctor(snap(sys.executable, {"LD_PRELOAD": fixed.get("LD_PRELOAD")}))
    assert of(again, "ENV-FTZ-DAZ") == {}


# ------------------------------------------------------------------------------------------- packages


@pytest.mark.slow
@pytest.mark.remedy("ENV-PKG-UNMET")
def test_an_unmet_requirement_is_installed_from_the_registry(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-deps", "python-dateutil==2.9.0.post0")
    assert "ModuleNotFoundError" in run(python, "import dateutil.tz").stderr  # it needs six

    report = doctor(snap(python))
    f = of(report, "ENV-PKG-UNMET")["six"]
    assert f.severity == "error" and f.actions == (Install(requirements=("six>=1.5",)),)
    assert f.remedy.startswith("On this machine: `pip install 'six>=1.5'`")
    run_script(report, tmp_path)

    assert run(python, "import dateutil.tz").returncode == 0
    again = doctor(snap(python))
    assert of(again, "ENV-PKG-UNMET") == {} and loud(again) == []


@pytest.mark.slow
@pytest.mark.remedy("ENV-PKG-MISSING", "ENV-PKG-ADDED", "ENV-PKG-VERSION", "ENV-PKG-SOURCE", "ENV-PKG-DIRECT")
def test_package_differences_are_undone_by_their_remedies(tmp_path: Path) -> None:
    base = venv_with_pip(tmp_path / "base")
    pip(base, "install", "--no-deps", "idna==3.20", "six==1.17.0", "python-dateutil==2.9.0.post0")
    target = venv_with_pip(tmp_path / "target")
    # idna from a wheel file (direct_url.json: not the index's release), six older, dateutil missing,
    # typing_extensions added.
    idna_wheel = tmp_path / "wheels"
    pip(sys.executable, "download", "--no-deps", "-d", str(idna_wheel), "idna==3.20")
    (idna_file,) = idna_wheel.glob("idna-3.20-*.whl")
    pip(target, "install", "--no-deps", str(idna_file), "six==1.16.0", "typing_extensions==4.5.0")
    base_m = snap(base)

    # Alone, the target's wheel-file idna is ENV-PKG-DIRECT: its remedy puts the index's release in.
    alone = doctor(snap(target))
    direct = of(alone, "ENV-PKG-DIRECT")["idna"]
    assert direct.actions == (Install(pins=(("idna", "3.20"),), force=True, no_deps=True),)
    run_actions([direct], str(target), tmp_path)
    assert of(doctor(snap(target)), "ENV-PKG-DIRECT") == {}
    pip(target, "install", "--no-deps", "--force-reinstall", str(idna_file))  # the wheel file again

    report = diff(base_m, snap(target))
    found = {f.key: f for f in report.findings if f.rule.startswith("ENV-PKG-")}
    assert set(found) >= {
        "ENV-PKG-MISSING:python-dateutil",
        "ENV-PKG-ADDED:typing_extensions",
        "ENV-PKG-VERSION:six",
        "ENV-PKG-SOURCE:idna",
    }
    assert found["ENV-PKG-ADDED:typing_extensions"].actions == (Uninstall(names=("typing_extensions",)),)
    assert found["ENV-PKG-MISSING:python-dateutil"].actions == (
        Install(pins=(("python-dateutil", "2.9.0.post0"),)),
    )
    assert found["ENV-PKG-VERSION:six"].actions == (Install(pins=(("six", "1.17.0"),)),)
    assert found["ENV-PKG-SOURCE:idna"].actions == (
        Install(pins=(("idna", "3.20"),), force=True, no_deps=True),
    )
    # Every root with a remedy, info ones too (the script writes those that fail the gate).
    run_actions([f for f in found.values() if f.caused_by is None], str(target), tmp_path)

    after = diff(base_m, snap(target))
    assert [f.key for f in after.findings if f.rule.startswith("ENV-PKG-")] == []
    assert run(target, "import dateutil.tz, six; print(six.__version__)").stdout.strip() == "1.17.0"
    assert run(target, "import typing_extensions").returncode != 0


# ----------------------------------------------------------------------- NumPy 2 under a NumPy 1 module


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("ENV-NUMPY-MAJOR")
def test_the_numpy_major_remedy_never_touches_a_shared_numpy_and_then_fixes_the_import(
    tmp_path: Path,
) -> None:
    h5py, numpy1 = wheel(H5PY), wheel(NUMPY1)
    # The reference: NumPy 1 from the registry (by name: no direct_url.json), h5py built for it.
    base = make_venv(tmp_path / "base")
    clone_site_packages(base, skip=lambda p: p.name.startswith("numpy"))
    pip(base, "install", "--no-deps", "--no-index", "--find-links", str(numpy1.parent), NUMPY1, H5PY)
    # The service: NumPy 2 (the test environment's), the same h5py, and PYTHONPATH naming a team folder
    # that holds another copy of NumPy 2, which Python imports first.
    target = make_venv(tmp_path / "target")
    site = clone_site_packages(target)
    pip(target, "install", "--no-deps", "--no-index", "--find-links", str(h5py.parent), H5PY)
    shared = tmp_path / "shared"
    shared.mkdir()
    for entry in site.iterdir():
        if entry.name.startswith("numpy"):
            shutil.copytree(entry, shared / entry.name, copy_function=_link_or_copy)
    service = {**os.environ, "PYTHONPATH": str(shared)}
    broken = run(target, "import numpy, h5py", service)
    assert broken.returncode != 0 and "numpy" in broken.stderr.lower(), broken.stderr[-2000:]
    assert run(target, "import numpy; print(numpy.__file__)", service).stdout.startswith(str(shared))
    before = state(shared)
    base_m = snap(base)

    # In the service's shell, NumPy's live copy is the shared one: the remedy installs nothing (pip would
    # uninstall NumPy from the shared folder first); it names the folder, and the shadow says how to take
    # it off PYTHONPATH.
    target_m = snap(target, {"PYTHONPATH": str(shared)})
    report = diff(base_m, target_m)
    major = of(report, "ENV-NUMPY-MAJOR")["numpy"]
    assert major.severity in ("error", "warning")
    assert all(isinstance(a, Manual) for a in major.actions) and str(shared) in major.remedy
    run_script(report, tmp_path, env=service)
    assert state(shared) == before
    assert run(target, "import h5py", service).returncode != 0

    shadow = of(report, "ENV-TORCH-SHADOWED")["numpy"]
    off = take_off_remedy(target_m, str(shared), "numpy")
    assert off is not None and off.actions == (SetVariable(name="PYTHONPATH"),)
    assert shadow.remedy.startswith("`unset PYTHONPATH`")
    fixed = applied(off.actions, service)

    # Off PYTHONPATH, the live NumPy is the environment's own: the remedy is the install it names.
    report = diff(base_m, snap(target, {"PYTHONPATH": None}))
    major = of(report, "ENV-NUMPY-MAJOR")["numpy"]
    assert major.actions == (Install(pins=(("numpy", "1.26.4"),)),)
    run_script(report, tmp_path, env=fixed)
    assert run(target, "import h5py; print('H5PY')", fixed).stdout.strip() == "H5PY"
    after = diff(base_m, snap(target, {"PYTHONPATH": None}))
    assert of(after, "ENV-NUMPY-MAJOR") == {}
    assert state(shared) == before


@needs_torch
@pytest.mark.slow
@pytest.mark.remedy("VERIFY-IMPORT")
def test_an_import_built_for_numpy_1_is_fixed_by_a_release_built_for_numpy_2(tmp_path: Path) -> None:
    # A venv of NumPy 2 (the test environment's) and pip only: the plan of native imports is NumPy's and
    # h5py's, each named with its distribution.
    h5py = wheel(H5PY)
    target = make_venv(tmp_path / "venv")
    top = site_packages()
    clone_site_packages(target, skip=lambda p: p.parent == top and not p.name.startswith(("numpy", "pip")))
    pip(target, "install", "--no-deps", "--no-index", "--find-links", str(h5py.parent), H5PY)
    assert run(target, "import h5py").returncode != 0

    def imports() -> dict[str, Finding]:
        found = import_findings(run_imports(str(target), timeout=120), target=snap(target))
        return {f.subject: f for f in found if f.rule == "VERIFY-IMPORT"}

    f = imports()["import h5py"]
    assert "NumPy ABI break" in f.message and "h5py 3.10.0" in f.message
    assert f.remedy.startswith("`pip install 'h5py>3.10.0'`") and "numpy<2" in f.remedy
    assert f.actions == (Install(requirements=("h5py>3.10.0",)),)
    run_actions([f], str(target), tmp_path)
    assert run(target, "import h5py; print('H5PY')").stdout.strip() == "H5PY"
    assert "import h5py" not in imports()
