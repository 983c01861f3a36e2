"""Facts about the interpreter itself: version, prefixes, venv or conda, sys.path, wheel tags."""

import os
import platform
import sys


def python_facts():
    # type: () -> dict
    implementation = platform.python_implementation()
    prefix = sys.prefix
    if os.path.isdir(os.path.join(prefix, "conda-meta")):
        environment = "conda"
    elif sys.prefix != getattr(sys, "base_prefix", sys.prefix):
        environment = "venv"
    else:
        environment = "system"
    try:
        import site

        user_site = site.getusersitepackages()
        user_site_enabled = bool(site.ENABLE_USER_SITE)
    except Exception:
        user_site, user_site_enabled = None, False
    # The platform default (importing multiprocessing costs more than the rest of this function):
    # spawn on Windows and macOS (3.8+), forkserver on POSIX from 3.14, fork before.
    if os.name == "nt" or sys.platform == "darwin":
        start_method = "spawn"
    elif sys.version_info >= (3, 14):
        start_method = "forkserver"
    else:
        start_method = "fork"
    import sysconfig

    shared = None
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        libdir = sysconfig.get_config_var("LIBDIR") or ""
        name = sysconfig.get_config_var("LDLIBRARY") or ""
        if libdir and name:
            shared = os.path.join(libdir, name)
    elif os.name == "nt":
        candidate = os.path.join(sys.base_exec_prefix, "python%d%d.dll" % sys.version_info[:2])
        shared = candidate if os.path.exists(candidate) else None
    return {
        "implementation": implementation,
        "version": platform.python_version(),
        "abi_flags": getattr(sys, "abiflags", ""),
        "pointer_bits": 64 if sys.maxsize > 2**32 else 32,
        "executable": sys.executable,
        "prefix": sys.prefix,
        "base_prefix": getattr(sys, "base_prefix", sys.prefix),
        "exec_prefix": sys.exec_prefix,
        "base_exec_prefix": getattr(sys, "base_exec_prefix", sys.exec_prefix),
        "environment": environment,
        "user_site_enabled": user_site_enabled,
        "user_site": user_site,
        "sys_path": [p for p in sys.path if p],
        "wheel_tags": wheel_tags(),
        "mp_start_method": start_method,
        "shared_library": shared,
    }


def wheel_tags(limit=12):
    """The first tags this interpreter accepts, via packaging (or pip's vendored copy) when present."""
    for module in ("packaging.tags", "pip._vendor.packaging.tags"):
        try:
            tags = __import__(module, fromlist=["sys_tags"])
        except Exception:
            continue
        out = []
        for tag in tags.sys_tags():
            out.append(str(tag))
            if len(out) >= limit:
                break
        return out
    return []
