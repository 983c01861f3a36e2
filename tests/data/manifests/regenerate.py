#!/usr/bin/env python3
"""Regenerate the real manifests the diff tests use, with envcheck itself.

    /root/venvs/dev/bin/python tests/data/manifests/regenerate.py [--dev PYTHON] [--cuda PYTHON]

- ``dev-cpu.json`` / ``dev-cpu-again.json``: the torch 2.13.0 CPU venv, snapshotted twice.
- ``cuda.json``: the torch 2.14.1+cu130 venv (a real CUDA 13 build; no GPU needed to snapshot it).
- ``twin-a.json`` / ``twin-b.json``: two fresh venvs at *different* paths with the same single wheel
  (MarkupSafe, which has a compiled extension) installed from one downloaded file: the same environment
  in two places.

Needs network access to PyPI once (``pip download``) unless the wheel is in pip's cache. Re-run whenever the
manifest format changes; the tests only rely on facts these environments really have.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
TWIN_WHEEL = "MarkupSafe==3.0.3"


def envcheck() -> list[str]:
    script = Path(sys.executable).with_name("envcheck")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envcheck"]


def snapshot(python: str, label: str, out: Path) -> None:
    subprocess.run(
        [*envcheck(), "snapshot", "--python", python, "--label", label, "-o", str(out)], check=True
    )
    print(f"wrote {out.relative_to(HERE)}")


def twins(base_python: str, work: Path) -> tuple[str, str]:
    wheels = work / "wheels"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--only-binary=:all:",
            "--no-deps",
            "-d",
            str(wheels),
            TWIN_WHEEL,
        ],
        check=True,
    )
    pythons = []
    for where in (work / "a" / "venv", work / "elsewhere" / "b" / "env"):
        subprocess.run([base_python, "-m", "venv", str(where)], check=True)
        python = where / "bin" / "python"
        subprocess.run(
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--no-index",
                "--find-links",
                str(wheels),
                TWIN_WHEEL,
            ],
            check=True,
        )
        pythons.append(str(python))
    return pythons[0], pythons[1]


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dev", default="/root/venvs/dev/bin/python")
    parser.add_argument("--cuda", default="/root/venvs/cuda/bin/python")
    parser.add_argument(
        "--base-python", default=sys.base_prefix + "/bin/python3", help="makes the twin venvs"
    )
    args = parser.parse_args()
    snapshot(args.dev, "dev-cpu", HERE / "dev-cpu.json")
    snapshot(args.dev, "dev-cpu", HERE / "dev-cpu-again.json")
    snapshot(args.cuda, "cuda", HERE / "cuda.json")
    work = Path(tempfile.mkdtemp(prefix="envcheck-twins-"))
    try:
        a, b = twins(args.base_python, work)
        snapshot(a, "twin", HERE / "twin-a.json")
        snapshot(b, "twin", HERE / "twin-b.json")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
