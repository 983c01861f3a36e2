"""The remedies of the built-for-torch, interpreter and torch rules, run for real: each test breaks a venv the
way users break theirs, takes envcheck's report, runs its remedy in bash against the venv's own interpreter
(``tests/remedyrun.py``: the ``--remedies`` script, or one finding's actions), and runs envcheck again: the
finding is gone and what failed (the import, the script) works.

What ran, exactly. PyTorch's index (``https://download.pytorch.org/whl/<label>``), which the remedies of a
labelled build name, is not reachable from the machines these tests run on. Where a remedy names it, the
test replaces that URL, and only it, with a local PEP 503 index (``mirror``) that serves the same build
(``torch 2.13.0+cpu`` from the machine's wheel store; a CPU build of the ``visionops`` fixture built here),
and runs pip with no configuration (``PIP_CONFIG_FILE=/dev/null``): the index option is then the only
source, as PyTorch's is for a user. Everything else in the command is the remedy's own.

The registry has no cp312 wheel for this machine either: the "wheel of another Python" is the registry's
cffi 2.1.1 for cp311 with its extension module and its tags renamed to CPython 3.12's (``retagged``), which
is what the interpreter and envcheck see of a real one (the file name's suffix, the WHEEL tag, the RECORD);
tests/diff/test_interpreter_invariants.py uses the real cp312 wheel where a registry serves it.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_torch
from remedyrun import run_actions, run_script
from venvs import _link_or_copy, clone_site_packages, installed_torch, make_venv, site_packages, write_scripts

from envcheck import api
from envcheck.core.findings import Finding
from envcheck.core.remedy import Install, Manual, Rebuild, RemoveFiles
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest
from envcheck.manifest.remedy import pytorch_index
from envcheck.report import Report

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "builtfor"
TORCH_WHEELS = Path("/opt/wheels")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: nothing to build")
linux_311 = pytest.mark.skipif(
    not (sys.platform == "linux" and os.uname().machine == "x86_64" and sys.version_info[:2] == (3, 11)),
    reason="the wheels are chosen for CPython 3.11 on Linux x86_64 (the test environment's)",
)


# ----------------------------------------------------------------------------------------------- helpers


def pip(python: Path, *args: str | Path, env: dict[str, str] | None = None) -> None:
    """The test environment's pip acting on ``python``'s environment (a real install, as the user's was)."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), *map(str, args)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False, env=env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def run(python: Path | str, *argv: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
    """``argv`` run by ``python`` (the symptom the remedy must fix); asserts the exit status ``ok`` asks."""
    done = subprocess.run([str(python), *argv], capture_output=True, text=True, timeout=300, check=False)
    assert (done.returncode == 0) == ok, done.stdout[-1000:] + done.stderr[-2000:]
    return done


def clone(tmp_path: Path, drop: Callable[[Path], bool] = lambda p: False) -> tuple[Path, Path]:
    """A venv whose site-packages is a hard-linked copy of the test environment's, without the entries
    ``drop`` names (deleting a link leaves the test environment's file alone)."""
    python = make_venv(tmp_path / "venv")
    site = clone_site_packages(python)
    for entry in [e for e in site.iterdir() if drop(e)]:
        shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    return python, site


def with_pip(python: Path) -> Path:
    """``python``'s venv with the test environment's pip linked in, and its scripts written (as ensurepip
    leaves a venv): ``python -m pip``, which every remedy runs, works there."""
    site = Path(run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    for entry in site_packages().iterdir():
        if entry.name == "pip" or (entry.name.startswith("pip-") and entry.name.endswith(".dist-info")):
            shutil.copytree(entry, site / entry.name, copy_function=_link_or_copy, symlinks=True)
    write_scripts(python, site)
    return site


def snapshot(python: Path) -> Manifest:
    return api.snapshot_this_machine(str(python), timeout=300)


def doctor(python: Path) -> Report:
    return api.doctor(python=str(python), policy=Policy(disabled=True), timeout=300)


def of(report: Report, rule: str) -> list[Finding]:
    return [f for f in report.findings if f.rule == rule]


def mirror(folder: Path, *wheels: Path) -> str:
    """A PEP 503 index in ``folder`` serving ``wheels`` (as PyTorch's per-label index serves its builds);
    its URL."""
    for wheel in wheels:
        project = folder / wheel.name.split("-", 1)[0].lower().replace("_", "-")
        project.mkdir(parents=True, exist_ok=True)
        (project / "index.html").write_text(
            f'<html><body><a href="{wheel.resolve().as_uri()}">{wheel.name}</a></body></html>\n',
            encoding="utf-8",
        )
    return folder.resolve().as_uri()


def only_index() -> dict[str, str]:
    """pip with no configuration file and no find-links: the command's own index is its only source."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


REGISTRY = Path("/opt/pypi/simple")


def default_index() -> dict[str, str] | None:
    """pip whose default index is this machine's registry (as a user's pip.conf names theirs), and nothing
    else: a remedy that installs "from the index" takes it from there, never from the internet."""
    if not REGISTRY.is_dir():
        return None  # elsewhere: the user's own pip configuration
    return {**only_index(), "PIP_INDEX_URL": REGISTRY.as_uri()}


def served_here(findings: Iterable[Finding], label: str, url: str) -> tuple[Finding, ...]:
    """``findings`` with PyTorch's index for ``label`` replaced by ``url`` in every install (nothing else
    changed): PyTorch's index is not reachable from here (see the module's docstring)."""
    public = pytorch_index(label)

    def local(f: Finding) -> Finding:
        actions = tuple(
            dataclasses.replace(a, index_url=url) if isinstance(a, Install) and a.index_url == public else a
            for a in f.actions
        )
        return dataclasses.replace(f, actions=actions)

    return tuple(local(f) for f in findings)


def record(site: Path, files: list[Path], info: Path) -> None:
    """``info``/RECORD listing ``files`` (paths under ``site``), as pip writes it."""
    rows = []
    for path in files:
        data = path.read_bytes()
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        rows.append(f"{path.relative_to(site).as_posix()},sha256={digest},{len(data)}")
    rows.append(f"{info.relative_to(site).as_posix()}/RECORD,,")
    (info / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


def pack(tree: Path, out: Path) -> Path:
    """The files under ``tree`` (a package and its dist-info with a RECORD) zipped as the wheel ``out``."""
    with zipfile.ZipFile(out, "w") as z:
        for path in sorted(p for p in tree.rglob("*") if p.is_file()):
            z.write(path, path.relative_to(tree).as_posix())
    return out


# ------------------------------------------------------------------------------------ built for torch


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("builtfor_build", FIXTURES / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("builtfor_build", module)
    spec.loader.exec_module(module)
    return module


@needs_torch
@needs_gxx
@pytest.mark.slow
@pytest.mark.remedy("ENV-BUILT-FOR-VARIANT")
def test_a_cuda_build_beside_a_cpu_torch_is_replaced_by_its_cpu_build_from_the_label_index(
    tmp_path: Path,
) -> None:
    """``visionops 0.3.0+cu130`` (its ``_C`` needs ``libc10_cuda.so``) beside torch 2.13.0+cpu: the remedy
    installs ``visionops==0.3.0+cpu`` from the index of torch's label, never the same CUDA build again. The
    CPU build is compiled here from the same fixture and served by the local mirror of that index."""
    version, cuda = installed_torch()
    if cuda is not None or "+cpu" not in version:
        pytest.skip(f"the test environment's torch is {version}, not a CPU build: nothing mismatches")
    build = _builder()
    python, site = clone(tmp_path)
    stubs = build.build_stubs(tmp_path / "stubs")
    build.build(build.CUDA, site, stubs)
    assert "libc10_cuda.so" in run(python, "-c", "import visionops", ok=False).stderr

    cpu = dataclasses.replace(build.CUDA, version="0.3.0+cpu", defines=(), stubs=(), why="its CPU build")
    tree = tmp_path / "cpu-build"
    tree.mkdir()
    build.build(cpu, tree, stubs)
    wheel = pack(tree, tmp_path / "visionops-0.3.0+cpu-cp311-cp311-linux_x86_64.whl")

    before = doctor(python)
    (finding,) = of(before, "ENV-BUILT-FOR-VARIANT")
    assert finding.caused_by is None
    assert finding.actions == (
        Install(pins=(("visionops", "0.3.0+cpu"),), index_url=pytorch_index("cpu"), no_deps=True),
    )
    assert "--force-reinstall" not in finding.remedy and "operating system" not in finding.remedy
    served = served_here(before.findings, "cpu", mirror(tmp_path / "simple", wheel))
    run_script(dataclasses.replace(before, findings=served), tmp_path, env=only_index())

    after = doctor(python)
    assert not of(after, "ENV-BUILT-FOR-VARIANT")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert run(python, "-c", "import visionops; print(visionops._C.devices())").stdout.strip() == "0"
    assert [p.name for p in site.glob("visionops-*.dist-info")] == ["visionops-0.3.0+cpu.dist-info"]


ABI_SETUP = """\
import importlib.util
from pathlib import Path

from setuptools import Extension, setup

# torch's libraries, found without importing torch: the build links libc10 as torch.utils.cpp_extension does.
torch_lib = Path(next(iter(importlib.util.find_spec("torch").submodule_search_locations))) / "lib"
setup(
    name="abiops",
    version="0.1.0",
    packages=["abiops"],
    ext_modules=[
        Extension(
            "abiops._C",
            ["ext.cpp"],
            language="c++",
            library_dirs=[str(torch_lib)],
            libraries=["c10"],
            extra_link_args=["-Wl,-rpath,$ORIGIN/../torch/lib"],
        )
    ],
)
"""


@needs_torch
@needs_gxx
@pytest.mark.slow
@pytest.mark.remedy("ENV-BUILT-FOR-ABI")
def test_a_local_build_with_the_old_abi_is_built_again_with_torchs_flag(tmp_path: Path) -> None:
    """A project built from its checkout with ``CPPFLAGS=-D_GLIBCXX_USE_CXX11_ABI=0`` (a toolchain whose
    default is the old ABI): its import fails with ``undefined symbol ...RKSs``. No index serves another
    build of it: the remedy deletes the checkout's ``build`` folder (setuptools would reuse the objects
    compiled with the old flag) and builds it again from that folder with torch's flag."""
    python, _ = clone(tmp_path)
    src = tmp_path / "abiops"
    (src / "abiops").mkdir(parents=True)
    shutil.copy(FIXTURES / "ext.cpp", src / "ext.cpp")
    (src / "abiops" / "__init__.py").write_text("import torch  # noqa: F401\n\nfrom . import _C\n")
    (src / "setup.py").write_text(ABI_SETUP, encoding="utf-8")
    old = {**os.environ, "CPPFLAGS": "-D_GLIBCXX_USE_CXX11_ABI=0"}
    pip(python, "install", "-q", "--no-deps", "--no-build-isolation", src, env=old)
    failed = run(python, "-c", "import abiops", ok=False).stderr
    assert "undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs" in failed
    assert (src / "build").is_dir()

    before = doctor(python)
    (finding,) = of(before, "ENV-BUILT-FOR-ABI")
    assert finding.caused_by is None
    assert finding.actions == (
        RemoveFiles(paths=(str(src / "build"),)),
        Rebuild(name="abiops", source=str(src), variables=(("CPPFLAGS", "-D_GLIBCXX_USE_CXX11_ABI=1"),)),
    )
    run_script(before, tmp_path, env=only_index())  # its source folder: no index at all

    after = doctor(python)
    assert not of(after, "ENV-BUILT-FOR-ABI")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert run(python, "-c", "import abiops; print(abiops._C.devices())").stdout.strip() == "0"


# ---------------------------------------------------------------------------------------- interpreter


def retagged(wheel: Path, folder: Path, python_tag: str, *, wheel_tag: str | None = None) -> Path:
    """``wheel`` (a cp311 wheel) with its extension modules' suffix and its tags renamed to ``python_tag``
    (``cp312``): what a wheel built for that interpreter holds. ``wheel_tag``: the tag its WHEEL file and
    name say instead (a wheel built wrong: the right tag over another interpreter's files)."""
    tree = folder / "tree"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tree)
    for ext in list(tree.rglob("*.cpython-311-*.so")):
        ext.rename(ext.with_name(ext.name.replace("cpython-311", f"cpython-{python_tag[2:]}")))
    tag = wheel_tag or python_tag
    (info,) = tree.glob("*.dist-info")
    meta = info / "WHEEL"
    meta.write_text(meta.read_text().replace("cp311-cp311", f"{tag}-{tag}"), encoding="utf-8")
    record(tree, [p for p in tree.rglob("*") if p.is_file() and p.name != "RECORD"], info)
    return pack(tree, folder / wheel.name.replace("cp311-cp311", f"{tag}-{tag}"))


def cffi_wheel() -> Path:
    """cffi 2.1.1 for this interpreter, from the registry (pip's configured index)."""
    from wheels import wheel

    return wheel("cffi==2.1.1")


@linux_311
@pytest.mark.slow
@pytest.mark.remedy("ENV-WHEEL-TAG")
def test_a_cp312_wheel_copied_into_a_311_venv_is_reinstalled_for_311(tmp_path: Path) -> None:
    """A builder stage's Python 3.12 cffi copied into a 3.11 venv (files and dist-info, no direct_url.json):
    ``import _cffi_backend`` fails. The remedy reinstalls cffi 2.1.1 from the index, which serves the cp311
    wheel to this interpreter; the cp312 files go with the RECORD that lists them."""
    python = make_venv(tmp_path / "venv")
    site = with_pip(python)
    with zipfile.ZipFile(retagged(cffi_wheel(), tmp_path / "cp312", "cp312")) as z:
        z.extractall(site)
    failed = run(python, "-c", "import _cffi_backend", ok=False).stderr
    assert "No module named '_cffi_backend'" in failed

    before = doctor(python)
    (tag,) = of(before, "ENV-WHEEL-TAG")
    assert tag.caused_by is None and tag.severity == "error"
    assert tag.actions == (Install(pins=(("cffi", "2.1.1"),), force=True, no_deps=True),)
    assert [f.caused_by for f in of(before, "ENV-EXT-SUFFIX")] == [tag.key]
    run_script(before, tmp_path, env=default_index())

    after = doctor(python)
    assert not of(after, "ENV-WHEEL-TAG") and not of(after, "ENV-EXT-SUFFIX")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert (
        run(python, "-c", "import _cffi_backend; print(_cffi_backend.__version__)").stdout.strip() == "2.1.1"
    )
    assert not list(site.glob("_cffi_backend.cpython-312-*"))


@linux_311
@pytest.mark.slow
@pytest.mark.remedy("ENV-EXT-SUFFIX")
def test_a_wheel_holding_another_pythons_extension_is_reinstalled_from_the_index(tmp_path: Path) -> None:
    """A wheel tagged cp311 whose extension module is 3.12's (built wrong), installed by pip from a folder
    of wheels: its tag is right, its suffix is not. The remedy reinstalls cffi from the index, not from that
    wheel again."""
    python = make_venv(tmp_path / "venv")
    site = with_pip(python)
    bad = retagged(cffi_wheel(), tmp_path / "bad", "cp312", wheel_tag="cp311")
    pip(python, "install", "-q", "--no-deps", "--no-index", "--find-links", bad.parent, "cffi==2.1.1")
    assert list(site.glob("_cffi_backend.cpython-312-*"))
    run(python, "-c", "import _cffi_backend", ok=False)

    before = doctor(python)
    assert not of(before, "ENV-WHEEL-TAG")
    (suffix,) = of(before, "ENV-EXT-SUFFIX")
    assert suffix.caused_by is None
    assert suffix.actions == (Install(pins=(("cffi", "2.1.1"),), force=True, no_deps=True),)
    run_script(before, tmp_path, env=default_index())

    after = doctor(python)
    assert not of(after, "ENV-EXT-SUFFIX")
    assert not [f.key for f in after.findings if f.severity == "error"]
    run(python, "-c", "import _cffi_backend")
    assert not list(site.glob("_cffi_backend.cpython-312-*"))


def demo_wheel(folder: Path, name: str = "envdemo", version: str = "1.0") -> Path:
    """A pure-Python wheel that declares a console script."""
    tree = folder / f"{name}-{version}"
    info = tree / f"{name}-{version}.dist-info"
    (tree / name).mkdir(parents=True)
    info.mkdir()
    (tree / name / "__init__.py").write_text("def main():\n    print('ok')\n")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "WHEEL").write_text(
        "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    (info / "entry_points.txt").write_text(f"[console_scripts]\n{name} = {name}:main\n")
    record(tree, [p for p in tree.rglob("*") if p.is_file()], info)
    return pack(tree, folder / f"{name}-{version}-py3-none-any.whl")


@pytest.mark.slow
@pytest.mark.remedy("ENV-SCRIPT-BROKEN")
def test_the_scripts_of_a_moved_venv_are_written_again_by_a_reinstall(tmp_path: Path) -> None:
    """A venv built at one path and moved to another: its console script's #! line names the old python
    ('bad interpreter'). pip writes a script's #! line for the python that runs it, so a reinstall of the
    owning distribution, from the wheel its direct_url.json recorded, rewrites it for the venv's new path."""
    built = make_venv(tmp_path / "build" / "venv")
    wheel = demo_wheel(tmp_path / "dist")
    pip(built, "install", "-q", "--no-deps", "--no-index", wheel)
    shutil.move(tmp_path / "build" / "venv", tmp_path / "app")
    python = tmp_path / "app" / "bin" / "python"
    with_pip(python)  # after the move: pip's own scripts are written for where the venv is now
    script = python.parent / "envdemo"
    assert script.read_text().startswith(f"#!{built}\n")
    with pytest.raises(FileNotFoundError):  # bash: "bad interpreter: No such file or directory"
        subprocess.run([str(script)], capture_output=True, check=False)

    before = doctor(python)
    (finding,) = of(before, "ENV-SCRIPT-BROKEN")
    assert (finding.subject, finding.caused_by) == (f"#!{built}", None)
    assert finding.actions == (
        Install(pins=(("envdemo", "1.0"),), wheel_url=wheel.resolve().as_uri(), force=True, no_deps=True),
    )
    run_script(before, tmp_path, env=only_index())  # the wheel file it names: no index at all

    after = doctor(python)
    assert not of(after, "ENV-SCRIPT-BROKEN")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert script.read_text().startswith(f"#!{python}\n")
    assert subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout == "ok\n"


# ------------------------------------------------------------------------------------------------ torch


def torch_wheel() -> Path:
    version, cuda = installed_torch()
    found = sorted(TORCH_WHEELS.glob(f"torch-{version}-cp311-*.whl")) if TORCH_WHEELS.is_dir() else []
    if cuda is not None or "+cpu" not in version or not found:
        pytest.skip(f"no wheel of the test environment's torch ({version}) in {TORCH_WHEELS}")
    return found[0]


def is_torch(path: Path) -> bool:
    return path.name.split("-", 1)[0] in ("torch", "functorch", "torchgen")


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> Manifest:
    """A snapshot of a whole clone of the test environment (torch 2.13.0+cpu): the base of the diffs."""
    python, _ = clone(tmp_path_factory.mktemp("whole"))
    return snapshot(python)


@needs_torch
@linux_311
@pytest.mark.slow
@pytest.mark.remedy("ENV-TORCH-MISSING")
def test_torch_missing_on_the_target_is_installed_from_the_index_of_its_label(
    tmp_path: Path, reference: Manifest
) -> None:
    """The base has torch 2.13.0+cpu, the target none (a requirements file that left it out): the remedy
    installs the base's build, local label and all, from the index of that label."""
    wheel = torch_wheel()
    python, _ = clone(tmp_path, drop=is_torch)
    run(python, "-c", "import torch", ok=False)

    before = api.diff(reference, python=str(python), policy=Policy(disabled=True), timeout=300)
    (finding,) = of(before, "ENV-TORCH-MISSING")
    assert finding.caused_by is None
    version = installed_torch()[0]
    assert finding.actions == (Install(pins=(("torch", version),), index_url=pytorch_index("cpu")),)
    assert "$TORCH_INDEX_URL" not in finding.remedy
    served = served_here([finding], "cpu", mirror(tmp_path / "simple", wheel))
    run_actions(served, str(python), tmp_path, env=only_index())

    after = api.diff(reference, python=str(python), policy=Policy(disabled=True), timeout=300)
    assert not of(after, "ENV-TORCH-MISSING")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert run(python, "-c", "import torch; print(torch.__version__)").stdout.strip() == version


@needs_torch
@linux_311
@pytest.mark.slow
@pytest.mark.remedy("ENV-TORCH-VERSION", "ENV-TORCH-VARIANT")
def test_another_torch_on_the_target_is_replaced_by_the_bases_build(
    tmp_path: Path, reference: Manifest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch 2.14.1 from the default index (a CUDA 13 build, its nvidia-* wheels not installed) where the
    base runs 2.13.0+cpu: another release and another variant, one remedy (the base's build from its
    label's index). Only these two findings' actions run: the report also has roots for 2.14.1's own
    requirements (nvidia-*, triton), which that remedy makes moot."""
    wheel = torch_wheel()
    other = sorted(Path("/opt/pypi-more/files").glob("torch-2.14.1-cp311-*.whl"))
    if not other:
        pytest.skip("no torch 2.14.1 wheel in this machine's wheel store")
    # The sha256 of each of 2.14.1's 1.2 GB of native files against its RECORD is another rule's question
    # (ENV-NATIVE-TAMPERED), and the most of this test's time: not asked here.
    monkeypatch.setenv("ENVCHECK_INTEGRITY", "0")
    python, _ = clone(tmp_path)
    pip(python, "install", "-q", "--no-deps", "--no-index", other[0])
    run(python, "-c", "import torch", ok=False)

    before = api.diff(reference, python=str(python), policy=Policy(disabled=True), timeout=300)
    version = installed_torch()[0]
    action = Install(pins=(("torch", version),), index_url=pytorch_index("cpu"))
    for rule in ("ENV-TORCH-VERSION", "ENV-TORCH-VARIANT"):
        (finding,) = of(before, rule)
        assert (finding.caused_by, finding.actions) == (None, (action,)), finding
    mine = [f for f in before.findings if f.rule in ("ENV-TORCH-VERSION", "ENV-TORCH-VARIANT")]
    run_actions(
        served_here(mine, "cpu", mirror(tmp_path / "simple", wheel)), str(python), tmp_path, env=only_index()
    )

    after = api.diff(reference, python=str(python), policy=Policy(disabled=True), timeout=300)
    assert not of(after, "ENV-TORCH-VERSION") and not of(after, "ENV-TORCH-VARIANT")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert run(python, "-c", "import torch; print(torch.__version__)").stdout.strip() == version


@needs_torch
@linux_311
@pytest.mark.slow
@pytest.mark.remedy("ENV-TORCH-NO-METADATA")
def test_torch_without_its_dist_info_is_reinstalled_over_its_files(tmp_path: Path) -> None:
    """An uninstall interrupted after the dist-info went: torch imports, pip does not see it. The remedy
    reinstalls the same build (force, no deps) from its label's index, which writes the metadata again.
    A report folds the finding under ENV-FILE-ORPHAN of the torch tree (files no RECORD lists), so its own
    actions are taken from the rules' findings before the report links them."""
    wheel = torch_wheel()
    python, site = clone(
        tmp_path, drop=lambda p: p.name.startswith("torch-") and p.name.endswith(".dist-info")
    )
    run(python, "-c", "import torch")

    from envcheck.diff.engine import doctor as rules_of

    (finding,) = [f for f in rules_of(snapshot(python)) if f.rule == "ENV-TORCH-NO-METADATA"]
    version = installed_torch()[0]
    assert finding.actions == (
        Install(pins=(("torch", version),), index_url=pytorch_index("cpu"), force=True, no_deps=True),
    )
    served = served_here([finding], "cpu", mirror(tmp_path / "simple", wheel))
    run_actions(served, str(python), tmp_path, env=only_index())

    after = doctor(python)
    assert not of(after, "ENV-TORCH-NO-METADATA")
    assert not [f.key for f in after.findings if f.severity == "error"]
    assert [p.name for p in site.glob("torch-*.dist-info")] == [f"torch-{version}.dist-info"]
    assert run(python, "-m", "pip", "show", "torch").stdout.splitlines()[1] == f"Version: {version}"


# ------------------------------------------------------------------------------------- what stays manual


def test_a_gpu_beside_a_cpu_torch_names_the_index_of_a_cuda_build_the_driver_runs() -> None:
    """ENV-GPU-UNUSED's remedy is a manual step (no machine of these tests has a GPU to prove a command on),
    and it names the build and PyTorch's index for it: no variable for the user to fill in."""
    from diffdata import manifest
    from test_diff_single_rules import gpu

    from envcheck.diff.engine import doctor as raw_doctor

    def found(driver: int) -> Finding:
        edited = manifest("dev-cpu", gpu("8.9", cuda_driver=driver))
        (f,) = [f for f in raw_doctor(edited) if f.rule == "ENV-GPU-UNUSED"]
        return f

    for driver, label in ((13010, "cu130"), (12080, "cu128"), (12060, "cu126")):
        f = found(driver)
        assert [type(a) for a in f.actions] == [Manual]
        assert f"'torch==2.13.0+{label}' --index-url 'https://download.pytorch.org/whl/{label}'" in f.remedy
        assert "TORCH_INDEX_URL" not in f.remedy
    assert found(11080).remedy.startswith("Upgrade the NVIDIA driver: it supports CUDA 11.8")
