"""Run inside a pip subprocess (``python pip_entry.py MARKERS_JSON pip-args...``): pip's own command line,
with requirement markers evaluated for the target platform.

pip evaluates PEP 508 markers in the environment of the interpreter running it, even with ``--platform``
and ``--python-version`` (those choose wheel tags and ``Requires-Python`` only), so a resolution for
Windows made on Linux would still pull torch's ``; platform_system == "Linux"`` requirements. The marker
variables a platform tag determines replace the running interpreter's in ``packaging``'s default
environment, which pip's vendored ``packaging`` reads each time a marker is evaluated; everything else —
finding, resolving, downloading, hashing — is pip's unchanged. Imports nothing of envcheck.
"""

from __future__ import annotations

import json
import sys
from typing import Any


def main(argv: list[str]) -> int:
    overrides = json.loads(argv[0])
    if not isinstance(overrides, dict) or not all(isinstance(v, str) for v in overrides.values()):
        sys.stderr.write("pip_entry: the marker overrides must be a JSON object of strings\n")
        return 2
    from pip._vendor.packaging import markers

    running = markers.default_environment

    # Any: pip's vendored packaging gives a dict[str, str] before pip 26, its Environment TypedDict since.
    def target_environment() -> Any:
        environment: dict[str, Any] = dict(running())
        environment.update(overrides)
        return environment

    markers.default_environment = target_environment
    _report_unreachable_indexes()
    _refuse_oversized_wheels()
    from pip._internal.cli.main import main as pip_main

    return int(pip_main(argv[1:]) or 0)


# The line prefix envcheck reads back: an index page pip could not fetch for a connection error or a
# timeout. pip logs those at debug level and goes on as if the index had no such project, which would
# read as "no wheel for the target"; envcheck reports an unreachable index as the input error it is.
UNREACHABLE = "ENVCHECK-UNREACHABLE "


def _report_unreachable_indexes() -> None:
    try:
        from pip._internal.index import collector
    except ImportError:  # another pip's layout: the resolution still runs, without this report
        return
    original = getattr(collector, "_handle_get_simple_fail", None)
    if original is None:
        return

    def handle(link: object, reason: object, *args: object, **kwargs: object) -> None:
        text = str(reason)
        if text.startswith(("connection error", "timed out")) or "SSL" in text:
            url = str(getattr(link, "url", link)).replace("\n", " ")
            sys.stderr.write(f"{UNREACHABLE}{url}\t{text.splitlines()[0][:300]}\n")
        original(link, reason, *args, **kwargs)

    collector._handle_get_simple_fail = handle


# What pip may read of a wheel whose metadata it needs (a local or downloaded file without PEP 658
# metadata): its member directory, within these caps, read from the zip's end record first, and its
# METADATA / WHEEL members within MAX_METADATA_BYTES, refused by size before pip reads them. A 565 KB wheel
# holding a 200 MB METADATA took pip to 2.3 GB.
MAX_METADATA_BYTES = 16 * 1024**2
MAX_WHEEL_MEMBERS = 50_000
MAX_DIRECTORY_BYTES = 8 * 1024**2


def _refuse_oversized_wheels() -> None:
    try:
        from pip._internal.exceptions import UnsupportedWheel
        from pip._internal.metadata import base
        from pip._internal.utils import wheel as wheel_utils
    except ImportError:  # another pip's layout: pip runs without these caps
        return
    opened = base.FilesystemWheel.as_zipfile

    def as_zipfile(self: object) -> object:
        location = str(getattr(self, "location", ""))
        problem = directory_problem(location)
        if problem is not None:
            raise UnsupportedWheel(f"{location.rsplit('/', 1)[-1]}: {problem}")
        return opened(self)  # type: ignore[arg-type]

    base.FilesystemWheel.as_zipfile = as_zipfile  # type: ignore[method-assign,assignment]
    original = wheel_utils.read_wheel_metadata_file

    def read_metadata_file(source: object, path: str) -> bytes:
        try:
            size = source.getinfo(path).file_size  # type: ignore[attr-defined]
        except (KeyError, AttributeError):
            size = 0
        if size > MAX_METADATA_BYTES:
            raise UnsupportedWheel(
                f"{path} is {size} bytes, over envcheck's {MAX_METADATA_BYTES}-byte cap (MAX_METADATA_BYTES)"
            )
        return original(source, path)  # type: ignore[arg-type]

    for module_name in ("pip._internal.utils.wheel", "pip._internal.metadata.importlib._dists"):
        module = sys.modules.get(module_name)
        if module is None:
            try:
                module = __import__(module_name, fromlist=["_"])
            except ImportError:
                continue
        if hasattr(module, "read_wheel_metadata_file"):
            setattr(module, "read_wheel_metadata_file", read_metadata_file)  # noqa: B010
    pkg = sys.modules.get("pip._internal.metadata.pkg_resources")
    if pkg is not None and hasattr(pkg, "read_wheel_metadata_file"):
        setattr(pkg, "read_wheel_metadata_file", read_metadata_file)  # noqa: B010


def directory_problem(path: str) -> str | None:
    """Why a zip's member directory is not read (over ``MAX_WHEEL_MEMBERS`` members or
    ``MAX_DIRECTORY_BYTES``), from its end record (zip64's where used); None otherwise."""
    import struct

    try:
        with open(path, "rb") as f:  # noqa: PTH123
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - (1 << 16) - 22))
            tail = f.read()
            at = tail.rfind(b"PK\x05\x06")
            if at < 0 or len(tail) - at < 22:
                return None
            count, directory, offset = struct.unpack("<HIIH", tail[at + 10 : at + 22])[:3]
            locator = tail.rfind(b"PK\x06\x07", 0, at)
            if locator >= 0 and (count == 0xFFFF or directory == 0xFFFFFFFF or offset == 0xFFFFFFFF):
                (end64,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
                f.seek(end64)
                record = f.read(56)
                if len(record) == 56 and record[:4] == b"PK\x06\x06":
                    count, directory = struct.unpack("<QQ", record[32:48])
    except (OSError, struct.error):
        return None
    if count > MAX_WHEEL_MEMBERS:
        return f"{count} members, over envcheck's {MAX_WHEEL_MEMBERS} cap for a wheel (MAX_WHEEL_MEMBERS)"
    if directory > MAX_DIRECTORY_BYTES:
        return f"a {directory}-byte member directory, over envcheck's {MAX_DIRECTORY_BYTES}-byte cap"
    return None


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
