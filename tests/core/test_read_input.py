"""``envcheck.core.files.read_input``: the one reader of an input file given on the command line, and its one
wording, which the manifest and checks-file readers show unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envcheck.core.errors import ManifestError, UsageError
from envcheck.core.files import Unreadable, read_input
from envcheck.manifest.io import read_text
from envcheck.verify.checks_file import read_checks_file


def _problem(path: Path, cap: int = 16) -> Unreadable:
    with pytest.raises(Unreadable) as caught:
        read_input(str(path), cap)
    return caught.value


def test_a_file_within_the_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"x" * 16)
    assert read_input(str(path), 16) == b"x" * 16


def test_each_refusal_in_the_one_wording(tmp_path: Path) -> None:
    big = tmp_path / "big.txt"
    big.write_bytes(b"x" * 17)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # never waited on: the open does not block, fstat refuses it
    cases = {
        big: ("too-large", "larger than 16 bytes"),
        tmp_path / "absent": ("os-error", "cannot read: No such file or directory"),
        tmp_path: ("directory", "cannot read: it is a directory, not a regular file"),
        fifo: ("not-regular", "cannot read: it is a FIFO, not a regular file: not opened"),
    }
    for path, (kind, problem) in cases.items():
        error = _problem(path)
        assert (error.kind, error.problem, str(error)) == (kind, problem, f"{path}: {problem}")


def test_the_manifest_and_checks_file_readers_say_the_same(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    with pytest.raises(ManifestError) as manifest:
        read_text(str(absent))
    with pytest.raises(UsageError) as checks:
        read_checks_file(absent)
    assert str(manifest.value) == f"{absent}: cannot read: No such file or directory"
    assert str(checks.value) == f"checks file {absent}: cannot read: No such file or directory"
