"""Identity of files, not spelling: merged /usr on this machine, and a venv reached through a linked folder.

Both are real: the probe's own record of this machine's top-level links, and two real snapshots of the test
venv, one through its real path and one through a symbolic link to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.app import flows
from envcheck.diff.policy import Policy
from envcheck.inside.host import system_links
from envcheck.inside.interpreter import folder_aliases
from envcheck.manifest.identity import aliases, canonical, same_file
from envcheck.manifest.io import load

merged_usr = pytest.mark.skipif(
    not (Path("/lib").is_symlink() and os.path.realpath("/lib") == "/usr/lib"),
    reason="/lib is not a link to usr/lib",
)


@merged_usr
def test_this_machine_records_its_merged_usr() -> None:
    links = system_links()  # type: ignore[no-untyped-call]
    assert links["/lib"] == "/usr/lib"
    table = tuple(sorted(links.items(), key=lambda kv: -len(kv[0])))
    libc = "/lib/x86_64-linux-gnu/libc.so.6"
    assert canonical(libc, table) == "/usr/lib/x86_64-linux-gnu/libc.so.6"
    # The claim checked against the file system itself: the two spellings are one file (device + inode).
    if Path(libc).exists():
        assert Path(libc).samefile(canonical(libc, table))
    # Against a manifest that recorded no alias, its /lib spelling stays its own.
    assert not same_file("/usr/lib/x86_64-linux-gnu/libc.so.6", table, libc, ())
    assert same_file(libc, table, "/usr/lib/x86_64-linux-gnu/libc.so.6", ())


def test_a_linked_folder_is_recorded_once_at_the_link(tmp_path: Path) -> None:
    real = tmp_path / "real" / "venv"
    (real / "lib" / "site-packages").mkdir(parents=True)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    found = folder_aliases(
        [  # type: ignore[no-untyped-call]
            str(link),
            str(link / "lib" / "site-packages"),
            str(real),
        ]
    )
    assert found == {str(link): os.path.realpath(real)}


@pytest.mark.slow
def test_a_venv_through_a_linked_folder_is_the_same_venv(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    link = tmp_path / "venv-link"
    link.symlink_to(Path(sys.prefix), target_is_directory=True)
    linked_python = link / "bin" / Path(sys.executable).name
    if not linked_python.exists():
        pytest.skip("the test interpreter is not inside its prefix")
    for name, python in (("real", sys.executable), ("linked", str(linked_python))):
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "envcheck",
                "snapshot",
                "--no-verify",
                "--python",
                python,
                "-o",
                f"{name}.json",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    real, linked = load(tmp_path / "real.json"), load(tmp_path / "linked.json")
    assert linked.python.prefix == str(link)
    assert (linked.python.path_aliases or {}).get(str(link)) == os.path.realpath(sys.prefix)
    # The loader reports real paths: the venv's libraries are still its wheels', not the system's.
    assert linked.runtimes is not None
    torch_libs = [lib for lib in linked.runtimes.loaded if "/torch/lib/" in lib.path]
    assert torch_libs and {lib.owner for lib in torch_libs} == {"torch"}
    assert all(
        canonical(lib.path, aliases(linked)).startswith(os.path.realpath(sys.prefix)) for lib in torch_libs
    )
    report = flows.diff("real.json", real, ("linked.json", linked), Policy())
    assert [f.key for f in report.findings if f.rule.startswith("ENV-NATIVE-")] == []
    assert [f.key for f in report.findings if f.severity in ("error", "warning")] == []
