"""A human summary of one manifest (``envcheck show``, and the lines ``envcheck snapshot`` prints).

A manifest is untrusted input: every value it supplies is redacted and printed through
``escape.one_line`` (shown as ``_v``/``_n`` below), so a label or path holding escape sequences, newlines
or lone surrogates prints as visible data on one line and never drives the reader's terminal.
"""

from __future__ import annotations

from envcheck.core.escape import one_line
from envcheck.core.redact import redact_text
from envcheck.manifest.model import Manifest, ProbeOutcome
from envcheck.manifest.query import vc_state


def _v(value: object) -> str:
    """A manifest value for a summary line: redacted (a manifest envcheck did not write may hold a
    credential), escaped, on one line; ``None`` as ``?``."""
    return "?" if value is None else one_line(redact_text(str(value)))


def _n(value: float) -> str:
    """A number from the manifest: ``:g`` formatting; the codec refuses non-finite ones, shown as is."""
    return f"{value:g}"


def _probe_line(outcome: ProbeOutcome) -> str:
    if outcome.status == "ok":
        return "probe      ok"
    if outcome.status == "not-run":
        return "probe      not run (--no-probe): static facts only"
    where = f" during {_v(outcome.stage)}" if outcome.stage else ""
    detail = {
        "timeout": f"hung{where}, killed after {_n(outcome.timeout_s)} s" if outcome.timeout_s else "hung",
        "crashed": f"crashed{where}: {_v(outcome.signal or f'exit code {outcome.exit_code}')}",
        "error": f"failed{where}: {_v(outcome.exception)}",
    }.get(outcome.status, _v(outcome.status))
    return f"probe      {detail}"


def _verify_line(manifest: Manifest) -> str:
    section = manifest.verify
    assert section is not None
    if section.skipped:
        return f"verify     not run ({_v(section.skipped)}): no goldens"
    counts: dict[str, int] = {}
    for result in section.results:
        counts[result.status] = counts.get(result.status, 0) + 1
    tally = ", ".join(f"{n} {_v(status)}" for status, n in sorted(counts.items()))
    return f"verify     {len(section.results)} checks recorded as goldens: {tally}"


def _windows_lines(manifest: Manifest) -> list[str]:
    """Windows' version, its VC++ runtime, where the loader stopped, and foreign DLLs on PATH."""
    w = manifest.windows
    assert w is not None
    lines = []
    if w.version is not None:
        v = w.version
        build = f"{v.build}.{v.ubr}" if v.ubr is not None else f"{v.build}"
        named = ", ".join(_v(x) for x in (v.product, v.display) if x)
        lines.append(f"windows    {_v(v.version)} build {build}" + (f" ({named})" if named else ""))
    lines.append(f"vc++       {_v(vc_state(w.vc_runtime)) if w.vc_runtime is not None else 'not recorded'}")
    failure = w.load_failure
    if failure is not None:
        gaps = [f"{_v(d.name)} not found" for d in failure.missing]
        gaps += [f"{_v(d.name)} refused ({_v(d.path)})" for d in failure.refused]
        dll = _v(failure.dll.replace("/", "\\").rsplit("\\", 1)[-1])
        lines.append(f"loader     stops at {dll}: {', '.join(gaps) or 'every import loads'}")
    if w.path_dlls:
        shown = ", ".join(_v(d.path) for d in w.path_dlls[:3])
        more = f" and {len(w.path_dlls) - 3} more" if len(w.path_dlls) > 3 else ""
        lines.append(f"PATH DLLs  {len(w.path_dlls)} outside the environment: {shown}{more}")
    return lines


def summary(manifest: Manifest, *, short: bool) -> str:
    """A few aligned lines: interpreter, torch and its variant, CUDA, driver, OpenMP/BLAS, probe outcome."""
    py = manifest.python
    lines = [
        f"python     {_v(py.implementation)} {_v(py.version)} ({_v(py.environment)}) {_v(py.executable)}"
    ]
    if manifest.platform is not None:
        p = manifest.platform
        libc = f"{_v(p.libc.name)} {_v(p.libc.version)}" if p.libc.name else "no libc reported"
        lines.append(f"platform   {_v(p.system)} {_v(p.machine)}, {_v(p.distro or p.release)}, {libc}")
    if manifest.windows is not None:
        lines.extend(_windows_lines(manifest))
    torch = manifest.torch
    if torch.static is None:
        lines.append("torch      not installed")
    else:
        s = torch.static
        build = f"CUDA {_v(s.cuda)}" if s.cuda else f"ROCm {_v(s.hip)}" if s.hip else "no CUDA"
        lines.append(f"torch      {_v(s.version)} ({_v(s.variant)}, {build}) at {_v(s.location)}")
        if len(torch.trees) > 1:
            trees = ", ".join(map(_v, torch.trees))
            lines.append(f"           {len(torch.trees)} torch trees on sys.path: {trees}")
    rt = torch.runtime
    if rt is not None:
        libs = [
            f"cuDNN {_v(rt.cudnn_version)}" if rt.cudnn_version else None,
            f"NCCL {_v(rt.nccl_version)}" if rt.nccl_version else None,
            f"MKL {_v(rt.mkl_version)}" if rt.mkl_version else None,
            f"oneDNN {_v(rt.onednn_version)}" if rt.onednn_version else None,
        ]
        lines.append(
            f"build      {', '.join(x for x in libs if x) or 'no MKL/oneDNN/cuDNN'}; "
            f"CPU capability {_v(rt.cpu_capability)}; {_v(rt.num_threads)} threads"
        )
        for device in rt.devices:
            lines.append(
                f"device     {_v(device.kind)}:{device.index} {_v(device.name)} (sm {_v(device.capability)})"
            )
    if manifest.gpu is not None:
        g = manifest.gpu
        if g.found:
            cuda = g.cuda_driver_version
            cuda_text = f", supports CUDA {cuda // 1000}.{cuda % 1000 // 10}" if cuda else ""
            lines.append(
                f"driver     {_v(g.driver_version)} via {_v(g.source)}{cuda_text}, {len(g.gpus)} GPU(s)"
            )
        else:
            lines.append(f"driver     none ({_v(g.reason)})")
    if manifest.runtimes is not None:
        for pool in manifest.runtimes.threadpools:
            version = f" {_v(pool.version)}" if pool.version else ""
            threads = f", {pool.num_threads} threads" if pool.num_threads else ""
            # threadpoolctl names OpenMP's pool "openmp" twice (user and internal API): say it once.
            internal = f" {_v(pool.internal_api)}" if pool.internal_api != pool.user_api else ""
            lines.append(
                f"{_v(pool.user_api):<10}{internal}{version} {_v(pool.filepath)} [{_v(pool.owner)}]{threads}"
            )
    lines.append(f"packages   {len(manifest.packages)} distributions")
    if manifest.native is not None and manifest.native.skipped:
        lines.append(f"native     skipped: {_v(manifest.native.skipped)}")
    if manifest.image is not None:
        i = manifest.image
        lines.append(
            f"image      {_v(i.digest)} ({_v(i.source_format)}, {_v(i.platform)}, {i.layers} layers): "
            "read statically, nothing in it ran"
        )
    else:
        lines.append(_probe_line(manifest.meta.probe))
    if manifest.verify is not None:
        lines.append(_verify_line(manifest))
    if not short:
        m = manifest.meta
        lines.insert(
            0,
            f"manifest   schema {manifest.schema_version}, envcheck {_v(m.envcheck_version)}, {_v(m.created)}"
            + (f", label '{_v(m.label)}'" if m.label else ""),
        )
        if manifest.env:
            lines.append("env        " + ", ".join(_v(name) for name in sorted(manifest.env)))
    return "\n".join(lines)
