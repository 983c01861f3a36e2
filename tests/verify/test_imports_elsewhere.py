"""A module the gate imports alone elsewhere (torch: the smoke suite's ``import_torch`` check) is not a
pass of the application's imports: the tally says where it was imported alone, and its failure among the
others does not claim a pair of modules that cannot share a process when it may fail alone too (the seed's
Windows machine without the VC++ runtime: torch fails alone and among the others)."""

from __future__ import annotations

from envcheck.verify.imports import AppImports, ImportResult, Together, import_findings, tally

ERROR = 'OSError: [WinError 126] Module not found. Error loading "C:\\torch\\lib\\c10.dll"'


def run(*, failed: bool) -> AppImports:
    return AppImports(
        results=(
            ImportResult(module="markupsafe", distribution="MarkupSafe", version="3.0.4"),
            ImportResult(
                module="torch",
                distribution="torch",
                version="2.13.0",
                reason="imported alone by the smoke suite's import_torch check",
            ),
        ),
        together=Together(
            modules=("markupsafe", "torch"), failed=(("torch", ERROR),) if failed else (), status="ok"
        ),
        wall_s=1.0,
    )


def test_the_tally_counts_a_module_imported_alone_elsewhere_as_it_went_among_the_others() -> None:
    line = tally(run(failed=True))
    assert line.splitlines()[0] == "2 imports in 1.0 s: 1 error, 1 passed"
    assert line.splitlines()[1] == "imported in this order: markupsafe, torch"
    assert tally(run(failed=False)).startswith("2 imports in 1.0 s: 2 passed")
    crashed = AppImports(
        results=run(failed=False).results,
        together=Together(modules=("markupsafe", "torch"), status="crashed", current="torch", exit_code=3),
    )
    assert tally(crashed).startswith("2 imports: 1 crashed, 1 passed")
    not_together = AppImports(results=run(failed=False).results)
    assert tally(not_together).startswith("2 imports: 1 imported alone elsewhere, 1 passed")


def test_its_failure_among_the_others_points_at_the_check_that_imports_it_alone() -> None:
    (finding,) = import_findings(run(failed=True))
    assert finding.rule == "VERIFY-IMPORT" and finding.subject == "import torch"
    assert (
        "(imported alone by the smoke suite's import_torch check; here among the others)" in finding.message
    )
    assert finding.remedy.startswith("If the smoke suite's import_torch check passed, two modules cannot")
    assert finding.remedy.endswith("If it failed, fix that failure first.")


def test_a_module_run_alone_here_keeps_the_pair_remedy() -> None:
    plain = AppImports(
        results=(ImportResult(module="first"), ImportResult(module="second")),
        together=Together(modules=("first", "second"), failed=(("second", "ImportError: x"),)),
    )
    (finding,) = import_findings(plain)
    assert finding.remedy.startswith("Two modules that cannot be imported together")
    assert tally(plain).startswith("2 imports: 2 passed")
