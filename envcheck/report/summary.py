"""A human summary of one manifest (``envcheck show``, and the lines ``envcheck snapshot`` prints)."""

from __future__ import annotations

from envcheck.manifest.model import Manifest, ProbeOutcome


def _probe_line(outcome: ProbeOutcome) -> str:
    if outcome.status == "ok":
        return "probe      ok"
    if outcome.status == "not-run":
        return "probe      not run (--no-probe): static facts only"
    where = f" during {outcome.stage}" if outcome.stage else ""
    detail = {
        "timeout": f"hung{where}, killed after {outcome.timeout_s:g} s" if outcome.timeout_s else "hung",
        "crashed": f"crashed{where}: {outcome.signal or f'exit code {outcome.exit_code}'}",
        "error": f"failed{where}: {outcome.exception}",
    }.get(outcome.status, outcome.status)
    return f"probe      {detail}"


def _verify_line(manifest: Manifest) -> str:
    section = manifest.verify
    assert section is not None
    if section.skipped:
        return f"verify     not run ({section.skipped}): no goldens"
    counts: dict[str, int] = {}
    for result in section.results:
        counts[result.status] = counts.get(result.status, 0) + 1
    tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"verify     {len(section.results)} checks recorded as goldens: {tally}"


def summary(manifest: Manifest, *, short: bool) -> str:
    """A few aligned lines: interpreter, torch and its variant, CUDA, driver, OpenMP/BLAS, probe outcome."""
    py = manifest.python
    lines = [f"python     {py.implementation} {py.version} ({py.environment}) {py.executable}"]
    if manifest.platform is not None:
        p = manifest.platform
        libc = f"{p.libc.name} {p.libc.version}" if p.libc.name else "no libc reported"
        lines.append(f"platform   {p.system} {p.machine}, {p.distro or p.release}, {libc}")
    torch = manifest.torch
    if torch.static is None:
        lines.append("torch      not installed")
    else:
        s = torch.static
        build = f"CUDA {s.cuda}" if s.cuda else f"ROCm {s.hip}" if s.hip else "no CUDA"
        lines.append(f"torch      {s.version} ({s.variant}, {build}) at {s.location}")
        if len(torch.trees) > 1:
            lines.append(f"           {len(torch.trees)} torch trees on sys.path: {', '.join(torch.trees)}")
    rt = torch.runtime
    if rt is not None:
        libs = [
            f"cuDNN {rt.cudnn_version}" if rt.cudnn_version else None,
            f"NCCL {rt.nccl_version}" if rt.nccl_version else None,
            f"MKL {rt.mkl_version}" if rt.mkl_version else None,
            f"oneDNN {rt.onednn_version}" if rt.onednn_version else None,
        ]
        lines.append(
            f"build      {', '.join(x for x in libs if x) or 'no MKL/oneDNN/cuDNN'}; "
            f"CPU capability {rt.cpu_capability}; {rt.num_threads} threads"
        )
        for device in rt.devices:
            lines.append(f"device     {device.kind}:{device.index} {device.name} (sm {device.capability})")
    if manifest.gpu is not None:
        g = manifest.gpu
        if g.found:
            cuda = g.cuda_driver_version
            cuda_text = f", supports CUDA {cuda // 1000}.{cuda % 1000 // 10}" if cuda else ""
            lines.append(
                f"driver     {g.driver_version or '?'} via {g.source}{cuda_text}, {len(g.gpus)} GPU(s)"
            )
        else:
            lines.append(f"driver     none ({g.reason})")
    if manifest.runtimes is not None:
        for pool in manifest.runtimes.threadpools:
            version = f" {pool.version}" if pool.version else ""
            threads = f", {pool.num_threads} threads" if pool.num_threads else ""
            lines.append(
                f"{pool.user_api:<10} {pool.internal_api}{version} {pool.filepath} [{pool.owner}]{threads}"
            )
    lines.append(f"packages   {len(manifest.packages)} distributions")
    if manifest.native is not None and manifest.native.skipped:
        lines.append(f"native     skipped: {manifest.native.skipped}")
    lines.append(_probe_line(manifest.meta.probe))
    if manifest.verify is not None:
        lines.append(_verify_line(manifest))
    if not short:
        m = manifest.meta
        lines.insert(
            0,
            f"manifest   schema {manifest.schema_version}, envcheck {m.envcheck_version}, {m.created}"
            + (f", label {m.label!r}" if m.label else ""),
        )
        if manifest.env:
            lines.append("env        " + ", ".join(sorted(manifest.env)))
    return "\n".join(lines)
