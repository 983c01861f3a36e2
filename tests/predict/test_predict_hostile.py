"""``envcheck predict`` and its wheel cache against hostile wheels, indexes and caches (the class-level
suite: each case runs the real CLI under ``tests/hostile.py``'s runner, whose whole process tree must stay
under 300 MB and end within its deadline + 5 s, pip or uv included).

Everything is local: the wheels lie in a ``--find-links`` folder, the index is an empty folder (or a
local socket that never answers), pip's and uv's configuration files are off, and the caches are the
test's own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from hostile import Bounded, assert_bounded, envcheck_argv, run_bounded
from test_canaries import GHP_FOLDER

from envcheck.native.scan import MAX_RATIO, MAX_WHEEL_MEMBERS, RATIO_FLOOR_BYTES
from envcheck.predict.fetch import WheelCache
from envcheck.predict.pip_entry import MAX_METADATA_BYTES
from envcheck.predict.uv import uv_binary

from .conftest import CPU

pytestmark = pytest.mark.slow
PLATFORM = "manylinux_2_28_x86_64"
TAG = f"py3-none-{PLATFORM}"


def _resolvers() -> list[str]:
    return ["pip", "uv"] if uv_binary() is not None else ["pip"]


def _manifest(tmp: Path, *dists: tuple[str, str], requires: tuple[str, ...] = ()) -> Path:
    """The example CPU manifest with only ``dists`` installed (nothing from an index but these)."""
    data = json.loads(CPU.read_text(encoding="utf-8"))
    template = {**data["packages"][0], "requires": list(requires), "native_files": [], "wheel_tags": [TAG]}
    data["packages"] = [{**template, "name": n, "version": v} for n, v in dists]
    path = tmp / "dev.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    (tmp / "tmp").mkdir(exist_ok=True)
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        XDG_CACHE_HOME=str(tmp / "cache"),
        UV_CACHE_DIR=str(tmp / "uv-cache"),
        TMPDIR=str(tmp / "tmp"),
        PIP_NO_CACHE_DIR="1",
    )
    return env


def _predict(
    tmp: Path, manifest: Path, wheels: Path, resolver: str, *extra: str, timeout: float = 60
) -> Bounded:
    empty = tmp / "empty-index"
    empty.mkdir(exist_ok=True)
    argv = envcheck_argv(
        "predict",
        str(manifest),
        "--platform",
        PLATFORM,
        "--python-version",
        "3.11",
        "--resolver",
        resolver,
        "--index-url",
        empty.as_uri(),
        "--find-links",
        str(wheels),
        "--timeout",
        str(timeout),
        "--format",
        "json",
        "--quiet",
        *extra,
    )
    return run_bounded(argv, timeout=timeout, env=_env(tmp), cwd=tmp)


def _dist_info(name: str, requires: tuple[str, ...] | list[str] = ()) -> dict[str, bytes]:
    info = f"{name}-1.0.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    return {
        f"{info}/METADATA": metadata.encode(),
        f"{info}/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {TAG}\n".encode(),
        f"{info}/RECORD": b"",
    }


def _stored_zip(path: Path, members: Iterator[tuple[str, bytes]], *, claimed: int | None = None) -> None:
    """A zip of stored members written directly (zip64 end records: any number of members), so that a
    200,000-member wheel takes a second to make instead of zipfile's minutes. ``claimed``: the member
    count its end records state, a lie when given."""
    central = bytearray()
    count = 0
    with path.open("wb") as f:
        for name, data in members:
            raw = name.encode()
            crc = zlib.crc32(data)
            offset = f.tell()
            f.write(
                struct.pack(
                    "<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc, len(data), len(data), len(raw), 0
                )
            )
            f.write(raw + data)
            central += struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                0,
                0,
                0,
                0x21,
                crc,
                len(data),
                len(data),
                len(raw),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            central += raw
            count += 1
        start = f.tell()
        f.write(central)
        end64 = f.tell()
        count = count if claimed is None else claimed
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, count, count, len(central), start))
        f.write(struct.pack("<IIQI", 0x07064B50, 0, end64, 1))
        f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, len(central), start, 0))


def _wheel(folder: Path, name: str, members: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-1.0-{TAG}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in {**members, **_dist_info(name)}.items():
            zf.writestr(member, data)
    return path


def _deflated(name: str) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    return info


def _zeros_member(zf: zipfile.ZipFile, name: str, size: int) -> None:
    """A deflated member of ``size`` zero bytes, written in chunks (never held whole)."""
    with zf.open(_deflated(name), "w", force_zip64=size > 2**31) as out:
        chunk = b"\0" * (1 << 20)
        for _ in range(size >> 20):
            out.write(chunk)


def _findings(result: Bounded) -> list[dict[str, object]]:
    return list(json.loads(result.stdout)["findings"])


# ---------------------------------------------------------------------------------------------------------
# Members per wheel: a named limit, read from the zip's end record before its member directory.


@pytest.mark.parametrize("resolver", _resolvers())
def test_a_wheel_of_200000_members_is_refused_by_name_within_the_bounds(
    tmp_path: Path, resolver: str
) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    members = ((f"evil/lib{i}.so", b"\x7fELF") for i in range(199_990))
    dist_info = iter(_dist_info("evil").items())
    _stored_zip(wheels / f"evil-1.0-{TAG}.whl", (m for part in (members, dist_info) for m in part))
    result = _predict(tmp_path, _manifest(tmp_path, ("evil", "1.0")), wheels, resolver)
    assert_bounded(result, timeout=60)
    shown = result.stdout + result.stderr
    assert "MAX_WHEEL_MEMBERS" in shown and f"{MAX_WHEEL_MEMBERS}" in shown, shown[-2000:]
    assert result.returncode in (1, 2)
    assert "Nothing differs" not in shown


@pytest.mark.parametrize("resolver", _resolvers())
def test_a_wheel_that_lies_about_its_member_count_is_refused_within_the_bounds(
    tmp_path: Path, resolver: str
) -> None:
    """The end record claims 10 members; the directory (under its byte cap) holds 140,000: the count of
    what was read is checked too."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    members = ((f"e/{i:x}.so", b"") for i in range(140_000))
    dist_info = iter(_dist_info("liar").items())
    path = wheels / f"liar-1.0-{TAG}.whl"
    _stored_zip(path, (m for part in (members, dist_info) for m in part), claimed=10)
    result = _predict(tmp_path, _manifest(tmp_path, ("liar", "1.0")), wheels, resolver)
    assert_bounded(result, timeout=60)
    shown = result.stdout + result.stderr
    # envcheck's cap (pip's run, then the scan), or uv's own refusal of the inconsistent directory.
    assert "MAX_WHEEL_MEMBERS" in shown or "conflicts with the actual number of entries" in shown, shown[
        -2000:
    ]
    assert result.returncode in (1, 2) and "Nothing differs" not in shown


# ---------------------------------------------------------------------------------------------------------
# A small wheel holding a 200 MB METADATA: refused by its size before pip (or envcheck) reads it.


@pytest.mark.parametrize("resolver", _resolvers())
def test_a_200_mb_metadata_is_refused_before_the_resolver_reads_it(tmp_path: Path, resolver: str) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    path = wheels / f"fat-1.0-{TAG}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for member, data in _dist_info("fat").items():
            if not member.endswith("METADATA"):
                zf.writestr(member, data)
        with zf.open(_deflated("fat-1.0.dist-info/METADATA"), "w") as out:
            out.write(b"Metadata-Version: 2.1\nName: fat\nVersion: 1.0\nDescription: ")
            for _ in range(200):
                out.write(b" " * (1 << 20))
    assert path.stat().st_size < 2 * 1024**2
    result = _predict(tmp_path, _manifest(tmp_path, ("fat", "1.0")), wheels, resolver)
    assert_bounded(result, timeout=60)
    shown = result.stdout + result.stderr
    assert "MAX_METADATA_BYTES" in shown and f"{MAX_METADATA_BYTES}" in shown, shown[-2000:]
    assert "Nothing differs" not in shown


# ---------------------------------------------------------------------------------------------------------
# Zip bombs at any member size, and refused members as findings.


def test_small_bombs_are_refused_and_the_prediction_says_so(tmp_path: Path) -> None:
    """Members just over the 1 MiB floor, each 1000:1 (the old cap looked only at members over 16 MiB),
    and many small members under the floor whose sum is far over the wheel's size times the ratio cap."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    path = wheels / f"bomb-1.0-{TAG}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for i in range(4):
            _zeros_member(zf, f"bomb/libbig{i}.so", 2 * RATIO_FLOOR_BYTES)
        for i in range(400):
            _zeros_member(zf, f"bomb/libsmall{i}.so", RATIO_FLOOR_BYTES)
        for member, data in _dist_info("bomb").items():
            zf.writestr(member, data)
    wheel_size = path.stat().st_size
    assert wheel_size * MAX_RATIO < 400 * RATIO_FLOOR_BYTES
    result = _predict(tmp_path, _manifest(tmp_path, ("bomb", "1.0")), wheels, "pip")
    assert_bounded(result, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    [refused] = [f for f in _findings(result) if f["rule"] == "ENV-PREDICT-REFUSED"]
    assert "ratio cap" in str(refused["message"]) and "times its size" in str(refused["message"])
    assert "Nothing differs" not in result.stdout + result.stderr


# ---------------------------------------------------------------------------------------------------------
# One deadline for the whole command; the temp folders of envcheck, pip and uv removed at it and on Ctrl-C.


@pytest.fixture
def silent_index() -> Iterator[str]:
    """An index URL whose server accepts connections and never answers."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                held.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/simple"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _left_behind(tmp: Path) -> list[str]:
    found = [p.name for p in (tmp / "tmp").iterdir()]
    cache = tmp / "cache" / "envcheck" / "wheels"
    found += [p.name for p in cache.glob(".tmp-*")] if cache.is_dir() else []
    return found


@pytest.mark.parametrize("resolver", _resolvers())
def test_timeout_is_one_deadline_for_the_command_and_nothing_is_left_behind(
    tmp_path: Path, silent_index: str, resolver: str
) -> None:
    manifest = _manifest(tmp_path, ("numpy", "2.4.6"))
    argv = envcheck_argv(
        "predict", str(manifest), "--platform", PLATFORM, "--python-version", "3.11", "--resolver", resolver
    )
    argv += ["--index-url", silent_index, "--timeout", "8", "--quiet"]
    result = run_bounded(argv, timeout=8, env=_env(tmp_path), cwd=tmp_path)
    assert_bounded(result, timeout=8)
    assert result.returncode == 2, result.stderr
    assert "deadline (--timeout 8 s) passed while" in result.stderr and "stopped" in result.stderr
    assert _left_behind(tmp_path) == []


@pytest.mark.parametrize("at", ["process", "thread"], ids=["to-the-process", "to-a-worker-thread"])
@pytest.mark.parametrize("resolver", _resolvers())
def test_an_interrupt_while_the_resolver_runs_removes_its_temp_folders(
    tmp_path: Path, silent_index: str, resolver: str, at: str
) -> None:
    """``at``: the kernel may hand a process's signal to any of its threads, here the one that waits on the
    resolver; Python acts on it in the main thread once that one wakes (``envcheck.process.awake``). CI once
    saw the main thread sleep through a Ctrl-C so, for the 60 s of the deadline."""
    manifest = _manifest(tmp_path, ("numpy", "2.4.6"))
    argv = envcheck_argv(
        "predict", str(manifest), "--platform", PLATFORM, "--python-version", "3.11", "--resolver", resolver
    )
    argv += ["--index-url", silent_index, "--timeout", "60", "--quiet"]
    with subprocess.Popen(
        argv, env=_env(tmp_path), cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as proc:
        try:
            # Wait (bounded) until pip or uv runs: its log exists in envcheck's work folder.
            for _ in range(600):
                if list((tmp_path / "tmp").rglob(f"{resolver}.log")):
                    break
                time.sleep(0.05)
            else:
                pytest.fail(f"{resolver} never started")
            threads = [int(t.name) for t in Path(f"/proc/{proc.pid}/task").iterdir()]
            workers = sorted(t for t in threads if t != proc.pid)
            assert workers, "no worker thread waits on the resolver"
            # A kill() naming a thread's id goes to the process, but to that thread first.
            os.kill(workers[-1] if at == "thread" else proc.pid, signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, stderr
    assert _left_behind(tmp_path) == []


# ---------------------------------------------------------------------------------------------------------
# --save: through the redactor, and only a manifest that loads back.


def test_save_redacts_credentials_from_requirement_lines_and_urls(tmp_path: Path) -> None:
    secrets = ["CanaryPredictPass21", "CanaryPredictOauth22", "CanaryPredictQuery23", GHP_FOLDER]
    requires = [
        'a @ https://user:CanaryPredictPass21@mirror.example/a.whl ; sys_platform == "never"',
        'b @ git+https://oauth2:CanaryPredictOauth22@git.example/b.git ; sys_platform == "never"',
        'c @ https://files.example/c.whl?token=CanaryPredictQuery23 ; sys_platform == "never"',
        f'd @ https://{GHP_FOLDER}@github.com/o/d.git ; sys_platform == "never"',
    ]
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / f"leaky-1.0-{TAG}.whl", "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("leaky/libleaky.so", b"\x7fELF")
        for member, data in _dist_info("leaky", requires).items():
            zf.writestr(member, data)
    saved = tmp_path / "predicted.json"
    for resolver in _resolvers():
        # The dev box's METADATA says what the wheel's says (uv takes it from there, pip from the wheel).
        manifest = _manifest(tmp_path, ("leaky", "1.0"), requires=tuple(requires))
        result = _predict(tmp_path, manifest, wheels, resolver, "--save", str(saved))
        assert_bounded(result, timeout=60)
        assert result.returncode in (0, 1), result.stderr[-2000:]
        text = saved.read_text(encoding="utf-8")
        for secret in secrets:
            assert secret not in text, (resolver, secret)
            assert secret not in result.stdout + result.stderr
        # The lines arrived, redacted: the test cannot pass because they went missing.
        assert "mirror.example/a.whl" in text and "git.example/b.git" in text, resolver
        saved.unlink()


def test_a_predicted_manifest_that_would_not_load_is_not_written(tmp_path: Path) -> None:
    import dataclasses

    from envcheck.api._predict import saved_text
    from envcheck.core.errors import UsageError
    from envcheck.core.files import MAX_MANIFEST_BYTES
    from envcheck.manifest.io import load

    source = load(CPU)
    huge = dataclasses.replace(
        source.packages[0],
        requires=[f"dep{i} ; extra == '{'x' * 1000}'" for i in range(MAX_MANIFEST_BYTES // 1000)],
    )
    manifest = dataclasses.replace(source, packages=[huge])
    with pytest.raises(UsageError, match="is not written: it would not load back"):
        saved_text(manifest, "win_amd64")


# ---------------------------------------------------------------------------------------------------------
# The cache is a cache: entries verified on read, stored files capped and checked, pruning only its own.


def test_a_planted_wheel_in_the_cache_is_verified_and_removed(tmp_path: Path) -> None:
    from envcheck.core.errors import UsageError
    from envcheck.predict.resolve import ResolvedWheel

    real = _wheel(tmp_path / "src", "good", {"good/libgood.so": b"\x7fELF"})
    import hashlib

    digest = hashlib.sha256(real.read_bytes()).hexdigest()
    wheel = ResolvedWheel(
        name="good",
        version="1.0",
        url=f"https://files.example/{real.name}",
        sha256=digest,
        filename=real.name,
        requires=None,
        requested=True,
    )
    cache = WheelCache(tmp_path / "cache")
    entry = cache.entry(wheel)
    assert entry is not None
    entry.parent.mkdir(parents=True)
    planted = _wheel(tmp_path / "evil", "good", {"good/libgood.so": b"\x7fELF planted"})
    entry.write_bytes(planted.read_bytes())
    with pytest.raises(UsageError, match="does not match the sha256"):
        cache.scan_tree([wheel])
    assert not entry.exists()
    entry.write_bytes(planted.read_bytes())
    with pytest.raises(UsageError, match="does not match the sha256"):
        cache.requires_of(wheel)
    entry.write_bytes(real.read_bytes())
    assert cache.scan_tree([wheel]).section.nodes  # the real one scans


def test_a_stored_scan_or_requirement_file_is_read_capped_and_checked(tmp_path: Path) -> None:
    from envcheck.predict.fetch import MAX_SCAN_BYTES, _read_requires, _read_scan

    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.write(b'{"format": "x", "pad": "')
        f.seek(MAX_SCAN_BYTES + 10)
        f.write(b'"}')
    assert _read_scan(big) is None
    wrong = tmp_path / "wrong.json"
    wrong.write_text(json.dumps({"format": "envcheck-scan/0/0", "section": {"nodes": "not a list"}}))
    assert _read_scan(wrong) is None
    assert _read_requires(wrong) is None
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    assert _read_requires(fifo) is None  # a FIFO is never opened for reading as a file (no hang)
    link = tmp_path / "link.json"
    link.symlink_to(wrong)
    assert _read_requires(link) is None


def test_pruning_never_follows_a_link_and_removes_only_what_envcheck_wrote(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = WheelCache(root, max_bytes=0)
    # The user's files, which a link in the cache points at.
    precious = tmp_path / "precious"
    precious.mkdir()
    for i in range(300):
        (precious / f"{i}.json").write_text("{}")
    (root / "trees").parent.mkdir(parents=True)
    (root / "trees").symlink_to(precious)
    # An entry folder that is a link, and a real entry with a file envcheck did not write beside its own.
    (root / ("a" * 64)).symlink_to(precious)
    own = root / ("b" * 64)
    own.mkdir()
    wheel = own / f"own-1.0-{TAG}.whl"
    wheel.write_bytes(b"x" * 100)
    cache.record(wheel)
    stranger = own / "notes.txt"
    stranger.write_text("mine")
    removed = cache.prune()
    assert removed == [own]
    assert not wheel.exists() and stranger.read_text() == "mine"
    assert len(list(precious.iterdir())) == 300


def test_one_command_writes_at_most_its_byte_cap_over_all_its_wheels(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each wheel within its own caps, together over the command's: the member that would pass the
    command's cap is refused, named, and nothing past the cap is written."""
    import hashlib

    from envcheck.predict import fetch
    from envcheck.predict.resolve import ResolvedWheel

    monkeypatch.setattr(fetch, "MAX_WRITTEN_BYTES", 5 * 1024**2)
    wheels = []
    for name in ("one", "two"):
        path = _wheel(tmp_path / "wheels", name, {f"{name}/lib{name}.so": os.urandom(3 * 1024**2)})
        wheels.append(
            ResolvedWheel(
                name=name,
                version="1.0",
                url=path.as_uri(),
                sha256=hashlib.sha256(path.read_bytes()).hexdigest(),
                filename=path.name,
                requires=(),
                requested=True,
            )
        )
    tree = WheelCache(tmp_path / "cache").scan_tree(wheels)
    # The wheels are extracted in the order of their hashes: whichever comes second is refused.
    refused = {r.path: r.reason for r in tree.section.refused or []}
    assert len(refused) == 1 and set(refused) <= {"one/libone.so", "two/libtwo.so"}, refused
    [reason] = refused.values()
    assert "past the" in reason and "what the command may still write" in reason


def test_the_deadline_stops_extraction_between_members(tmp_path: Path) -> None:
    """The deadline is checked before each member, not only between wheels: one that passes while a wheel
    is extracted stops it there, naming how far it got (a fault injected: the deadline passes after the
    second member)."""
    from envcheck.core.deadline import Deadline, DeadlineExpired
    from envcheck.native.scan import extract_native

    class PassesAfterTwo:
        calls = 0

        def check(self, step: str, done: str | None = None) -> None:
            self.calls += 1
            if self.calls > 2:
                raise DeadlineExpired(step, Deadline(at=0.0, seconds=1.0), done)

    path = _wheel(tmp_path / "wheels", "many", {f"many/lib{i}.so": b"\x7fELF" for i in range(10)})
    into = tmp_path / "into"
    into.mkdir()
    with pytest.raises(
        DeadlineExpired, match=r"while extracting many-1\.0-.*\(2 of its native files written\)"
    ):
        extract_native(path, str(into), deadline=PassesAfterTwo())  # type: ignore[arg-type]
    assert len(list(into.rglob("*.so"))) == 2
