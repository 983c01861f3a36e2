"""The OS package that ships a library (``envcheck/data/os_packages.json``, ``envcheck.manifest.ospackages``),
checked against this machine's own dpkg database, and the remedy of a missing library that names it
(``ENV-NATIVE-MISSING``) for the distribution a manifest names."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

import envcheck.app.catalog  # noqa: F401 - every rule registered
from envcheck.diff.engine import doctor
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest
from envcheck.manifest.ospackages import _os_packages, install_command, installer_of, os_packages
from envcheck.native.ldcache import cache_lookup, read_ld_cache

DATA = Path(__file__).resolve().parent.parent / "data" / "manifests"
# Debian policy's package names, and Fedora's (which allow capitals: mesa-libGL).
APT_NAME = re.compile(r"^[a-z0-9][a-z0-9.+-]+$")
DNF_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]+$")


def test_every_library_names_a_package_of_each_family() -> None:
    table = _os_packages()
    assert len(table) >= 60
    for name, packages in table.items():
        assert re.match(r"^lib[\w+.-]*\.so(\.\d+)+$", name) or name.startswith("ld-"), name
        assert APT_NAME.match(packages["apt"]) and DNF_NAME.match(packages["dnf"]), (name, packages)


def _dpkg_owners(paths: list[str]) -> dict[str, str]:
    """Path -> the package dpkg says ships it, for those it knows, in one ``dpkg -S`` (which reads its
    whole file database once per call)."""
    done = subprocess.run(["dpkg", "-S", *paths], capture_output=True, text=True, check=False, timeout=120)
    owners: dict[str, str] = {}
    for line in done.stdout.splitlines():  # "libgl1:amd64: /lib/x86_64-linux-gnu/libGL.so.1"
        if line.startswith("diversion"):
            continue
        package, _, path = line.partition(": ")
        owners.setdefault(path.strip(), package.split(",", 1)[0].split(":", 1)[0].strip())
    return owners


@pytest.mark.skipif(shutil.which("dpkg") is None, reason="dpkg is not installed: not a Debian machine")
def test_the_apt_names_are_the_packages_dpkg_says_ship_this_machines_copies() -> None:
    """For every library of the table this machine has, dpkg names the package the table names (Debian
    13's 64-bit-time renames add ``t64``; their old name is what apt-get install accepts)."""
    cache = read_ld_cache()
    spelled = {name.lower(): name for name in cache}
    candidates: dict[str, list[str]] = {}
    for name in _os_packages():
        found = cache_lookup(cache, spelled[name], "x86_64") if name in spelled else None
        if found is not None:
            paths = [found, str(Path(found).resolve())]
            paths += [p.replace("/lib/", "/usr/lib/", 1) for p in paths if p.startswith("/lib/")]
            candidates[name] = list(dict.fromkeys(paths))
    owners = _dpkg_owners(sorted({p for paths in candidates.values() for p in paths}))
    checked = 0
    for name, paths in candidates.items():
        owner = next((owners[p] for p in paths if p in owners), None)
        if owner is None:
            continue  # a file no package ships (built by hand, copied in)
        assert owner.removesuffix("t64") == _os_packages()[name]["apt"], (name, paths, owner)
        checked += 1
    if checked < 5:  # 63 of the 73 on the machine CI runs on (its Chromium brings the X11 and GL ones)
        pytest.skip(f"only {checked} libraries of the table are installed here by a package dpkg knows")


@pytest.mark.parametrize(
    ("distro", "tool"),
    [
        ("Debian GNU/Linux 12 (bookworm)", "apt"),
        ("Ubuntu 24.04.1 LTS", "apt"),
        ("Rocky Linux 9.4 (Blue Onyx)", "dnf"),
        ("Amazon Linux 2023.5.20240624", "dnf"),
        ("Alpine Linux v3.20", None),
        ("", None),
        (None, None),
    ],
)
def test_the_family_is_read_from_the_distributions_name(distro: str | None, tool: str | None) -> None:
    assert installer_of(distro) == tool


def test_the_packages_come_once_each_in_order_and_the_rest_is_left() -> None:
    got = os_packages(
        ["libGL.so.1", "libglib-2.0.so.0", "libgthread-2.0.so.0", "libfoo.so.1"], "Debian GNU/Linux 12"
    )
    assert got == ("apt", ["libgl1", "libglib2.0-0"], ["libfoo.so.1"])
    assert os_packages(["libfoo.so.1"], "Debian GNU/Linux 12") is None
    assert os_packages(["libGL.so.1"], "Alpine Linux v3.20") is None
    assert install_command("dnf", ["mesa-libGL", "glib2"]) == "dnf install -y mesa-libGL glib2"


def _without_libgl(distro: str) -> Manifest:
    """dev-cpu.json on ``distro``, where an extension module of torch needs libGL.so.1, which is missing."""
    data: dict[str, Any] = copy.deepcopy(json.loads((DATA / "dev-cpu.json").read_text(encoding="utf-8")))
    data["platform"]["distro"] = distro
    root = "torch:torch/_C.cpython-311-x86_64-linux-gnu.so"
    data["native"]["missing"] = [
        {
            "root": root,
            "chain": [root],
            "missing": "libGL.so.1",
            "text": "_C.cpython-311-x86_64-linux-gnu.so → libGL.so.1: MISSING",
            "from_extension": True,
        }
    ]
    return decode(Manifest, data, source="dev-cpu.json (edited)")


@pytest.mark.parametrize(
    ("distro", "command"),
    [
        (
            "Debian GNU/Linux 12 (bookworm)",
            "as root: `apt-get update && apt-get install -y --no-install-recommends libgl1`",
        ),
        ("Rocky Linux 9.4 (Blue Onyx)", "as root: `dnf install -y mesa-libGL`"),
    ],
)
def test_a_missing_os_library_is_remedied_with_its_package(distro: str, command: str) -> None:
    [found] = [f for f in doctor(_without_libgl(distro)) if f.rule == "ENV-NATIVE-MISSING"]
    assert command in found.remedy, found.remedy
    assert [a.kind for a in found.actions] == ["manual"]


def test_an_unknown_distribution_keeps_the_words_without_a_command() -> None:
    [found] = [f for f in doctor(_without_libgl("Alpine Linux v3.20")) if f.rule == "ENV-NATIVE-MISSING"]
    assert "from the operating system's packages" in found.remedy
    assert "apt-get" not in found.remedy and "dnf" not in found.remedy
