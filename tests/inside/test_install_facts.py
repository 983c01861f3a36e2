"""The installation facts of site folders that several RECORDs share (``envcheck/inside/install_facts.py``),
on real folders: which RECORD an orphan most likely came from, and every RECORD a shared or missing file is
named for. The single-folder cases run through real installs in tests/diff/test_install_invariants.py."""

from __future__ import annotations

from pathlib import Path

from envcheck.inside.install_facts import install_facts


def _site(root: Path, files: list[str], records: dict[str, list[tuple[str, str]]]) -> list[dict[str, str]]:
    """A site folder holding ``files`` (empty) and one distribution per ``records`` entry (``name``:
    its RECORD's ``(path, hash field)`` rows); the probe's view of those distributions, in that order."""
    for relative in files:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("", encoding="utf-8")
    packages = []
    for name, rows in records.items():
        mdir = root / f"{name}-1.0.dist-info"
        mdir.mkdir(parents=True)
        (mdir / "METADATA").write_text(f"Name: {name}\nVersion: 1.0\n", encoding="utf-8")
        (mdir / "RECORD").write_text("".join(f"{p},{h},0\n" for p, h in rows), encoding="utf-8")
        packages.append({"name": name, "version": "1.0", "location": str(root), "metadata_dir": str(mdir)})
    return packages


def test_an_orphan_is_traced_to_the_first_earlier_record_that_lists_it(tmp_path: Path) -> None:
    # A user site before the venv's: a and b both list pkg/extra.py (with other bytes: a shared file), and
    # the venv's copy of pkg holds extra.py too, which c's RECORD does not list.
    first, second = tmp_path / "user-site", tmp_path / "site-packages"
    earlier = _site(
        first,
        ["pkg/__init__.py", "pkg/extra.py"],
        {
            "a": [("pkg/__init__.py", ""), ("pkg/extra.py", "sha256=AAAA")],
            "b": [("pkg/extra.py", "sha256=BBBB")],
        },
    )
    later = _site(second, ["pkg/__init__.py", "pkg/extra.py"], {"c": [("pkg/__init__.py", "")]})
    out = install_facts(earlier + later)
    [orphans] = out["orphans"]
    assert orphans["folder"] == str(second / "pkg") and orphans["examples"] == ["pkg/extra.py"]
    assert orphans["likely"] == f"dist-info {first / 'a-1.0.dist-info'}"  # the first RECORD, not b's
    [shared] = out["shared"]
    assert shared["owners"] == [str(first / "a-1.0.dist-info"), str(first / "b-1.0.dist-info")]
    assert shared["examples"] == ["pkg/extra.py"] and out["missing"] == []


def test_a_missing_file_two_records_list_is_missing_for_both(tmp_path: Path) -> None:
    packages = _site(
        tmp_path,
        ["pkg/__init__.py"],
        {
            "a": [("pkg/__init__.py", ""), ("pkg/gone.py", "sha256=AAAA")],
            "b": [("pkg/gone.py", "sha256=AAAA")],
        },
    )
    out = install_facts(packages)
    assert [(m["owner"], m["examples"]) for m in out["missing"]] == [
        (str(tmp_path / "a-1.0.dist-info"), ["pkg/gone.py"]),
        (str(tmp_path / "b-1.0.dist-info"), ["pkg/gone.py"]),
    ]
    assert out["shared"] == [] and out["orphans"] == []  # the same bytes in both: legal


def test_the_same_files_every_record_lists_leave_nothing(tmp_path: Path) -> None:
    # The healthy control: the later folder's RECORD lists its copy of pkg/extra.py; a namespace package's
    # __init__.py, listed by two RECORDs with the same bytes, is no shared file.
    earlier = _site(
        tmp_path / "user-site",
        ["ns/__init__.py", "ns/a.py", "ns/b.py"],
        {
            "a": [("ns/__init__.py", "sha256=NS"), ("ns/a.py", "")],
            "b": [("ns/__init__.py", "sha256=NS"), ("ns/b.py", "")],
        },
    )
    later = _site(
        tmp_path / "site-packages",
        ["ns/__init__.py", "ns/a.py"],
        {"c": [("ns/__init__.py", "sha256=NS"), ("ns/a.py", "")]},
    )
    out = install_facts(earlier + later)
    assert (out["orphans"], out["shared"], out["missing"]) == ([], [], [])
    assert out["walked"] == 5 and not out["truncated"]
