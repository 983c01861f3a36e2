"""Everything built against torch matches the installed torch (FM-07): the build variant, the release and
the C++ ABI of every distribution whose native code links libtorch or libc10.

Real binaries: ``tests/fixtures/builtfor/build.py`` compiles, with g++ at test time, against the test
environment's own torch (``torch/lib/libc10.so``, ABI 1, CPU):

- ``goodops 0.1.0+cpu``: the healthy control, built for the installed torch;
- ``visionops 0.3.0+cu130``: a CUDA build beside the CPU torch (its ``_C`` needs ``libc10_cuda.so``);
- ``abiops 0.1.0``: compiled with ``-D_GLIBCXX_USE_CXX11_ABI=0`` from a local checkout; its import fails
  with ``undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs``;
- ``rocmops 1.0.0``: a ROCm build with no label and no pin, its GPU code in a bundled library that needs
  ``libc10_hip.so`` and ``libamdhip64.so.6``: only its files say what it was built for.

and installs them into real venvs cloned from the test environment; ``envcheck snapshot``, ``doctor`` and
``gate`` run on them as a user would. The manifest-level cases edit the recorded snapshots (a CUDA torch
beside them, a companion's name, no runtime facts).
"""

from __future__ import annotations

import copy
import importlib.util
import json
import shutil
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_torch
from diffdata import Edit, dist_entry
from typer.testing import CliRunner
from venvs import clone_site_packages, installed_torch, make_venv
from wheels import pip_install, wheel

from envcheck.cli import app
from envcheck.core.findings import Finding
from envcheck.diff.causes import link
from envcheck.diff.engine import doctor
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest
from envcheck.native.elf import MAX_ABI_SYMBOLS, cxx11_abi, mangled_cxx11_abi

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "builtfor"
EXT = "_C.cpython-311-x86_64-linux-gnu.so"
BUILT_FOR = ("ENV-BUILT-FOR-VARIANT", "ENV-BUILT-FOR-ABI")


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("builtfor_build", FIXTURES / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("builtfor_build", module)
    spec.loader.exec_module(module)
    return module


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ is not installed: nothing to build")


# ------------------------------------------------------------------------ manifest edits (TRIGGERS too)


def built_extension(
    name: str,
    version: str,
    *,
    needs: tuple[str, ...] = ("libc10.so",),
    abi: bool | None = True,
    pin: str | None = "torch==2.13.0",
) -> Edit:
    """A distribution whose extension module needs ``needs`` (the ones torch does not ship MISSING, with
    their chain, as the walk records them) and was compiled with ``abi``."""

    def edit(d: dict[str, Any]) -> None:
        site = dist_entry(d, "torch")["location"]
        entry = dict(dist_entry(d, "filelock"), name=name, version=version, native_files=[])
        entry["requires"] = [pin] if pin else []
        entry["metadata_dir"] = f"{site}/{name}-{version}.dist-info"
        d["packages"].append(entry)
        key = f"{name}:{name}/{EXT}"
        deps: list[dict[str, Any]] = []
        for lib in needs:
            shipped = f"torch:torch/lib/{lib}"
            if any(n["key"] == shipped for n in d["native"]["nodes"]):
                deps.append(
                    {
                        "name": lib,
                        "target": shipped,
                        "how": "runpath",
                        "kind": "distribution",
                        "provider": "torch",
                    }
                )
            else:
                deps.append({"name": lib, "target": None, "how": "missing", "kind": "missing"})
                d["native"]["missing"] = [
                    *(d["native"]["missing"] or []),
                    {
                        "root": key,
                        "chain": [key],
                        "missing": lib,
                        "text": f"{EXT} → {lib}: MISSING",
                        "from_extension": True,
                    },
                ]
        node: dict[str, Any] = {
            "key": key,
            "path": f"{site}/{name}/{EXT}",
            "owner": name,
            "role": "extension",
            "format": "elf",
            "machine": "x86_64",
            "dependencies": deps,
        }
        if abi is not None:
            node["cxx11_abi"] = abi
        d["native"]["nodes"] = sorted([*d["native"]["nodes"], node], key=lambda n: n["key"])

    return edit


cuda_build = built_extension("visionops", "0.3.0+cu130", needs=("libc10.so", "libc10_cuda.so"))
old_abi_build = built_extension("abiops", "0.1.0", abi=False)


def _recorded(snapshot: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(snapshot.read_text(encoding="utf-8"))
    return data


def _manifest(data: dict[str, Any], *edits: Callable[[dict[str, Any]], object]) -> Manifest:
    data = copy.deepcopy(data)
    for edit in edits:
        edit(data)
    return decode(Manifest, data, source="edited snapshot")


def _found(findings: list[Finding], *rules: str) -> dict[tuple[str, str], Finding]:
    return {(f.rule, f.subject): f for f in findings if f.rule in rules}


# ---------------------------------------------------------------------------------- the ABI of a name


def test_mangled_names_tell_the_abi_and_only_the_grammar_counts() -> None:
    new = b"_ZN3c106detail14torchCheckFailEPKcS2_jRKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    assert mangled_cxx11_abi(new) is True
    assert mangled_cxx11_abi(b"_ZN3c106detail14torchCheckFailEPKcS2_jRKSs") is False
    assert mangled_cxx11_abi(b"_ZNK3c1010TensorImpl4sizeEl") is None  # no string: says nothing
    # "Ss" inside an identifier, a substitution or a literal is no std::string.
    assert mangled_cxx11_abi(b"_ZN3c104Ssss5ClassEv") is None
    assert mangled_cxx11_abi(b"_ZN2at6native2SsILi12EEEvS0_") is None


def _hostile_elf(path: Path, names: int, name: bytes, *, undefined: bool) -> None:
    """An ELF64 file with ``names`` dynamic symbols, each named ``name`` + a number (one string table
    entry each), only section headers: what ``cxx11_abi`` reads."""
    strtab = bytearray(b"\0")
    offsets = []
    for i in range(names):
        offsets.append(len(strtab))
        strtab += name + str(i).encode() + b"Ev\0"
    syms = bytearray(24)  # the null symbol
    shndx = 0 if undefined else 7
    for off in offsets:
        syms += struct.pack("<IBBHQQ", off, 0x12, 0, shndx, 0, 0)
    head = 64
    sym_at = head
    str_at = sym_at + len(syms)
    sh_at = str_at + len(strtab)
    sections = bytes(64)
    sections += struct.pack("<IIQQQQIIQQ", 0, 11, 2, 0, sym_at, len(syms), 2, 1, 8, 24)
    sections += struct.pack("<IIQQQQIIQQ", 0, 3, 2, 0, str_at, len(strtab), 0, 0, 1, 0)
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    header = ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, sh_at, 0, 64, 0, 0, 64, 3, 2)
    path.write_bytes(header + syms + strtab + sections)


@pytest.mark.parametrize(
    ("name", "undefined", "expected"),
    [
        # a million names that all need parsing, none telling: the parse cap ends it
        (b"_ZN3c102Ss", True, None),
        # a million telling names, all defined: the symbol table is walked to its cap
        (b"_ZN3c103fooERKNSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE", False, None),
    ],
)
def test_a_million_symbols_is_bounded(tmp_path: Path, name: bytes, undefined: bool, expected: object) -> None:
    lib = tmp_path / "libhostile.so"
    _hostile_elf(lib, MAX_ABI_SYMBOLS, name, undefined=undefined)
    start = time.perf_counter()
    assert cxx11_abi(str(lib)) is expected
    assert time.perf_counter() - start < 5.0
    # The same file asked for any symbol (libc10's own exports) answers from the first telling name.
    if b"__cxx11" in name:
        assert cxx11_abi(str(lib), undefined=False) is True


def test_a_file_that_is_not_elf_or_has_no_symbols_is_unknown(tmp_path: Path) -> None:
    junk = tmp_path / "libjunk.so"
    junk.write_bytes(b"\x7fELF" + bytes(10))
    assert cxx11_abi(str(junk)) is None
    assert cxx11_abi(str(tmp_path / "absent.so")) is None


# ------------------------------------------------------------------------------ real binaries, real venvs


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two venvs with the test environment's torch: ``healthy`` (goodops) and ``broken`` (goodops and the
    three mismatched builds), each with a snapshot (``ref-healthy.json``, ``ref-broken.json``)."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: nothing to build")
    build = _builder()
    out: dict[str, Path] = {}
    for name, fixtures in (("healthy", (build.GOOD,)), ("broken", build.FIXTURES)):
        root = tmp_path_factory.mktemp(name)
        python = make_venv(root / "venv")
        build.install(clone_site_packages(python), fixtures)
        ref = root / f"ref-{name}.json"
        made = CliRunner().invoke(
            app, ["snapshot", "--python", str(python), "--no-verify", "-o", str(ref), "-q"]
        )
        assert made.exit_code == 0, made.output
        out[name], out[f"ref-{name}"] = python, ref
    return out


def _invoke(args: list[str]) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"])
    stdout = result.stdout
    return result.exit_code, json.loads(stdout[stdout.index("{") :]) if "{" in stdout else {}


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_the_facts_are_read_from_the_binaries(venvs: dict[str, Path]) -> None:
    nodes = {n["key"]: n for n in _recorded(venvs["ref-broken"])["native"]["nodes"]}
    assert nodes["torch:torch/lib/libc10.so"]["cxx11_abi"] is True
    assert nodes[f"goodops:goodops/{EXT}"]["cxx11_abi"] is True
    assert nodes[f"visionops:visionops/{EXT}"]["cxx11_abi"] is True
    # The linker dropped its DT_NEEDED libc10.so (none of its symbols resolved): the symbol still tells.
    abiops = nodes[f"abiops:abiops/{EXT}"]
    assert abiops["cxx11_abi"] is False
    assert "libc10.so" not in {d["name"] for d in abiops["dependencies"]}
    needs = {d["name"]: d["how"] for d in nodes[f"visionops:visionops/{EXT}"]["dependencies"]}
    assert needs["libc10_cuda.so"] == "missing" and needs["libc10.so"] != "missing"
    # Files that never call torch carry no ABI field: old manifests and new ones read alike.
    assert all("cxx11_abi" not in n for k, n in nodes.items() if k.startswith(("numpy:", "MarkupSafe:")))


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_the_healthy_control_gets_nothing(venvs: dict[str, Path]) -> None:
    code, report = _invoke(["gate", str(venvs["ref-healthy"]), "--python", str(venvs["healthy"])])
    assert code == 0, report
    assert [f for f in report["findings"] if f["rule"] in BUILT_FOR] == []
    assert [f for f in report["findings"] if f["subject"] == "import goodops"] == []
    code, report = _invoke(["doctor", "--python", str(venvs["healthy"])])
    assert [f for f in report["findings"] if f["rule"] in BUILT_FOR or f["severity"] == "error"] == []


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_the_gate_leads_with_the_mismatched_builds(venvs: dict[str, Path]) -> None:
    code, report = _invoke(["gate", str(venvs["ref-healthy"]), "--python", str(venvs["broken"])])
    assert code == 1
    findings = report["findings"]
    roots = [f for f in findings if f["caused_by"] is None]
    assert roots[0]["rule"] in BUILT_FOR, roots[0]
    errors = {(f["rule"], f["subject"]) for f in roots if f["severity"] == "error"}
    assert errors == {
        ("ENV-BUILT-FOR-VARIANT", "visionops"),
        ("ENV-BUILT-FOR-VARIANT", "rocmops"),
        ("ENV-BUILT-FOR-ABI", "abiops"),
    }
    by = {(f["rule"], f["subject"]): f for f in findings}
    # The symptoms fold under the cause: the libraries the other variant ships, and each failed import.
    for dist, root in (
        ("visionops", "ENV-BUILT-FOR-VARIANT"),
        ("rocmops", "ENV-BUILT-FOR-VARIANT"),
        ("abiops", "ENV-BUILT-FOR-ABI"),
    ):
        assert by[("VERIFY-IMPORT", f"import {dist}")]["caused_by"] == f"{root}:{dist}"
    missing = [f for f in findings if f["rule"] == "ENV-NATIVE-MISSING"]
    assert {f["subject"] for f in missing} == {f"visionops/{EXT}", f"rocmops/{EXT}"}
    for f in missing:
        assert f["caused_by"] == f"ENV-BUILT-FOR-VARIANT:{f['subject'].split('/')[0]}"
        assert "operating system's packages" not in f["remedy"]
        # A consequence carries no remedy of its own: it points at the mismatched build's.
        assert f["remedy"].startswith("Follows from ENV-BUILT-FOR-VARIANT")
    assert (
        "undefined symbol: _ZN3c106detail14torchCheckFailEPKcS2_jRKSs"
        in by[("VERIFY-IMPORT", "import abiops")]["message"]
    )
    # The remedies: the matching build from the index that serves it, or a rebuild with the right flags.
    cuda = by[("ENV-BUILT-FOR-VARIANT", "visionops")]
    assert "is a CUDA build" in cuda["message"] and "libc10_cuda.so" in cuda["message"]
    assert "pip install --no-deps 'visionops==0.3.0+cpu' --index-url" in cuda["remedy"]
    assert "'https://download.pytorch.org/whl/cpu'" in cuda["remedy"]
    rocm = by[("ENV-BUILT-FOR-VARIANT", "rocmops")]
    assert "is a ROCm build" in rocm["message"] and "librocmops_hip.so" in rocm["message"]
    abi = by[("ENV-BUILT-FOR-ABI", "abiops")]
    assert "_GLIBCXX_USE_CXX11_ABI=0" in abi["message"]
    # Built again from its checkout (direct_url.json) with torch's flag, its stale build folder deleted first.
    assert "`rm -rf -- '/src/abiops/build'`" in abi["remedy"]
    assert "CPPFLAGS='-D_GLIBCXX_USE_CXX11_ABI=1' pip install --force-reinstall --no-deps" in abi["remedy"]
    assert "--no-build-isolation '/src/abiops'" in abi["remedy"]


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_doctor_names_them(venvs: dict[str, Path]) -> None:
    code, report = _invoke(["doctor", "--python", str(venvs["broken"])])
    assert code == 1
    roots = {(f["rule"], f["subject"]) for f in report["findings"] if f["caused_by"] is None}
    assert {("ENV-BUILT-FOR-VARIANT", "visionops"), ("ENV-BUILT-FOR-ABI", "abiops")} <= roots
    assert not [f for f in report["findings"] if f["rule"] == "ENV-NATIVE-MISSING" and f["caused_by"] is None]


# ------------------------------------------------------------------- the recorded facts, other torches


def cuda_torch(major: str = "13.0", label: str = "cu130") -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["torch"]["static"].update(variant=label, cuda=major, version=f"2.13.0+{label}")
        dist_entry(d, "torch")["version"] = f"2.13.0+{label}"

    return edit


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_a_cuda_torch_matches_the_cuda_build_and_not_the_others(venvs: dict[str, Path]) -> None:
    data = _recorded(venvs["ref-broken"])
    found = _found(doctor(_manifest(data, cuda_torch())), *BUILT_FOR)
    # visionops (CUDA) now matches; the ROCm build and the CPU-labelled goodops do not.
    assert ("ENV-BUILT-FOR-VARIANT", "visionops") not in found
    assert "is a ROCm build" in found[("ENV-BUILT-FOR-VARIANT", "rocmops")].message
    assert (
        "is a CPU build (its version's label is +cpu)" in found[("ENV-BUILT-FOR-VARIANT", "goodops")].message
    )
    # A CUDA 12 build (its _C needs libcudart.so.12) beside a CUDA 13 torch is another build too.

    def cuda12(d: dict[str, Any]) -> None:
        node = next(n for n in d["native"]["nodes"] if n["key"] == f"visionops:visionops/{EXT}")
        node["dependencies"].append(
            {"name": "libcudart.so.12", "target": None, "how": "missing", "kind": "missing"}
        )

    found = _found(doctor(_manifest(data, cuda_torch(), cuda12)), "ENV-BUILT-FOR-VARIANT")
    assert "is a CUDA 12 build" in found[("ENV-BUILT-FOR-VARIANT", "visionops")].message
    assert "a CUDA 13 build" in found[("ENV-BUILT-FOR-VARIANT", "visionops")].message


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_torchs_abi_is_read_from_libc10_when_the_runtime_did_not_say(venvs: dict[str, Path]) -> None:
    def no_runtime(d: dict[str, Any]) -> None:
        d["torch"]["runtime"] = None

    found = _found(doctor(_manifest(_recorded(venvs["ref-broken"]), no_runtime)), "ENV-BUILT-FOR-ABI")
    assert set(found) == {("ENV-BUILT-FOR-ABI", "abiops")}


@needs_torch
@needs_gxx
@pytest.mark.slow
def test_a_companion_label_folds_under_the_binary_evidence(venvs: dict[str, Path]) -> None:
    def rename(d: dict[str, Any]) -> None:
        dist_entry(d, "visionops")["name"] = "torchvision"
        for n in d["native"]["nodes"]:
            if n["owner"] == "visionops":
                n["owner"] = "torchvision"

    findings = link(doctor(_manifest(_recorded(venvs["ref-broken"]), rename)))
    by = {(f.rule, f.subject): f for f in findings}
    root = by[("ENV-BUILT-FOR-VARIANT", "torchvision")]
    assert root.caused_by is None and "torchvision 0.3.0+cu130 is a CUDA build" in root.message
    # ENV-COMPANION-VARIANT keeps its id (policies name it), folded under the file's evidence.
    assert by[("ENV-COMPANION-VARIANT", "torchvision")].caused_by == root.key


# ------------------------------------------------------------------------ the rules on edited manifests


def test_the_rules_fire_on_a_recorded_manifest_and_fold_what_follows() -> None:
    from diffdata import manifest

    findings = link(doctor(manifest("dev-cpu", cuda_build, old_abi_build)))
    by = {(f.rule, f.subject): f for f in findings}
    variant = by[("ENV-BUILT-FOR-VARIANT", "visionops")]
    assert variant.caused_by is None and variant.severity == "error"
    assert by[("ENV-BUILT-FOR-ABI", "abiops")].caused_by is None
    (missing,) = [f for f in findings if f.rule == "ENV-NATIVE-MISSING"]
    assert missing.caused_by == variant.key
    assert "operating system" not in missing.remedy.replace("never an operating system's package", "")
    # Needing only torch's CUDA library (no libc10.so, no label) is a CUDA build too; the remedy names the
    # Python distribution that ships the library, never an OS package.
    alone = link(doctor(manifest("dev-cpu", built_extension("plainops", "1.0", needs=("libc10_cuda.so",)))))
    (missing,) = [f for f in alone if f.rule == "ENV-NATIVE-MISSING"]
    assert missing.caused_by == "ENV-BUILT-FOR-VARIANT:plainops"
    assert missing.remedy.startswith("Only a CUDA build of torch ships libc10_cuda.so")
    assert "operating system's packages" not in missing.remedy


def test_a_build_that_does_not_link_torch_or_matches_it_is_silent() -> None:
    from diffdata import manifest

    healthy = manifest(
        "dev-cpu",
        built_extension("goodops", "0.1.0+cpu"),
        built_extension("plain", "1.0", needs=("libgomp.so.1",), abi=None, pin=None),
    )
    assert [f for f in doctor(healthy) if f.rule in BUILT_FOR] == []


@pytest.mark.slow
def test_the_registrys_torchvision_beside_a_cpu_torch_is_named_as_the_build_it_is(tmp_path: Path) -> None:
    """The case users meet: torchvision from the default index (a CUDA build, no label) beside torch from
    the CPU index. ``pip check`` is silent and ``import torchvision`` dies; the gate names the mismatched
    build, with the matching one from PyTorch's CPU index, and the missing CUDA libraries under it."""
    version, cuda = installed_torch()
    if cuda is not None or "+cpu" not in version:
        pytest.skip(f"the test environment's torch is {version}, not a CPU build: nothing mismatches")
    python = make_venv(tmp_path / "venv")
    clone_site_packages(python)
    ref = tmp_path / "ref.json"
    result = CliRunner().invoke(app, ["snapshot", "--python", str(python), "-o", str(ref), "--quiet"])
    assert result.exit_code == 0, result.stderr
    pip_install(python, wheel("torchvision==0.28.0"))
    result = CliRunner().invoke(
        app, ["gate", str(ref), "--python", str(python), "--format", "json", "--quiet"]
    )
    assert result.exit_code == 1
    report = json.loads(result.stdout[result.stdout.index("{") :])
    first = next(f for f in report["findings"] if f["caused_by"] is None)
    assert (first["rule"], first["subject"]) == ("ENV-BUILT-FOR-VARIANT", "torchvision")
    assert "torchvision 0.28.0 is a CUDA build" in first["message"]
    assert "'torchvision==0.28.0+cpu' --index-url 'https://download.pytorch.org/whl/cpu'" in first["remedy"]
    # Its CPU build, from PyTorch's index for torch's label: never the same CUDA build again.
    (action,) = first["actions"]
    assert (action["kind"], action["pins"], action["index_url"], action["force"]) == (
        "install",
        [["torchvision", "0.28.0+cpu"]],
        "https://download.pytorch.org/whl/cpu",
        False,
    )
    key = f"{first['rule']}:{first['subject']}"
    under = {(f["rule"], f["subject"]) for f in report["findings"] if f["caused_by"] == key}
    assert ("VERIFY-IMPORT", "import torchvision") in under
    assert any(rule == "ENV-NATIVE-MISSING" for rule, _ in under)
    assert not any("from the operating system's packages" in f["remedy"] for f in report["findings"])
