"""``python -m envcheck.cluster`` under a real ``torchrun`` (2 ranks, Gloo on the CPU), end to end.

A drift or a fault is given to rank 1 only, by a wrapper launched with ``torchrun --no-python``: a real
environment variable, a real broken ``import torch`` (a package earlier on PYTHONPATH that raises), or
the fault hook (``ENVCHECK_CLUSTER_FAULT``: SIGKILL itself, hang). Every job runs under a subprocess
timeout, and its whole process group is killed at it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

# torchrun's start and two torch imports per rank on 2 busy cores, plus the job's own --timeout.
JOB_LIMIT_S = 150


def _wrapper(tmp_path: Path, rank1_env: dict[str, str]) -> Path:
    """A launcher script that sets ``rank1_env`` on rank 1 only, then runs the cluster check."""
    exports = "".join(f"  export {k}='{v}'\n" for k, v in rank1_env.items())
    script = tmp_path / "rank.sh"
    script.write_text(
        f'#!/bin/sh\nif [ "$RANK" = 1 ]; then\n{exports}fi\nexec {sys.executable} -m envcheck.cluster "$@"\n',
        encoding="utf-8",
    )
    script.chmod(0o755)
    return script


def _job(
    tmp_path: Path, *args: str, rank1_env: dict[str, str] | None = None, limit: float = JOB_LIMIT_S
) -> tuple[int, dict[str, Any], str]:
    """Run a 2-rank job; return torchrun's exit code, the JSON report, and the job's log."""
    report = tmp_path / "report.json"
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node=2", "--standalone"]
    if rank1_env:
        launch += ["--no-python", str(_wrapper(tmp_path, rank1_env))]
    else:
        launch += ["-m", "envcheck.cluster"]
    env = {k: v for k, v in os.environ.items() if k != "ENVCHECK_CLUSTER_FAULT"}
    proc = subprocess.Popen(
        [*launch, "--format", "json", "--output", str(report), *args],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"the job did not end within {limit} s:\n{out.decode(errors='replace')[-4000:]}")
    log = out.decode(errors="replace")
    assert report.is_file(), f"no report; exit {proc.returncode}:\n{log[-4000:]}"
    return proc.returncode, json.loads(report.read_text(encoding="utf-8")), log


def _rule(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == rule]


def test_a_clean_job_is_one_environment_with_an_exact_all_reduce(tmp_path: Path) -> None:
    code, report, log = _job(tmp_path, "--timeout", "120")
    host = socket.gethostname()
    assert code == 0, log[-4000:]
    assert report["result"] == "pass"
    assert report["title"].startswith("envcheck cluster: 2 ranks in 1 environment,")
    assert [(g["name"], g["members"], g["identical_to_base"]) for g in report["groups"]] == [
        (f"{host}:0-1", [f"{host}:0-1"], True)
    ]
    (gloo,) = [f for f in _rule(report, "CLUSTER-COLLECTIVES") if f["subject"] == "gloo"]
    assert "all-reduce exact on 2 of 2 ranks" in gloo["message"]
    assert "barrier round trip" in gloo["message"] and "bandwidth" in gloo["message"]
    assert not _rule(report, "CLUSTER-ALLREDUCE")
    # The smoke suite ran on both ranks and agreed: nothing beyond info.
    assert all(f["severity"] == "info" for f in report["findings"]), report["findings"]


def test_a_rank_with_another_numerics_setting_fails_the_job_and_is_named(tmp_path: Path) -> None:
    code, report, log = _job(tmp_path, "--timeout", "120", rank1_env={"ONEDNN_DEFAULT_FPMATH_MODE": "BF16"})
    host = socket.gethostname()
    assert code == 1, log[-4000:]
    assert report["result"] == "fail"
    (drift,) = [f for f in _rule(report, "ENV-VAR-CHANGED") if f["subject"] == "ONEDNN_DEFAULT_FPMATH_MODE"]
    assert drift["machine"] == f"{host}:1"
    assert drift["severity"] == "error" and drift["fails"]
    assert drift["target"] == "'BF16'"
    groups = {g["name"]: g["identical_to_base"] for g in report["groups"]}
    assert groups == {f"{host}:0": True, f"{host}:1": False}
    # One rank each: the tie goes to the environment of the lowest rank.
    assert report["title"].endswith(f"against the reference environment ({host}:0)")


def test_a_rank_killed_mid_run_is_reported_and_the_job_ends(tmp_path: Path) -> None:
    code, report, log = _job(
        tmp_path, "--timeout", "60", "--no-verify", rank1_env={"ENVCHECK_CLUSTER_FAULT": "kill"}
    )
    host = socket.gethostname()
    assert code != 0
    (failed,) = _rule(report, "CLUSTER-RANK-FAILED")
    assert failed["machine"] == f"{host}:1"
    assert "process is gone" in failed["message"]
    # torchrun ends the other ranks once one died: rank 0 says so in the report it still wrote.
    assert _rule(report, "CLUSTER-JOB-STOPPED") or _rule(report, "CLUSTER-COLLECTIVES")
    assert "SIGKILL" in log or "-9" in log


def test_a_rank_hung_in_import_torch_is_reported_at_the_deadline_and_the_job_ends(tmp_path: Path) -> None:
    hanging = tmp_path / "hanging" / "torch"
    hanging.mkdir(parents=True)
    (hanging / "__init__.py").write_text("import time\ntime.sleep(3600)\n", encoding="utf-8")
    code, report, _ = _job(
        tmp_path, "--timeout", "30", "--no-verify", rank1_env={"PYTHONPATH": str(hanging.parent)}
    )
    host = socket.gethostname()
    assert code != 0
    (hung,) = _rule(report, "CLUSTER-RANK-TIMEOUT")
    assert hung["machine"] == f"{host}:1"
    # It announced itself before importing torch, so rank 0 knows where it hangs.
    assert "still running at the deadline" in hung["message"]
    assert hung["message"].endswith("(last stage: import torch)")
    # The collectives ran without the hung rank instead of waiting for it.
    (gloo,) = [f for f in _rule(report, "CLUSTER-COLLECTIVES") if f["subject"] == "gloo"]
    assert "exact on 1 of 1 rank;" in gloo["message"]
    assert report["title"].startswith("envcheck cluster: 2 ranks in 1 environment (1 sent one)")


def test_a_rank_that_cannot_import_torch_still_sends_its_static_snapshot(tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text(
        'raise ImportError("libtorch_cpu.so: cannot open shared object file (injected)")\n', encoding="utf-8"
    )
    code, report, log = _job(
        tmp_path, "--timeout", "60", "--no-verify", rank1_env={"PYTHONPATH": str(broken.parent)}
    )
    host = socket.gethostname()
    assert code != 0, log[-4000:]
    (no_torch,) = _rule(report, "CLUSTER-RANK-NO-TORCH")
    assert no_torch["machine"] == f"{host}:1"
    assert "(injected)" in no_torch["message"]
    # Its environment arrived through the store and was diffed: the variable that broke it is named.
    (pythonpath,) = [f for f in _rule(report, "ENV-VAR-CHANGED") if f["subject"] == "PYTHONPATH"]
    assert pythonpath["machine"] == f"{host}:1"
    assert {g["name"] for g in report["groups"]} == {f"{host}:0", f"{host}:1"}


def test_a_rank_hung_in_the_collectives_is_their_root_cause(tmp_path: Path) -> None:
    code, report, _ = _job(
        tmp_path, "--timeout", "30", "--no-verify", rank1_env={"ENVCHECK_CLUSTER_FAULT": "hang@collectives"}
    )
    host = socket.gethostname()
    assert code != 0
    (hung,) = _rule(report, "CLUSTER-RANK-TIMEOUT")
    assert hung["machine"] == f"{host}:1"
    assert hung["message"].endswith("(last stage: collectives)")
    # Rank 0's all-reduce failed at the collective timeout, and the report says why.
    (allreduce,) = _rule(report, "CLUSTER-ALLREDUCE")
    assert allreduce["machine"] == f"{host}:0" and "failed" in allreduce["message"]
    assert allreduce["caused_by"] == hung["id"]


def test_a_rank_whose_results_exceed_the_stores_8_mib_arrive_whole(tmp_path: Path) -> None:
    """torch's store drops a value over 8 MiB: rank 1 was reported as sending no results, and torch printed
    a C++ stack trace on rank 0. Its 20 MB payload now arrives in parts."""
    code, report, log = _job(
        tmp_path, "--timeout", "60", "--no-verify", rank1_env={"ENVCHECK_CLUSTER_FAULT": "pad:20000000"}
    )
    assert code == 0, log[-4000:]
    assert not _rule(report, "CLUSTER-RANK-SNAPSHOT") and not _rule(report, "CLUSTER-RANK-FAILED"), report
    assert report["title"].startswith("envcheck cluster: 2 ranks in 1 environment,")
    assert "frame #" not in log and "sendBytes failed" not in log, log[-4000:]
