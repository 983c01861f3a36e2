"""The flows: what each command computes, as pure functions over manifests, suite results and a policy.

A command parses its arguments, gathers its inputs (loads manifests, takes a live snapshot, runs the
suite: the effects), calls one flow, renders the ``Report`` and picks the exit code. Every flow ends in
``finish``, the one place where strictness, the policy, de-duplication, cause linking and ordering are
applied, so the four commands cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envcheck.app.catalog import rule_ids
from envcheck.core.findings import Finding, MachineGroup
from envcheck.diff import engine, fixes
from envcheck.diff.causes import escalate, link
from envcheck.diff.policy import policy_line
from envcheck.manifest.remedy import remedy_target
from envcheck.report import Report

if TYPE_CHECKING:
    from envcheck.app.fleet import Fleet
    from envcheck.core.deadline import Deadline
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection
    from envcheck.verify.imports import AppImports


def finish(
    title: str,
    findings: Sequence[Finding],
    policy: Policy,
    *,
    rules: Sequence[str],
    strict: bool = False,
    target: Manifest | None = None,
) -> Report:
    """Strictness (a skipped check becomes an error), the policy, exact duplicates once, consequences
    linked to their root causes (``envcheck.diff.causes``), errors first. The remedies: a consequence
    defers to its root's, and with the ``target`` environment known, none reaches outside it
    (``envcheck.diff.fixes``); the report names it (``--remedies`` writes its fixes)."""
    if strict:
        findings = [
            dataclasses.replace(f, severity="error") if f.rule == "VERIFY-SKIPPED" else f for f in findings
        ]
    # A root cause is as severe as what it causes (an import that fails under a variable's change): raised
    # before the policy, so a policy's own severity for it still has the last word.
    raised = {f.key: f.severity for f in escalate(link(list(dict.fromkeys(findings))))}
    findings = [dataclasses.replace(f, severity=raised.get(f.key, f.severity)) for f in findings]
    outcome = policy.apply_counted(findings)
    linked = fixes.defer_to_roots(link(list(dict.fromkeys(outcome.findings))))
    if target is not None:
        linked = fixes.confine(linked, target)
    return Report(
        title=title,
        findings=tuple(sorted(linked, key=Finding.sort_key)),
        rules=tuple(sorted({*rules, *(f.rule for f in linked)})),
        policy_line=policy_line(policy, outcome, rule_ids=rules),
        policy_changed=bool(outcome.ignored or outcome.downgraded),
        target=remedy_target(target) if target is not None else None,
    )


def diff(
    base_name: str,
    base: Manifest,
    target: tuple[str, Manifest],
    policy: Policy,
    deadline: Deadline | None = None,
) -> Report:
    """``envcheck diff``: one target ``(name, manifest)`` against ``base`` (difference rules) and alone
    (single rules). Several targets are a fleet: ``diff_fleet``, the one fleet path. Raises
    ``DeadlineExpired`` once ``deadline`` passes between two rules."""
    name, manifest = target
    return finish(
        f"envcheck diff: {base_name} → {name}",
        environment_findings(base, manifest, deadline),
        policy,
        rules=rule_ids("difference", "single"),
        target=manifest,
    )


def environment_findings(base: Manifest, target: Manifest, deadline: Deadline | None = None) -> list[Finding]:
    """``target`` against ``base`` by the difference rules, and alone by the single rules: what diff,
    predict and gate report of an environment (``envcheck.diff.engine.diff_and_doctor``, called only
    here). Raises ``DeadlineExpired`` once ``deadline`` passes between two rules."""
    return engine.diff_and_doctor(base, target, deadline)


def diff_fleet(base_name: str, machines: Fleet, policy: Policy) -> Report:
    """A fleet report: the machines that share an environment are one ``MachineGroup`` and its findings are
    reported once, each naming the group (``Finding.machine``): a group of one machine is named by it, a
    larger one by its first machine and the count of the others (``node-07 +41``).

    An environment's machines are split further where the policy selects machines (``machine = "prod-*"``)
    so that every entry of the policy applies to all of a group's machines or to none of them; the policy
    sees each group's findings under its first machine's name, which its globs match as they match every
    machine of the group (never the group's name, which they might not)."""
    groups: list[MachineGroup] = []
    findings: list[Finding] = []
    taken: set[str] = set()
    renamed: dict[str, str] = {}
    for environment in machines.environments:
        for members in _split_by_policy(environment.members, policy):
            name = _group_name(members, taken)
            renamed[members[0]] = name
            groups.append(
                MachineGroup(name=name, members=members, identical_to_base=environment.identical_to_base)
            )
            findings += [on_machine(f, members[0]) for f in environment.findings]
    report = finish(
        f"envcheck diff: {base_name} → {machines.machines} machines",
        findings,
        policy,
        rules=rule_ids("difference", "single"),
    )
    named = sorted((_renamed(f, renamed) for f in report.findings), key=Finding.sort_key)
    return dataclasses.replace(report, findings=tuple(named), groups=tuple(groups))


def predict(
    title: str, source: Manifest, predicted: Sequence[tuple[str, Manifest]], policy: Policy
) -> Report:
    """``envcheck predict``: each predicted manifest (named by its platform) against the dev box's
    ``source``, by the diff engine (which runs only the rules of static facts on a predicted side).
    Several platforms make a fleet-style report: one group per platform."""
    fleet = len(predicted) > 1
    findings: list[Finding] = []
    for platform, manifest in predicted:
        found = environment_findings(source, manifest)
        findings += [on_machine(f, platform) for f in found] if fleet else found
    report = finish(title, findings, policy, rules=rule_ids("difference", "single"))
    if not fleet:
        return report
    groups = tuple(MachineGroup(name=platform, members=(platform,)) for platform, _ in predicted)
    return dataclasses.replace(report, groups=groups, member="platform")


def _renamed(finding: Finding, names: dict[str, str]) -> Finding:
    """``finding`` of a group's first machine, named by its group (its cause's id too)."""
    first = finding.machine or ""
    name = names.get(first, first)
    if name == first:
        return finding
    cause = finding.caused_by
    if cause is not None and cause.endswith(f"@{first}"):
        cause = cause[: -len(first)] + name
    return dataclasses.replace(finding, machine=name, caused_by=cause)


def on_machine(finding: Finding, machine: str) -> Finding:
    """A finding of one machine (or group) of a fleet; its cause, if any, is that machine's too."""
    cause = f"{finding.caused_by}@{machine}" if finding.caused_by else None
    return dataclasses.replace(finding, machine=machine, caused_by=cause)


def _split_by_policy(members: Sequence[str], policy: Policy) -> list[tuple[str, ...]]:
    """``members`` in runs of machines that the policy's machine globs select alike (order kept)."""
    from fnmatch import fnmatchcase

    selectors = (*policy.ignore, *(s for s, _ in policy.severity), *(i.selector for i in policy.intended))
    globs = sorted({s.machine for s in selectors if set(s.machine) != {"*"}})
    if not globs:
        return [tuple(members)]
    split: dict[tuple[bool, ...], list[str]] = {}
    for member in members:
        split.setdefault(tuple(fnmatchcase(member, g) for g in globs), []).append(member)
    return [tuple(group) for group in split.values()]


def _group_name(members: Sequence[str], taken: set[str]) -> str:
    """A group's name, unique in the report: its machine, or its first machine ``+`` the others' count."""
    name = members[0] if len(members) == 1 else f"{members[0]} +{len(members) - 1}"
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name} #{n}"
    taken.add(unique)
    return unique


def doctor(name: str, manifest: Manifest, policy: Policy, deadline: Deadline | None = None) -> Report:
    """``envcheck doctor``: the traps of one environment, no baseline (``deadline``: see ``diff``)."""
    return finish(
        f"envcheck doctor: {name}",
        engine.doctor(manifest, deadline=deadline),
        policy,
        rules=rule_ids("difference", "single"),
        target=manifest,
    )


def verify(
    against: str | None,
    golden: VerifySection | None,
    current: VerifySection,
    policy: Policy,
    *,
    strict: bool,
    imports: AppImports | None = None,
) -> Report:
    """``envcheck verify``: the suite's outcomes, compared with ``golden`` when there is one, and what the
    application's ``imports`` did (``envcheck.verify.imports``)."""
    # Lazy: the smoke suite's comparison loads for verify and gate only, never on a diff's path.
    from envcheck.verify.compare import compare, outcomes

    findings = compare(golden, current) if golden is not None else outcomes(current)
    if imports is not None:
        # Lazy: the application imports' rules (0.13 s) load only when the imports ran.
        from envcheck.verify.imports import import_findings

        findings += import_findings(imports)
    title = "envcheck verify" + (f" against {against}" if against is not None else "")
    return finish(title, findings, policy, rules=rule_ids("verify"), strict=strict)


def gate(
    manifest_name: str,
    base: Manifest,
    live: Manifest,
    current: VerifySection,
    policy: Policy,
    *,
    strict: bool,
    live_name: str = "this machine",
    imports: AppImports | None = None,
    deadline: Deadline | None = None,
) -> Report:
    """``envcheck gate``: this machine (``live``, named ``live_name`` in the title) against ``base``, the
    suite against its goldens, and what the application's ``imports`` did (a NumPy ABI break under the
    base-to-live NumPy change). ``deadline``: the command's, checked between two rules."""
    # Lazy: the smoke suite's comparison loads for verify and gate only, never on a diff's path.
    from envcheck.verify.compare import compare, outcomes

    findings = environment_findings(base, live, deadline)
    golden = goldens(base)
    if golden is not None:
        findings += compare(golden, current)
    else:
        findings += outcomes(current)
        findings.append(
            Finding(
                rule="VERIFY-NO-GOLDEN",
                severity="warning",
                subject="verify",
                message=f"{manifest_name} holds no verify goldens: the suite ran, numerics were not compared",
                remedy="Record the manifest with `envcheck snapshot` (without --no-verify).",
            )
        )
    if imports is not None:
        # Lazy: the application imports' rules (0.13 s) load only when the imports ran.
        from envcheck.verify.imports import import_findings

        findings += import_findings(imports, base=base, target=live)
    return finish(
        f"envcheck gate: {live_name} against {manifest_name}",
        findings,
        policy,
        rules=rule_ids(),
        strict=strict,
        target=live,
    )


def gate_image(
    manifest_name: str,
    base: Manifest,
    image_name: str,
    image: Manifest,
    policy: Policy,
    *,
    strict: bool,
    deadline: Deadline | None = None,
) -> Report:
    """``envcheck gate --image``: a container image's manifest (read statically, ``meta.kind`` ``image``)
    against ``base`` by every rule whose facts the image holds, and one ``VERIFY-NOT-RUN`` that says no
    smoke suite and no import ran in it (an error with ``strict``, as a skipped check is)."""
    findings = environment_findings(base, image, deadline)
    findings.append(
        Finding(
            rule="VERIFY-NOT-RUN",
            severity="error" if strict else "info",
            subject="verify",
            message=(
                f"{image_name} was read statically: no smoke suite, no import torch and none of the "
                "application's imports ran in it"
            ),
            remedy=f"Run `envcheck gate {manifest_name}` inside the container for them.",
        )
    )
    return finish(
        f"envcheck gate: {image_name} against {manifest_name}",
        findings,
        policy,
        rules=rule_ids(),
        strict=strict,
        target=image,
    )


def goldens(manifest: Manifest) -> VerifySection | None:
    """The manifest's smoke-suite goldens, or None when it was recorded without them."""
    section = manifest.verify
    if section is None or section.skipped is not None or not section.results:
        return None
    return section


# ``Report`` is the report layer's; every flow returns one, so its callers find it here too.
__all__ = [
    "Report",
    "diff",
    "diff_fleet",
    "doctor",
    "environment_findings",
    "finish",
    "gate",
    "gate_image",
    "goldens",
    "on_machine",
    "predict",
    "verify",
]
