"""``envcheck export --format cyclonedx``: the example manifests and a real snapshot of the test venv as
CycloneDX 1.6 SBOMs, validated by cyclonedx-python-lib's own JSON validator; hostile manifests and outputs
as one line and exit 2."""

from __future__ import annotations

import importlib.metadata
import json
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clirun import run
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from hostile import assert_bounded, envcheck_argv, make_char_device, run_bounded

from envcheck.export import cyclonedx, purl_ref
from envcheck.manifest.io import dumps, load

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = sorted((ROOT / "manifests" / "examples").glob("*.json"))
CPU_EXAMPLE = ROOT / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
BAD = Path(__file__).parent / "data" / "bad"
HOSTILE = "<script>alert(1)</script>\x1b]0;x\x07\ud800"


def validated(text: str) -> dict[str, Any]:
    """The SBOM's JSON, after the library's strict validator for 1.6 found no error."""
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    assert error is None, error
    data: dict[str, Any] = json.loads(text)
    assert (data["bomFormat"], data["specVersion"]) == ("CycloneDX", "1.6")
    return data


def walk(components: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every component, nested ones included, by bom-ref."""
    out: dict[str, dict[str, Any]] = {}
    for c in components:
        out[c["bom-ref"]] = c
        out.update(walk(c.get("components", [])))
    return out


def props(component: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p["value"] for p in component.get("properties", [])}


def edges(data: dict[str, Any]) -> dict[str, set[str]]:
    return {d["ref"]: set(d.get("dependsOn", [])) for d in data["dependencies"]}


@pytest.mark.slow
@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_example_exports_a_valid_sbom(path: Path, tmp_path: Path) -> None:
    out = tmp_path / "sbom.json"
    code, stdout, err = run("export", str(path), "--format", "cyclonedx", "-o", str(out))
    assert (code, stdout, err) == (0, "", "")
    data = validated(out.read_text(encoding="utf-8"))
    manifest = load(path)
    components = walk(data["components"])
    libraries = {ref for ref, c in components.items() if c["type"] == "library"}
    assert len(libraries) == len(manifest.packages)
    files = [c for c in components.values() if c["type"] == "file"]
    assert manifest.native is not None and manifest.native.nodes is not None
    assert len(files) == len(manifest.native.nodes)
    # Every reference in the graph names a component of the BOM (the validator does not check this).
    known = set(components) | {data["metadata"]["component"]["bom-ref"]}
    assert all(ref in known and targets <= known for ref, targets in edges(data).items())
    # Deterministic: the same manifest, the same bytes (serial number and time come from the manifest).
    assert run("export", str(path))[1] == out.read_text(encoding="utf-8")


@pytest.mark.slow
def test_the_cpu_example_in_detail() -> None:
    data = validated(cyclonedx(load(CPU_EXAMPLE)))
    components = walk(data["components"])
    torch = components["pkg:pypi/torch@2.13.0%2Bcpu"]
    assert (torch["name"], torch["version"], torch["purl"]) == (
        "torch",
        "2.13.0+cpu",
        "pkg:pypi/torch@2.13.0%2Bcpu",
    )
    assert props(torch)["envcheck:local_label"] == "cpu"
    # A native file torch ships: nested in torch's component, with the sha256 of its RECORD.
    libc10 = {c["name"]: c for c in torch["components"]}["torch/lib/libc10.so"]
    node = next(n for n in load(CPU_EXAMPLE).native.nodes or () if n.key == "torch:torch/lib/libc10.so")
    assert libc10["type"] == "file"
    assert libc10["hashes"] == [{"alg": "SHA-256", "content": (node.identity or "").removeprefix("sha256:")}]
    assert props(libc10)["envcheck:integrity"] == "record"
    # The graph: libtorch_cpu needs libc10 (as the loader resolved it: $ORIGIN), and libc from the system.
    graph = edges(data)
    needs = graph["file:torch:torch/lib/libtorch_cpu.so"]
    assert {"file:torch:torch/lib/libc10.so", "file:/lib/x86_64-linux-gnu/libc.so.6"} <= needs
    # torch requires filelock (a requirement without a marker); the environment depends on every
    # distribution.
    assert "pkg:pypi/filelock@4.3.1" in graph["pkg:pypi/torch@2.13.0%2Bcpu"]
    # ... and depends on the files it ships (nested in its component too).
    assert "file:torch:torch/lib/libc10.so" in graph["pkg:pypi/torch@2.13.0%2Bcpu"]
    assert len(graph["envcheck:environment"]) == len(load(CPU_EXAMPLE).packages)
    # System files are top-level, not shipped by a distribution.
    assert "file:/lib/x86_64-linux-gnu/libc.so.6" in {c["bom-ref"] for c in data["components"]}
    meta = props(data["metadata"])
    assert meta["envcheck:python"] == "CPython 3.11.7"
    assert meta["envcheck:platform"] == "Linux x86_64"
    assert (meta["envcheck:torch.variant"], meta["envcheck:torch.version"]) == ("cpu", "2.13.0+cpu")
    assert data["metadata"]["timestamp"].startswith("2026-11-29T14:53:48")
    assert data["metadata"]["tools"]["components"][0]["name"] == "envcheck"


@pytest.mark.slow
def test_a_changed_manifest_gets_another_serial_number() -> None:
    manifest = load(CPU_EXAMPLE)
    first = json.loads(cyclonedx(manifest))["serialNumber"]
    changed = manifest.replace(packages=manifest.packages[1:])
    assert json.loads(cyclonedx(changed))["serialNumber"] != first
    assert json.loads(cyclonedx(load(CPU_EXAMPLE)))["serialNumber"] == first


@pytest.mark.slow
def test_a_real_snapshot_of_the_test_venv(tmp_path: Path, torch_python: str) -> None:
    snap = tmp_path / "venv.json"
    code, _, err = run("snapshot", "--python", torch_python, "--no-verify", "-o", str(snap))
    assert code == 0, err
    sbom = tmp_path / "sbom.json"
    assert run("export", str(snap), "-o", str(sbom))[0] == 0
    data = validated(sbom.read_text(encoding="utf-8"))
    installed = importlib.metadata.version("torch")  # whatever build is installed: read, never assumed
    components = walk(data["components"])
    torch = components[purl_ref("torch", installed)]
    assert torch["version"] == installed
    label = installed.partition("+")[2]
    assert props(torch).get("envcheck:local_label", "") == label
    hashed = [c for c in torch["components"] if c.get("hashes")]
    assert any(c["name"].startswith("torch/_C.") for c in hashed)
    graph = edges(data)
    extension = next(c["bom-ref"] for c in hashed if c["name"].startswith("torch/_C."))
    assert any(ref.startswith("file:torch:torch/lib/libtorch") for ref in graph[extension])
    for name in ("envcheck", "cyclonedx-python-lib"):
        assert purl_ref(name, importlib.metadata.version(name)) in components


@pytest.mark.slow
def test_strings_stay_data_and_valid_utf8(tmp_path: Path) -> None:
    data = json.loads(CPU_EXAMPLE.read_text(encoding="utf-8"))
    torch = next(p for p in data["packages"] if p["name"] == "torch")
    torch["version"] = f"2.13.0+{HOSTILE}"
    data["meta"]["label"] = HOSTILE
    data["native"]["nodes"][0]["key"] = HOSTILE
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "sbom.json"
    code, _, err = run("export", str(path), "-o", str(out))
    assert code == 0, err
    text = out.read_bytes().decode("utf-8")  # valid UTF-8: the lone surrogate is shown as \ud800
    sbom = validated(text)
    assert sbom["metadata"]["component"]["name"] == HOSTILE.replace("\ud800", "\\ud800")
    assert any(c["name"] == "torch" and "<script>" in c["version"] for c in walk(sbom["components"]).values())


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("newer-schema.json", "schema_version 99 is newer than this envcheck reads"),
        ("not-json.json", "not valid JSON"),
        ("empty.json", "file is empty"),
        ("wrong-types.json", "packages[3].version: expected a string"),
    ],
)
def test_bad_manifests_are_one_line_and_exit_2(name: str, message: str, tmp_path: Path) -> None:
    out = tmp_path / "sbom.json"
    code, stdout, err = run("export", str(BAD / name), "-o", str(out))
    assert (code, stdout) == (2, "")
    assert err.startswith("error: ") and message in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if not line.startswith("Tip: ")]) == 1
    assert not out.exists()


def test_an_unknown_format_is_a_usage_error() -> None:
    code, stdout, _ = run("export", str(CPU_EXAMPLE), "--format", "spdx")
    assert (code, stdout) == (2, "")


@pytest.mark.slow
def test_outputs_behave_as_every_other_output(tmp_path: Path) -> None:
    # A symlink is written through and stays a link.
    real = tmp_path / "real.json"
    real.write_text("old\n")
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert run("export", str(CPU_EXAMPLE), "-o", str(link))[0] == 0
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith("{")
    # A device stays a device; a full one is one line and exit 2 (a real process: the CLI's own exit).
    null = make_char_device(tmp_path / "null", 1, 3)
    full = make_char_device(tmp_path / "full", 1, 7)
    ok = subprocess.run(
        envcheck_argv("export", str(CPU_EXAMPLE), "-o", str(null)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    failed = subprocess.run(
        envcheck_argv("export", str(CPU_EXAMPLE), "-o", str(full)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert failed.returncode == 2 and failed.stderr.startswith("error: cannot write")
    assert "No space left on device" in failed.stderr and "Traceback" not in failed.stderr
    assert stat.S_ISCHR(null.stat().st_mode) and stat.S_ISCHR(full.stat().st_mode)
    # A missing folder is refused before the manifest is even read.
    code, _, err = run("export", str(BAD / "not-json.json"), "-o", str(tmp_path / "nope" / "x.json"))
    assert code == 2 and "does not exist" in err


@pytest.mark.slow
def test_a_manifest_without_native_tree_uses_the_record_hashes() -> None:
    manifest = load(CPU_EXAMPLE)
    bare = manifest.replace(native=None)
    data = validated(cyclonedx(bare))
    torch = walk(data["components"])["pkg:pypi/torch@2.13.0%2Bcpu"]
    libc10 = {c["name"]: c for c in torch["components"]}["torch/lib/libc10.so"]
    record = next(
        f
        for f in (manifest.package("torch") or manifest.packages[0]).native_files
        if f.path == "torch/lib/libc10.so"
    )
    assert libc10["hashes"][0]["content"] == record.sha256
    assert dumps(bare) != dumps(manifest)


def test_without_the_library_the_error_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    # A fault injected: the library cannot be imported (None in sys.modules makes `import` raise).
    monkeypatch.setitem(sys.modules, "cyclonedx.output.json", None)
    code, stdout, err = run("export", str(CPU_EXAMPLE))
    assert (code, stdout) == (2, "")
    assert err.splitlines() == [
        "error: envcheck export needs cyclonedx-python-lib, which is not installed (cyclonedx.output.json)",
        "Tip: pip install cyclonedx-python-lib",
    ]


CUDA_EXAMPLE = ROOT / "manifests" / "examples" / "torch-2.14.1-cu130-linux-nogpu.json"


@pytest.mark.slow
def test_the_graph_follows_the_extras_a_requirer_asks_for() -> None:
    # torch requires cuda-toolkit[cublas,cudart,...]; cuda-toolkit's nvidia-* requirements are all behind
    # `extra == "..."`: the SBOM's graph follows the extras torch asked for, as pip installed them.
    manifest = load(CUDA_EXAMPLE)
    graph = edges(validated(cyclonedx(manifest)))
    toolkit = next(d for d in manifest.packages if d.name == "cuda-toolkit")
    needs = {r.split("@")[0] for r in graph[purl_ref(toolkit.name, toolkit.version)] if r.startswith("pkg:")}
    assert needs == {
        f"pkg:pypi/nvidia-{n}"
        for n in (
            "cublas",
            "cuda-cupti",
            "cuda-nvrtc",
            "cuda-runtime",
            "cufft",
            "cufile",
            "curand",
            "cusolver",
            "cusparse",
            "nvjitlink",
            "nvtx",
        )
    }
    # Every nvidia-* distribution is now required by a distribution, not only by the environment.
    required = set().union(*(t for ref, t in graph.items() if ref.startswith("pkg:pypi/")))
    nvidia = {purl_ref(d.name, d.version) for d in manifest.packages if d.name.startswith("nvidia-")}
    assert nvidia and nvidia <= required
    # An extra nobody asked for stays off: cuda-toolkit[all] brings nvidia-npp, which is not installed,
    # and cuda-bindings' own extra "all" is not asked for, so it requires only cuda-pathfinder.
    bindings = next(d for d in manifest.packages if d.name == "cuda-bindings")
    needed = graph[purl_ref(bindings.name, bindings.version)]
    assert {r.split("@")[0] for r in needed if r.startswith("pkg:")} == {"pkg:pypi/cuda-pathfinder"}


PURL_SPECIALS = ["evil/torch", "a/b/c", "x@1", "q?y=1", "h#sub", "pct%2Fx", "../up"]


@pytest.mark.slow
def test_purl_specials_in_a_name_never_change_the_namespace(tmp_path: Path) -> None:
    from packageurl import PackageURL

    from envcheck.manifest.model import canonical

    data = json.loads(CPU_EXAMPLE.read_text(encoding="utf-8"))
    six = next(p for p in data["packages"] if p["name"] == "filelock")
    data["packages"] += [{**six, "name": n, "version": "1.0", "native_files": []} for n in PURL_SPECIALS]
    path = tmp_path / "specials.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "sbom.json"
    result = run_bounded(envcheck_argv("export", str(path), "-o", str(out)), timeout=60)
    assert_bounded(result, timeout=60)
    assert result.returncode == 0, result.stderr
    components = walk(validated(out.read_text(encoding="utf-8"))["components"])
    by_name = {c["name"]: c for c in components.values() if c["type"] == "library"}
    for name in PURL_SPECIALS:
        purl = PackageURL.from_string(by_name[name]["purl"])
        assert (purl.type, purl.namespace, purl.subpath, purl.qualifiers) == ("pypi", None, None, {}), name
        decoded = purl.name.replace("%2f", "/").replace("%25", "%")
        assert purl.version == "1.0" and decoded == canonical(name), (name, purl)
        assert by_name[name]["bom-ref"] == by_name[name]["purl"]


@pytest.mark.slow
def test_an_sbom_passes_the_redactor(tmp_path: Path) -> None:
    from test_canaries import GHP_FOLDER, SECRETS

    data = json.loads(CPU_EXAMPLE.read_text(encoding="utf-8"))
    data["meta"]["label"] = "build of https://ci:p@ssCanaryIndex04@pypi.corp.example/simple"
    torch = next(p for p in data["packages"] if p["name"] == "torch")
    torch["installer"] = f"pip {GHP_FOLDER}"
    torch["requires"] = ["private-dep @ https://deploy:CanaryRequires09@git.corp.example/private-dep-1.0.whl"]
    torch["direct_url"] = {
        "url": "git+https://oauth2:CanaryGitToken10@gitlab.corp.example/org/canary.git",
        "vcs_info": {"vcs": "git", "commit_id": "0" * 40},
    }
    node = data["native"]["nodes"][0]
    node["path"] = "/srv/models?token=CanaryQueryToken08/lib.so"
    path = tmp_path / "canary.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "sbom.json"
    result = run_bounded(envcheck_argv("export", str(path), "-o", str(out)), timeout=60)
    assert_bounded(result, timeout=60)
    assert result.returncode == 0, result.stderr
    text = out.read_text(encoding="utf-8")
    for secret in SECRETS:
        assert secret not in text + result.stdout + result.stderr, secret
    sbom = validated(text)
    # Each canary-bearing field arrived, redacted: the test cannot pass by a field going missing.
    assert sbom["metadata"]["component"]["name"] == "build of https://<redacted>@pypi.corp.example/simple"
    components = walk(sbom["components"])
    assert props(components["pkg:pypi/torch@2.13.0%2Bcpu"])["envcheck:installer"] == "pip <redacted>"
    paths = [props(c).get("envcheck:path", "") for c in components.values()]
    assert "/srv/models?token=<redacted>" in paths
