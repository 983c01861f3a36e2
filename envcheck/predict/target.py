"""The platform a prediction is for: a wheel platform tag, a Python version and an implementation, and the
PEP 508 marker environment pip must evaluate requirements in for that platform."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from envcheck.core.errors import UsageError

System = Literal["Windows", "Darwin", "Linux"]

# The platform tags of PEP 425 / 600 / the macOS and Windows conventions that wheels are built for.
_WINDOWS = {"win_amd64": "AMD64", "win32": "x86", "win_arm64": "ARM64"}
_MACOS = re.compile(r"macosx_(\d+)_(\d+)_(x86_64|arm64|universal2|intel|universal)")
_LINUX = re.compile(
    r"(?:manylinux_(\d+)_(\d+)|manylinux(1|2010|2014)|musllinux_(\d+)_(\d+)|linux)_"
    r"(x86_64|aarch64|i686|ppc64le|s390x|armv7l)"
)
# The legacy manylinux names and the glibc they stand for (PEP 513, 571, 599).
_LEGACY_GLIBC = {"1": "2.5", "2010": "2.12", "2014": "2.17"}
_IMPLEMENTATIONS = {"cp": ("cpython", "CPython"), "pp": ("pypy", "PyPy")}
_PYTHON_VERSION = re.compile(r"3\.(\d{1,2})")


@dataclass(frozen=True, kw_only=True, slots=True)
class PredictTarget:
    """One target of a prediction. ``platform`` the wheel platform tag; ``python_version`` ``X.Y``;
    ``implementation`` pip's short name (``cp``)."""

    platform: str
    python_version: str
    implementation: str = "cp"

    @property
    def system(self) -> System:
        if self.platform in _WINDOWS:
            return "Windows"
        if self.platform.startswith("macosx_"):
            return "Darwin"
        return "Linux"

    @property
    def machine(self) -> str:
        """``platform.machine()`` on the target (``AMD64``, ``arm64``, ``x86_64``)."""
        if self.platform in _WINDOWS:
            return _WINDOWS[self.platform]
        m = _MACOS.fullmatch(self.platform)
        if m is not None:
            return "x86_64" if m.group(3) in ("intel", "universal", "universal2") else m.group(3)
        linux = _LINUX.fullmatch(self.platform)
        return linux.group(6) if linux is not None else self.platform.rsplit("_", 1)[-1]

    @property
    def pointer_bits(self) -> int:
        return 32 if self.platform in ("win32",) or self.machine in ("i686", "armv7l", "x86") else 64

    @property
    def loader(self) -> Literal["windows", "dyld", "ld.so"]:
        return {"Windows": "windows", "Darwin": "dyld", "Linux": "ld.so"}[self.system]  # type: ignore[return-value]

    @property
    def glibc_floor(self) -> str | None:
        """The glibc a ``manylinux`` tag promises the machine has at least (PEP 600), or None."""
        m = _LINUX.fullmatch(self.platform)
        if m is None:
            return None
        if m.group(1):
            return f"{m.group(1)}.{m.group(2)}"
        return _LEGACY_GLIBC.get(m.group(3) or "")

    @property
    def macos_minimum(self) -> str | None:
        """The macOS release a ``macosx_X_Y`` tag stands for, or None."""
        m = _MACOS.fullmatch(self.platform)
        return f"{m.group(1)}.{m.group(2)}" if m is not None else None

    def markers(self) -> dict[str, str]:
        """The PEP 508 marker variables of the target that a platform tag and a version determine. pip
        evaluates requirement markers in the environment of the interpreter running it, even with
        ``--platform``; these replace that environment's values so that ``; platform_system == "Linux"``
        drops torch's ``nvidia-*`` requirements for Windows. ``platform_release`` and ``platform_version``
        are unknowable here and keep the running interpreter's; the patch level of the Python is taken
        as ``.0`` (the lowest of the minor version)."""
        impl_name, impl = _IMPLEMENTATIONS[self.implementation]
        sys_platform = {"Windows": "win32", "Darwin": "darwin", "Linux": "linux"}[self.system]
        return {
            "sys_platform": sys_platform,
            "platform_system": self.system,
            "platform_machine": self.machine,
            "os_name": "nt" if self.system == "Windows" else "posix",
            "python_version": self.python_version,
            "python_full_version": f"{self.python_version}.0",
            "implementation_version": f"{self.python_version}.0",
            "implementation_name": impl_name,
            "platform_python_implementation": impl,
        }

    def platforms(self) -> list[str]:
        """The platform tags a machine of this tag installs, best first. pip expands a ``macosx`` tag to
        the older releases itself, but takes a ``manylinux_2_28`` or ``musllinux_1_2`` tag literally, while
        such a machine also installs every older level (PEP 600, 656) and the legacy aliases."""
        m = _LINUX.fullmatch(self.platform)
        if m is None or not (m.group(1) or m.group(3) or m.group(4)):
            return [self.platform]
        arch = m.group(6)
        if m.group(1) or m.group(3):
            glibc = (self.glibc_floor or "2.5").split(".")
            major, minor = int(glibc[0]), int(glibc[1])
            tags = [f"manylinux_{major}_{y}_{arch}" for y in range(minor, 4, -1)] if major == 2 else []
            tags = tags or [self.platform]
            for legacy, level in (("manylinux2014", 17), ("manylinux2010", 12), ("manylinux1", 5)):
                if major > 2 or minor >= level:
                    tags.append(f"{legacy}_{arch}")
            return tags
        major, minor = int(m.group(4)), int(m.group(5))
        return [f"musllinux_{major}_{y}_{arch}" for y in range(minor, -1, -1)]

    def pip_options(self) -> list[str]:
        """pip's options selecting wheels for this target (pip takes them only with ``--target`` or
        ``download``)."""
        platforms = [arg for p in self.platforms() for arg in ("--platform", p)]
        return [
            "--only-binary",
            ":all:",
            *platforms,
            "--python-version",
            self.python_version,
            "--implementation",
            self.implementation,
        ]


def parse_target(platform: str, python_version: str, implementation: str = "cp") -> PredictTarget:
    """A target from the command line. Raises ``UsageError`` for a platform tag no wheel is built for, a
    Python version that is not ``3.Y`` or an implementation pip does not know."""
    tag = platform.strip()
    if not (tag in _WINDOWS or _MACOS.fullmatch(tag) or _LINUX.fullmatch(tag)):
        shown = ascii(platform[:60])
        raise UsageError(
            f"unknown platform tag {shown}",
            tip="Use a wheel platform tag: win_amd64, macosx_11_0_arm64, manylinux_2_28_x86_64, ...",
        )
    version = python_version.strip()
    if not _PYTHON_VERSION.fullmatch(version):
        raise UsageError(
            f"--python-version {python_version[:20]!a} is not a Python 3 version X.Y", tip="e.g. 3.11"
        )
    impl = implementation.strip().lower()
    if impl not in _IMPLEMENTATIONS:
        raise UsageError(f"unknown implementation {implementation[:20]!a}", tip="Use cp (CPython) or pp.")
    return PredictTarget(platform=tag, python_version=version, implementation=impl)
