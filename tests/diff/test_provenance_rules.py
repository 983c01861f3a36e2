"""The provenance rules on edited real manifests: manifests recorded before ``python.path_origins`` (one
folder listed twice, no origins), two metadata folders in one folder, the sources of each side, and the
remedies for each origin. The real venvs and installs are in ``test_provenance.py``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from diffdata import Edit, dist_entry, manifest
from test_provenance import _hostile_pth_files

from envcheck.core.findings import Finding
from envcheck.diff.engine import diff, doctor

SITE = "/root/venvs/dev/lib/python3.11/site-packages"  # where dev-cpu.json's distributions live


def of(found: list[Finding], rule: str) -> list[Finding]:
    return [f for f in found if f.rule == rule]


def torch_copy(location: str, version: str = "2.13.0+cpu", metadata: str | None = None) -> Edit:
    """A second, shadowed copy of torch in ``location`` (the probe lists it after the first)."""

    def edit(d: dict[str, Any]) -> None:
        copy = dict(dist_entry(d, "torch"), version=version, shadowed=True, location=location)
        copy["metadata_dir"] = f"{location}/{metadata or f'torch-{version}.dist-info'}"
        d["packages"].append(copy)

    return edit


def origins(*entries: tuple[str, str, str | None]) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["python"]["path_origins"] = [{"path": p, "origin": o, "pth": pth} for p, o, pth in entries]

    return edit


def trees(*paths: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["torch"]["trees"] = list(paths)

    return edit


def env(name: str, value: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["env"][name] = value

    return edit


def test_one_folder_listed_twice_by_an_older_probe_is_one_copy() -> None:
    # Through a link the manifest records as an alias, and spelt with a trailing slash.
    linked = manifest(
        "dev-cpu",
        torch_copy("/srv/dev-link/lib/python3.11/site-packages"),
        lambda d: d["python"].update(path_aliases={"/srv/dev-link": "/root/venvs/dev"}),
        trees(f"{SITE}/torch", "/srv/dev-link/lib/python3.11/site-packages/torch"),
    )
    slashed = manifest("dev-cpu", torch_copy(SITE + "/"), trees(f"{SITE}/torch", f"{SITE}//torch"))
    for m in (linked, slashed):
        found = doctor(m)
        assert of(found, "ENV-TORCH-SHADOWED") == [] and of(found, "ENV-TORCH-TREES") == []


def test_two_metadata_folders_in_one_folder_defer_to_the_duplicate_rule() -> None:
    # Which copy pip and importlib report is an accident of directory order: no command here picks one to
    # keep; ENV-DIST-DUPLICATE's remedy (every copy uninstalled, then one install) writes the commands.
    m = manifest("dev-cpu", torch_copy(SITE, "2.12.0+cpu"))
    (f,) = of(doctor(m), "ENV-TORCH-SHADOWED")
    assert f.severity == "warning" and "two metadata folders" in f.message
    assert "ENV-DIST-DUPLICATE" in f.remedy and not f.actions
    assert "`" not in f.remedy


def test_without_recorded_origins_the_remedy_removes_nothing_it_cannot_name() -> None:
    m = manifest("dev-cpu", torch_copy("/root/.local/lib/python3.11/site-packages", "2.12.0+cpu"))
    (f,) = of(doctor(m), "ENV-TORCH-SHADOWED")
    assert f.severity == "error"
    assert SITE in f.message and "/root/.local/lib/python3.11/site-packages" in f.message
    assert "pip uninstall" not in f.remedy and "PYTHONNOUSERSITE=1" in f.remedy


def test_the_user_site_first_keeps_the_user_site_off() -> None:
    user = "/root/.local/lib/python3.11/site-packages"

    def user_first(d: dict[str, Any]) -> None:
        # The user copy is the importable one; the environment's own is shadowed.
        dist_entry(d, "torch")["shadowed"] = True
        d["packages"].append(
            dict(dist_entry(d, "torch"), version="2.12.0+cpu", location=user, shadowed=False)
        )

    m = manifest("dev-cpu", user_first, origins((user, "user-site", None), (SITE, "site", None)))
    (f,) = of(doctor(m), "ENV-TORCH-SHADOWED")
    assert f.severity == "error" and f"{user} (the user site)" in f.message
    assert "is not the one imported" in f.message
    assert f.remedy.startswith("`export PYTHONNOUSERSITE='1'` where the application runs")
    assert [(a.kind, a.name, a.value) for a in f.actions] == [("variable", "PYTHONNOUSERSITE", "1")]
    assert f"is imported from {SITE}" in f.remedy


def test_a_pythonpath_remedy_keeps_the_other_entries_and_quotes_them() -> None:
    other = "/opt/torch-old"
    edits = (
        torch_copy(SITE),
        trees(f"{other}/torch", f"{SITE}/torch"),
        origins((other, "pythonpath", None), ("/opt/my lib", "pythonpath", None), (SITE, "site", None)),
        env("PYTHONPATH", f"{other}:/opt/my lib"),
    )
    (f,) = of(doctor(manifest("dev-cpu", *edits)), "ENV-TORCH-TREES")
    assert f.remedy.startswith("`export PYTHONPATH='/opt/my lib'`")
    # PYTHONPATH's value not recorded (or redacted): an instruction, never a guess.
    (f,) = of(doctor(manifest("dev-cpu", *edits[:3])), "ENV-TORCH-TREES")
    assert f.remedy.startswith(f"Remove {other} from PYTHONPATH")


def test_a_windows_pythonpath_remedy_is_powershell() -> None:
    other = "C:\\old"
    m = manifest(
        "dev-cpu",
        trees(f"{other}\\torch", f"{SITE}/torch"),
        origins((other, "pythonpath", None), (SITE, "site", None)),
        env("PYTHONPATH", other),
        lambda d: d["platform"].update(system="Windows"),
    )
    (f,) = of(doctor(m), "ENV-TORCH-TREES")
    assert f.remedy.startswith("`Remove-Item Env:PYTHONPATH`")


def test_sources_of_both_sides() -> None:
    def vcs(commit: str) -> Edit:
        def edit(d: dict[str, Any]) -> None:
            dist_entry(d, "filelock")["direct_url"] = {
                "url": "https://example.invalid/filelock.git",
                "vcs_info": {"vcs": "git", "commit_id": commit},
            }

        return edit

    def wheel_url(d: dict[str, Any]) -> None:
        dist_entry(d, "filelock")["direct_url"] = {
            "url": "https://example.invalid/filelock-3.20.0-py3-none-any.whl",
            "archive_info": {},
        }

    def local_dir(d: dict[str, Any]) -> None:
        dist_entry(d, "filelock")["direct_url"] = {"url": "file:///src/filelock", "dir_info": {}}

    base = manifest("cuda")
    (f,) = of(diff(base, manifest("cuda", vcs("abc123"))), "ENV-PKG-SOURCE")
    assert f.severity == "error" and f.target == "vcs: git+https://example.invalid/filelock.git @ abc123"
    (f,) = of(diff(manifest("cuda", vcs("abc123")), manifest("cuda", vcs("def456"))), "ENV-PKG-SOURCE")
    assert f.severity == "warning" and "different code" in f.message
    assert of(diff(manifest("cuda", vcs("abc123")), manifest("cuda", vcs("abc123"))), "ENV-PKG-SOURCE") == []
    # A release wheel named by URL is a release; a local folder is not.
    assert of(diff(base, manifest("cuda", wheel_url)), "ENV-PKG-SOURCE") == []
    (f,) = of(diff(base, manifest("cuda", local_dir)), "ENV-PKG-SOURCE")
    assert f.target == "local: file:///src/filelock"
    assert of(doctor(manifest("cuda", wheel_url)), "ENV-PKG-DIRECT") == []
    # A wheel file from a local path may be the released file: a warning, not an error.
    (f,) = of(diff(base, manifest("cuda", local_wheel)), "ENV-PKG-SOURCE")
    assert f.severity == "warning" and f.target == "local: file:///wheels/filelock-3.20.0-py3-none-any.whl"
    # No direct_url.json, another installer: said as it is.
    (f,) = of(diff(manifest("cuda", by_conda), manifest("cuda", local_dir)), "ENV-PKG-SOURCE")
    assert f.base == "a release installed by conda"


def local_wheel(d: dict[str, Any]) -> None:
    dist_entry(d, "filelock")["direct_url"] = {
        "url": "file:///wheels/filelock-3.20.0-py3-none-any.whl",
        "archive_info": {"hashes": {"sha256": "0" * 64}},
    }


def by_conda(d: dict[str, Any]) -> None:
    dist_entry(d, "filelock")["installer"] = "conda"


def test_lock_check_compares_sources() -> None:
    from envcheck.lock.check import compare, parse_lock

    def editable(d: dict[str, Any]) -> None:
        direct = {"url": "file:///src/filelock", "dir_info": {"editable": True}}
        dist_entry(d, "filelock")["direct_url"] = direct

    m = manifest("cuda")
    lock = parse_lock(
        "".join(f"{d.name}=={d.version}\n" for d in m.packages if not d.shadowed).encode(), "lock"
    )
    assert compare(lock, m, python=None) == []
    version = next(d.version for d in m.packages if d.name == "filelock")
    (f,) = compare(lock, manifest("cuda", editable), python=None)
    assert (f.rule, f.severity, f.target) == ("LOCK-SOURCE", "error", "editable: /src/filelock")
    assert f.remedy == f"`python -m pip install --force-reinstall --no-deps 'filelock=={version}'`"
    (f,) = compare(lock, manifest("cuda", local_wheel), python=None)
    assert (f.rule, f.severity) == ("LOCK-SOURCE", "warning")


def test_a_labelled_torch_from_a_checkout_is_reinstalled_from_its_index() -> None:
    def editable_torch(d: dict[str, Any]) -> None:
        dist_entry(d, "torch")["direct_url"] = {"url": "file:///src/pytorch", "dir_info": {"editable": True}}

    (f,) = of(diff(manifest("dev-cpu"), manifest("dev-cpu", editable_torch)), "ENV-PKG-SOURCE")
    assert f.severity == "error" and f.target == "editable: /src/pytorch"
    assert "`pip install --force-reinstall --no-deps 'torch==2.13.0+cpu' --index-url" in f.remedy


def test_pth_files_are_parsed_never_run_and_read_within_bounds(tmp_path: Path) -> None:
    from envcheck.inside.interpreter import _key, pth_entries

    folder = tmp_path / "site"
    folder.mkdir()
    marker, good = tmp_path / "ran", tmp_path / "good"
    good.mkdir()
    _hostile_pth_files(folder, marker, good)
    (folder / "c-garbage-bytes.pth").write_bytes(bytes(range(256)) * 64 + b"\n\x00\xff\xfe/etc\n")
    (folder / "d-nested.pth").write_text("import x" + "(" * 4000 + "\n", encoding="utf-8")
    os.mkfifo(folder / "f-fifo.pth")  # site.py would block on it; the probe must not
    (folder / "g-zero.pth").symlink_to("/dev/zero")
    (folder / "h-dir.pth").mkdir()
    wanted = {_key(str(good)), _key("/etc")}
    found = pth_entries([str(folder)], wanted)
    assert found == {_key(str(good)): str(folder / "e-good.pth")}
    assert not marker.exists()


def test_hostile_direct_urls_and_origins_in_a_manifest_are_text(tmp_path: Path) -> None:
    def hostile(d: dict[str, Any]) -> None:
        dist_entry(d, "filelock")["direct_url"] = {
            "url": "git+https://user:s3cret@example.invalid/x.git\x1b[31m",
            "vcs_info": {"vcs": ["not", "a", "string"], "commit_id": 7},
        }
        dist_entry(d, "jinja2")["direct_url"] = {"url": None, "dir_info": "editable"}
        dist_entry(d, "sympy")["direct_url"] = ["a", "list"]
        d["python"]["path_origins"] = [{"path": "/x", "origin": "from-the-future", "pth": None}]

    edited = manifest("cuda", hostile)
    found = diff(manifest("cuda"), edited) + doctor(edited)
    sources = {f.subject: f for f in found if f.rule == "ENV-PKG-SOURCE"}
    assert set(sources) == {"filelock", "Jinja2"}
    assert "s3cret" not in sources["filelock"].message and "<redacted>" in sources["filelock"].message
    assert (
        sources["filelock"].target
        == "vcs: vcs+git+https://<redacted>@example.invalid/x.git\x1b[31m @ an unrecorded commit"
    )
