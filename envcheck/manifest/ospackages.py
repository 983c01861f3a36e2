"""The operating-system package that ships a library, by the name a binary asks for, for the two families of
distributions manylinux wheels run on (``envcheck/data/os_packages.json``, which says where its names come
from): the remedy of a library an import needs that the machine or the image lacks names the package and
the command that installs it, for the distribution the manifest names."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Literal

Installer = Literal["apt", "dnf"]
# A distribution's name as its os-release PRETTY_NAME (the manifest's ``platform.distro``) begins, and the
# package manager of its family.
_FAMILIES: tuple[tuple[str, Installer], ...] = (
    ("debian", "apt"),
    ("ubuntu", "apt"),
    ("linux mint", "apt"),
    ("pop!_os", "apt"),
    ("raspbian", "apt"),
    ("red hat", "dnf"),
    ("rocky", "dnf"),
    ("almalinux", "dnf"),
    ("centos", "dnf"),
    ("fedora", "dnf"),
    ("amazon linux", "dnf"),
    ("oracle linux", "dnf"),
)


@functools.cache
def _os_packages() -> dict[str, dict[str, str]]:
    from importlib import resources

    path = resources.files("envcheck").joinpath("data").joinpath("os_packages.json")
    libraries = json.loads(path.read_text(encoding="utf-8"))["libraries"]
    return {name.lower(): packages for name, packages in libraries.items()}


def installer_of(distro: str | None) -> Installer | None:
    """The package manager of the distribution ``distro`` names (os-release's PRETTY_NAME), if known."""
    lower = (distro or "").strip().lower()
    return next((tool for prefix, tool in _FAMILIES if lower.startswith(prefix)), None)


def os_packages(names: Sequence[str], distro: str | None) -> tuple[Installer, list[str], list[str]] | None:
    """``(installer, packages, names left)``: the packages of ``distro``'s family that ship ``names``
    (``envcheck/data/os_packages.json``), in order and once each, and the names no package of the table
    ships; None when the family is not known or no name is in the table."""
    tool = installer_of(distro)
    if tool is None:
        return None
    table = _os_packages()
    packages: list[str] = []
    left: list[str] = []
    for name in names:
        package = table.get(name.lower(), {}).get(tool)
        if package is None:
            left.append(name)
        elif package not in packages:
            packages.append(package)
    return (tool, packages, left) if packages else None


def install_command(tool: Installer, packages: Sequence[str]) -> str:
    """The command that installs ``packages`` (names from envcheck's own table) with ``tool``, as root."""
    if tool == "apt":
        return "apt-get update && apt-get install -y --no-install-recommends " + " ".join(packages)
    return "dnf install -y " + " ".join(packages)
