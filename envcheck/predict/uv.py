"""uv as predict's resolver (``--resolver uv``, the ``envcheck[uv]`` extra): ``uv pip compile`` for the
target's platform and Python, its answer read from the ``pylock.toml`` it writes.

The same inputs as pip's resolution: the roots pinned, the rest as constraints, binary wheels only, and
the indexes pip is configured with (its configuration files and ``PIP_*`` variables, read in-process with
pip's own reader) plus the ones given, searched like pip searches them (the best match across all
indexes). uv evaluates the requirement markers for ``--python-platform`` itself. Its lock lists every
wheel of a version that suits the platform family (``macosx_11_0`` and ``macosx_14_0`` builds of
numpy); the one pip would install is chosen here by the target's tag order.
"""

# uv runs as an argument list (no shell).

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

from envcheck.core.errors import UsageError
from envcheck.core.files import NotOpened, open_regular
from envcheck.native.scan import directory_problem
from envcheck.predict.pip_entry import MAX_METADATA_BYTES
from envcheck.predict.target import PredictTarget

# The manylinux levels ``uv pip compile --python-platform`` names (uv 0.13).
_UV_MANYLINUX = {17, 28, *range(31, 41)}
_MANYLINUX = re.compile(r"manylinux_2_(\d+)_(x86_64|aarch64)")
_MACOS = re.compile(r"macosx_(\d+)_(\d+)_(arm64|x86_64)")
_WINDOWS = {"win_amd64": "x86_64-pc-windows-msvc", "win_arm64": "aarch64-pc-windows-msvc"}
_WINDOWS["win32"] = "i686-pc-windows-msvc"


def uv_binary() -> str | None:
    """The uv executable: the ``uv`` package's own (the ``envcheck[uv]`` extra), else ``uv`` on ``PATH``."""
    try:
        import uv  # type: ignore[import-not-found,unused-ignore]

        found = uv.find_uv_bin()
        if isinstance(found, str | os.PathLike) and Path(found).is_file():
            return str(found)
    except (ImportError, FileNotFoundError, OSError, AttributeError):
        pass
    return shutil.which("uv")


def uv_platform(target: PredictTarget) -> tuple[str, dict[str, str]] | None:
    """``--python-platform`` for ``target`` and the environment it needs (the macOS release goes in
    ``MACOSX_DEPLOYMENT_TARGET``), or None where uv cannot name the target (PyPy, manylinux levels uv does
    not list, musllinux other than 1.2, universal2)."""
    if target.implementation != "cp":
        return None
    tag = target.platform
    if tag in _WINDOWS:
        return _WINDOWS[tag], {}
    m = _MACOS.fullmatch(tag)
    if m is not None:
        arch = "aarch64" if m.group(3) == "arm64" else "x86_64"
        return f"{arch}-apple-darwin", {"MACOSX_DEPLOYMENT_TARGET": f"{m.group(1)}.{m.group(2)}"}
    m = _MANYLINUX.fullmatch(tag)
    if m is not None and int(m.group(1)) in _UV_MANYLINUX:
        return f"{m.group(2)}-manylinux_2_{m.group(1)}", {}
    if tag in ("manylinux2014_x86_64", "manylinux2014_aarch64"):
        return f"{tag[len('manylinux2014_') :]}-manylinux2014", {}
    if tag in ("musllinux_1_2_x86_64", "musllinux_1_2_aarch64"):
        return f"{tag[len('musllinux_1_2_') :]}-unknown-linux-musl", {}
    return None


def pip_configuration() -> dict[str, list[str]]:
    """pip's configured ``index-url``, ``extra-index-url``, ``find-links`` and ``constraint`` (files and
    ``PIP_*`` variables, ``install`` over ``global``), read with pip's own reader; empty where pip is
    missing or its configuration cannot be read."""
    try:
        from pip._internal.configuration import Configuration

        config = Configuration(isolated=False)
        config.load()
    except Exception:  # pip's internals: any failure means "no configuration"
        return {}
    out: dict[str, list[str]] = {}
    for key in ("index-url", "extra-index-url", "find-links", "constraint"):
        for section in (":env:", "install", "global"):
            # get_value, not items(): pip 26 changed what items() yields (a dictionary per file) but not
            # get_value, which merges the files in pip's order of precedence in every release.
            try:
                raw = config.get_value(f"{section}.{key}")
            except Exception:  # ConfigurationError: no such key
                continue
            if isinstance(raw, str) and raw.strip():
                out[key] = raw.split()
                break
    return out


def uv_argv(
    uv: str,
    target: PredictTarget,
    platform: str,
    *,
    index_url: str | None,
    extra_index_urls: Iterable[str],
    find_links: Iterable[str],
    pins: Path,
    constraints: Path,
    lock: Path,
) -> list[str]:
    """``uv pip compile`` of ``pins`` under ``constraints`` for ``target``, the answer in ``lock``."""
    config = pip_configuration()
    index = index_url or next(iter(config.get("index-url", [])), None)
    extras = [*config.get("extra-index-url", []), *extra_index_urls]
    links = [*config.get("find-links", []), *find_links]
    check_local_wheels([*links, *extras, *([index] if index else [])])
    argv = [uv, "pip", "compile", str(pins), "-c", str(constraints)]
    argv += [f"--constraints={c}" for c in config.get("constraint", []) if Path(c).is_file()]
    argv += ["--python-platform", platform, "--python-version", target.python_version]
    argv += ["--only-binary", ":all:", "--format", "pylock.toml", "--no-header", "--no-config"]
    argv += ["--index-strategy", "unsafe-best-match", "--quiet", "-o", str(lock)]
    if index:
        argv.append(f"--default-index={index}")
    argv += [f"--index={u}" for u in dict.fromkeys(extras)]
    argv += [f"--find-links={f}" for f in dict.fromkeys(links)]
    return argv


# Local wheels uv may read (``--find-links`` folders, ``file:`` indexes): at most this many files looked at.
MAX_LOCAL_WHEELS = 10_000
# What each local wheel's check found, by path, size and mtime: every resolution attempt asks again.
_CHECKED: dict[tuple[str, int, int], str | None] = {}


def check_local_wheels(places: Iterable[str]) -> None:
    """Refuse, before uv reads them, the local wheels of ``places`` whose member directory or METADATA is
    over envcheck's caps (pip's own run refuses them itself: ``pip_entry``). Raises ``UsageError`` naming
    the wheel and the cap."""
    from urllib.parse import unquote, urlsplit

    seen = 0
    for place in places:
        parts = urlsplit(place)
        if parts.scheme not in ("", "file"):
            continue
        folder = Path(unquote(parts.path) if parts.scheme == "file" else place)
        try:
            candidates = (
                [folder] if folder.is_file() else list(folder.rglob("*.whl")) if folder.is_dir() else []
            )
        except OSError:
            continue
        for wheel in candidates:
            seen += 1
            if seen > MAX_LOCAL_WHEELS:
                return
            try:
                if wheel.is_symlink() or not wheel.is_file():
                    continue
                st = wheel.stat()
                key = (str(wheel), st.st_size, st.st_mtime_ns)
                if key not in _CHECKED:
                    problem = directory_problem(wheel)
                    _CHECKED[key] = problem or _metadata_problem(wheel, MAX_METADATA_BYTES)
                problem = _CHECKED[key]
            except OSError:
                continue
            if problem is not None:
                raise UsageError(
                    f"{wheel.name} (in {place}): {problem}: refused before the resolver reads it",
                    tip="A real wheel stays far inside these caps: check where this one comes from.",
                )


def _metadata_problem(wheel: Path, cap: int) -> str | None:
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.filename.endswith(".dist-info/METADATA") and info.file_size > cap:
                    size = info.file_size
                    return f"{info.filename} is {size} bytes, over the {cap}-byte cap (MAX_METADATA_BYTES)"
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None
    return None


def uv_environment(extra: dict[str, str]) -> dict[str, str]:
    """uv's environment: the caller's (credentials, proxies, certificates), no colour or progress bars,
    the system's certificates as pip uses them, and ``extra``."""
    env = {
        **os.environ,
        "NO_COLOR": "1",
        "UV_NO_PROGRESS": "1",
        "UV_HTTP_TIMEOUT": "15",
        "UV_HTTP_RETRIES": "1",
    }
    env.setdefault("UV_NATIVE_TLS", "1")
    env.update(extra)
    return env


def lock_report(lock: Path, target: PredictTarget, pins: Iterable[str], max_bytes: int) -> dict[str, object]:
    """The ``pylock.toml`` uv wrote, as the part of pip's ``--report`` that ``resolve`` reads: one
    ``install`` item per package, with the wheel pip would choose for ``target``. ``requires_dist`` is
    absent (a lock does not carry it): it is filled in later from the source manifest or the wheel."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib

    raw = read_output(lock, max_bytes, "uv's lock")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UsageError(f"uv wrote a lock that is not TOML: {str(e)[:200]}") from e
    requested = {_canon(p) for p in pins}
    install: list[object] = []
    packages = data.get("packages")
    for package in packages if isinstance(packages, list) else []:
        if not isinstance(package, dict):
            continue
        name, version = str(package.get("name") or ""), str(package.get("version") or "")
        wheels = [
            w for w in package.get("wheels") or [] if isinstance(w, dict) and isinstance(w.get("url"), str)
        ]
        best = best_wheel(wheels, target)
        if best is None:
            continue
        hashes = best.get("hashes")
        install.append(
            {
                "metadata": {"name": name, "version": version, "requires_unknown": True},
                "download_info": {
                    "url": best["url"],
                    "archive_info": {"hashes": hashes if isinstance(hashes, dict) else {}},
                },
                "requested": _canon(name) in requested,
            }
        )
    return {"install": install}


def read_output(path: Path, cap: int, what: str) -> bytes:
    """The bytes of a file a resolver wrote (uv's lock, pip's ``--report``), read as untrusted: opened
    non-blocking, only as a regular file inside its own folder (``open_regular``: a link out of it, say
    to ``/dev/zero``, is refused; the resolved file is opened with ``O_NOFOLLOW``; a FIFO or a device
    is closed unread), at most ``cap`` bytes. Raises ``UsageError`` naming ``what`` otherwise, and when
    the tool exited 0 without writing it."""
    try:
        fd = open_regular(str(path), inside=[os.path.realpath(path.parent)])
    except FileNotFoundError as e:
        raise UsageError(
            f"{what} is missing ({path.name}): the tool exited 0 without writing it",
            tip="Run the resolver by hand to see what it does, or try the other one (--resolver pip|uv).",
        ) from e
    except NotOpened as e:
        why = "is a symbolic link out of envcheck's work folder" if e.kind == "link-outside" else e.reason
        raise UsageError(
            f"{what} ({path.name}) {why}: not read", tip="Check where the resolver comes from."
        ) from e
    except OSError as e:
        raise UsageError(f"cannot read {what} ({path.name}): {e.strerror or e}") from e
    with os.fdopen(fd, "rb") as f:
        raw = f.read(cap + 1)
    if len(raw) > cap:
        raise UsageError(f"{what} is over the {cap}-byte cap")
    return raw


def best_wheel(wheels: list[dict[str, object]], target: PredictTarget) -> dict[str, object] | None:
    """The wheel pip would install on ``target`` among those uv listed: the most specific interpreter tag
    first (``cp311-cp311``, then ``abi3``, then ``none``, then ``py3``), then the target's platform tag
    order (the newest macOS or glibc level the machine has)."""
    ranked = [(rank, w) for w in wheels if (rank := _rank(str(w["url"]), target)) is not None]
    return min(ranked, key=lambda pair: pair[0])[1] if ranked else None


def _rank(url: str, target: PredictTarget) -> tuple[int, int] | None:
    from urllib.parse import unquote, urlsplit

    name = unquote(urlsplit(url).path.rsplit("/", 1)[-1])
    parts = name[: -len(".whl")].split("-") if name.endswith(".whl") else []
    if len(parts) < 5:
        return None
    pythons, abis, platforms = (p.split(".") for p in parts[-3:])
    cp = f"cp{target.python_version.replace('.', '')}"
    if "any" in platforms:
        return (9, 0)
    if cp in pythons and cp in abis:
        interpreter = 0
    elif "abi3" in abis:
        interpreter = 1
    elif "none" in abis and any(p.startswith("cp") for p in pythons):
        interpreter = 2
    else:
        interpreter = 3
    order = _platform_order(target)
    ranks = [order.index(p) for p in platforms if p in order]
    return (interpreter, min(ranks)) if ranks else (interpreter, len(order))


def _platform_order(target: PredictTarget) -> list[str]:
    """The target's platform tags, best first: pip's expansion of a macOS tag (every older release down to
    10.0 on Intel or 11.0 on arm64, the universal builds after the exact architecture), else
    ``PredictTarget.platforms``."""
    m = _MACOS.fullmatch(target.platform)
    if m is None:
        return target.platforms()
    major, minor, arch = int(m.group(1)), int(m.group(2)), m.group(3)
    releases = [(v, 0) for v in range(major, 10, -1)] if major >= 11 else []
    if major >= 11:
        releases[0] = (major, minor)
    releases += [(10, y) for y in range(minor if major == 10 else 16, -1, -1)] if arch == "x86_64" else []
    order = []
    for v, y in releases:
        order += [f"macosx_{v}_{y}_{arch}", f"macosx_{v}_{y}_universal2"]
        if arch == "x86_64":
            order += [f"macosx_{v}_{y}_intel", f"macosx_{v}_{y}_universal"]
    return order


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
