"""What a target writes back is counted before it is parsed (``envcheck.process.runner.RESULT_MAX_VALUES``):
16 MiB of short JSON strings, under the result file's byte cap, parse into ~2 M objects, and a snapshot reads
two results (a facts probe and a runtime probe each answering so took a snapshot to 499 MB and 12.9 s).
The case runs under ``tests/hostile.py`` (300 MB for the whole process tree, the deadline + 5 s)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded

from envcheck.process.runner import RESULT_MAX_BYTES, RESULT_MAX_VALUES

TIMEOUT = 20.0


def _answering(tmp_path: Path, result: Path) -> Path:
    """An "interpreter" that answers every probe with ``result`` (its fifth argument is the result file:
    ``python -c BOOT FOLDER MODULE OUT``) and exits 1."""
    script = tmp_path / "python"
    script.write_text(f'#!/bin/sh\ncp {result} "$5"\nexit 1\n', encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.mark.slow
def test_a_result_of_millions_of_short_values_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    count = 1_780_000
    result.write_text(json.dumps({"stage": "x", "done": False, "junk": [f"{i:x}" for i in range(count)]}))
    assert result.stat().st_size <= RESULT_MAX_BYTES
    python = _answering(tmp_path, result)
    argv = envcheck_argv("snapshot", "--python", str(python), "--timeout", f"{TIMEOUT:g}", "-o", "-")
    run = run_bounded(argv, timeout=TIMEOUT)
    assert_bounded(run, timeout=TIMEOUT, tree=True)
    assert run.returncode == 2
    assert f"result file not read: up to {count + 3} JSON values, over the cap of {RESULT_MAX_VALUES}" in (
        run.stderr
    )
