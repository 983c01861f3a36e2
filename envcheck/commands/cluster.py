"""``envcheck cluster``: the torchrun entry (``python -m envcheck.cluster``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer

from envcheck import api
from envcheck.commands._common import EXIT_OK, handles_errors, report_findings
from envcheck.commands.options import (
    AgainstOption,
    FailOnOption,
    FormatOption,
    JunitOption,
    NoPolicyOption,
    NoVerifyOption,
    OutputOption,
    PolicyOption,
    QuietOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.core.errors import UsageError
from envcheck.report.formats import FormatName
from envcheck.report.options import ReportOptions

if TYPE_CHECKING:
    from envcheck.api import Policy

MIN_JOB_TIMEOUT_S = 30.0
NOTHING_FOUND = "No differences between the ranks, and no problems found."


@handles_errors
def cluster(
    against: AgainstOption = None,
    no_verify: NoVerifyOption = False,
    timeout: TimeoutOption = 300.0,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Check every rank of a torchrun job: `torchrun --nproc-per-node=N -m envcheck.cluster -o report.json`.

    Each rank snapshots its environment and runs the smoke suite on its device (LOCAL_RANK picks its GPU);
    the ranks run an exactly verified all-reduce, a barrier and an all-reduce bandwidth test (Gloo, and
    NCCL where the ranks have GPUs); everything reaches rank 0 through the rendezvous store, even from a
    rank that cannot import torch. Rank 0 writes one report: ranks sharing an environment as one group
    (host:0-3), every other environment diffed against --against or the majority, ranks that died, hung
    or lack torch by rank. Between the ranks of one job a difference that `envcheck diff` rates a
    warning is an error (ranks that load or compute differently diverge, or hang in a collective); with
    --against, severities are those of `envcheck diff`.

    Only rank 0 writes the report; the other ranks exit 0 once they have sent their results, so the
    job's exit status is rank 0's: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    A rank stopped by SIGSTOP is reported at the deadline; torchrun kills it 30 s after rank 0 exits.

    -o's suffix picks the format when --format is not given (report.json: JSON, .md, .html, .xml: JUnit).
    -q is accepted as by every command; cluster draws no progress line, and a rank's notes stay on stderr.
    """
    del quiet  # one vocabulary: accepted, nothing to hide
    shown: list[ReportOptions] = []

    def on_rank_0() -> Policy:  # the options only rank 0 uses are refused there, before any work starts
        shown.append(
            report_options(
                fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=NOTHING_FOUND
            )
        )
        return api.load_policy(policy, disabled=no_policy)

    if timeout < MIN_JOB_TIMEOUT_S:
        # Every rank's snapshot, suite and collectives, and rank 0's wait for the others, fit in the one
        # deadline; a watchdog ends any rank 20 s after it.
        raise UsageError(
            f"--timeout {timeout:g}: a job's deadline is at least {MIN_JOB_TIMEOUT_S:g} s",
            tip="Rank 0 reports the ranks it has not heard from at the deadline; give them time to start.",
        )
    report = api.cluster_check(against=against, verify=not no_verify, timeout=timeout, policy=on_rank_0)
    if report is None:  # a rank other than 0: its results are sent
        raise typer.Exit(EXIT_OK)
    report_findings(report, shown[0])
