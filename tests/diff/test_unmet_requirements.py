"""ENV-PKG-UNMET against ``pip check`` on the same real venv: everything pip check reports, envcheck reports;
requirements through extras, which pip check does not follow, envcheck reports too.

The distributions are real to ``importlib.metadata``: ``.dist-info`` folders with METADATA written into a
real venv's site-packages (no code needed: metadata is what both tools read).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from venvs import make_venv, venv_site

from envcheck.diff.engine import doctor
from envcheck.manifest.io import load


def dist_info(site: Path, name: str, version: str, *requires: str) -> None:
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir()
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    if any("extra ==" in r for r in requires):
        lines += sorted(
            {f"Provides-Extra: {m}" for r in requires for m in re.findall(r'extra == "(\w+)"', r)}
        )
    (folder / "METADATA").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "INSTALLER").write_text("pip\n", encoding="utf-8")
    (folder / "RECORD").write_text("", encoding="utf-8")


@pytest.mark.slow
def test_unmet_requirements_match_pip_check_and_follow_extras(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    site = venv_site(python)
    # torchvision without pillow (the case), a version conflict, and a requirement via an extra.
    dist_info(site, "torchvision", "0.28.0+cpu", "numpy", "pillow!=8.3.*,>=5.3.0")
    dist_info(site, "numpy", "1.26.4")
    dist_info(site, "scipy-like", "1.0", "numpy>=2")
    dist_info(site, "app", "1.0", "lib-x[fast]>=1")
    dist_info(site, "lib-x", "1.0", 'speedy>=2; extra == "fast"', 'never; extra == "docs"')
    dist_info(site, "winonly", "1.0", 'pywin32; sys_platform == "win32"')

    pip = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "check"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    reported_by_pip = {
        (m.group(1).lower(), m.group(2).lower())
        for m in re.finditer(r"^(\S+) \S+ (?:requires|has requirement) ([A-Za-z0-9._-]+)", pip.stdout, re.M)
    }
    assert ("torchvision", "pillow") in reported_by_pip and ("scipy-like", "numpy") in reported_by_pip
    assert not any(name == "speedy" for _, name in reported_by_pip)  # pip check does not follow extras

    out = tmp_path / "m.json"
    subprocess.run(
        [
            sys.executable,
            *("-m", "envcheck", "snapshot", "--no-probe", "--no-verify"),
            "--python",
            str(python),
            "-o",
            str(out),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    unmet = {f.subject.lower(): f for f in doctor(load(out)) if f.rule == "ENV-PKG-UNMET"}
    for requirer, name in reported_by_pip:
        assert name in unmet and requirer in unmet[name].message.lower(), (requirer, name)
    assert "pillow!=8.3.*,>=5.3.0" in unmet["pillow"].message and unmet["pillow"].target == "missing"
    assert unmet["numpy"].target == "1.26.4" and "numpy>=2" in unmet["numpy"].base  # type: ignore[operator]
    assert "through its extra 'fast'" in unmet["speedy"].message
    assert "`pip install 'speedy>=2'`" in unmet["speedy"].remedy
    assert "never" not in unmet and "pywin32" not in unmet  # an extra nobody asks for; another platform
