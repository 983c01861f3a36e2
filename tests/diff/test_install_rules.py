"""The installation rules on edited real manifests: what is an error, what a warning, what legal (fast)."""

from __future__ import annotations

from typing import Any

from diffdata import dist_entry, manifest

from envcheck.core.remedy import Install, Manual, RemoveFiles
from envcheck.diff.causes import link
from envcheck.diff.engine import doctor

SITE = "/root/venvs/dev/lib/python3.11/site-packages"


def rules(found: list[Any], rule: str) -> list[Any]:
    return [f for f in found if f.rule == rule]


def twice(version: str):  # type: ignore[no-untyped-def]
    def edit(d: dict[str, Any]) -> None:
        old = dict(dist_entry(d, "numpy"), version=version, metadata_dir=f"{SITE}/numpy-{version}.egg-info")
        d["packages"].append(dict(old, shadowed=True))

    return edit


def test_two_releases_in_one_folder_are_an_error_one_release_twice_a_warning() -> None:
    (two,) = rules(doctor(manifest("dev-cpu", twice("1.26.4"))), "ENV-DIST-DUPLICATE")
    assert two.severity == "error" and "mixes releases" in two.message
    same = manifest("dev-cpu")
    version = same.package("numpy").version  # type: ignore[union-attr]
    (one,) = rules(doctor(manifest("dev-cpu", twice(version))), "ENV-DIST-DUPLICATE")
    assert one.severity == "warning" and "one release" in one.message


def orphans(**group: Any):  # type: ignore[no-untyped-def]
    def edit(d: dict[str, Any]) -> None:
        d["install"] = {"stashes": [], "orphans": [group], "shared": [], "walked": 1, "truncated": False}

    return edit


def test_orphaned_code_is_an_error_orphaned_data_a_warning() -> None:
    code = orphans(folder=f"{SITE}/idna", count=1, examples=["idna/x.py"], modules=1, owners=["idna==3.20"])
    data = orphans(folder=f"{SITE}/idna", count=1, examples=["idna/x.json"], modules=0, owners=["idna==3.20"])
    assert [f.severity for f in rules(doctor(manifest("dev-cpu", code)), "ENV-FILE-ORPHAN")] == ["error"]
    assert [f.severity for f in rules(doctor(manifest("dev-cpu", data)), "ENV-FILE-ORPHAN")] == ["warning"]


def test_a_stashed_projects_partial_tree_folds_under_the_interrupted_install() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["install"] = {
            "stashes": [
                {"path": f"{SITE}/~orchgen", "kind": "package", "name": "torch", "files": 10},
                {
                    "path": f"{SITE}/~orch-2.13.0+cpu.dist-info",
                    "kind": "dist-info",
                    "name": "torch",
                    "version": "2.13.0+cpu",
                },
            ],
            "orphans": [
                {
                    "folder": f"{SITE}/torchgen",
                    "count": 3,
                    "examples": ["torchgen/a.py"],
                    "modules": 3,
                    "likely": "stash torch",
                    "owners": [],
                }
            ],
            "shared": [],
            "walked": 10,
            "truncated": False,
        }

    found = link(doctor(manifest("dev-cpu", edit)))
    (interrupted,) = rules(found, "ENV-INSTALL-INTERRUPTED")
    assert interrupted.subject == "torch" and interrupted.caused_by is None  # one install, two stashes
    (orphan,) = rules(found, "ENV-FILE-ORPHAN")
    assert orphan.caused_by == "ENV-INSTALL-INTERRUPTED:torch"
    assert "rm -rf" in interrupted.remedy and "~orchgen" in interrupted.remedy


def test_a_default_index_wheel_without_a_label_agrees_with_its_labelled_version_file() -> None:
    def pypi_style(d: dict[str, Any]) -> None:
        dist_entry(d, "torch")["version"] = "2.13.0"  # METADATA without the label, version.py with it

    assert not rules(doctor(manifest("dev-cpu", pypi_style)), "ENV-VERSION-FILE")

    def other_label(d: dict[str, Any]) -> None:
        dist_entry(d, "torch")["version"] = "2.13.0+cu130"

    (f,) = rules(doctor(manifest("dev-cpu", other_label)), "ENV-VERSION-FILE")
    assert f.severity == "error"


def test_an_interrupted_install_beside_a_live_dist_info_removes_the_partial_tree_too() -> None:
    """A reinstall over an interrupted upgrade leaves the other build's files that no RECORD lists: the
    remedy deletes the folders they are in with the stashes, then installs the labelled build from the index
    its label names."""

    def edit(d: dict[str, Any]) -> None:
        version = dist_entry(d, "torch")["version"]
        d["install"] = {
            "stashes": [{"path": f"{SITE}/~orch", "kind": "package", "name": "torch", "files": 10}],
            "orphans": [
                {
                    "folder": f"{SITE}/torch",
                    "count": 201,
                    "examples": ["torch/lib/libtorch_cuda.so"],
                    "modules": 201,
                    "likely": "stash torch",
                    "owners": [f"torch=={version}"],
                }
            ],
            "shared": [],
            "walked": 10,
            "truncated": False,
        }

    found = link(doctor(manifest("dev-cpu", edit)))
    (interrupted,) = rules(found, "ENV-INSTALL-INTERRUPTED")
    removed, reinstall = interrupted.actions
    assert isinstance(removed, RemoveFiles) and removed.paths == (f"{SITE}/torch", f"{SITE}/~orch")
    assert isinstance(reinstall, Install) and reinstall.force and reinstall.no_deps
    assert reinstall.index_url == "https://download.pytorch.org/whl/cpu"
    assert "<" not in interrupted.remedy


def test_a_second_copy_pip_cannot_uninstall_is_deleted_before_every_dist_info_is_uninstalled() -> None:
    (two,) = rules(doctor(manifest("dev-cpu", twice("1.26.4"))), "ENV-DIST-DUPLICATE")
    kinds = [a.kind for a in two.actions]
    assert kinds == ["remove", "uninstall", "install"]
    assert two.actions[0] == RemoveFiles(paths=(f"{SITE}/numpy-1.26.4.egg-info",))


def test_an_editable_checkout_gone_is_a_manual_step_that_names_it() -> None:
    def edit(d: dict[str, Any]) -> None:
        d["install"] = {
            "stashes": [],
            "orphans": [],
            "shared": [],
            "sources_missing": [{"name": "mylib", "version": "0.1.0", "path": "/src/mylib"}],
            "walked": 1,
            "truncated": False,
        }

    (gone,) = rules(doctor(manifest("dev-cpu", edit)), "ENV-SOURCE-GONE")
    (step,) = gone.actions
    assert isinstance(step, Manual) and "/src/mylib" in step.text
    assert "<" not in gone.remedy and "mylib==0.1.0" not in gone.remedy  # no other build from an index
