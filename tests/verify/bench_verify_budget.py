"""Budget benchmark (docs/budgets.md: the CPU suite <= `import torch` + 5 s on 2 cores). Not a test: run it.

    python tests/verify/bench_verify_budget.py [--python PATH] [--runs N]

Interleaves `python -c "import torch"` and `envcheck verify` runs in the same interpreter and prints each
pair and the medians. Numbers vary with the machine's load; timed assertions do not belong in tests.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _timed(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    envcheck = str(Path(sys.executable).with_name("envcheck"))
    imports, verifies = [], []
    for i in range(args.runs):
        imports.append(_timed([args.python, "-c", "import torch"]))
        verifies.append(_timed([envcheck, "verify", "--python", args.python, "--format", "json"]))
        print(f"run {i + 1}: import torch {imports[-1]:.2f} s, envcheck verify {verifies[-1]:.2f} s")
    imp, ver = statistics.median(imports), statistics.median(verifies)
    print(
        f"median: import torch {imp:.2f} s, envcheck verify {ver:.2f} s, over budget by {ver - imp - 5:.2f} s"
    )


if __name__ == "__main__":
    main()
