"""Facts about the machine: OS, libc, CPU model and ISA flags, CPU quota, container hints, /dev/shm."""

import os
import platform
import re
import sys

from .system import read_text, run_text

ISA_FLAGS = re.compile(r"^(sse4_1|sse4_2|avx|avx2|fma|f16c|avx_vnni|avx512\w*|amx\w*|asimd|sve\w*|neon)$")


def cpu_facts():
    model, flags = None, []
    info = read_text("/proc/cpuinfo")
    if info:
        for line in info.splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if model is None and key in ("model name", "Hardware", "cpu model"):
                model = value.strip()
            elif not flags and key in ("flags", "Features"):
                flags = sorted({f for f in value.split() if ISA_FLAGS.match(f)})
            if model is not None and flags:
                break
    elif sys.platform == "darwin":
        model = run_text(["sysctl", "-n", "machdep.cpu.brand_string"])
        features = run_text(["sysctl", "-n", "machdep.cpu.features", "machdep.cpu.leaf7_features"]) or ""
        flags = sorted({f.lower().replace(".", "_") for f in features.split()} & {"avx1_0", "avx2", "fma"})
    else:
        model = platform.processor() or None
    try:
        affinity = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        affinity = None
    return {
        "model": model,
        "isa_flags": flags,
        "logical_cpus": os.cpu_count(),
        "affinity_cpus": affinity,
        "cgroup_cpu_quota": cgroup_quota(),
    }


def cgroup_quota():
    """CPUs this container may use (cgroup v2 ``cpu.max`` or v1 CFS quota), or None when unlimited."""
    if os.name == "nt":
        return None
    text = read_text("/sys/fs/cgroup/cpu.max")
    if text:
        quota, _, period = text.strip().partition(" ")
        if quota != "max" and period:
            try:
                return round(int(quota) / int(period), 3)
            except ValueError:
                return None
        return None
    quota = read_text("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") or read_text(
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"
    )
    period = read_text("/sys/fs/cgroup/cpu/cpu.cfs_period_us") or read_text(
        "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us"
    )
    try:
        if quota and period and int(quota) > 0:
            return round(int(quota) / int(period), 3)
    except ValueError:
        pass
    return None


def container_hints():
    if os.name == "nt":
        return []  # the POSIX hints below would read the Linux host's files under Wine
    hints = []
    if os.path.exists("/.dockerenv"):
        hints.append("docker")
    if os.path.exists("/run/.containerenv"):
        hints.append("podman")
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        hints.append("kubernetes")
    cgroup = read_text("/proc/1/cgroup") or ""
    for word in ("docker", "kubepods", "containerd", "lxc"):
        if word in cgroup and word not in hints:
            hints.append(word)
    if os.environ.get("container"):
        hints.append(os.environ["container"])
    if os.path.exists("/dev/nvidia0") or os.path.exists("/dev/nvidiactl"):
        hints.append("nvidia-devices")
    if os.environ.get("NVIDIA_VISIBLE_DEVICES"):
        hints.append("nvidia-container-runtime")
    return sorted(set(hints))


def shm_size():
    try:
        st = os.statvfs("/dev/shm")
    except (OSError, AttributeError):
        return None
    return st.f_frsize * st.f_blocks


def distro():
    if os.name == "nt":
        # Before any POSIX file: under Wine "/etc/os-release" is the Linux host's, not this Windows'.
        return "Windows " + platform.release() + " build " + platform.version()
    text = read_text("/etc/os-release")
    if text:
        for line in text.splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip().strip('"')
    if sys.platform == "darwin":
        return "macOS " + platform.mac_ver()[0]
    return None


def platform_facts():
    libc_name, libc_version = platform.libc_ver()
    uname = platform.uname()
    return {
        "system": uname.system,
        "release": uname.release,
        "kernel": uname.version,
        "machine": uname.machine,
        "distro": distro(),
        "libc": {"name": libc_name or None, "version": libc_version or None},
        "cpu": cpu_facts(),
        "container": container_hints(),
        "shm_bytes": shm_size(),
        "path_aliases": system_links(),
        "hostname": uname.node,
    }


# Top-level folders that a merged-/usr system (Debian 12, Fedora, Arch, Ubuntu 20.04+) makes links into
# /usr: /lib/x86_64-linux-gnu/libc.so.6 and /usr/lib/x86_64-linux-gnu/libc.so.6 are one file there, and
# the loader names it either way depending on which search path matched.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def system_links():
    """``{"/lib": "/usr/lib", ...}`` for each of ``SYSTEM_LINKS`` that is a symbolic link (POSIX only)."""
    if os.name != "posix":
        return {}
    out = {}
    for folder in SYSTEM_LINKS:
        try:
            if os.path.islink(folder):
                out[folder] = os.path.realpath(folder)
        except (OSError, ValueError):
            continue
    return out
