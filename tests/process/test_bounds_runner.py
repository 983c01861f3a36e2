"""``tests/hostile.py`` measures the whole process tree, not only its largest process: three processes of
~80 MB each are ~240 MB together, which a bound on ``ru_maxrss`` alone (the largest one) would miss."""

from __future__ import annotations

import sys

import pytest
from hostile import MAX_RSS_MB, run_bounded

# Each process holds 80 MB of touched memory for a few sampling intervals, then exits.
_HOLD = "import time; b = bytearray(80 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); time.sleep(1.5)"
_TREE = (
    "import subprocess, sys\n"
    f"kids = [subprocess.Popen([sys.executable, '-c', {_HOLD!r}]) for _ in range(2)]\n"
    f"exec({_HOLD!r})\n"
    "for k in kids: k.wait()\n"
)


@pytest.mark.slow
def test_the_tree_is_measured_as_a_sum() -> None:
    result = run_bounded([sys.executable, "-c", _TREE], timeout=30)
    assert result.returncode == 0, result.stderr
    assert 80 <= result.max_rss_mb < 160  # the largest process alone
    assert result.tree_mb >= 200  # all three together, shared pages counted once
    assert result.tree_mb < MAX_RSS_MB * 2


@pytest.mark.slow
def test_the_tree_can_be_left_unsampled() -> None:
    result = run_bounded([sys.executable, "-c", _HOLD], timeout=30, tree=False)
    assert result.returncode == 0 and result.tree_mb == 0.0 and result.max_rss_mb >= 80
