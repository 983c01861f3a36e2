"""envcheck's Python API: one function per job, the same jobs the command line runs (its commands only
parse options, call these and render) and the pytest plugin calls::

    from envcheck import api

    manifest = api.snapshot(api.SnapshotOptions(verify=False))     # this interpreter, no smoke suite
    report = api.diff("dev.json", "prod.json", policy=api.load_policy())
    print(api.render_report(report, api.ReportOptions()))           # text; format=FormatName.json, ...

Every job takes keyword options and returns a typed result: ``snapshot`` a ``Manifest``; ``diff``,
``doctor``, ``verify``, ``gate`` and ``check_lock`` (its ``.report``) a ``Report``; ``fleet_diff`` a
``FleetReport``; ``scan``, ``lock``, ``predict``, ``export``, ``cluster_check`` their own results. Progress
is a callback (``progress: Callable[[str], None] | None``), never a terminal; what a command says before
its report goes to ``tell``. Errors are ``envcheck.core.errors.EnvcheckError`` (``describe_error`` gives
the lines a person reads). docs/reference.md ("Python API") describes each.

Each job's module loads on its first use (PEP 562: the module ``__getattr__`` over ``_JOBS``): importing
every job costs about 0.15 s, and a diff of two 500-package manifests has 0.25 s in all, CLI start
included.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from envcheck.api._common import EXAMPLE_PYTHON, Progress, checked_timeout, describe_error, error_message
from envcheck.core.deadline import DeadlineExpired
from envcheck.core.errors import EnvcheckError, ImageError, ManifestError, ProbeError, UsageError
from envcheck.core.findings import Finding, Rule, Severity
from envcheck.core.outputs import OutputError
from envcheck.report import Report, render_report, write_report
from envcheck.report.formats import FormatName
from envcheck.report.options import ReportOptions

if TYPE_CHECKING:
    from envcheck.api._catalog import FAMILY_MODULES, get_rule, rules
    from envcheck.api._cluster import cluster_check
    from envcheck.api._diff import FleetReport, diff, diff_targets, doctor, expand_targets, fleet_diff
    from envcheck.api._export import ExportFormat, export
    from envcheck.api._image import gate_image, snapshot_image
    from envcheck.api._lock import check_lock, lock
    from envcheck.api._manifest import Manifest, dump_manifest, load_manifest
    from envcheck.api._policy import Policy, load_policy
    from envcheck.api._predict import predict
    from envcheck.api._scan import scan
    from envcheck.api._snapshot import SnapshotOptions, snapshot, snapshot_this_machine
    from envcheck.api._verify import GateRun, SuiteOptions, gate, run_gate, verify

# Each name a job's module defines (its functions, their options and results): the module of envcheck.api
# that defines it, imported on the name's first use.
_JOBS = {
    "snapshot": "_snapshot",
    "snapshot_this_machine": "_snapshot",
    "SnapshotOptions": "_snapshot",
    "snapshot_image": "_image",
    "gate_image": "_image",
    "diff": "_diff",
    "doctor": "_diff",
    "fleet_diff": "_diff",
    "expand_targets": "_diff",
    "diff_targets": "_diff",
    "FleetReport": "_diff",
    "verify": "_verify",
    "gate": "_verify",
    "run_gate": "_verify",
    "GateRun": "_verify",
    "SuiteOptions": "_verify",
    "scan": "_scan",
    "lock": "_lock",
    "check_lock": "_lock",
    "predict": "_predict",
    "export": "_export",
    "ExportFormat": "_export",
    "cluster_check": "_cluster",
    "load_policy": "_policy",
    "Policy": "_policy",
    "load_manifest": "_manifest",
    "dump_manifest": "_manifest",
    "Manifest": "_manifest",
    "rules": "_catalog",
    "get_rule": "_catalog",
    "FAMILY_MODULES": "_catalog",
}

__all__ = [
    "EXAMPLE_PYTHON",
    "FAMILY_MODULES",
    "DeadlineExpired",
    "EnvcheckError",
    "ExportFormat",
    "Finding",
    "FleetReport",
    "FormatName",
    "GateRun",
    "ImageError",
    "Manifest",
    "ManifestError",
    "OutputError",
    "Policy",
    "ProbeError",
    "Progress",
    "Report",
    "ReportOptions",
    "Rule",
    "Severity",
    "SnapshotOptions",
    "SuiteOptions",
    "UsageError",
    "check_lock",
    "checked_timeout",
    "cluster_check",
    "describe_error",
    "diff",
    "diff_targets",
    "doctor",
    "dump_manifest",
    "error_message",
    "expand_targets",
    "export",
    "fleet_diff",
    "gate",
    "gate_image",
    "get_rule",
    "load_manifest",
    "load_policy",
    "lock",
    "predict",
    "render_report",
    "rules",
    "run_gate",
    "scan",
    "snapshot",
    "snapshot_image",
    "snapshot_this_machine",
    "verify",
    "write_report",
]


def __getattr__(name: str) -> Any:
    """A job of ``_JOBS``, its module imported now (and the name kept here for the next use)."""
    module = _JOBS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_JOBS})
