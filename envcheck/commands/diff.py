"""``envcheck diff``, ``envcheck doctor`` and ``envcheck rules``."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envcheck.commands._common import EXIT_USAGE, handles_errors, report_findings, snapshot_this_machine
from envcheck.commands.options import (
    FailOnOption,
    FormatOption,
    JunitOption,
    NoPolicyOption,
    OutputOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.core.errors import UsageError
from envcheck.report.formats import FormatName
from envcheck.report.options import ReportOptions

if TYPE_CHECKING:
    from envcheck.core.deadline import Deadline
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest

_LIVE = "this machine"
# What a report about one environment says when it found nothing (a diff says "No differences that matter").
NO_PROBLEMS = "No problems found."


def load_rules_policy(policy: Path | None, no_policy: bool) -> Policy:
    """--policy FILE, else [tool.envcheck] of ./pyproject.toml, else none; --no-policy: none, said so."""
    from envcheck.app.catalog import rule_ids
    from envcheck.diff.policy import load_policy

    return load_policy(policy, Path.cwd(), disabled=no_policy, known_rules=rule_ids())


def _live(live: Manifest) -> str:
    """The live environment named in a title by its interpreter's path: ``this machine (/path/python)``."""
    return f"{_LIVE} ({live.python.executable})"


def _names(paths: Sequence[Path], manifests: Sequence[Manifest]) -> list[str]:
    """A name per manifest, one way for all: each its label when every one has a label and no two share
    one, else each its file path."""
    labels = [m.meta.label for m in manifests]
    if all(labels) and len(set(labels)) == len(labels):
        return [str(label) for label in labels]
    return [str(p) for p in paths]


def _base_name(base: Path, manifest: Manifest, targets: Sequence[str], by_label: bool) -> str:
    """The base named like its targets (labels or paths, never one of each); its path when its label
    would read as one of the targets'."""
    label = manifest.meta.label
    return str(label) if by_label and label and label not in targets else str(base)


def name(path: Path, manifest: Manifest) -> str:
    """One manifest named in a title: its label, else its path (doctor, gate, verify --against)."""
    return str(manifest.meta.label or path)


@handles_errors
def diff(
    base: Annotated[
        Path,
        typer.Argument(
            metavar="BASE", help="The reference manifest (e.g. the dev box's envcheck.lock.json)."
        ),
    ],
    targets: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[TARGET]...",
            help="Manifests to compare with BASE, folders of them (their *.json files) or quoted patterns "
            "('fleet/*.json') (default: a fresh snapshot of this machine).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Explain every difference from BASE to each TARGET that matters, ranked, with a remedy.

    Runs the difference rules (BASE vs TARGET) and the TARGET's single-environment rules (as
    `envcheck doctor` would).

    Several targets, a folder or a pattern give one fleet report: machines whose manifests differ only
    in volatile fields (label, hostname, timestamps, timings) share an environment, diffed once on every
    CPU and reported once as a group ("N machines identical to the base; M machines in K groups"), each
    group with its findings and members (JSON lists every member). A manifest that cannot be read is
    named on stderr, the others are still reported, and the run exits 2. A policy entry that selects
    machines (`machine = "prod-*"`) matches each machine, never a group's name.

    Policy (--policy FILE, or [tool.envcheck] in ./pyproject.toml): `ignore = ["RULE", "RULE:subject"]`,
    `[severity] RULE = "warning"`, `[[intended]] rule = "..." reason = "..."` (reported, never failing).
    Every report names the policy applied and counts what it ignored or downgraded; --no-policy applies
    none. Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck.app import flows
    from envcheck.commands.progress import progress
    from envcheck.core.deadline import Deadline
    from envcheck.manifest.io import load

    deadline = Deadline.after(timeout)  # the whole command's, from its start
    options = report_options(fmt, output, fail_on=fail_on, junit=junit, verbose=verbose)
    rules_policy = load_rules_policy(policy, no_policy)
    paths, folders = expand_targets(targets or [])
    if len(paths) > 1 or folders:
        _diff_fleet(base, paths, rules_policy, options, deadline)
        return
    base_manifest = load(base)
    if paths:  # one pair: both named by label, or both by path
        target = load(paths[0])
        base_name, target_name = _names([base, Path(paths[0])], [base_manifest, target])
        named = [(target_name, target)]
    else:
        with progress("diff", quiet=quiet) as step:
            live = snapshot_this_machine(python, timeout, step, deadline=deadline)
        named = [(_live(live), live)]
        base_name = name(base, base_manifest)
    # The rules are envcheck's own work: they get the grace past the targets' deadline (a hang is reported).
    report = flows.diff(base_name, base_manifest, named, rules_policy, deadline.for_own_work())
    if not paths:
        from envcheck.commands import slips

        slip = slips.live_against(python, base_name, base_manifest, live)
        if slip is not None:
            slip.say()
            report = slip.titled(report)
    report_findings(report, options)


def _diff_fleet(
    base: Path, paths: Sequence[str], rules_policy: Policy, options: ReportOptions, deadline: Deadline
) -> None:
    """Several targets: streamed and grouped (``envcheck.app.fleet``). Each manifest that cannot be read is
    named on stderr, one line each, after the others' report; the run then exits 2."""
    from envcheck.app import flows
    from envcheck.app.fleet import base_document, diff_files
    from envcheck.core.escape import one_line
    from envcheck.core.redact import redact_text

    base_manifest, base_fingerprint = base_document(str(base))
    fleet = diff_files(base_manifest, base_fingerprint, paths, deadline=deadline.for_own_work())
    names = [m for e in fleet.environments for m in e.members]
    given = set(paths)
    base_name = _base_name(base, base_manifest, names, by_label=any(n not in given for n in names))
    report = flows.diff_fleet(base_name, fleet, rules_policy)
    try:
        report_findings(report, options)
    except typer.Exit:
        if not fleet.unreadable:
            raise
    if fleet.unreadable:
        for error in fleet.unreadable:
            typer.echo(one_line(redact_text(f"error: {error}")), err=True)
        raise typer.Exit(EXIT_USAGE)


# A TARGET that is no file but holds one of these is a pattern (quoted, so that the shell left it alone).
_GLOB_CHARS = frozenset("*?[")
# The manifests one fleet diff reads (docs/guarantees.md): a folder or a pattern is listed up to one past
# it, never whole, so a folder of a million files costs no more than this many names.
MAX_FLEET_FILES = 50_000


def expand_targets(targets: Sequence[Path]) -> tuple[list[str], bool]:
    """The manifest files the TARGETs name, in order, each once, and whether a folder or pattern was
    among them. A folder gives the ``*.json`` files directly in it, a pattern that is not itself a path
    (``'fleet/*.json'``, quoted for a fleet too large for a command line) the files it matches, both
    sorted, hidden files left out; anything else is taken as given (the reader refuses a FIFO, a device
    or a link loop). Raises ``UsageError`` for a folder or a pattern without a manifest."""
    import glob

    out: list[str] = []
    expanded = False
    for target in targets:
        text = str(target)
        if target.is_dir():
            expanded = True
            try:
                with os.scandir(text) as entries:
                    named = (e.name for e in entries if e.name.endswith(".json") and e.name[0] != ".")
                    found = sorted(str(target / n) for n in _at_most(named, MAX_FLEET_FILES - len(out), text))
            except OSError as e:
                raise UsageError(f"{text}: cannot list the folder: {e.strerror or e}") from e
            if not found:
                from envcheck.manifest.io import is_environment_folder

                if is_environment_folder(text):
                    raise UsageError(
                        f"{text}: a Python environment's folder, not a manifest nor a folder of them",
                        tip=f"To diff that environment, pass its interpreter: --python {text}/bin/python",
                    )
                raise UsageError(f"{text}: no manifest (*.json) in this folder")
            out += found
        elif not os.path.lexists(text) and _GLOB_CHARS & set(text):
            expanded = True
            # Path.glob takes relative patterns only; a fleet's folder is often absolute.
            found = sorted(_at_most(glob.iglob(text), MAX_FLEET_FILES - len(out), text))  # noqa: PTH207
            if not found:
                raise UsageError(f"no file matches {text}")
            out += found
        else:
            out.append(text)
    if len(out) > MAX_FLEET_FILES:
        raise UsageError(f"{len(out)} manifests named, more than the {MAX_FLEET_FILES} one fleet diff reads")
    return list(dict.fromkeys(out)), expanded


def _at_most(names: Iterator[str], left: int, where: str) -> list[str]:
    """The first ``left`` of ``names``; raises ``UsageError`` at the next one (``MAX_FLEET_FILES``)."""
    taken = list(itertools.islice(names, max(0, left) + 1))
    if len(taken) > left:
        raise UsageError(f"{where}: more than the {MAX_FLEET_FILES} manifests one fleet diff reads")
    return taken


@handles_errors
def doctor(
    manifest: Annotated[
        Path | None,
        typer.Argument(
            metavar="[MANIFEST]",
            help="A manifest to examine (default: a fresh snapshot of this machine).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Find the traps in one environment that need no baseline: two OpenMP runtimes, a driver older than
    torch's CUDA, a companion pinned to another torch, nvidia-* wheels off torch's pins, ...

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck.app import flows
    from envcheck.commands.progress import progress
    from envcheck.core.deadline import Deadline
    from envcheck.manifest.io import load

    deadline = Deadline.after(timeout)  # the whole command's, from its start
    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=NO_PROBLEMS
    )
    rules_policy = load_rules_policy(policy, no_policy)
    if manifest is not None:
        loaded = load(manifest)
        report = flows.doctor(name(manifest, loaded), loaded, rules_policy, deadline.for_own_work())
    else:
        with progress("doctor", quiet=quiet) as step:
            live = snapshot_this_machine(python, timeout, step, deadline=deadline)
        report = flows.doctor(_live(live), live, rules_policy, deadline.for_own_work())
    report_findings(report, options)


@handles_errors
def rules(
    rule_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="A rule id to explain (default: list them all).")
    ] = None,
) -> None:
    """The rule catalog (every id any command emits), or one rule explained with its evidence."""
    from difflib import get_close_matches

    from envcheck.app.catalog import FAMILY_MODULES, catalog, get_rule

    rules_ = catalog()
    if rule_id is None:
        width = max(len(r.id) for r in rules_)
        order = {module: i for i, module in enumerate(FAMILY_MODULES)}
        rank: dict[str, int] = {}
        for r in rules_:  # a family ranks where the module of its first check stands in FAMILY_MODULES
            module = getattr(r.difference or r.single, "__module__", "envcheck.verify.rules")
            rank[r.family] = min(rank.get(r.family, len(order)), order.get(module, len(order)))
        families = sorted(rank, key=lambda f: (rank[f], f))
        lines: list[str] = []
        for family in families:
            lines += [*([""] if lines else []), family.upper()]
            lines += [
                f"  {r.id:<{width}}  {r.kind:<10}  {r.severity:<8}  {r.title}"
                for r in rules_
                if r.family == family
            ]
        lines.append(
            f"\n{len(rules_)} rules (kind: difference = base vs target, single = one environment (doctor), "
            "verify = the smoke suite). `envcheck rules ID` explains one."
        )
        typer.echo("\n".join(lines))
        return
    rule = get_rule(rule_id)
    if rule is None:
        close = get_close_matches(rule_id.strip().upper(), [r.id for r in rules_], n=1)
        tip = f"Did you mean {close[0]}? " if close else ""
        raise UsageError(f"no rule {rule_id!r}", tip=tip + "`envcheck rules` lists every rule id.")
    kind = {
        "difference": "difference rule (base vs target)",
        "single": "single-environment rule (doctor)",
        "verify": "smoke-suite rule (verify, gate)",
        "lock": "lock rule (lock --check)",
        "cluster": "cluster rule (cluster)",
    }[rule.kind]
    lines = [
        f"{rule.id}: {rule.title}",
        f"  kind            {kind}",
        f"  family          {rule.family}",
        f"  severity        {rule.severity} (by default; a finding may be graded by its consequence)",
        f"  why it matters  {rule.why}",
        *([f"  what to do      {rule.remedy}"] if rule.remedy else []),
        f"  failure modes   {', '.join(rule.failure_modes) or '-'}",
        f"  evidence        {', '.join(rule.evidence) or '-'}",
    ]
    typer.echo("\n".join(lines))
