#!/usr/bin/env python3
"""Grow a real manifest into a large pair with realistic drift, for the diff budget (docs/budgets.md).

    from synth import synthesize
    base, target = synthesize(Path("seed.json"), packages=500, libraries=500)

``base`` is the seed manifest with enough extra distributions (each with requirements and a native file)
and extra loaded libraries / native-tree nodes to reach ``packages`` and ``libraries``; ``target`` is a
copy with the drift a real fleet shows: ~5% of packages upgraded (a few across a major version), ~2%
removed, a few added, some libraries rebuilt (other sha256) or loaded from a system folder, a numerics
switch flipped, an environment variable changed. Both are plain JSON data that ``envcheck`` validates.
Deterministic: the same seed manifest gives the same pair.

Run as a script to write the pair: ``python ci/synth.py SEED.json OUT_DIR``.

A fleet for the fleet diff's budget (docs/budgets.md):

    from synth import write_fleet
    truth = write_fleet(Path("seed.json"), Path("fleet"), machines=1000)

writes ``fleet/base.json`` and ``machines`` manifests (``fleet/machines/node-0000.json`` ...) of 500 packages
and 500 libraries:
90% are the base recorded again on another host (only the volatile fields differ: label, hostname,
timestamps, timings), the rest fall in a few drift groups (``FLEET_DRIFTS``), each group one environment.
``truth`` maps each group (``identical`` and the drift names) to its machines' labels: the ground truth a
fleet report's groups must match. ``python ci/synth.py --fleet N SEED.json OUT_DIR`` writes one from the
command line.
"""

from __future__ import annotations

import copy
import hashlib
import json
import sys
from pathlib import Path
from typing import Any


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _site(manifest: dict[str, Any]) -> str:
    for dist in manifest.get("packages", []):
        if dist.get("location"):
            return str(dist["location"])
    return str(manifest["python"]["prefix"]) + "/lib/python3/site-packages"


def _grow(manifest: dict[str, Any], packages: int, libraries: int) -> dict[str, Any]:
    grown = copy.deepcopy(manifest)
    site = _site(grown)
    dists: list[dict[str, Any]] = grown.setdefault("packages", [])
    existing = len(dists)
    for i in range(max(0, packages - existing)):
        name = f"synth-pkg-{i:03d}"
        module = name.replace("-", "_")
        dists.append(
            {
                "name": name,
                "version": f"{1 + i % 4}.{i % 10}.{i % 7}",
                "installer": "pip",
                "requires": [f"synth-pkg-{(i + 1) % packages:03d}>={i % 3}.0"] if i % 3 == 0 else [],
                "direct_url": None,
                "wheel_tags": ["cp311-cp311-manylinux_2_17_x86_64", "cp311-cp311-manylinux2014_x86_64"],
                "location": site,
                "metadata_dir": f"{site}/{module}-{1 + i % 4}.{i % 10}.{i % 7}.dist-info",
                "shadowed": False,
                "native_files": [
                    {
                        "path": f"{module}/_core.cpython-311-x86_64-linux-gnu.so",
                        "sha256": _sha(name),
                        "size": 4096 + i,
                    }
                ],
            }
        )
    runtimes = grown.get("runtimes")
    native = grown.get("native")
    loaded_now = len(runtimes["loaded"]) if runtimes else 0
    for i in range(max(0, libraries - loaded_now)):
        owner = f"synth-pkg-{i % max(1, packages - existing):03d}"
        module = owner.replace("-", "_")
        path = f"{site}/{module}.libs/libsynth{i:03d}-{_sha(owner)[:8]}.so.{1 + i % 3}"
        if runtimes is not None:
            runtimes["loaded"].append({"path": path, "owner": owner, "identity": "sha256:" + _sha(path)})
        if isinstance(native, dict) and isinstance(native.get("nodes"), list):
            native["nodes"].append(
                {
                    "key": f"{owner}:{module}.libs/libsynth{i:03d}.so.{1 + i % 3}",
                    "path": path,
                    "owner": owner,
                    "role": "library",
                    "format": "elf",
                    "identity": "sha256:" + _sha(path),
                    "version_needs": {"GLIBC": "2.17"},
                    "dependencies": [
                        {
                            "name": "libc.so.6",
                            "target": "/usr/lib/x86_64-linux-gnu/libc.so.6",
                            "how": "ld-so-cache",
                            "kind": "os",
                        },
                        {
                            "name": f"libsynth{(i + 1) % libraries:03d}.so",
                            "target": f"{owner}:{module}.libs/libsynth{(i + 1) % libraries:03d}.so",
                            "how": "runpath",
                            "kind": "bundled",
                            "via": "$ORIGIN",
                        },
                    ],
                }
            )
    if runtimes is not None:
        runtimes["loaded"].sort(key=lambda lib: lib["path"])
    if isinstance(native, dict) and isinstance(native.get("nodes"), list):
        native["nodes"].sort(key=lambda node: node["key"])
    return grown


def _drift(base: dict[str, Any]) -> dict[str, Any]:
    target = copy.deepcopy(base)
    dists = target["packages"]
    synth = [d for d in dists if d["name"].startswith("synth-pkg-")]
    for i, dist in enumerate(synth):
        if i % 20 == 0:  # ~5% upgraded, every fourth of them across a major version
            major, minor, patch = (int(x) for x in dist["version"].split("."))
            dist["version"] = f"{major + 1}.0.0" if i % 80 == 0 else f"{major}.{minor}.{patch + 1}"
    removed = {d["name"] for i, d in enumerate(synth) if i % 50 == 7}  # ~2% removed
    target["packages"] = [d for d in dists if d["name"] not in removed]
    for i in range(3):
        target["packages"].append({**copy.deepcopy(synth[i]), "name": f"synth-extra-{i}", "native_files": []})
    runtimes = target.get("runtimes")
    if runtimes:
        for i, lib in enumerate(runtimes["loaded"]):
            if "libsynth" not in lib["path"]:
                continue
            if i % 40 == 0:  # rebuilt in place
                lib["identity"] = "sha256:" + _sha(lib["path"] + "rebuilt")
            elif i % 97 == 0:  # taken from a system folder instead of the wheel
                lib["path"] = "/usr/lib/x86_64-linux-gnu/" + lib["path"].rsplit("/", 1)[-1]
                lib["owner"] = "system"
    torch = target.get("torch") or {}
    runtime = torch.get("runtime")
    if isinstance(runtime, dict) and isinstance(runtime.get("numerics"), dict):
        runtime["numerics"]["allow_tf32_cudnn"] = not runtime["numerics"].get("allow_tf32_cudnn")
    target.setdefault("env", {})["OMP_NUM_THREADS"] = "4"
    meta = target.get("meta") or {}
    meta["label"] = "synth-target"
    return target


def synthesize(
    manifest_path: Path, packages: int = 500, libraries: int = 500
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(base, target): the seed grown to ``packages`` distributions and ``libraries`` loaded libraries
    (and native-tree nodes, when the seed has a native tree), and a drifted copy. Raises ``OSError`` /
    ``ValueError`` when the seed cannot be read as JSON."""
    seed = json.loads(Path(manifest_path).read_text(encoding="utf-8"))
    base = _grow(seed, packages, libraries)
    base.setdefault("meta", {})["label"] = "synth-base"
    return base, _drift(base)


def _numerics_drift(document: dict[str, Any]) -> None:
    document.setdefault("env", {})["ONEDNN_DEFAULT_FPMATH_MODE"] = "BF16"


def _thread_drift(document: dict[str, Any]) -> None:
    document.setdefault("env", {})["OMP_NUM_THREADS"] = "4"


def _package_drift(document: dict[str, Any]) -> None:
    for dist in document["packages"]:
        if dist["name"] == "synth-pkg-010":
            major, minor, patch = (int(x) for x in dist["version"].split("."))
            dist["version"] = f"{major}.{minor}.{patch + 1}"


# The drift groups of a synthetic fleet: a name and what each of its machines has changed.
FLEET_DRIFTS: dict[str, Any] = {
    "drift-threads": _thread_drift,
    "drift-numerics": _numerics_drift,
    "drift-package": _package_drift,
}
_LABEL, _HOST, _CREATED, _SECONDS = "@@label@@", "@@host@@", "@@created@@", 987654.321


def _template(document: dict[str, Any]) -> str:
    """The manifest as envcheck writes it, with placeholders in the volatile fields each machine fills."""
    machine = copy.deepcopy(document)
    meta = machine.setdefault("meta", {})
    meta.update(label=_LABEL, created=_CREATED, duration_s=_SECONDS)
    if isinstance(meta.get("probe"), dict):
        meta["probe"]["duration_s"] = _SECONDS
    if isinstance(machine.get("platform"), dict):
        machine["platform"]["hostname"] = _HOST
    verify = machine.get("verify")
    if isinstance(verify, dict):
        verify["wall_s"] = _SECONDS
        for result in verify.get("results") or []:
            result["duration_s"] = _SECONDS
    return json.dumps(machine, indent=2, sort_keys=True) + "\n"


def fleet_group(index: int) -> str:
    """The group of the fleet's machine ``index``: every tenth machine drifts, in turn into each drift."""
    if index % 10 != 9:
        return "identical"
    drifts = list(FLEET_DRIFTS)
    return drifts[(index // 10) % len(drifts)]


def write_fleet(
    seed: Path, out: Path, machines: int, packages: int = 500, libraries: int = 500
) -> dict[str, list[str]]:
    """Write ``out/base.json`` and ``machines`` manifests ``out/machines/node-NNNN.json`` (see the module's
    docstring); return the ground truth: each group's machine labels, in order."""
    base, _ = synthesize(seed, packages, libraries)
    (out / "machines").mkdir(parents=True, exist_ok=True)
    (out / "base.json").write_text(json.dumps(base, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    templates = {"identical": _template(base)}
    for name, drift in FLEET_DRIFTS.items():
        drifted = copy.deepcopy(base)
        drift(drifted)
        templates[name] = _template(drifted)
    truth: dict[str, list[str]] = {}
    for i in range(machines):
        group, label = fleet_group(i), f"node-{i:04d}"
        seconds = 2.0 + (i % 97) / 100
        text = (
            templates[group]
            .replace(_LABEL, label)
            .replace(_HOST, f"host-{i:04d}.fleet.invalid")
            .replace(_CREATED, f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:{i % 60:02d}:00+00:00")
            .replace(str(_SECONDS), f"{seconds:.3f}")
        )
        (out / "machines" / f"{label}.json").write_text(text, encoding="utf-8")
        truth.setdefault(group, []).append(label)
    return truth


def main(argv: list[str]) -> int:
    if len(argv) == 4 and argv[0] == "--fleet":
        truth = write_fleet(Path(argv[2]), Path(argv[3]), machines=int(argv[1]))
        print(json.dumps({group: len(labels) for group, labels in truth.items()}))
        return 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[1])
    out.mkdir(parents=True, exist_ok=True)
    base, target = synthesize(Path(argv[0]))
    for name, data in (("big-a.json", base), ("big-b.json", target)):
        (out / name).write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
