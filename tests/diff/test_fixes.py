"""The rules every report's remedies obey (envcheck.diff.fixes), on real manifests: a consequence defers to
its root's remedy; a pip action on a distribution another installer owns (conda) or whose live copy lies
outside the environment (a shared folder on sys.path) becomes a manual step that names why."""

from __future__ import annotations

from typing import Any

from diffdata import dist_entry, manifest

from envcheck.app import flows
from envcheck.core.remedy import Install, Manual, Uninstall
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest


def version_changed(name: str, version: str):  # type: ignore[no-untyped-def]
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, name)["version"] = version

    return edit


def installed_by(name: str, installer: str):  # type: ignore[no-untyped-def]
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, name)["installer"] = installer

    return edit


def living_in(name: str, folder: str):  # type: ignore[no-untyped-def]
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, name)["location"] = folder

    return edit


def version_finding(target: Manifest, name: str):  # type: ignore[no-untyped-def]
    report = flows.diff("base", manifest("dev-cpu"), ("target", target), Policy(disabled=True))
    return next(f for f in report.findings if f.rule == "ENV-PKG-VERSION" and f.subject == name)


def test_a_pip_installed_distribution_keeps_its_pip_remedy() -> None:
    f = version_finding(manifest("dev-cpu", version_changed("filelock", "3.0.0")), "filelock")
    assert any(isinstance(a, Install) for a in f.actions)
    assert "`pip install" in f.remedy


def test_a_conda_installed_distribution_is_left_to_conda() -> None:
    target = manifest("dev-cpu", version_changed("filelock", "3.0.0"), installed_by("filelock", "conda"))
    f = version_finding(target, "filelock")
    assert not any(isinstance(a, Install | Uninstall) for a in f.actions)
    (step,) = [a for a in f.actions if isinstance(a, Manual)]
    assert "installed by conda" in step.text and "conda install filelock=3.0.0" in step.text
    assert "`pip" not in f.remedy


def test_a_copy_outside_the_environment_is_never_a_pip_command() -> None:
    shared = "/srv/team-shared/site-packages"
    target = manifest("dev-cpu", version_changed("filelock", "3.0.0"), living_in("filelock", shared))
    f = version_finding(target, "filelock")
    assert f.actions and all(isinstance(a, Manual) for a in f.actions)
    assert shared in f.remedy and "outside this environment" in f.remedy and "`pip" not in f.remedy


def test_a_hostile_installer_name_stays_prose() -> None:
    target = manifest(
        "dev-cpu", version_changed("filelock", "3.0.0"), installed_by("filelock", "`rm -rf ~`\nx")
    )
    f = version_finding(target, "filelock")
    assert "`" not in f.remedy and "\n" not in f.remedy
