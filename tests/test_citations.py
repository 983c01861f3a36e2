"""The repository cites only itself: every document the code, the tests, the CI scripts and the docs point a
reader to is a file of this repository.

Two shapes are checked. A path that names a document (``docs/budgets.md``, ``README.md``, ``ci/gate.sh``)
must exist. A section citation of a design or style document (``DESIGN §6``, ``STYLE 6``) names a document
that is not here, so a reader cannot follow it; it must say ``docs/...`` instead.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SEARCHED = ("envcheck", "tests", "ci", "docs", ".ci")
TOP_LEVEL = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".sh", ".ps1", ".c", ".txt", ".yml", ".yaml", ""}
SKIPPED = {".ci/cache", "tests/fixtures/winloader/bin"}

# "DESIGN §6", "DESIGN.md", "STYLE 6", "STYLE.md", "§5.11" after a document's name: a document outside.
OUTSIDE = re.compile(r"\b(?:DESIGN|STYLE)(?:\.md\b|\s*§|\s+\d)|\.\./shared/")
# A repository path a reader is sent to: docs/x.md, ci/x.py, README.md and the like.
CITED = re.compile(r"(?<![\w/.-])((?:docs|ci|tests|manifests|envcheck|\.ci)/[\w./-]*\w|README\.md)")


def files() -> Iterator[Path]:
    roots = [ROOT / name for name in SEARCHED] + [ROOT / name for name in TOP_LEVEL]
    for root in roots:
        candidates = [root] if root.is_file() else sorted(root.rglob("*"))
        for path in candidates:
            relative = path.relative_to(ROOT).as_posix()
            if (
                path.is_file()
                and path.suffix in SUFFIXES
                and "__pycache__" not in path.parts
                and not any(relative.startswith(skip) for skip in SKIPPED)
            ):
                yield path


def test_no_document_outside_the_repository_is_cited() -> None:
    found = []
    for path in files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) and path != Path(__file__):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "citations of documents that are not in the repository:\n" + "\n".join(found)


def test_every_cited_repository_document_exists() -> None:
    # The tests name made-up paths inside their temp folders: only the code, the CI and the docs are read.
    missing = []
    for path in files():
        if path.suffix not in {".py", ".md"} or path.relative_to(ROOT).parts[0] == "tests":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for match in CITED.finditer(text):
            cited = match.group(1).rstrip(".")
            if (
                any(ch in cited for ch in "*<>{}")
                or cited.endswith("/")
                or cited.startswith(("envcheck/ci/", ".ci/cache"))
            ):
                # A pattern, a folder, this checkout cloned as ./envcheck (README's CI recipe), or what
                # .ci/run downloads into its ignored cache.
                continue
            if not (ROOT / cited).exists() and not (path.parent / cited).exists():
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert not missing, "documents cited that the repository does not hold:\n" + "\n".join(sorted(missing))


def test_the_check_sees_a_citation() -> None:
    assert OUTSIDE.search("the snapshot budget (DESIGN §6)")
    assert OUTSIDE.search("partial failure is data (STYLE 6)")
    assert OUTSIDE.search("see ../shared/research/anchors.md")
    assert not OUTSIDE.search("the snapshot budget (docs/budgets.md)")
    assert [m.group(1) for m in CITED.finditer("as docs/budgets.md says, and README.md")] == [
        "docs/budgets.md",
        "README.md",
    ]
