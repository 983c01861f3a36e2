"""Bad input to ``envcheck lock`` and ``lock --check``: one clear line on stderr and exit 2, never a
traceback; what cannot be locked is named; unreachable indexes are named, redacted, and fail fast."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import threading
import zipfile
from pathlib import Path

import pytest

from envcheck.lock.check import LockedPin, LockFile, compare
from envcheck.lock.inputs import lock_inputs
from envcheck.manifest.io import load

from .conftest import Env, envcheck, pip, snapshot, venv_with_pip

# Only the sources a test names: no configuration file, no PIP_* variable of this machine; pip gives up
# on a refused connection at once.
ISOLATED_PIP = {
    "PIP_CONFIG_FILE": os.devnull,
    "PIP_FIND_LINKS": "",
    "PIP_EXTRA_INDEX_URL": "",
    "PIP_INDEX_URL": "",
    "PIP_RETRIES": "0",
    "PIP_TIMEOUT": "3",
    "PIP_DEFAULT_TIMEOUT": "3",
}


def _one_error(done: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """The run failed as an input error should: exit 2, one ``error:`` line naming ``fragments``."""
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    for fragment in fragments:
        assert fragment in errors[0], done.stderr
    return errors[0]


def _edited(env: Env, tmp_path: Path, edit: object) -> Path:
    data = json.loads(env.manifest.read_text(encoding="utf-8"))
    edit(data)  # type: ignore[operator]
    out = tmp_path / "edited.json"
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def _set_version(name: str, version: str) -> object:
    def edit(data: dict[str, list[dict[str, object]]]) -> None:
        for dist in data["packages"]:
            if dist["name"] == name:
                dist["version"] = version

    return edit


# --- envcheck lock ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_manifest_without_packages_is_one_error(small_env: Env, tmp_path: Path) -> None:
    empty = _edited(small_env, tmp_path, lambda d: d.update(packages=[]))
    _one_error(envcheck("lock", empty), "holds no distributions")


@pytest.mark.slow
def test_only_installer_tooling_is_nothing_to_lock(small_env: Env, tmp_path: Path) -> None:
    def keep_tooling(data: dict[str, list[dict[str, object]]]) -> None:
        data["packages"] = [d for d in data["packages"] if d["name"] in ("pip", "setuptools")]

    _one_error(envcheck("lock", _edited(small_env, tmp_path, keep_tooling)), "holds no distributions")


@pytest.mark.slow
@pytest.mark.parametrize(
    "index",
    ["http://127.0.0.1:9/simple", "https://lock-user:s3cr3t-t0ken@pkgs.invalid/simple"],
)
def test_an_unreachable_index_is_named_and_the_lock_fails(small_env: Env, index: str) -> None:
    done = envcheck("lock", small_env.manifest, "--index-url", index, env=ISOLATED_PIP)
    _one_error(done, "no reachable source serves")
    warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
    host = (
        index.rsplit("@", 1)[-1]
        .split("/simple", maxsplit=1)[0]
        .replace("https://", "")
        .replace("http://", "")
    )
    assert any(host in w and "cannot be reached" in w for w in warnings), done.stderr
    assert "s3cr3t" not in done.stderr + done.stdout


@pytest.mark.slow
def test_a_version_no_source_serves_is_named_or_left_out(small_env: Env, tmp_path: Path) -> None:
    manifest = _edited(small_env, tmp_path, _set_version("six", "0.0.1"))
    _one_error(envcheck("lock", manifest), "six==0.0.1")

    out = tmp_path / "partial.txt"
    done = envcheck("lock", manifest, "--allow-unlocked", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "left out: six==0.0.1: no reachable source serves it" in done.stderr
    text = out.read_text(encoding="utf-8")
    assert "\nsix==" not in text and "tabulate==" in text
    assert "#   six==0.0.1: no reachable source serves it" in text


@pytest.mark.slow
def test_an_unserved_torch_build_asks_for_its_index(small_env: Env, tmp_path: Path) -> None:
    def add_torch(data: dict[str, list[dict[str, object]]]) -> None:
        six = next(d for d in data["packages"] if d["name"] == "six")
        data["packages"].append({**six, "name": "torch", "version": "9.9.9+cpu", "requires": []})

    manifest = _edited(small_env, tmp_path, add_torch)
    done = envcheck("lock", manifest, env={"TORCH_INDEX_URL": ""})
    _one_error(done, "torch==9.9.9+cpu")
    assert "TORCH_INDEX_URL" in done.stderr  # the tip says what to set

    out = tmp_path / "lock.txt"
    done = envcheck("lock", manifest, "--allow-unlocked", "-o", out, env={"TORCH_INDEX_URL": ""})
    assert done.returncode == 0, done.stderr
    text = out.read_text(encoding="utf-8")
    assert "torch==" not in text.replace("#   torch==9.9.9+cpu", "")
    assert "TORCH_INDEX_URL" in text and "six==" in text


def _wheel(folder: Path, name: str, version: str, requires: list[str]) -> Path:
    """A real (minimal, valid) pure-Python wheel, built here so that it can be installed from a path."""
    dist = f"{name}-{version}.dist-info"
    files = {
        f"{name}/__init__.py": b"VALUE = 1\n",
        f"{dist}/METADATA": (
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
            + "".join(f"Requires-Dist: {r}\n" for r in requires)
        ).encode(),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    out = folder / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(out, "w") as whl:
        for path, data in files.items():
            whl.writestr(path, data)
        whl.writestr(f"{dist}/RECORD", "\n".join(record) + "\n")
    return out


@pytest.mark.slow
def test_a_path_installed_distribution_is_an_error_unless_allowed(tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    wheel = _wheel(tmp_path, "envchecklocal", "0.1", ["six"])
    pip(python, "install", "--no-compile", "six", str(wheel))
    manifest = snapshot(python, tmp_path / "manifest.json")

    _one_error(envcheck("lock", manifest), "envchecklocal==0.1", "local path")

    out = tmp_path / "lock.txt"
    done = envcheck("lock", manifest, "--allow-unlocked", "-o", out)
    assert done.returncode == 0, done.stderr
    assert "left out: envchecklocal==0.1: installed from a local path" in done.stderr
    text = out.read_text(encoding="utf-8")
    assert "six==" in text  # its requirer is out of the lock: now a root
    assert "\nenvchecklocal==" not in text and "#   envchecklocal==0.1: installed from a local path" in text


@pytest.mark.slow
def test_the_lock_output_follows_a_link_and_feeds_a_fifo(small_env: Env, tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    assert envcheck("lock", small_env.manifest, "-o", link).returncode == 0
    assert link.is_symlink() and "six==" in real.read_text(encoding="utf-8")

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    done = envcheck("lock", small_env.manifest, "-o", fifo)
    reader.join(timeout=60)
    assert done.returncode == 0, done.stderr
    assert fifo.exists() and not fifo.is_file()  # still a FIFO, never replaced by a file
    assert b"tabulate==" in got[0]


@pytest.mark.slow
def test_a_folder_as_output_is_refused_before_any_work(small_env: Env, tmp_path: Path) -> None:
    _one_error(envcheck("lock", small_env.manifest, "-o", tmp_path), "is a folder")
    _one_error(envcheck("lock", small_env.manifest, "-o", tmp_path / "no" / "such.txt"), "does not exist")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--python", "python3"], "--python cannot be used when writing a lock"),
        (["--junit", "x.xml"], "--junit cannot be used when writing a lock"),
        (["--check", "--hashes"], "--hashes cannot be used when --check"),
        (["--check", "--allow-unlocked"], "--allow-unlocked cannot be used when --check"),
    ],
)
def test_options_of_the_other_mode_are_refused(small_env: Env, args: list[str], fragment: str) -> None:
    _one_error(envcheck("lock", small_env.lock, *args), fragment)


# --- envcheck lock --check --------------------------------------------------------------------------------

MALFORMED = [
    # A manifest where a requirements lock goes: named, with the command that takes it.
    (b'{"schema_version": 1, "packages": []}\n', "an envcheck manifest (JSON), not a requirements lock"),
    (b"six>=1\n", "line 1: six>=1 is not one exact version"),
    (b"six==1.*\n", "is not one exact version"),
    (b"six==1.17.0\n-r other.txt\n", "line 2: -r includes what this file does not pin"),
    (b"-e ./src\n", "line 1: -e includes"),
    (b"--frobnicate\n", "unknown option --frobnicate"),
    (b"six==1.17.0\nSix==1.17.0\n", "line 2: Six is pinned twice (first on line 1)"),
    (b"six==1.17.0 --global-option=x\n", "unsupported option on a requirement line"),
    (b'six==1.17.0 ; python_version >< "3"\n', "not a requirement"),
    (b"\xff\xfe\x00\x01 not text", "not UTF-8"),
    (b"# nothing but a comment\n\n", "no requirements"),
    (b"", "no requirements"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("content", "fragment"), MALFORMED)
def test_a_malformed_lock_is_one_error(small_env: Env, tmp_path: Path, content: bytes, fragment: str) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_bytes(content)
    _one_error(envcheck("lock", "--check", lock, "--python", small_env.python), fragment)


@pytest.mark.slow
def test_a_lock_that_is_no_regular_file_is_one_error(small_env: Env, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # nobody writes: reading it would block forever
    _one_error(envcheck("lock", "--check", fifo, "--python", small_env.python), "not a regular file")
    _one_error(envcheck("lock", "--check", tmp_path, "--python", small_env.python), "directory")
    _one_error(envcheck("lock", "--check", tmp_path / "absent.txt", "--python", small_env.python), "absent")


@pytest.mark.slow
def test_check_tolerates_what_pip_tolerates(small_env: Env, tmp_path: Path) -> None:
    pins = [ln for ln in small_env.lock.read_text(encoding="utf-8").splitlines() if "==" in ln]
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        "# a hand-edited lock\n"
        "--index-url https://lock-user:s3cr3t@pkgs.invalid/simple\n"
        "--extra-index-url=${TORCH_INDEX_URL}\n"
        "--find-links /nowhere\n"
        "--trusted-host pkgs.invalid\n"
        + "".join(f"{p} \\\n    --hash=sha256:{'0' * 64}  # a comment\n" for p in pins)
        + 'colorama==0.4.6 ; sys_platform == "win32"\n'  # not for this interpreter
        + "pip==1.0  # installer tooling: ignored\n",
        encoding="utf-8",
    )
    done = envcheck("lock", "--check", lock, "--python", small_env.python)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "The environment matches the lock." in done.stdout


def test_check_compares_local_labels(small_env: Env) -> None:
    manifest = load(small_env.manifest)
    six = next(d for d in manifest.packages if d.name == "six")
    pins = (LockedPin(name="six", written="six", version=f"{six.version}+cpu", line=3),)
    findings = compare(LockFile(pins=pins, sources=()), manifest, python=None)
    got = [(f.rule, f.subject, f.base, f.target) for f in findings if f.subject.lower() == "six"]
    assert got == [("LOCK-VERSION", "six", f"{six.version}+cpu", six.version)]
    # "1.0" and "1.0.0" are one PEP 440 version: not a difference.
    pins = (LockedPin(name="six", written="six", version=f"{six.version}.0", line=3),)
    findings = compare(LockFile(pins=pins, sources=()), manifest, python=None)
    assert not [f for f in findings if f.subject.lower() == "six"]


def test_platform_markers_follow_their_requirers(small_env: Env, tmp_path: Path) -> None:
    def marked(data: dict[str, list[dict[str, object]]]) -> None:
        six = next(d for d in data["packages"] if d["name"] == "six")
        tab = next(d for d in data["packages"] if d["name"] == "tabulate")
        system = data["platform"]["system"]  # type: ignore[call-overload]
        six["requires"] = [f'tabulate ; platform_system == "{system}"']
        tab["requires"] = ['six ; extra == "never"']

    manifest = load(_edited(small_env, tmp_path, marked))
    assert manifest.platform is not None
    inputs = lock_inputs(manifest)
    assert dict(inputs.markers) == {"tabulate": f'platform_system == "{manifest.platform.system}"'}
    assert [p.name for p in inputs.roots] == ["six"]


@pytest.mark.slow
def test_a_vcs_install_and_what_requires_it_are_left_out(small_env: Env, tmp_path: Path) -> None:
    def from_git(data: dict[str, list[dict[str, object]]]) -> None:
        six = next(d for d in data["packages"] if d["name"] == "six")
        tab = next(d for d in data["packages"] if d["name"] == "tabulate")
        six["direct_url"] = {
            "url": "https://git.invalid/six.git",
            "vcs_info": {"vcs": "git", "commit_id": "0"},
        }
        tab["requires"] = ["six"]

    manifest = _edited(small_env, tmp_path, from_git)
    inputs = lock_inputs(load(manifest))
    assert {(u.name, u.reason) for u in inputs.unlocked} == {
        ("six", "installed from a VCS checkout (direct_url.json)"),
        ("tabulate", "requires six, which is not locked"),
    }
    assert not inputs.roots
    _one_error(envcheck("lock", manifest), "six==", "VCS checkout", "(and 1 more)")
    _one_error(envcheck("lock", manifest, "--allow-unlocked"), "nothing of", "could be locked")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "version"),
    [("six\n--index-url http://evil.invalid/", "1.17.0"), ("six", "1.17.0\n-r /etc/passwd"), ("-e", "1")],
)
def test_a_name_or_version_that_is_no_pin_is_refused(
    small_env: Env, tmp_path: Path, name: str, version: str
) -> None:
    def poison(data: dict[str, list[dict[str, object]]]) -> None:
        six = next(d for d in data["packages"] if d["name"] == "six")
        six.update(name=name, version=version)

    done = envcheck("lock", _edited(small_env, tmp_path, poison))
    _one_error(done, "is not a distribution name and version that a lock can pin")
    assert not done.stdout


@pytest.mark.slow
def test_credentials_never_reach_the_lock_or_stderr(small_env: Env, tmp_path: Path) -> None:
    out = tmp_path / "lock.txt"
    index = "https://lock-user:s3cr3t-t0ken@pkgs.invalid/simple"
    # pip would retry the unreachable index for every distribution (seconds each): once is enough here.
    retries = {"PIP_RETRIES": "0", "PIP_TIMEOUT": "3", "PIP_DEFAULT_TIMEOUT": "3"}
    done = envcheck("lock", small_env.manifest, "--extra-index-url", index, "-o", out, env=retries)
    assert done.returncode == 0, done.stderr  # pip's own sources serve everything; this one is named
    assert "pkgs.invalid" in done.stderr and "cannot be reached" in done.stderr
    text = out.read_text(encoding="utf-8")
    assert "--extra-index-url https://pkgs.invalid/simple\n" in text
    assert "s3cr3t" not in text + done.stderr + done.stdout and "lock-user" not in text


@pytest.mark.slow
def test_a_manifest_of_another_python_is_locked_with_a_warning(small_env: Env, tmp_path: Path) -> None:
    def older(data: dict[str, dict[str, object]]) -> None:
        data["python"]["version"] = "3.9.1"

    done = envcheck("lock", _edited(small_env, tmp_path, older))
    assert done.returncode == 0, done.stderr
    assert "warning: the manifest was recorded on" in done.stderr and "Python 3.9" in done.stderr
    assert "six==" in done.stdout


def test_what_only_a_left_out_distribution_required_becomes_a_root(small_env: Env, tmp_path: Path) -> None:
    from envcheck.manifest.query import views
    from envcheck.manifest.requirements import graph

    def tabulate_needs_six(data: dict[str, list[dict[str, object]]]) -> None:
        next(d for d in data["packages"] if d["name"] == "tabulate")["requires"] = ["six"]

    manifest = load(_edited(small_env, tmp_path, tabulate_needs_six))
    inputs = lock_inputs(manifest)
    assert [p.name for p in inputs.roots] == ["tabulate"]
    assert "six" in [p.name for p in inputs.constraints]
    with views(manifest):
        g = graph(manifest)
    left = inputs.without({"tabulate": "no reachable source serves it"}, g)
    assert [p.name for p in left.roots] == ["six"]  # else pip-compile would never install it
    assert [(u.name, u.reason) for u in left.unlocked] == [("tabulate", "no reachable source serves it")]
