"""The wheel cache: an interrupted download leaves no entry, a download that does not match the report's
sha256 never enters, and a warm run downloads nothing. Real pip, real wheels from the registry."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from envcheck.core.errors import UsageError
from envcheck.predict.fetch import WheelCache, sha256_of
from envcheck.predict.resolve import IndexOptions, ResolvedWheel
from envcheck.predict.target import parse_target

from .conftest import CPU

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("registry")]

# torch and what it needs: a small resolution with one big wheel (the Windows torch, ~120 MB).
_TORCH_SET = {"torch", "filelock", "typing_extensions", "setuptools", "sympy", "mpmath", "networkx"}
_TORCH_SET |= {"Jinja2", "MarkupSafe", "fsspec"}


def _torch_manifest(tmp_path: Path) -> Path:
    data = json.loads(CPU.read_text(encoding="utf-8"))
    data["packages"] = [p for p in data["packages"] if p["name"] in _TORCH_SET]
    path = tmp_path / "torch-only.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _bytes_under(*folders: Path) -> int:
    total = 0
    for folder in folders:
        for dirpath, _dirs, files in os.walk(folder):
            for name in files:
                try:
                    total = max(total, (Path(dirpath) / name).stat().st_size)
                except OSError:
                    continue
    return total


def _children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (pip runs in a session of its own), from /proc."""
    out: list[int] = []
    parents = {pid}
    for _ in range(3):
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid in parents and int(entry.name) not in out:
                out.append(int(entry.name))
        parents |= set(out)
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find pip under envcheck")
@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_an_interrupted_download_leaves_no_cache_entry(tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(cache), "TMPDIR": str(tmpdir)}
    argv = [
        sys.executable,
        "-m",
        "envcheck",
        "predict",
        str(_torch_manifest(tmp_path)),
        "--platform",
        "win_amd64",
    ]
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    deadline = time.monotonic() + 240
    # Interrupt once the download is under way: some MB of a wheel written, none in the cache yet.
    while _bytes_under(tmpdir, cache) < 4 * 1024**2:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the download never started"
        time.sleep(0.05)
    if how == "SIGKILL":
        for pid in [*_children(proc.pid), proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
    else:
        proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=60)
    wheels = cache / "envcheck" / "wheels"
    entries = list(wheels.glob("*/*.whl")) if wheels.is_dir() else []
    # Whatever finished before the interrupt verified; nothing half-written looks like an entry.
    for entry in entries:
        assert sha256_of(entry) == entry.parent.name, entry
    assert not any(p.name.startswith("torch-") for p in entries)
    if how == "SIGINT":
        assert proc.returncode == 130, err
        assert b"interrupted" in err
        assert not list(wheels.glob(".tmp-*")), "an interrupt removes its temporary download folder"


def _torch_wheel(tmp_path: Path) -> ResolvedWheel:
    from envcheck.manifest.io import load
    from envcheck.predict.resolve import resolve

    tmp_path.mkdir()
    resolution = resolve(
        load(_torch_manifest(tmp_path)), parse_target("win_amd64", "3.11"), IndexOptions(), workdir=tmp_path
    )
    return next(w for w in resolution.wheels if w.name == "MarkupSafe")


def test_a_download_that_does_not_match_the_report_never_enters(tmp_path: Path) -> None:
    wheel = _torch_wheel(tmp_path / "resolve")
    assert wheel.filename.endswith("win_amd64.whl") and wheel.sha256 is not None
    lying = ResolvedWheel(
        name=wheel.name,
        version=wheel.version,
        url=wheel.url.split("#", 1)[0],
        sha256="0" * 64,
        filename=wheel.filename,
        requires=wheel.requires,
        requested=True,
    )
    cache = WheelCache(tmp_path / "cache")
    with pytest.raises(UsageError, match=r"sha256|hash"):
        cache.fetch([lying], parse_target("win_amd64", "3.11"), IndexOptions())
    assert cache.wheel_path(lying) is None
    assert not list((tmp_path / "cache").glob("*/*.whl"))
    # The true hash: fetched, verified, and found by a second cache on the same folder.
    cache.fetch([wheel], parse_target("win_amd64", "3.11"), IndexOptions())
    entry = WheelCache(tmp_path / "cache").wheel_path(wheel)
    assert entry is not None and sha256_of(entry) == wheel.sha256
    assert not list((tmp_path / "cache").glob(".tmp-*"))
