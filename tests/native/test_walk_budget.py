"""A budget for the whole walk, not only for each file: 250 real ELF files of 4,001 DT_NEEDED entries each
(every one under the per-binary caps) made `envcheck scan --timeout 120` run 182 s and peak at 1.48 GB; a
walk now resolves at most MAX_WALK_EDGES dependency entries in all, checks the deadline as it resolves,
and names the files whose needed libraries it did not follow."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded

from envcheck.native.tree import MAX_WALK_EDGES

NEEDED = 4000
FILES = 250


def bomb(tmp_path: Path) -> Path:
    """``FILES`` copies of one real shared library that gcc linked against ``NEEDED`` stub libraries."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed: the ELF files cannot be built")
    work = tmp_path / "build"
    libs = work / "libs"
    libs.mkdir(parents=True)
    (work / "stub.c").write_text("int stub_fn(void) { return 0; }\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(work / "stub.so"), str(work / "stub.c")], check=True)
    for i in range(NEEDED):
        (libs / f"libn{i:04d}.so").hardlink_to(work / "stub.so")
    (work / "big.c").write_text("int big(void) { return 1; }\n")
    argv = ["gcc", "-shared", "-fPIC", "-o", str(work / "big.so"), str(work / "big.c"), f"-L{libs}"]
    argv += ["-Wl,--no-as-needed", *(f"-l:libn{i:04d}.so" for i in range(NEEDED))]
    subprocess.run(argv, check=True, capture_output=True)
    tree = tmp_path / "tree"
    tree.mkdir()
    for i in range(FILES):
        shutil.copyfile(work / "big.so", tree / f"mod{i:03d}.so")
    return tree


@pytest.mark.slow
def test_many_files_under_every_cap_end_within_the_deadline_and_the_memory_bound(tmp_path: Path) -> None:
    tree = bomb(tmp_path)
    result = run_bounded(envcheck_argv("scan", str(tree), "--timeout", "20"), timeout=20)
    assert_bounded(result, timeout=20, tree=True)
    assert result.returncode in (1, 2), result.stderr
    if result.returncode == 1:  # finished: the files it did not follow are named, with the budget
        assert "needed libraries were not followed" in result.stdout
        assert f"budget of {MAX_WALK_EDGES} dependency entries" in result.stdout
    else:  # the deadline came first: one line naming the step, no traceback
        assert "walking the native tree" in result.stderr


def test_the_budget_is_far_above_a_real_environment() -> None:
    # A CUDA torch venv resolves about 3,000 entries, a large ML venv (37 native modules) 1,862.
    assert MAX_WALK_EDGES >= 10 * 3_000
