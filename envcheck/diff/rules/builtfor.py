"""Everything built against torch matches the installed torch: the build variant (CPU, CUDA, ROCm), the
release and the C++ ABI of every distribution whose native code links libtorch or libc10.

The facts come from the files, not from names: the native tree records, for each file of a distribution,
the libraries it needs (DT_NEEDED: ``libc10.so`` says it was built against torch, ``libc10_cuda.so`` /
``libcudart.so.13`` that it was built for a CUDA torch, ``libc10_hip.so`` for a ROCm one) and, for a file
that needs torch's libraries, the C++ ABI its mangled names were compiled with (``NativeNode.cxx11_abi``).
A distribution's local version label (``+cu130``, ``+cpu``) says the variant where its files do not.

Three rules, one per fact, for any distribution (not only the companions PyTorch publishes):

- ``ENV-BUILT-FOR-VARIANT``: built for another variant than the installed torch, or for another CUDA
  major. ``ENV-COMPANION-VARIANT`` (packages) keeps its id and its case, the label of a companion alone;
  where both fire on one distribution, it is folded under this one (``envcheck.diff.causes``).
- ``ENV-BUILT-FOR-ABI``: compiled with another ``_GLIBCXX_USE_CXX11_ABI`` than torch.
- The release a distribution was built for is its ``Requires-Dist: torch==X`` pin, which
  ``ENV-COMPANION-PIN`` (packages) already checks for every distribution: it is not checked twice.

What these mismatches make fail, the ENV-NATIVE-MISSING of a library the other variant ships and the
failed import of the distribution's module (VERIFY-IMPORT), are folded under them
(``envcheck.diff.causes.built_for_causes``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from envcheck.core.escape import one_line
from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Action, Manual, Rebuild, RemoveFiles, make
from envcheck.diff.rules.base import single_rule
from envcheck.diff.rules.torch import COMPANIONS, installed_version
from envcheck.manifest.model import Distribution, Manifest
from envcheck.manifest.native import (
    BuildKind,
    NativeNode,
    build_kind_of_label,
    build_kind_of_library,
    links_torch,
)
from envcheck.manifest.provenance import source
from envcheck.manifest.query import canon, local_label, pkg, public, torch_index_label
from envcheck.manifest.remedy import install_action, pip_install, remedy_text

FAMILY = "built against torch"

_KIND_WORDS: dict[str, str] = {"cpu": "CPU", "cuda": "CUDA", "rocm": "ROCm"}
# The CUDA major a needed runtime library names (``libcudart.so.12``, ``cudart64_12.dll``).
_CUDA_RUNTIME = re.compile(r"^(?:libcudart\.so\.|cudart64_)(\d+)", re.I)


@dataclass(frozen=True, slots=True)
class Built:
    """What one owner's files that link torch were built for. ``files``: those files' names; ``kind`` and
    ``evidence`` (a needed library, or the label): the variant and what says so; ``cuda_major``: the CUDA
    major its needed runtime or its label names; ``abi``: the files whose C++ ABI is known, with it."""

    owner: str
    dist: Distribution | None
    files: tuple[str, ...]
    kind: BuildKind | None
    evidence: str | None
    cuda_major: int | None
    abi: tuple[tuple[str, bool], ...]


def _name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def built_against_torch(m: Manifest) -> list[Built]:
    """Every owner (a distribution, or ``unowned`` files of site-packages) with a native file that needs
    torch's libraries or calls torch's functions, except torch itself, with what its files were built for
    (sorted by owner)."""
    native = m.native
    if native is None or not native.nodes:
        return []
    by_owner: dict[str, list[NativeNode]] = {}
    for node in native.nodes:
        if node.owner in ("torch", "system", "interpreter"):
            continue
        # It needs torch's libraries, or calls torch's functions (its ABI is known only then: the linker
        # drops a DT_NEEDED libc10.so none of whose symbols resolved, which is the other ABI's case).
        if node.cxx11_abi is not None or any(links_torch(d.name) for d in node.dependencies or ()):
            by_owner.setdefault(node.owner, []).append(node)
    out = []
    for owner, nodes in sorted(by_owner.items()):
        dist = pkg(m, owner) if owner != "unowned" else None
        if dist is not None and canon(dist.name) == "torch":
            continue
        kind: BuildKind | None = None
        evidence = None
        major = None
        for node in nodes:
            for dep in node.dependencies or ():
                found = build_kind_of_library(dep.name)
                if found is not None and kind is None:
                    kind, evidence = found, f"{_name(node.path)} needs {dep.name}"
                runtime = _CUDA_RUNTIME.match(dep.name)
                if runtime and major is None:
                    major = int(runtime.group(1))
        label = local_label(dist.version) if dist is not None else None
        if kind is None and build_kind_of_label(label) is not None:
            kind, evidence = build_kind_of_label(label), f"its version's label is +{label}"
        if major is None and kind == "cuda" and label and (digits := re.match(r"^cu(\d+)$", label)):
            major = _cuda_label_major(digits.group(1))
        out.append(
            Built(
                owner=owner,
                dist=dist,
                files=tuple(sorted({_name(n.path) for n in nodes})),
                kind=kind,
                evidence=evidence,
                cuda_major=major,
                abi=tuple(sorted((_name(n.path), n.cxx11_abi) for n in nodes if n.cxx11_abi is not None)),
            )
        )
    return out


def _cuda_label_major(digits: str) -> int:
    """The CUDA major of a label's digits: ``130`` -> 13, ``126`` -> 12, ``92`` -> 9."""
    return int(digits[:-1]) if len(digits) > 1 else int(digits)


def torch_kind(m: Manifest) -> tuple[BuildKind | None, int | None]:
    """The installed torch's variant kind and, for a CUDA build, its CUDA major."""
    static = m.torch.static
    dist = pkg(m, "torch")
    kind = build_kind_of_label(static.variant if static is not None else None)
    if kind is None and dist is not None:
        kind = build_kind_of_label(local_label(dist.version))
    major = None
    if kind == "cuda" and static is not None and static.cuda:
        head = static.cuda.split(".", 1)[0]
        major = int(head) if head.isdigit() else None
    return kind, major


def torch_abi(m: Manifest) -> bool | None:
    """torch's ``_GLIBCXX_USE_CXX11_ABI``: what the running torch said, else what its libc10's own names
    say (read from the file)."""
    if m.torch.runtime is not None and m.torch.runtime.cxx11_abi is not None:
        return m.torch.runtime.cxx11_abi
    for node in m.native.nodes or () if m.native is not None else ():
        if (
            node.owner == "torch"
            and (node.soname or "").startswith("libc10.so")
            and node.cxx11_abi is not None
        ):
            return node.cxx11_abi
    return None


def _who(b: Built) -> str:
    return f"{b.dist.name} {b.dist.version}" if b.dist is not None else f"the unowned {', '.join(b.files)}"


def _subject(b: Built) -> str:
    return b.dist.name if b.dist is not None else f"unowned:{b.files[0]}"


def _torch_words(m: Manifest) -> str:
    return installed_version(m) or "the installed torch"


def _folder(url: str) -> str:
    """The path of a ``file:`` URL (``file:///srv/pkg`` -> ``/srv/pkg``; ``file:///C:/x`` -> ``C:/x``)."""
    path = unquote(urlsplit(url).path)
    return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" else path


def _rebuild(
    m: Manifest, b: Built, variables: tuple[tuple[str, str], ...], flags: str
) -> tuple[list[Action], str]:
    """``b`` built again from its source against the installed torch, with ``variables`` set for the build
    (``flags`` says the rest, a clause): its source folder (``direct_url.json``: the folder, or an archive
    URL), else the index's source distribution of its release (``--no-binary``). A folder's ``build``
    directory goes first: setuptools reuses the objects there, compiled with the old flags, when no source
    file changed. An editable checkout, a VCS commit or unowned files are manual steps that name them."""
    if b.dist is None:
        text = (
            f"rebuild {', '.join(b.files)} against the installed torch ({flags}), or delete the files: no "
            "installed distribution owns them"
        )
        return [Manual(text=one_line(text).replace("`", "'"))], ""
    dist = b.dist
    direct = dist.direct_url if isinstance(dist.direct_url, dict) else {}
    url = direct.get("url") if isinstance(direct.get("url"), str) else ""
    what = f"rebuild {dist.name} {dist.version} against the installed torch"
    if isinstance(direct.get("vcs_info"), dict) or (
        isinstance(direct.get("dir_info"), dict) and direct["dir_info"].get("editable") is True
    ):
        return [
            Manual(text=one_line(f"{what} from its source ({source(dist).shown}), {flags}").replace("`", "'"))
        ], ""
    if url and not urlsplit(url).path.lower().endswith(".whl"):
        if isinstance(direct.get("dir_info"), dict) and url.startswith("file:"):
            folder = _folder(url)
            sep = "\\" if "\\" in folder else "/"
            build = folder.rstrip("/\\") + sep + "build"
            actions = [
                make(lambda: RemoveFiles(paths=(build,)), f"delete {build}"),
                make(lambda: Rebuild(name=dist.name, source=folder, variables=variables), what),
            ]
            note = (
                f"(from its source folder, as it was installed; {build} holds objects compiled with the old "
                f"flags, which setuptools would reuse) {_capital(flags)}."
            )
            return actions, note
        built = _folder(url) if url.startswith("file:") else url
        rebuild = make(lambda: Rebuild(name=dist.name, source=built, variables=variables), what)
        return [rebuild], f"(from the source archive it was installed from) {_capital(flags)}."
    rebuild = make(lambda: Rebuild(name=dist.name, version=public(dist.version), variables=variables), what)
    return [rebuild], (
        f"(from the index's source distribution of {dist.name} {public(dist.version)}: a project no index "
        f"serves builds from its checkout the same way) {_capital(flags)}."
    )


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _local(b: Built) -> bool:
    """A build made here (a checkout, a folder, a VCS commit, a wheel file from a local path): no index
    serves another build of it. A torch companion's wheel file (torchvision downloaded, then installed from
    the file) is one of PyTorch's builds: its index serves the others."""
    if b.dist is None or source(b.dist).released:
        return False
    url = b.dist.direct_url.get("url") if isinstance(b.dist.direct_url, dict) else None
    wheel = isinstance(url, str) and url.lower().endswith(".whl")
    return not (wheel and canon(b.dist.name) in COMPANIONS)


def _variant_build(kind: BuildKind | None, major: int | None) -> tuple[tuple[tuple[str, str], ...], str]:
    """The variables a rebuild for torch's variant sets (``FORCE_CUDA``, which torchvision, detectron2,
    mmcv and most CUDA extensions' setup.py read) and what else it needs (a clause)."""
    if kind == "cpu":
        return (("FORCE_CUDA", "0"),), "build it with CUDA and ROCm off (no CUDA_HOME in the environment)"
    if kind == "cuda":
        toolkit = f"the CUDA {major} toolkit" if major else "the CUDA toolkit torch was built with"
        return (("FORCE_CUDA", "1"),), f"build it with {toolkit} (CUDA_HOME)"
    return (
        ("FORCE_CUDA", "1"),
    ), "build it with ROCm's compilers (ROCM_HOME) of the release torch was built with"


@single_rule(
    "ENV-BUILT-FOR-VARIANT",
    family=FAMILY,
    severity="error",
    title="a distribution's native code was built for another torch variant (CPU / CUDA / ROCm)",
    why=(
        "An extension built against a CUDA torch needs libc10_cuda.so / libtorch_cuda.so, which a CPU torch "
        "does not ship ('libc10_cuda.so: cannot open shared object file'); a CPU build beside a CUDA torch "
        "has no CUDA kernels ('Could not run ... with arguments from the CUDA backend'); a CUDA 12 build "
        "needs libcudart.so.12 beside a CUDA 13 torch. The missing library is the symptom, the mismatched "
        "build the cause."
    ),
    fm=("FM-07",),
    evidence=("pytorch/vision#4222", "pytorch/pytorch#62350"),
    static_facts=True,
    fixes=("install", "remove", "rebuild"),
)
def built_for_variant(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if pkg(m, "torch") is None and m.torch.static is None:
        return
    kind, major = torch_kind(m)
    if kind is None:
        return
    for b in built_against_torch(m):
        if b.kind is None:
            continue
        from_files = b.evidence is not None and not b.evidence.startswith("its version's label")
        if not from_files and b.dist is not None and canon(b.dist.name) in COMPANIONS:
            continue  # a companion's label alone: ENV-COMPANION-VARIANT's case
        other_major = kind == b.kind == "cuda" and major is not None and b.cuda_major not in (None, major)
        if b.kind == kind and not other_major:
            continue
        built = f"CUDA {b.cuda_major}" if other_major else _KIND_WORDS[b.kind]
        has = f"CUDA {major}" if other_major else _KIND_WORDS[kind]
        remedy, actions = _variant_remedy(m, b, kind, major)
        yield rule.finding(
            _subject(b),
            f"{_who(b)} is a {built} build ({b.evidence}); torch is {_torch_words(m)}, a {has} build: "
            "its native code cannot load or run against it.",
            remedy,
            base=f"torch {_torch_words(m)} ({has})",
            target=f"{_subject(b)} ({built})",
            actions=actions,
        )


def _variant_remedy(
    m: Manifest, b: Built, kind: BuildKind, major: int | None
) -> tuple[str, tuple[Action, ...]]:
    """The build of ``b`` for torch's variant from the index that serves it (PyTorch's, for its label: never
    the same build again from the default index), or ``b`` built again for it where no index serves one."""
    torch_version = installed_version(m) or ""
    torch_label = torch_index_label(torch_version) or (
        m.torch.static.variant if m.torch.static is not None else None
    )
    variables, flags = _variant_build(kind, major)
    if b.dist is None or _local(b):
        actions, note = _rebuild(m, b, variables, flags)
        return _capital(remedy_text(actions, m, note=note)), tuple(actions)
    label = torch_index_label(b.dist.version)
    # PyTorch's index serves every companion in every build torch has (torchvision 0.28.0+cpu beside torch
    # 2.13.0+cpu), whatever label the installed one carries (none, from the default index).
    companion = canon(b.dist.name) in COMPANIONS
    if (label or companion) and torch_label and torch_index_label(f"0+{torch_label}"):
        pins = [(b.dist.name, f"{public(b.dist.version)}+{torch_label}")]
        # --no-deps: only this build changes; what it requires is torch's release, already installed.
        action = install_action(pins, source=m, no_deps=True)
        return (
            f"Install its {_KIND_WORDS[kind]} build for torch {public(torch_version)} from the index that "
            f"serves it: {pip_install(pins, source=m, on=m, options='--no-deps')}; or install the torch "
            "build it was made for."
        ), (action,)
    actions, note = _rebuild(m, b, variables, flags)
    return (
        f"Build {b.dist.name} again for torch {torch_version} ({_KIND_WORDS[kind]}): "
        + remedy_text(actions, m, note=note)
        + f" Or install a {b.dist.name} build made for that torch where its project publishes one."
    ), tuple(actions)


@single_rule(
    "ENV-BUILT-FOR-ABI",
    family=FAMILY,
    severity="error",
    title="a distribution's native code was compiled with another C++ ABI than torch",
    why=(
        "torch's functions that take a std::string are exported under the _GLIBCXX_USE_CXX11_ABI torch was "
        "built with (=1 for every wheel since torch 2.7): an extension compiled with the other flag calls "
        "names libc10 does not define, and its import fails with 'undefined symbol: _ZN3c106detail14"
        "torchCheckFail…RKSs'."
    ),
    fm=("FM-07",),
    evidence=("pytorch/pytorch#51039", "pytorch/pytorch#17492", "Dao-AILab/flash-attention#853"),
    static_facts=True,
    fixes=("remove", "rebuild"),
)
def built_for_abi(rule: Rule, m: Manifest) -> Iterator[Finding]:
    want = torch_abi(m)
    if want is None:
        return
    flag = int(want)
    for b in built_against_torch(m):
        wrong = [name for name, abi in b.abi if abi != want]
        if not wrong:
            continue
        # CPPFLAGS: what setuptools adds to every compile (CFLAGS and CXXFLAGS would replace its own flags).
        variables = (("CPPFLAGS", f"-D_GLIBCXX_USE_CXX11_ABI={flag}"),)
        flags = (
            f"compile it with -D_GLIBCXX_USE_CXX11_ABI={flag} (torch.utils.cpp_extension sets it from the "
            "installed torch; a CMake build takes it from torch's TorchConfig.cmake; a setup.py or "
            "CMakeLists.txt that sets the flag itself must be changed there)"
        )
        actions, note = _rebuild(m, b, variables, flags)
        if b.dist is not None and not _local(b):
            remedy = (
                f"Build {b.dist.name} again against torch {_torch_words(m)}: "
                + remedy_text(actions, m, note=note)
                + f" Or install the {b.dist.name} release built for that torch (its wheels use torch's ABI)."
            )
        else:
            remedy = _capital(remedy_text(actions, m, note=note))
        yield rule.finding(
            _subject(b),
            f"{_who(b)} was compiled with _GLIBCXX_USE_CXX11_ABI={1 - flag} ({', '.join(wrong)} names "
            f"{'std::string' if flag else 'std::__cxx11::basic_string'} in torch's functions); torch "
            f"{_torch_words(m)} uses ={flag}: its import fails with 'undefined symbol'.",
            remedy,
            base=f"torch _GLIBCXX_USE_CXX11_ABI={flag}",
            target=f"{_subject(b)} _GLIBCXX_USE_CXX11_ABI={1 - flag}",
            actions=tuple(actions),
        )
