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


def main(argv: list[str]) -> int:
    overrides = json.loads(argv[0])
    if not isinstance(overrides, dict) or not all(isinstance(v, str) for v in overrides.values()):
        sys.stderr.write("pip_entry: the marker overrides must be a JSON object of strings\n")
        return 2
    from pip._vendor.packaging import markers

    running = markers.default_environment

    def target_environment() -> dict[str, str]:
        environment = dict(running())
        environment.update(overrides)
        return environment

    markers.default_environment = target_environment
    _report_unreachable_indexes()
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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
