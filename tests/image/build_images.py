"""Real container images for the tests of ``envcheck snapshot/diff/gate --image``, built without a daemon.

A Debian rootfs made by Debian's own ``mmdebstrap`` (``--variant=apt`` plus ``python3``, ``python3-venv``
and ``ca-certificates``; no docs, man pages or locales), a venv made in it by the image's own interpreter
(``chroot ROOT python3 -m venv /app/.venv``) and filled by the image's own pip from real manylinux wheels
downloaded on the host (torch 2.13.0 and numpy with their dependencies, cp311). The layers are plain tars
of that tree (GNU tar: sorted, numeric owners, pax) and each image is a list of them plus an image config:

========================= =================================================================================
``healthy``               base + app (``/app/.venv`` and a ``/app/app`` package); ``python -m app`` works
``venv-moved``            base + a venv built at ``/build/.venv`` and copied to ``/app/.venv`` (a
                          multi-stage ``COPY``): every console script's ``#!`` names the gone
                          ``/build/.venv/bin/python3``, so ``/app/.venv/bin/pip`` cannot even start
``numpy-cp312``           healthy + a layer that replaced numpy by the cp312 wheel of the same version (what
                          ``pip install --upgrade --target SITE --python-version 3.12`` leaves): its WHEEL
                          says cp312, its extension modules are ``cpython-312``, ``import numpy`` fails
``libgomp-whiteout``      healthy + a layer whose whiteout deletes ``torch/lib/libgomp.so.1``: ``import
                          torch`` fails (the base has no system libgomp)
``env-weights-only``      healthy's layers, with ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1`` in its ``Env``
                          (envcheck/data/runtime_config.json: call-fails when set): ``torch.load(...,
                          weights_only=False)`` of a checkpoint pickling an ``argparse.Namespace`` fails
``base-bump``             only from ``build_bump()``, on demand: healthy's app layer on a Debian trixie
                          base (Python 3.13): the venv's python is 3.13, ``import torch`` fails
========================= =================================================================================

Every image is verified under ``chroot`` by running its own interpreter (``unshare`` gives the run a
private mount namespace with its own ``/proc``, gone when the run ends: nothing of the host is mounted and
nothing can stay mounted): the healthy one works, each broken one fails its probe while the same probe
works on the healthy image. A broken image's root is the healthy tree (hard links) with the image's own
extra layer applied by ``apply_layer`` (whiteouts included), or, for ``venv-moved``, with the very
``/build/.venv`` its layer was made of moved to ``/app/.venv``.

Everything is built once per builder version: under ``cache_root()/<key>`` (``key()`` hashes this file,
``ocibuild.py`` and the requirements), built in a temp folder beside it and renamed into place, under a
lock, so a re-run (or a second run at the same time) reuses it. Run as a script to build (or find) it and
print the result: ``python tests/image/build_images.py``.

The flattened roots kept under the cache are hard-link clones of one another: never modify a file there
in place (``run_in_root`` sets ``PYTHONDONTWRITEBYTECODE`` so the interpreter writes nothing).
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

HERE = Path(__file__).resolve().parent
SUITE = "bookworm"
PYTHON_VERSION = "3.11"  # bookworm's python3
# bookworm has glibc 2.36; pip 23 does not widen a --platform to the older manylinux tags, so name them.
PIP_PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
                 "manylinux2014_x86_64")  # fmt: skip
REQUIREMENTS = ("torch==2.13.0", "numpy")
APT_PACKAGES = ("python3", "python3-venv", "ca-certificates")
DPKG_EXCLUDES = (
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/lintian/*",
)
VENV = "/app/.venv"
BUILD_VENV = "/build/.venv"
SITE = f"{VENV}/lib/python{PYTHON_VERSION}/site-packages"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The environment of every command run in a root: nothing of the host's (its PIP_* settings would point the
# image's pip at host folders).
CLEAN_ENV = {"PATH": SYSTEM_PATH, "HOME": "/root", "LANG": "C.UTF-8"}
# Entries of the rootfs that are not the image's: device nodes (a container runtime makes /dev), the
# host's name and resolver that mmdebstrap copied in, caches and temp files.
BASE_EXCLUDES = (
    "dev/*",
    "proc/*",
    "sys/*",
    "tmp/*",
    "run/*",
    "root/.cache",
    "etc/hostname",
    "etc/resolv.conf",
    "var/cache/apt/*.bin",
    "var/lib/apt/lists/*",
)
APP_MAIN = '''"""The image's application: proves its torch and numpy work."""

import numpy
import torch

print("torch", torch.__version__, "numpy", numpy.__version__, (torch.ones(2) + 1).tolist())
'''
# The weights-only probe: a checkpoint that pickles an argparse.Namespace, loaded with weights_only=False
# (from a temp file it removes: a probe leaves nothing in the root).
CHECKPOINT_PROBE = (
    "import argparse, os, tempfile, torch\n"
    "fd, path = tempfile.mkstemp(suffix='.pt')\n"
    "try:\n"
    "    torch.save({'args': argparse.Namespace(lr=0.1)}, path)\n"
    "    print(torch.load(path, weights_only=False)['args'])\n"
    "finally:\n"
    "    os.close(fd)\n"
    "    os.unlink(path)\n"
)
OUTPUT_TAIL = 2000


class Unavailable(Exception):
    """The images cannot be built here (no root, no mmdebstrap, no mirror, no wheels): the reason, one line,
    for a test's skip."""


@dataclass(frozen=True)
class Probe:
    """One command run under ``chroot`` in an image's root: ``argv`` inside it, ``env`` its whole
    environment, and what it did (``returncode``, the tail of stdout and stderr together)."""

    argv: tuple[str, ...]
    env: Mapping[str, str]
    returncode: int
    output: str

    def to_json(self) -> dict[str, Any]:
        return {"argv": list(self.argv), "env": dict(self.env), "returncode": self.returncode,
                "output": self.output}  # fmt: skip

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Probe:
        return cls(tuple(data["argv"]), dict(data["env"]), int(data["returncode"]), str(data["output"]))


@dataclass(frozen=True)
class Image:
    """One built image.

    ``layers``: its layer tars (uncompressed, bottom first; ``apply_layer`` semantics, whiteouts included).
    ``config``: the image config's ``config`` object (``Env``, ``Entrypoint``, ``Cmd``, ``WorkingDir``).
    ``root``: the flattened root the probes ran in (hard links shared with the other images: read only).
    ``broken``: what is wrong with it, one line; None for the healthy image.
    ``probe``: the check run under chroot with the image's ``Env``: exit 0 for the healthy image, non-zero
    for a broken one. ``control``: the same check in the healthy image's root (exit 0).
    ``pip_list``: ``pip list --format json`` run under chroot (``/app/.venv/bin/pip`` for the healthy
    image, ``python -m pip`` for the others): (name, version) pairs, the truth to compare a snapshot with.
    ``oci_layout``, ``oci_archive``, ``docker_archive``: the image written by ``ocibuild`` (an OCI image
    layout folder, a tar of one, a ``docker save`` tarball); None where not written (only the healthy
    image has the two archives).
    """

    name: str
    layers: tuple[Path, ...]
    config: Mapping[str, Any]
    root: Path
    broken: str | None
    probe: Probe
    control: Probe
    pip_list: tuple[tuple[str, str], ...]
    oci_layout: Path | None = None
    oci_archive: Path | None = None
    docker_archive: Path | None = None

    @property
    def env(self) -> dict[str, str]:
        """The image's ``Env`` as a mapping."""
        return dict(entry.split("=", 1) for entry in self.config.get("Env", ()))

    def version_of(self, name: str) -> str | None:
        """The version ``pip list`` gave for ``name`` (compared case-insensitively), None if not listed."""
        wanted = _canonical(name)
        return next((version for n, version in self.pip_list if _canonical(n) == wanted), None)


@dataclass(frozen=True)
class Built:
    """The result of ``build()``: ``images`` by name, the folder they live in, and the seconds each step
    took when they were built (``timings``; the run that found them cached did not rebuild)."""

    folder: Path
    images: Mapping[str, Image]
    timings: Mapping[str, float] = field(default_factory=dict)
    reused: bool = False


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def cache_root() -> Path:
    """``$ENVCHECK_TEST_IMAGES`` or ``${XDG_CACHE_HOME:-~/.cache}/envcheck/test-images``."""
    given = os.environ.get("ENVCHECK_TEST_IMAGES")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "envcheck" / "test-images"


def key() -> str:
    """The builder's version: a hash of this file, ``ocibuild.py`` (when present) and what it installs."""
    digest = hashlib.sha256()
    for source in (Path(__file__).resolve(), HERE / "ocibuild.py"):
        digest.update(source.read_bytes() if source.is_file() else b"-")
        digest.update(b"\0")
    digest.update("\0".join((SUITE, PYTHON_VERSION, *REQUIREMENTS, *APT_PACKAGES)).encode())
    return digest.hexdigest()[:16]


def _tool(name: str) -> str | None:
    return shutil.which(name) or next(
        (str(Path(d) / name) for d in ("/usr/sbin", "/sbin") if (Path(d) / name).is_file()), None
    )


def missing() -> str | None:
    """Why the images cannot be built here (one line), or None when they can: Linux, root, and the tools
    ``mmdebstrap``, ``chroot``, ``unshare`` and GNU ``tar`` (``.ci/run`` installs mmdebstrap with apt)."""
    if sys.platform != "linux":
        return "the test images are built with chroot: Linux only"
    if os.geteuid() != 0:
        return "building the test images needs root (mmdebstrap and chroot)"
    for name in ("mmdebstrap", "chroot", "unshare", "tar"):
        if _tool(name) is None:
            how = " (.ci/run installs it with apt-get)" if name == "mmdebstrap" else ""
            return f"{name} is not installed{how}: the image tests need it"
    return None


# --- running things ---------------------------------------------------------------------------------


def _run(argv: Sequence[str], *, log: Callable[[str], None], timeout: float = 900, **kw: Any) -> str:
    """``argv`` on the host; its output (stdout and stderr). Raises ``Unavailable`` with the tail of the
    output when it fails."""
    log("$ " + " ".join(argv))
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, check=False, **kw)
    except subprocess.TimeoutExpired as e:
        raise Unavailable(f"{argv[0]} did not finish within {timeout:g} s") from e
    text: str = out.stdout + out.stderr
    if out.returncode != 0:
        tail = " | ".join(text.strip().splitlines()[-4:])
        raise Unavailable(f"{Path(argv[0]).name} failed (exit {out.returncode}): {tail[-600:]}")
    return text


def chroot_argv(root: Path, argv: Sequence[str], *, workdir: str = "/") -> list[str]:
    """The host command that runs ``argv`` inside ``root``: a private mount and pid namespace with its own
    ``/proc`` at ``root/proc`` (gone with the namespace), ``chroot``, then the image's ``env -C workdir``."""
    unshare, chroot = _tool("unshare"), _tool("chroot")
    assert unshare and chroot, missing()
    return [unshare, "--mount", "--pid", "--fork", f"--mount-proc={root / 'proc'}", chroot, str(root),
            "/usr/bin/env", "-C", workdir, *argv]  # fmt: skip


def run_in_root(
    root: Path, argv: Sequence[str], env: Mapping[str, str] | None = None, *, workdir: str = "/",
    timeout: float = 300,
) -> Probe:  # fmt: skip
    """``argv`` run inside ``root`` (``chroot_argv``) with exactly ``env`` (default ``CLEAN_ENV``) plus
    ``PYTHONDONTWRITEBYTECODE=1``; never raises for the command's own failure: the ``Probe`` says it."""
    full = dict(CLEAN_ENV if env is None else env)
    full.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    out = subprocess.run(chroot_argv(root, argv, workdir=workdir), env=full, capture_output=True,
                         text=True, timeout=timeout, check=False)  # fmt: skip
    return Probe(tuple(argv), full, out.returncode, (out.stdout + out.stderr)[-OUTPUT_TAIL:])


def _pip_list(root: Path, argv: Sequence[str], env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    got = run_in_root(root, [*argv, "list", "--format", "json"], env)
    if got.returncode != 0:
        raise RuntimeError(f"pip list failed in {root}: {got.output}")
    data = json.loads(got.output[got.output.index("[") :])
    return tuple(sorted((str(p["name"]), str(p["version"])) for p in data))


# --- layers -------------------------------------------------------------------------------------------


def _tar_tree(root: Path, members: Sequence[str], out: Path, *, excludes: Sequence[str] = (),
              transform: str | None = None, log: Callable[[str], None]) -> Path:  # fmt: skip
    """A layer tar of ``members`` (paths relative to ``root``) with GNU tar: sorted, numeric owners, pax;
    ``excludes`` anchored patterns; ``transform`` a sed expression renaming members."""
    argv = [
        _tool("tar") or "tar",
        "--create",
        "--file",
        str(out),
        "--directory",
        str(root),
        "--anchored",
        "--sort=name",
        "--numeric-owner",
        "--format=pax",
        "--pax-option=delete=atime,delete=ctime",
    ]
    argv += [f"--exclude={pattern}" for pattern in excludes]
    if transform:
        argv.append(f"--transform={transform}")
    _run([*argv, "--", *members], log=log)
    return out


def _dir_info(name: str, mode: int = 0o755) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime = tarfile.DIRTYPE, mode, 0
    return info


def _empty_file(name: str) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.mode, info.mtime, info.size = 0o644, 0, 0
    return info, b""


def _parents(path: str) -> list[str]:
    parts = PurePosixPath(path).parts
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _write_layer(out: Path, dirs: Sequence[str], files: Sequence[tuple[tarfile.TarInfo, bytes]]) -> Path:
    """A layer tar of ``dirs`` (with their parents, once each) then ``files``."""
    seen: set[str] = set()
    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for directory in dirs:
            for parent in _parents(directory):
                if parent not in seen:
                    seen.add(parent)
                    tar.addfile(_dir_info(parent))
        for info, data in files:
            tar.addfile(info, _BytesReader(data) if info.isfile() else None)
    return out


class _BytesReader:
    def __init__(self, data: bytes) -> None:
        self._data, self._at = data, 0

    def read(self, size: int = -1) -> bytes:
        end = len(self._data) if size < 0 else self._at + size
        chunk, self._at = self._data[self._at : end], min(end, len(self._data))
        return chunk


def _wheel_layer(wheel: Path, site: str, out: Path, *, replaces: Sequence[str]) -> Path:
    """The layer a ``pip install --upgrade --target SITE`` of ``wheel`` leaves: every top-level folder in
    ``replaces`` (relative to ``site``) opaque (``.wh..wh..opq``: the lower layers' files are gone), then
    the wheel's files with the modes the wheel records."""
    site = site.strip("/")
    files: list[tuple[tarfile.TarInfo, bytes]] = []
    dirs = [f"{site}/{name}" for name in replaces]
    files += [_empty_file(f"{site}/{name}/.wh..wh..opq") for name in replaces]
    with zipfile.ZipFile(wheel) as archive:
        for entry in sorted(archive.infolist(), key=lambda e: e.filename):
            name = f"{site}/{entry.filename}"
            if entry.is_dir():
                dirs.append(name.rstrip("/"))
                continue
            dirs.append(str(PurePosixPath(name).parent))
            info = tarfile.TarInfo(name)
            data = archive.read(entry)
            mode = (entry.external_attr >> 16) & 0o777
            info.mode, info.mtime, info.size = (mode or 0o644), 0, len(data)
            files.append((info, data))
    return _write_layer(out, sorted(set(dirs)), files)


def _safe_target(root: Path, name: str) -> Path:
    """``root/name`` for a member name of a layer, refusing names that leave ``root`` (absolute, ``..``)
    and parents that are links out of it."""
    parts = PurePosixPath(name.removeprefix("./")).parts
    if not parts or any(p in ("..", "") for p in parts) or parts[0] == "/":
        raise ValueError(f"layer member outside the root: {name!r}")
    target = root.joinpath(*parts)
    parent = Path(os.path.realpath(target.parent))
    if parent != root and root not in parent.parents:
        raise ValueError(f"layer member through a link out of the root: {name!r}")
    return target


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def apply_layer(root: Path, layer: Path) -> None:
    """Applies the layer tar ``layer`` onto the tree ``root`` as a container runtime does: first its
    whiteouts against the lower layers (``.wh.NAME`` deletes NAME, ``.wh..wh..opq`` empties its folder),
    then its entries. An entry never writes into an existing file: the old one is unlinked first, so a tree
    of hard links to another tree can be changed without touching the other. Only folders, regular files,
    symlinks and hard links are made (devices and FIFOs are skipped); members leaving ``root`` are refused.
    """
    root = Path(os.path.realpath(root))
    with tarfile.open(layer) as tar:
        members = tar.getmembers()
        for member in members:
            base = PurePosixPath(member.name).name
            if base == ".wh..wh..opq":
                folder = _safe_target(root, member.name).parent
                for child in folder.iterdir() if folder.is_dir() else ():
                    _remove(child)
            elif base.startswith(".wh."):
                target = _safe_target(root, member.name)
                _remove(target.parent / base.removeprefix(".wh."))
        for member in members:
            if PurePosixPath(member.name).name.startswith(".wh."):
                continue
            target = _safe_target(root, member.name)
            target.parent.mkdir(parents=True, exist_ok=True)
            if member.isdir():
                if target.is_symlink() or (target.exists() and not target.is_dir()):
                    _remove(target)
                target.mkdir(exist_ok=True)
                target.chmod(member.mode)
                continue
            _remove(target)
            if member.issym():
                target.symlink_to(member.linkname)
            elif member.islnk():
                os.link(_safe_target(root, member.linkname), target)
            elif member.isfile():
                source = tar.extractfile(member)
                assert source is not None
                with source, target.open("xb") as sink:
                    shutil.copyfileobj(source, sink, 1 << 20)
                target.chmod(member.mode)
                if os.geteuid() == 0:
                    os.chown(target, member.uid, member.gid)


def _clone(source: Path, dest: Path) -> None:
    """``dest`` as a copy of ``source`` made of hard links (``cp -al``: symlinks, modes and owners kept)."""
    _run(["cp", "-al", "--", str(source), str(dest)], log=lambda _: None)


# --- the build ----------------------------------------------------------------------------------------


def _host_sources(suite: str, work: Path) -> list[str]:
    """The host's apt source files for ``suite``, passed to mmdebstrap as its mirrors (it pastes a file
    given as a mirror into the chroot's sources), so the rootfs comes from the mirror (and snapshot) the
    host's apt uses: those that name ``suite``, else those that name ``SUITE`` with it renamed to ``suite``
    (``bookworm-security`` becomes ``trixie-security``), written into ``work``. Empty when the host has
    none: mmdebstrap then uses its default mirror."""
    apt = Path("/etc/apt")
    candidates = [apt / "sources.list", *sorted((apt / "sources.list.d").glob("*.sources")),
                  *sorted((apt / "sources.list.d").glob("*.list"))]  # fmt: skip

    def naming(name: str) -> list[tuple[Path, str]]:
        found = []
        for path in candidates:
            try:
                text = path.read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
            if "debian" in text and any(re.search(rf"^(Suites:|deb\s).*\b{name}\b", ln) for ln in lines):
                found.append((path, text))
        return found

    exact = naming(suite)
    if exact or suite == SUITE:
        return [str(path) for path, _ in exact]
    renamed = []
    for i, (path, text) in enumerate(naming(SUITE)):
        copy = work / f"{i}-{path.name}"
        copy.write_text(re.sub(rf"\b{SUITE}\b", suite, text), encoding="utf-8")
        renamed.append(str(copy))
    return renamed


def _mmdebstrap(root: Path, suite: str, work: Path, *, log: Callable[[str], None]) -> None:
    """A Debian ``suite`` rootfs at ``root`` (``--variant=apt`` plus ``APT_PACKAGES``, without docs)."""
    argv = [_tool("mmdebstrap") or "mmdebstrap", "--mode=root", "--variant=apt", "--format=directory",
            f"--include={','.join(APT_PACKAGES)}", '--aptopt=Acquire::Check-Valid-Until "false"',
            "--dpkgopt=force-unsafe-io"]  # fmt: skip
    argv += [f"--dpkgopt={option}" for option in DPKG_EXCLUDES]
    _run([*argv, suite, str(root), *_host_sources(suite, work)], log=log, timeout=900)
    # The host's sources, pasted in as the image's, and the host's name and resolver: not the image's.
    for pasted in (root / "etc/apt/sources.list.d").glob("0000*"):
        pasted.unlink()
    for name in ("etc/hostname", "etc/resolv.conf"):
        (root / name).unlink(missing_ok=True)


def _download(folder: Path, requirements: Sequence[str], python_version: str, *, deps: bool,
              log: Callable[[str], None]) -> list[Path]:  # fmt: skip
    """Real wheels for CPython ``python_version`` on manylinux x86-64, downloaded on the host with pip."""
    folder.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "--implementation", "cp",
            "--python-version", python_version, "-d", str(folder), "--disable-pip-version-check"]  # fmt: skip
    for platform in PIP_PLATFORMS:
        argv += ["--platform", platform]
    if not deps:
        argv.append("--no-deps")
    _run([*argv, *requirements], log=log, timeout=900)
    return sorted(folder.glob("*.whl"))


def _fill_venv(
    root: Path, venv: str, wheels: Sequence[Path], log: Callable[[str], None]
) -> subprocess.Popen[str]:
    """Starts ``chroot ROOT python3 -m venv VENV && VENV/bin/pip install`` of the wheels copied to
    ``ROOT/tmp/wheels`` (the image's own interpreter and pip, no index); the caller waits."""
    names = " ".join(_requirement_names(wheels))
    script = (f"set -e; /usr/bin/python3 -m venv {venv}; "
              f"{venv}/bin/pip install -q --no-index --find-links /tmp/wheels {names}")  # fmt: skip
    argv = chroot_argv(root, ["/bin/sh", "-c", script])
    log("$ " + " ".join(argv))
    env = {**CLEAN_ENV, "PIP_NO_CACHE_DIR": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _requirement_names(wheels: Sequence[Path]) -> list[str]:
    """``torch==V numpy==V`` pinned to the downloaded wheels' versions (local versions included)."""
    pins = []
    for requirement in REQUIREMENTS:
        name = requirement.split("==")[0]
        wheel = next(w for w in wheels if _canonical(w.name.split("-")[0]) == _canonical(name))
        pins.append(f"{name}=={wheel.name.split('-')[1]}")
    return pins


def _wait(process: subprocess.Popen[str], what: str, timeout: float = 900) -> None:
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as e:
        process.kill()
        process.communicate()
        raise Unavailable(f"{what} did not finish within {timeout:g} s") from e
    if process.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {process.returncode}): {output[-OUTPUT_TAIL:]}")


def _healthy_config(extra_env: Sequence[str] = ()) -> dict[str, Any]:
    return {
        "Env": [f"PATH={VENV}/bin:{SYSTEM_PATH}", f"VIRTUAL_ENV={VENV}", "LANG=C.UTF-8", *extra_env],
        "Entrypoint": [f"{VENV}/bin/python", "-m", "app"],
        "WorkingDir": "/app",
    }


def _image_env(config: Mapping[str, Any]) -> dict[str, str]:
    env = dict(entry.split("=", 1) for entry in config["Env"])
    env.setdefault("HOME", "/root")
    return env


@dataclass(frozen=True)
class _Plan:
    name: str
    layers: tuple[str, ...]
    config: dict[str, Any]
    broken: str | None
    probe: tuple[str, ...]


def _plans() -> list[_Plan]:
    python = f"{VENV}/bin/python"
    return [
        _Plan("healthy", ("base", "app"), _healthy_config(), None, (python, "-m", "app")),
        _Plan("venv-moved", ("base", "app-moved"), _healthy_config(),
              f"the venv was built at {BUILD_VENV} and copied to {VENV}: its console scripts' #! lines name "
              f"{BUILD_VENV}/bin/python3, which is not in the image",
              (f"{VENV}/bin/pip", "--version")),
        _Plan("numpy-cp312", ("base", "app", "numpy-cp312"), _healthy_config(),
              "numpy was replaced by its cp312 wheel (same version, WHEEL tag cp312) in a Python 3.11 venv",
              (python, "-c", "import numpy")),
        _Plan("libgomp-whiteout", ("base", "app", "rm-libgomp"), _healthy_config(),
              "a later layer deletes torch/lib/libgomp.so.1 (a whiteout), which libtorch_cpu.so needs",
              (python, "-c", "import torch")),
        _Plan("env-weights-only", ("base", "app"), _healthy_config(["TORCH_FORCE_WEIGHTS_ONLY_LOAD=1"]),
              "Env sets TORCH_FORCE_WEIGHTS_ONLY_LOAD=1: torch.load(..., weights_only=False) of a checkpoint "
              "that pickles an argparse.Namespace is refused",
              (python, "-c", CHECKPOINT_PROBE)),
    ]  # fmt: skip


def _build_into(out: Path, wheel_cache: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Builds everything under ``out`` (``layers/``, ``roots/``, ``images/``); returns result.json's data."""
    timings: dict[str, float] = {}
    started = time.monotonic()

    def lap(step: str) -> None:
        nonlocal started
        timings[step] = round(time.monotonic() - started, 1)
        started = time.monotonic()
        log(f"{step}: {timings[step]} s")

    work = out / "work"
    rootfs = work / "rootfs"
    layers, roots = out / "layers", out / "roots"
    for folder in (work, layers, roots):
        folder.mkdir(parents=True)

    wheels = _download(wheel_cache / f"cp{PYTHON_VERSION.replace('.', '')}", REQUIREMENTS, PYTHON_VERSION,
                       deps=True, log=log)  # fmt: skip
    numpy_version = next(w.name.split("-")[1] for w in wheels if w.name.startswith("numpy-"))
    cp312 = _download(wheel_cache / "cp312", [f"numpy=={numpy_version}"], "3.12", deps=False, log=log)
    cp312_numpy = next(w for w in cp312 if w.name.startswith(f"numpy-{numpy_version}-cp312-"))
    lap("download wheels")

    _mmdebstrap(rootfs, SUITE, work, log=log)
    lap("mmdebstrap")
    _tar_tree(rootfs, sorted(p.name for p in rootfs.iterdir()), layers / "base.tar", excludes=BASE_EXCLUDES,
              log=log)  # fmt: skip
    lap("base layer")

    staged = rootfs / "tmp" / "wheels"
    staged.mkdir()
    for wheel in wheels:
        shutil.copy2(wheel, staged / wheel.name)
    app = rootfs / "app" / "app"
    app.mkdir(parents=True)
    (app / "__init__.py").write_text("", encoding="utf-8")
    (app / "__main__.py").write_text(APP_MAIN, encoding="utf-8")
    filling = [_fill_venv(rootfs, venv, wheels, log) for venv in (VENV, BUILD_VENV)]
    for process, venv in zip(filling, (VENV, BUILD_VENV), strict=True):
        _wait(process, f"the image's pip filling {venv}")
    shutil.rmtree(staged)
    lap("venvs (image's own python and pip)")

    _tar_tree(rootfs, ["app"], layers / "app.tar", log=log)
    # The multi-stage COPY: /build/.venv as /app/.venv, the /app/app package beside it.
    _tar_tree(rootfs, ["app", "build/.venv"], layers / "app-moved.tar", excludes=["app/.venv"],
              transform=r"s,^build/\.venv,app/.venv,", log=log)  # fmt: skip
    with tarfile.open(layers / "app-moved.tar") as check:
        moved = set(check.getnames())
    assert not any(n.startswith("build") for n in moved), "the transform left /build"
    assert {"app", "app/app/__main__.py", "app/.venv/bin/pip", "app/.venv/pyvenv.cfg"} <= moved, "no venv"
    site = SITE.strip("/")
    _wheel_layer(cp312_numpy, SITE, layers / "numpy-cp312.tar",
                 replaces=("numpy", f"numpy-{numpy_version}.dist-info", "numpy.libs"))  # fmt: skip
    gomp = f"{site}/torch/lib/libgomp.so.1"
    assert (rootfs / gomp).is_file(), f"torch {REQUIREMENTS[0]} has no {gomp}"
    _write_layer(
        layers / "rm-libgomp.tar",
        [str(PurePosixPath(gomp).parent)],
        [_empty_file(str(PurePosixPath(gomp).parent / ".wh.libgomp.so.1"))],
    )
    lap("app and variant layers")

    # Roots: healthy = the build tree without /build; the others its hard-link clones plus their layer,
    # venv-moved with the very folder its layer was made of (/build/.venv) moved to /app/.venv.
    healthy_root = roots / "healthy"
    rootfs.rename(healthy_root)
    built_elsewhere = work / "moved-venv"
    (healthy_root / BUILD_VENV.lstrip("/")).rename(built_elsewhere)
    shutil.rmtree(healthy_root / "build")
    plans = _plans()
    for plan in plans[1:]:
        root = roots / plan.name
        _clone(healthy_root, root)
        for name in plan.layers:
            if name == "app-moved":
                shutil.rmtree(root / VENV.lstrip("/"))
                built_elsewhere.rename(root / VENV.lstrip("/"))
            elif name not in ("base", "app"):
                apply_layer(root, layers / f"{name}.tar")
    lap("flattened roots")

    images: dict[str, Any] = {}
    healthy_plan = plans[0]
    for plan in plans:
        root = roots / plan.name
        env = _image_env(plan.config)
        probe = run_in_root(root, plan.probe, env, workdir=plan.config["WorkingDir"])
        control = run_in_root(healthy_root, plan.probe, _image_env(healthy_plan.config), workdir="/app")
        if control.returncode != 0:
            raise RuntimeError(f"{plan.name}: the probe fails on the healthy image too: {control.output}")
        if (probe.returncode == 0) != (plan.broken is None):
            raise RuntimeError(f"{plan.name}: the probe {'failed' if plan.broken is None else 'worked'}: "
                               f"{probe.output}")  # fmt: skip
        pip = [f"{VENV}/bin/pip"] if plan.broken is None else [f"{VENV}/bin/python", "-m", "pip"]
        images[plan.name] = {
            "layers": [f"layers/{name}.tar" for name in plan.layers],
            "config": plan.config,
            "root": f"roots/{plan.name}",
            "broken": plan.broken,
            "probe": probe.to_json(),
            "control": control.to_json(),
            "pip_list": _pip_list(root, pip, env),
        }
    lap("verify under chroot")

    images.update(_pack(out, images, log))
    lap("pack images")
    shutil.rmtree(work)
    return {"key": key(), "suite": SUITE, "images": images, "timings": timings}


def _pack(
    out: Path, images: Mapping[str, Any], log: Callable[[str], None], *, suite: str = SUITE
) -> dict[str, Any]:
    """Writes each image with ``ocibuild``: an OCI layout folder each (``images/<name>/oci``), and an OCI
    archive (``oci.tar``) and a ``docker save`` tarball (``docker.tar``, the legacy shape) of the healthy
    one. The base layer is gzipped (``tar+gzip``, as a registry serves it), the others plain ``tar``: both
    media types in one real image. A blob already on disk (a plain layer tar, the gzipped base) is
    hard-linked into a layout, never written again. Returns the images' entries with their paths added."""
    # Lazy: ocibuild is the tests' image writer beside this file, imported as a script or from conftest.
    import ocibuild

    blobs: dict[str, Path] = {}  # digest hex -> a file on disk holding that blob

    def plain(name: str) -> ocibuild.LayerBlob:
        path = out / "layers" / f"{name}.tar"
        data = path.read_bytes()
        blob = ocibuild.LayerBlob(data, ocibuild.OCI_LAYER, ocibuild.sha256(data))
        blobs[blob.digest.removeprefix("sha256:")] = path
        return blob

    def gzipped(name: str) -> ocibuild.LayerBlob:
        path = out / "layers" / f"{name}.tar"
        data = path.read_bytes()
        packed = gzip.compress(data, compresslevel=1, mtime=0)
        blob = ocibuild.LayerBlob(packed, ocibuild.OCI_LAYER_GZIP, ocibuild.sha256(data))
        (out / "layers" / f"{name}.tar.gz").write_bytes(packed)
        blobs[blob.digest.removeprefix("sha256:")] = out / "layers" / f"{name}.tar.gz"
        return blob

    stored = {name: plain(name) for name in sorted({n for e in images.values() for n in _layer_names(e)})}
    stored_base_gz = gzipped("base")

    def write(files: ocibuild.Files, dest: Path) -> Path:
        for name, content in files.files.items():
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            known = blobs.get(name.removeprefix("blobs/sha256/")) if name.startswith("blobs/") else None
            if known is not None and isinstance(content, bytes):
                os.link(known, path)
            else:
                assert isinstance(content, bytes), name
                path.write_bytes(content)
        return dest

    entries: dict[str, Any] = {}
    for name, entry in images.items():
        names = _layer_names(entry)
        oci_layers = [stored_base_gz if n == "base" else stored[n] for n in names]
        config = ocibuild.image_config(oci_layers, env=entry["config"]["Env"], cmd=None,
                                       entrypoint=entry["config"]["Entrypoint"],
                                       working_dir=entry["config"]["WorkingDir"])  # fmt: skip
        config["history"] = _history(names, entry["config"], suite)
        folder = out / "images" / name
        layout = ocibuild.oci_image(oci_layers, config, ref=f"envcheck-test/{name}:latest")
        entries[name] = {**entry, "oci_layout": str(write(layout, folder / "oci").relative_to(out))}
        if name == "healthy":
            layout.write_tar(folder / "oci.tar")
            docker_config = ocibuild.image_config([stored[n] for n in names], env=entry["config"]["Env"],
                                                  cmd=None, entrypoint=entry["config"]["Entrypoint"],
                                                  working_dir=entry["config"]["WorkingDir"])  # fmt: skip
            docker_config["history"] = config["history"]
            saved = ocibuild.docker_save([stored[n] for n in names], docker_config,
                                         repo_tags=(f"envcheck-test/{name}:latest",))  # fmt: skip
            saved.write_tar(folder / "docker.tar")
            entries[name]["oci_archive"] = str((folder / "oci.tar").relative_to(out))
            entries[name]["docker_archive"] = str((folder / "docker.tar").relative_to(out))
        log(f"wrote {name}")
    return entries


def _layer_names(entry: Mapping[str, Any]) -> list[str]:
    return [PurePosixPath(layer).stem for layer in entry["layers"]]


HISTORY = {
    "base": f"mmdebstrap --variant=apt --include={','.join(APT_PACKAGES)} {{suite}}",
    "app": f"RUN python3 -m venv {VENV} && {VENV}/bin/pip install {' '.join(REQUIREMENTS)}; COPY app app",
    "app-moved": f"COPY --from=builder {BUILD_VENV} {VENV}; COPY app /app/app",
    "numpy-cp312": f"RUN pip install --upgrade --no-deps --target {SITE} --python-version 3.12 numpy",
    "rm-libgomp": f"RUN rm {SITE}/torch/lib/libgomp.so.1",
}


def _history(names: Sequence[str], config: Mapping[str, Any], suite: str) -> list[dict[str, Any]]:
    """The image's history as a builder writes it: one entry per layer, then the ``ENV`` and
    ``ENTRYPOINT`` instructions (empty layers)."""
    history: list[dict[str, Any]] = [{"created_by": HISTORY[name].format(suite=suite)} for name in names]
    history += [{"created_by": f"ENV {entry}", "empty_layer": True} for entry in config["Env"]]
    history.append({"created_by": f"ENTRYPOINT {json.dumps(config['Entrypoint'])}", "empty_layer": True})
    return history


def _load(folder: Path, reused: bool) -> Built:
    data = json.loads((folder / "result.json").read_text(encoding="utf-8"))

    def path(value: str | None) -> Path | None:
        return None if value is None else folder / value

    images = {}
    for name, entry in data["images"].items():
        images[name] = Image(
            name=name,
            layers=tuple(folder / layer for layer in entry["layers"]),
            config=entry["config"],
            root=folder / entry["root"],
            broken=entry["broken"],
            probe=Probe.from_json(entry["probe"]),
            control=Probe.from_json(entry["control"]),
            pip_list=tuple((str(n), str(v)) for n, v in entry["pip_list"]),
            oci_layout=path(entry.get("oci_layout")),
            oci_archive=path(entry.get("oci_archive")),
            docker_archive=path(entry.get("docker_archive")),
        )
    return Built(folder, images, data.get("timings", {}), reused)


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build(log: Callable[[str], None] = lambda _: None) -> Built:
    """The images, built once per ``key()`` under ``cache_root()/<key>`` and found there afterwards.
    Raises ``Unavailable`` (the reason in one line) when they cannot be built here: no root or tools
    (``missing()``), a mirror or registry out of reach. A build that fails half-way leaves nothing behind
    (its temp folder is removed); folders of other keys are removed once this one is in place."""
    reason = missing()
    if reason:
        raise Unavailable(reason)
    base = cache_root()
    done = base / key()
    with _locked(base):
        if (done / "result.json").is_file():
            return _load(done, reused=True)
        work = Path(tempfile.mkdtemp(prefix=f".{key()}-", dir=base))
        try:
            result = _build_into(work, base / "wheels", log)
            (work / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
            _remove(done)
            work.rename(done)
        finally:
            _remove(work)
        for stale in base.iterdir():
            if stale.is_dir() and stale != done and stale.name != "wheels" and not stale.name.startswith("."):
                _remove(stale)
    return _load(done, reused=False)


BUMP_SUITE = "trixie"


def build_bump(log: Callable[[str], None] = lambda _: None) -> Image:
    """The ``base-bump`` image, built on first use (~1 minute more, so only for the tests that ask) into
    ``<build()'s folder>/bump``: the healthy image's app layer (its ``/app/.venv`` made by bookworm's
    Python 3.11) on a Debian ``BUMP_SUITE`` base (Python 3.13), as when a Dockerfile's ``FROM`` moves on and
    the venv comes from a cache. The venv's ``python`` links to ``/usr/bin/python3``, now 3.13, whose path
    has no ``lib/python3.11/site-packages``: ``import torch`` fails. Its ``pip_list`` is empty (the venv's
    pip cannot run either). Raises ``Unavailable`` as ``build()`` does."""
    main = build(log)
    done = main.folder / "bump"
    with _locked(cache_root()):
        if not (done / "result.json").is_file():
            work = Path(tempfile.mkdtemp(prefix=".bump-", dir=main.folder))
            try:
                result = _build_bump_into(work, main, log)
                (work / "result.json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
                _remove(done)
                work.rename(done)
            finally:
                _remove(work)
    return _load(done, reused=True).images["base-bump"]


def _build_bump_into(out: Path, main: Built, log: Callable[[str], None]) -> dict[str, Any]:
    healthy = main.images["healthy"]
    layers, roots = out / "layers", out / "roots"
    layers.mkdir()
    roots.mkdir()
    root = roots / "base-bump"
    started = time.monotonic()
    _mmdebstrap(root, BUMP_SUITE, out, log=log)
    _tar_tree(root, sorted(p.name for p in root.iterdir()), layers / "base.tar", excludes=BASE_EXCLUDES,
              log=log)  # fmt: skip
    os.link(healthy.layers[1], layers / "app.tar")
    _clone(healthy.root / "app", root / "app")
    config = _healthy_config()
    argv = (f"{VENV}/bin/python", "-c", "import torch")
    probe = run_in_root(root, argv, _image_env(config), workdir=config["WorkingDir"])
    control = run_in_root(healthy.root, argv, healthy.env, workdir=config["WorkingDir"])
    system = run_in_root(
        root, ["/usr/bin/python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"]
    )
    if probe.returncode == 0 or control.returncode != 0 or system.returncode != 0:
        raise RuntimeError(f"base-bump: the probe did not fail as planned: {probe.output} {control.output}")
    entry = {
        "layers": ["layers/base.tar", "layers/app.tar"],
        "config": config,
        "root": "roots/base-bump",
        "broken": f"the base moved to Debian {BUMP_SUITE} (Python {system.output.strip()}) under a venv made "
        f"with Python {PYTHON_VERSION}: its python is the new one, its site-packages are not on its path",
        "probe": probe.to_json(),
        "control": control.to_json(),
        "pip_list": [],
    }
    images = _pack(out, {"base-bump": entry}, log, suite=BUMP_SUITE)
    return {"key": key(), "suite": BUMP_SUITE, "images": images,
            "timings": {"base bump": round(time.monotonic() - started, 1)}}  # fmt: skip


def _main() -> int:
    begun = time.monotonic()
    try:
        built = build(log=lambda line: print(line, file=sys.stderr, flush=True))
        if "--bump" in sys.argv[1:]:
            bump = build_bump(log=lambda line: print(line, file=sys.stderr, flush=True))
            built = Built(built.folder, {**built.images, bump.name: bump}, built.timings, built.reused)
    except Unavailable as e:
        print(f"cannot build the test images: {e}", file=sys.stderr)
        return 2
    print(f"{built.folder} ({'reused' if built.reused else 'built'} in {time.monotonic() - begun:.1f} s)")
    for step, seconds in built.timings.items():
        print(f"  {step}: {seconds} s")
    for image in built.images.values():
        last = (image.probe.output.strip().splitlines() or [""])[-1][:200]
        print(f"{image.name}: {image.broken or 'healthy'}\n  probe exit {image.probe.returncode}: {last}")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
