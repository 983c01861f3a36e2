"""``envcheck.image.static``: the facts probe's answer for an image, read from its files.

Each image root is laid out by hand in ``tmp_path`` as the real images lay it out, from real files where
they decide something: a venv made by ``python -m venv`` with real wheels installed by pip (then rewritten
to the image's paths, as it would be had it been built in the image), the real ``site.py``,
``_sysconfigdata`` and ``patchlevel.h`` of a python.org build and of Debian's python, this machine's real
``libc.so.6`` and ``/etc/os-release``. The interpreter itself is a small file: nothing of the image runs.
The answer must pass ``envcheck.collect.facts.static_facts`` and name what ``pip list`` names.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from venvs import make_venv
from wheels import pip_install, wheel

from envcheck.collect.facts import static_facts
from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.image.static import find_interpreter, image_facts

PYENV_LIB = Path(sys.base_prefix) / "lib" / "python3.11"  # a python.org-style build (pyenv)
PYENV_INCLUDE = Path(sys.base_prefix) / "include" / "python3.11"
DEBIAN_LIB = Path("/usr/lib/python3.11")
HOST_LIBC = Path("/lib/x86_64-linux-gnu/libc.so.6")
PIP_TARGET = (sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target")
WHEELS = ("six==1.17.0", "idna==3.20", "tqdm==4.70.1", "numpy==2.2.6")

needs_python_org = pytest.mark.skipif(
    not (PYENV_LIB / "site.py").is_file() or not (PYENV_INCLUDE / "patchlevel.h").is_file(),
    reason="the test interpreter is not a python.org-style 3.11 build with its headers",
)
needs_debian = pytest.mark.skipif(
    not (DEBIAN_LIB / "site.py").is_file() or not HOST_LIBC.is_file(),
    reason="no Debian python3.11 and glibc on this machine to copy from",
)


@dataclass(frozen=True)
class Config:
    """An image's config, as ``envcheck.image.Image`` holds it."""

    architecture: str = "amd64"
    variant: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    entrypoint: Sequence[str] | None = None
    cmd: Sequence[str] | None = None
    working_dir: str | None = None
    user: str | None = None


def _put(root: Path, path: str, text: str = "", mode: int = 0o644) -> Path:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")
    target.chmod(mode)
    return target


def _link(root: Path, path: str, target: str) -> None:
    where = root / path.lstrip("/")
    where.parent.mkdir(parents=True, exist_ok=True)
    if where.is_symlink() or where.exists():
        where.unlink()
    where.symlink_to(target)


def _copy(src: Path, root: Path, path: str) -> None:
    target = root / path.lstrip("/")
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(src, target)
    except OSError:
        shutil.copy2(src, target)


# What a Debian base's libc6, libgcc-s1 and zlib1g put in /usr/lib/x86_64-linux-gnu, copied from this
# machine: the libraries real wheels' extension modules need, and ld.so, which libc.so.6 itself needs.
BASE_LIBRARIES = (
    "libc.so.6",
    "ld-linux-x86-64.so.2",
    "libm.so.6",
    "libpthread.so.0",
    "libdl.so.2",
    "librt.so.1",
    "libgcc_s.so.1",
    "libz.so.1",
)


def _libc_and_os(root: Path) -> None:
    for name in BASE_LIBRARIES:
        _copy((HOST_LIBC.parent / name).resolve(), root, f"/usr/lib/x86_64-linux-gnu/{name}")
    _put(root, "/etc/os-release", Path("/etc/os-release").read_text(encoding="utf-8"))
    _put(root, "/etc/passwd", "root:x:0:0:root:/root:/bin/bash\napp:x:1000:1000::/home/app:/bin/sh\n")


def python_org_base(root: Path) -> None:
    """``/usr/local`` as the ``python:3.11`` images have it, merged /usr, glibc from this machine."""
    _link(root, "/lib", "usr/lib")
    _link(root, "/bin", "usr/bin")
    _libc_and_os(root)
    _put(root, "/usr/bin/sh", "not a shell\n", 0o755)
    _put(root, "/usr/local/bin/python3.11", "not an ELF: nothing of the image runs\n", 0o755)
    _link(root, "/usr/local/bin/python3", "python3.11")
    _link(root, "/usr/local/bin/python", "python3")
    lib = "/usr/local/lib/python3.11"
    _copy(PYENV_LIB / "os.py", root, f"{lib}/os.py")
    _copy(PYENV_LIB / "site.py", root, f"{lib}/site.py")
    (root / lib.lstrip("/") / "lib-dynload").mkdir(parents=True)
    (root / lib.lstrip("/") / "site-packages").mkdir(parents=True)
    sysconfig = next(PYENV_LIB.glob("_sysconfigdata_*linux*.py")).read_text(encoding="utf-8")
    _put(
        root,
        f"{lib}/_sysconfigdata__linux_x86_64-linux-gnu.py",
        sysconfig.replace(sys.base_prefix, "/usr/local"),
    )
    _copy(PYENV_INCLUDE / "patchlevel.h", root, "/usr/local/include/python3.11/patchlevel.h")
    _put(root, "/usr/local/lib/libpython3.11.so.1.0", "not a library\n")
    _link(root, "/usr/local/lib/libpython3.11.so", "libpython3.11.so.1.0")


def image_venv(root: Path, wheels: Sequence[str]) -> Path:
    """A real venv at ``<root>/app/.venv`` with ``wheels`` installed by pip, rewritten as ``python -m venv
    /app/.venv`` inside a python:3.11 image leaves it. Returns its host site-packages."""
    venv = root / "app" / ".venv"
    python = make_venv(venv)
    if wheels:
        pip_install(python, *(wheel(w) for w in wheels))
    site = venv / "lib" / "python3.11" / "site-packages"
    _link(root, "/app/.venv/bin/python", "/usr/local/bin/python3")
    _link(root, "/app/.venv/bin/python3", "python")
    _link(root, "/app/.venv/bin/python3.11", "python")
    (venv / "pyvenv.cfg").write_text(
        "home = /usr/local/bin\ninclude-system-site-packages = false\nversion = 3.11.7\n"
        "executable = /usr/local/bin/python3.11\ncommand = /usr/local/bin/python3 -m venv /app/.venv\n",
        encoding="utf-8",
    )
    for script in (venv / "bin").iterdir():
        if script.is_file() and not script.is_symlink():
            data = script.read_bytes()
            script.write_bytes(data.replace(os.fsencode(str(venv)), b"/app/.venv"))
    return site


def pip_list(site: Path) -> dict[str, str]:
    out = subprocess.run(
        [sys.executable, "-m", "pip", "list", "--path", str(site), "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
    )
    return {d["name"].lower(): d["version"] for d in json.loads(out.stdout)}


def no_host_path(facts: Mapping[str, Any], root: Path) -> None:
    text = json.dumps(facts)
    assert str(root) not in text, "a host path of the unpacked image reached the facts"


@pytest.fixture(scope="module")
def python_org(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A python:3.11-style image with an app venv holding real wheels: (root, host site-packages)."""
    if not (PYENV_LIB / "site.py").is_file() or not HOST_LIBC.is_file():
        pytest.skip("needs a python.org-style 3.11 and glibc on this machine")
    root = tmp_path_factory.mktemp("python-org")
    python_org_base(root)
    site = image_venv(root, WHEELS)
    _put(root, "/app/app.py", "print('hello')\n")
    return root, site


@pytest.mark.slow
@needs_python_org
def test_a_python_org_image_with_a_venv_is_read_as_its_interpreter_would_start(
    python_org: tuple[Path, Path],
) -> None:
    root, site = python_org
    config = Config(
        env={"PATH": "/app/.venv/bin:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "UNLISTED": "x"},
        cmd=["python", "/app/app.py"],
        working_dir="/app",
    )
    facts = image_facts(root, config, image_python=None, deadline=Deadline.after(60))
    found = static_facts(facts)
    assert facts["done"] is True and facts["python_version"] == [3, 11, 7]
    python = found.python
    assert python.executable == "/app/.venv/bin/python"
    assert python.environment == "venv"
    assert (python.prefix, python.base_prefix) == ("/app/.venv", "/usr/local")
    assert python.version == "3.11.7"
    assert python.sys_path == [
        "/usr/local/lib/python311.zip",
        "/usr/local/lib/python3.11",
        "/usr/local/lib/python3.11/lib-dynload",
        "/app/.venv/lib/python3.11/site-packages",
    ]
    assert [e.origin for e in python.path_origins or []] == ["stdlib", "stdlib", "stdlib", "site"]
    assert not python.user_site_enabled
    # The real packages, as pip lists the same files.
    listed = pip_list(site)
    assert {d.name.lower(): d.version for d in found.packages} == listed
    assert set(listed) == {"six", "idna", "tqdm", "numpy"}
    numpy = next(d for d in found.packages if d.name == "numpy")
    assert numpy.location == "/app/.venv/lib/python3.11/site-packages"
    assert numpy.metadata_dir == "/app/.venv/lib/python3.11/site-packages/numpy-2.2.6.dist-info"
    assert numpy.native_files and all(f.sha256 for f in numpy.native_files)
    assert numpy.installer == "pip"
    # The image's tags: CPython 3.11 on this libc (glibc 2.36 here), numpy's manylinux wheel fits.
    assert found.platform.libc.name == "glibc" and found.platform.libc.version
    glibc_minor = found.platform.libc.version.split(".")[1]
    assert python.wheel_tags[0] == f"cp311-cp311-manylinux_2_{glibc_minor}_x86_64"
    assert python.extension_suffixes == [".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so"]
    assert python.wheel_support is not None
    assert (python.wheel_support.checked, python.wheel_support.count) == (4, 0)
    assert python.shared_library == "/usr/local/lib/libpython3.11.so"
    assert python.own_library == "/usr/local/lib/libpython3.11.so.1.0"
    assert python.build_version == "3.11.7" and python.loaded_library is None
    assert python.venv_config is not None
    assert python.venv_config.home_exists and python.venv_config.home_python == "/usr/local/bin/python3.11"
    assert python.scripts is not None and python.scripts.folder == "/app/.venv/bin"
    assert python.scripts.checked >= 1 and python.scripts.count == 0, python.scripts.broken
    # The platform is the image's, and nothing of this machine's CPU or kernel.
    assert found.platform.machine == "x86_64" and found.platform.container == ["image"]
    assert found.platform.cpu.model is None and found.platform.kernel == ""
    assert found.platform.distro == _pretty_name()
    assert found.platform.path_aliases == {"/bin": "/usr/bin", "/lib": "/usr/lib"}
    assert found.env == {"LANG": "C.UTF-8", "PATH": "/app/.venv/bin:/usr/local/bin:/usr/bin:/bin"}
    assert found.install is not None and not found.install.orphans and not found.install.missing
    assert found.torch.trees == [] and found.torch.static is None
    no_host_path(facts, root)


def _pretty_name() -> str | None:
    for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines():
        if line.startswith("PRETTY_NAME="):
            return line.split("=", 1)[1].strip('"')
    return None


@pytest.mark.slow
@needs_python_org
def test_a_console_script_entrypoint_names_the_venv_python_of_its_interpreter_line(
    python_org: tuple[Path, Path],
) -> None:
    root, _ = python_org
    script = (root / "app/.venv/bin/tqdm").read_text(encoding="utf-8")
    assert script.startswith("#!/app/.venv/bin/python")  # as pip wrote it, rewritten to the image
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
    assert (
        find_interpreter(root, env, ["/app/.venv/bin/tqdm", "--help"], None, None) == "/app/.venv/bin/python"
    )
    # Through a wrapper and a shell, by name on PATH.
    env = {"PATH": "/app/.venv/bin:/usr/local/bin"}
    assert find_interpreter(root, env, ["tini", "--", "tqdm"], None, None) == "/app/.venv/bin/python"
    assert find_interpreter(root, env, ["/bin/sh", "-c", "exec tqdm"], None, None) == "/app/.venv/bin/python"
    assert (
        find_interpreter(root, env, ["/bin/sh", "-c", "python3 -m app"], None, None)
        == "/app/.venv/bin/python3"
    )
    # Entrypoint decides; Cmd is its arguments.
    assert find_interpreter(root, {}, None, ["python3", "app.py"], None) == "/usr/local/bin/python3"


@pytest.mark.slow
@needs_python_org
def test_image_python_names_the_base_interpreter_instead(python_org: tuple[Path, Path]) -> None:
    root, _ = python_org
    config = Config(env={"PATH": "/app/.venv/bin:/usr/local/bin"}, cmd=["python"])
    facts = image_facts(root, config, image_python="/usr/local/bin/python3.11", deadline=Deadline.after(60))
    found = static_facts(facts)
    assert found.python.executable == "/usr/local/bin/python3.11"
    assert found.python.environment == "system" and found.python.venv_config is None
    assert found.python.sys_path[-1] == "/usr/local/lib/python3.11/site-packages"
    assert found.packages == []  # the app's packages are in the venv, not the base
    assert found.python.user_site == "/root/.local/lib/python3.11/site-packages"  # root's, from /etc/passwd
    assert found.python.user_site_enabled
    # A name is looked up on the config's PATH; one the image lacks is a one-line error.
    assert (
        find_interpreter(root, {"PATH": "/usr/local/bin"}, None, None, "python3") == "/usr/local/bin/python3"
    )
    with pytest.raises(UsageError, match="--image-python /opt/python: no such interpreter"):
        find_interpreter(root, {}, None, None, "/opt/python")


@pytest.mark.slow
@needs_python_org
def test_a_venv_whose_home_is_gone_still_yields_facts_that_say_so(tmp_path: Path) -> None:
    # A multi-stage build that copied the venv into a stage without the python it was made with.
    _libc_and_os(tmp_path)
    site = image_venv(tmp_path, ["six==1.17.0"])
    config = Config(
        env={"PATH": "/app/.venv/bin:/usr/local/bin:/usr/bin"}, entrypoint=["/app/.venv/bin/python"]
    )
    facts = image_facts(tmp_path, config, image_python=None, deadline=Deadline.after(60))
    found = static_facts(facts)
    python = found.python
    assert python.executable == "/app/.venv/bin/python" and python.environment == "venv"
    assert python.version == "3.11.7"  # pyvenv.cfg: the only witness left
    assert facts["image"]["version_source"].startswith("/app/.venv/pyvenv.cfg")
    assert python.venv_config is not None
    assert python.venv_config.home == "/usr/local/bin"
    assert not python.venv_config.home_exists and python.venv_config.home_python is None
    assert {d.name.lower(): d.version for d in found.packages} == pip_list(site)
    assert any("no standard library" in note for note in facts["image"]["notes"])
    no_host_path(facts, tmp_path)


@pytest.mark.slow
@needs_python_org
def test_pythonpath_comes_first_and_secrets_of_the_config_never_reach_the_facts(
    python_org: tuple[Path, Path],
) -> None:
    root, _ = python_org
    config = Config(
        env={
            "PATH": "/app/.venv/bin:/usr/local/bin",
            "PYTHONPATH": "/app/src:lib",
            "PIP_INDEX_URL": "https://ci:hunter2-pass@index.example.invalid/simple",
            "TORCH_ACCESS_KEY": "AKIAIOSFODNN7EXAMPLE",
            "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz0123",
            "TORCH_HOME": "/models",
        },
        entrypoint=["python"],
    )
    facts = image_facts(root, config, image_python=None, deadline=Deadline.after(60))
    found = static_facts(facts)
    assert found.python.sys_path[:2] == ["/app/src", "/lib"]
    assert [e.origin for e in (found.python.path_origins or [])[:2]] == ["pythonpath", "pythonpath"]
    assert found.env["TORCH_HOME"] == "/models"
    assert found.env["TORCH_ACCESS_KEY"] == "<redacted>"
    assert (
        "hunter2" not in found.env["PIP_INDEX_URL"] and "index.example.invalid" in found.env["PIP_INDEX_URL"]
    )
    assert "HF_TOKEN" not in found.env  # not on the probe's allowlist at all
    text = json.dumps(facts)
    assert "hunter2" not in text and "AKIAIOSFODNN7EXAMPLE" not in text and "hf_abcdef" not in text


@pytest.mark.slow
@needs_debian
def test_debians_system_python_reads_dist_packages_pth_lines_and_dpkg(tmp_path: Path) -> None:
    root = tmp_path / "root"
    _link(root, "/lib", "usr/lib")
    _link(root, "/bin", "usr/bin")
    _libc_and_os(root)
    _put(root, "/usr/bin/python3.11", "not an ELF\n", 0o755)
    _link(root, "/usr/bin/python3", "python3.11")
    for name in ("os.py", "site.py", "_sysconfigdata__linux_x86_64-linux-gnu.py"):
        _copy(DEBIAN_LIB / name, root, f"/usr/lib/python3.11/{name}")
    (root / "usr/lib/python3.11/lib-dynload").mkdir()
    system = root / "usr/lib/python3/dist-packages"
    local = root / "usr/local/lib/python3.11/dist-packages"
    for target, requirement in ((system, "six==1.17.0"), (local, "idna==3.20")):
        subprocess.run(
            [*PIP_TARGET, str(target), str(wheel(requirement))],
            check=True,
            capture_output=True,
        )
    _put(root, "/opt/extra/extra_module.py", "")
    _put(
        root, "/usr/lib/python3/dist-packages/extra.pth", "/opt/extra\n/opt/missing\nimport os; os.environ\n"
    )
    _put(root, "/etc/python3.11/sitecustomize.py", "import torch\ntorch.set_flush_denormal(True)\n")
    _link(root, "/usr/lib/python3.11/sitecustomize.py", "/etc/python3.11/sitecustomize.py")
    _put(
        root,
        "/var/lib/dpkg/status",
        "Package: libc6\nStatus: install ok installed\nVersion: 2.36-9\n\n"
        "Package: python3.11-minimal\nStatus: install ok installed\nPriority: optional\n"
        "Version: 3.11.2-6+deb12u6\n\n",
    )
    config = Config(
        env={"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, cmd=["python3"]
    )
    facts = image_facts(root, config, image_python=None, deadline=Deadline.after(60))
    found = static_facts(facts)
    python = found.python
    assert python.executable == "/usr/bin/python3" and python.environment == "system"
    assert python.version == "3.11.2" and facts["python_version"] == [3, 11, 2]
    assert "dpkg" in facts["image"]["version_source"]
    assert python.sys_path == [
        "/usr/lib/python311.zip",
        "/usr/lib/python3.11",
        "/usr/lib/python3.11/lib-dynload",
        "/usr/local/lib/python3.11/dist-packages",
        "/usr/lib/python3/dist-packages",
        "/opt/extra",
    ]
    origins = python.path_origins or []
    assert (origins[-1].origin, origins[-1].pth) == ("pth", "/usr/lib/python3/dist-packages/extra.pth")
    assert facts["image"]["pth_imports"][0]["line"] == "import os; os.environ"
    names = {d.name.lower(): d.location for d in found.packages}
    assert names == {
        "six": "/usr/lib/python3/dist-packages",
        "idna": "/usr/local/lib/python3.11/dist-packages",
    }
    assert python.scripts is not None and python.scripts.folder == "/usr/local/bin"
    assert python.startup is not None
    (custom,) = python.startup.customize
    assert custom.path == "/usr/lib/python3.11/sitecustomize.py"
    assert custom.mentions == ["torch", "set_flush_denormal"]
    no_host_path(facts, root)


def test_no_python_at_all_is_one_line_that_names_image_python(tmp_path: Path) -> None:
    _put(tmp_path, "/bin/sh", "not a shell\n", 0o755)
    _put(tmp_path, "/usr/local/bin/gunicorn", "#!/usr/local/bin/python3\n", 0o755)  # its python is absent
    config = Config(entrypoint=["/usr/local/bin/gunicorn"], env={"PATH": "/usr/local/bin:/bin"})
    with pytest.raises(UsageError) as caught:
        image_facts(tmp_path, config, image_python=None, deadline=Deadline.after(10))
    assert "\n" not in str(caught.value) and "no Python interpreter found" in str(caught.value)
    assert caught.value.tip is not None and "--image-python" in caught.value.tip


def test_link_loops_on_path_and_in_the_layout_end_without_a_hang(tmp_path: Path) -> None:
    _link(tmp_path, "/usr/local/sbin", "sbin")  # a folder that is a link to itself
    _link(tmp_path, "/usr/local/bin/python3", "python3")  # a file that is a link to itself
    _link(tmp_path, "/usr/sbin", "/usr/sbin2")
    _link(tmp_path, "/usr/sbin2", "../usr/sbin")  # two links in a ring
    _link(tmp_path, "/sbin", "/../../../../sbin")  # `..` above the root stays at the root
    _put(tmp_path, "/usr/bin/python3.11", "not an ELF\n", 0o755)
    _link(tmp_path, "/usr/bin/python3", "python3.11")
    _put(tmp_path, "/usr/lib/python3.11/os.py", "")
    _link(tmp_path, "/usr/lib/python3.11/site-packages", "site-packages")  # a looping site folder
    _link(tmp_path, "/usr/lib/python3.11/lib-dynload", "/usr/lib/python3.11/lib-dynload/x")
    _link(tmp_path, "/etc/os-release", "/etc/os-release")
    started = time.monotonic()
    assert find_interpreter(tmp_path, {}, None, None, None) == "/usr/bin/python3"
    facts = image_facts(tmp_path, Config(), image_python=None, deadline=Deadline.after(10))
    found = static_facts(facts)
    assert time.monotonic() - started < 5
    assert found.python.version == "3.11" and facts["python_version"] == [3, 11, 0]
    assert "site-packages" not in " ".join(found.python.sys_path)  # a loop is no folder
    assert found.platform.distro is None and found.platform.libc.name is None
    assert found.python.wheel_tags[0] == "cp311-cp311-linux_x86_64"  # no libc read: no manylinux claim


def test_a_link_out_of_the_root_is_read_inside_it(tmp_path: Path) -> None:
    # /usr/bin/python3 -> /usr/bin/python3.11 must be the image's file, even where this machine has one.
    _put(tmp_path, "/usr/bin/python3.11", "", 0o755)
    _link(tmp_path, "/usr/bin/python3", "/usr/bin/python3.11")
    _put(tmp_path, "/usr/lib/python3.11/os.py", "")
    _link(tmp_path, "/etc/os-release", "/etc/../../../etc/os-release-of-the-image")
    _put(tmp_path, "/etc/os-release-of-the-image", 'PRETTY_NAME="Image Linux 1"\n')
    facts = image_facts(
        tmp_path, Config(architecture="arm64"), image_python=None, deadline=Deadline.after(10)
    )
    found = static_facts(facts)
    assert found.platform.distro == "Image Linux 1"
    assert found.platform.machine == "aarch64"
    assert found.python.extension_suffixes == [".cpython-311-aarch64-linux-gnu.so", ".abi3.so", ".so"]
    assert all(tag.endswith(("aarch64", "any")) for tag in found.python.wheel_tags)


def test_a_musl_image_takes_musllinux_wheels(tmp_path: Path) -> None:
    _put(tmp_path, "/lib/ld-musl-x86_64.so.1", "not a loader\n", 0o755)
    _put(tmp_path, "/lib/apk/db/installed", "C:Q1abc=\nP:musl\nV:1.2.4-r2\nA:x86_64\n\n")
    _put(tmp_path, "/usr/local/bin/python3.12", "", 0o755)
    _link(tmp_path, "/usr/local/bin/python3", "python3.12")
    _put(tmp_path, "/usr/local/lib/python3.12/os.py", "")
    (tmp_path / "usr/local/lib/python3.12/site-packages").mkdir()
    facts = image_facts(tmp_path, Config(cmd=["python3"]), image_python=None, deadline=Deadline.after(10))
    found = static_facts(facts)
    assert (found.platform.libc.name, found.platform.libc.version) == ("musl", "1.2.4")
    assert found.python.wheel_tags[:3] == [
        "cp312-cp312-musllinux_1_2_x86_64",
        "cp312-cp312-musllinux_1_1_x86_64",
        "cp312-cp312-musllinux_1_0_x86_64",
    ]
    assert found.python.extension_suffixes == [".cpython-312-x86_64-linux-musl.so", ".abi3.so", ".so"]
    assert found.python.sys_path[-1] == "/usr/local/lib/python3.12/site-packages"


def _ocibuild() -> Any:
    """tests/image/ocibuild.py, the real image writer, whether or not its folder is on sys.path."""
    if "ocibuild" in sys.modules:
        return sys.modules["ocibuild"]
    path = Path(__file__).with_name("ocibuild.py")
    if not path.is_file():
        pytest.skip("tests/image/ocibuild.py is not there")
    spec = importlib.util.spec_from_file_location("ocibuild", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["ocibuild"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
@needs_python_org
def test_an_oci_image_opened_and_flattened_gives_the_facts_of_its_tree(tmp_path: Path) -> None:
    # Through the real pipeline: the tree as two layers of an OCI layout, opened, checked and flattened
    # (which rewrites every link to stay inside the root), then read.
    from envcheck.image import flatten, open_image

    ocibuild = _ocibuild()

    base, app = tmp_path / "base", tmp_path / "app"
    python_org_base(base)
    site = image_venv(app, ["six==1.17.0", "tqdm==4.70.1"])
    layers = [ocibuild.layer(ocibuild.entries_from_folder(tree)) for tree in (base, app)]
    config = ocibuild.image_config(
        layers,
        env=[
            "PATH=/app/.venv/bin:/usr/local/bin:/usr/bin:/bin",
            "PIP_INDEX_URL=https://u:hunter2@x.invalid/s",
        ],
        entrypoint=["/app/.venv/bin/tqdm"],
        cmd=None,
    )
    layout = ocibuild.oci_image(layers, config).write_folder(tmp_path / "oci")
    deadline = Deadline.after(60)
    image = open_image(layout, deadline=deadline)
    root = tmp_path / "root"
    root.mkdir()
    flatten(image, root, deadline=deadline)
    assert str((root / "app/.venv/bin/python").readlink()) != "/usr/local/bin/python3"  # made relative
    facts = image_facts(root, image, image_python=None, deadline=deadline)
    found = static_facts(facts)
    assert found.python.executable == "/app/.venv/bin/python" and found.python.version == "3.11.7"
    assert {d.name.lower(): d.version for d in found.packages} == pip_list(site)
    assert found.python.scripts is not None and found.python.scripts.count == 0
    assert found.python.venv_config is not None and found.python.venv_config.home_exists
    assert "hunter2" not in json.dumps(facts)
    no_host_path(facts, root)
