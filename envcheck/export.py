"""A manifest as a software bill of materials: ``envcheck export MANIFEST --format cyclonedx``.

``cyclonedx(manifest)`` builds a CycloneDX 1.6 JSON document with cyclonedx-python-lib (its model and its
``JsonV1Dot6`` writer), so the output is what the CycloneDX tools and schema expect:

- every distribution is a ``library`` component whose ``bom-ref`` and ``purl`` are
  ``pkg:pypi/<normalised name>@<version>``, the version with its local label (``2.13.0+cpu``), which is
  also a property (``envcheck:local_label``);
- every file of the manifest's native tree is a ``file`` component with the sha256 the manifest records
  (from the wheel's RECORD, or computed), nested in the component of the distribution that ships it;
  system files, the interpreter's library and unowned files are top-level components;
- the dependency graph: which native file needs which (as the platform loader resolved it), which
  distribution requires which (requirements whose markers hold on the manifest's platform, and the extras
  another installed distribution asks for: torch's ``cuda-toolkit[cublas,...]`` brings cuda-toolkit's
  ``nvidia-cublas``; the requirement graph the diff rules read, ``envcheck.manifest.requirements``)
  and which files it ships (also nested in its component), and the environment (the BOM's subject)
  depending on every distribution: everything is reachable from the subject;
- the manifest's facts (Python, platform, torch version and variant, label) as metadata properties in the
  ``envcheck:`` namespace.

The same manifest gives the same bytes: the serial number is derived from the manifest's canonical text,
the timestamp is the manifest's own ``meta.created``, and components are sorted. Manifests were redacted
when they were written; strings are carried as data (lone surrogates shown as ``\\uXXXX``, so the output is
valid UTF-8) after the redactor (``envcheck.core.redact``): a hand-made or hostile manifest's credentials do
not reach the SBOM. A name cannot move its purl into a namespace: a ``/`` in it is percent-encoded.
cyclonedx-python-lib is imported only here, when an export runs.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from envcheck import __version__
from envcheck.core.errors import EnvcheckError
from envcheck.core.redact import redact_text
from envcheck.manifest.io import dumps
from envcheck.manifest.model import Manifest, canonical
from envcheck.manifest.query import views
from envcheck.manifest.requirements import graph

if TYPE_CHECKING:
    from cyclonedx.model import Property
    from cyclonedx.model.component import Component

# Namespace of the serial numbers: uuid5(this, sha256 of the manifest's canonical text).
_SERIAL_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:envcheck:manifest")
_SURROGATE = re.compile("[\ud800-\udfff]")
_SHA256 = re.compile(r"sha256:([0-9a-fA-F]{64})")
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_PREFIX = "envcheck:"


class ExportError(EnvcheckError):
    """An export cannot be written: the library it needs is missing."""


def _text(value: object) -> str:
    """A manifest string as valid UTF-8 data, credentials redacted: a lone surrogate (an undecodable file
    name) as ``\\uXXXX``."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", redact_text(str(value)))


def purl_ref(name: str, version: str) -> str:
    """``pkg:pypi/torch@2.13.0%2Bcpu``: the purl of a distribution, which is also its ``bom-ref``. A ``/``
    in the name (no PEP 508 name has one) is written ``%2F`` (and a ``%`` ``%25``) before the purl encodes
    it, so that it stays part of the name: ``pkg:pypi/evil%252ftorch@1``, never the namespace ``evil`` of
    ``torch``."""
    from packageurl import PackageURL

    safe = canonical(_text(name)).replace("%", "%25").replace("/", "%2F")  # one name, one purl
    return str(PackageURL(type="pypi", name=safe, version=_text(version)).to_string())


def local_label(version: str) -> str | None:
    """``cpu`` for ``2.13.0+cpu``; None without a label (or for a version PEP 440 does not parse)."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version).local
    except InvalidVersion:
        return None


@dataclass(frozen=True, kw_only=True, slots=True)
class _File:
    """One native file as the SBOM shows it."""

    ref: str
    name: str
    owner: str
    sha256: str | None
    properties: tuple[tuple[str, str], ...]
    needs: tuple[str, ...]  # the ``ref``s of the files it needs


# A Windows absolute path: a drive letter, a colon and a separator (C:\..., Z:/...).
_WINDOWS_ABSOLUTE = re.compile(r"[A-Za-z]:[\\/]")


def _files(manifest: Manifest) -> list[_File]:
    """The manifest's native files: its native tree when there is one, else the RECORD hashes of each
    distribution's compiled files (a snapshot whose native scan was skipped). First of a key wins."""
    nodes = manifest.native.nodes if manifest.native is not None else None
    found: dict[str, _File] = {}
    if nodes:
        for node in nodes:
            ref = f"file:{_text(node.key)}"
            if ref in found:
                continue
            _, _, inside = node.key.partition(":")
            # "owner:path" names a file inside its owner; an absolute key (/usr/lib/..., C:\...) is a path.
            absolute = node.key.startswith("/") or _WINDOWS_ABSOLUTE.match(node.key) is not None
            name = inside if inside and not absolute else node.key
            match = _SHA256.fullmatch(node.identity or "")
            facts = {
                "path": node.path,
                "owner": node.owner,
                "role": node.role,
                "format": node.format,
                "soname": node.soname,
                "build_id": node.build_id,
                "file_version": node.file_version,
                "integrity": node.integrity,
            }
            properties = [(k, _text(v)) for k, v in facts.items() if v]
            needs: list[str] = []
            for dep in node.dependencies or ():
                if dep.target is None:
                    properties.append(("missing", _text(dep.name)))
                else:
                    needs.append(f"file:{_text(dep.target)}")
            found[ref] = _File(
                ref=ref,
                name=_text(name),
                owner=node.owner,
                sha256=match.group(1).lower() if match else None,
                properties=tuple(properties),
                needs=tuple(needs),
            )
        return list(found.values())
    for dist in manifest.packages:
        for nf in dist.native_files:
            ref = f"file:{_text(dist.name)}:{_text(nf.path)}"
            if ref not in found:
                found[ref] = _File(
                    ref=ref,
                    name=_text(nf.path),
                    owner=dist.name,
                    sha256=nf.sha256.lower() if nf.sha256 and _HEX64.fullmatch(nf.sha256) else None,
                    properties=(("owner", _text(dist.name)),),
                    needs=(),
                )
    return list(found.values())


def _requirement_graph(manifest: Manifest) -> dict[str, tuple[str, ...]]:
    """Canonical name -> the canonical names it requires on the manifest's machine: markers evaluated
    there, extras followed as the installed distributions ask for them (``cuda-toolkit[cublas]`` brings
    cuda-toolkit's ``extra == "cublas"`` requirements). Unparseable lines are left out."""
    with views(manifest):
        g = graph(manifest)
    return {
        canonical(name): tuple(canonical(edge.req.name) for edge in edges) for name, edges in g.edges.items()
    }


def _properties(pairs: Iterable[tuple[str, str]]) -> list[Property]:
    from cyclonedx.model import Property

    return [Property(name=f"{_PREFIX}{k}", value=v) for k, v in pairs if v]


def _metadata_properties(manifest: Manifest) -> list[tuple[str, str]]:
    py, meta, torch = manifest.python, manifest.meta, manifest.torch.static
    pairs = [
        ("schema_version", str(manifest.schema_version)),
        ("label", meta.label or ""),
        ("created", meta.created),
        ("target", meta.target),
        ("manifest.envcheck_version", meta.envcheck_version),
        ("python", f"{py.implementation} {py.version}"),
        ("python.environment", py.environment),
    ]
    if manifest.platform is not None:
        p = manifest.platform
        pairs += [
            ("platform", f"{p.system} {p.machine}"),
            ("platform.release", p.release),
            ("platform.distro", p.distro or ""),
            ("platform.libc", " ".join(x for x in (p.libc.name, p.libc.version) if x)),
        ]
    if torch is not None:
        pairs += [
            ("torch.version", torch.version or ""),
            ("torch.variant", torch.variant),
            ("torch.cuda", torch.cuda or ""),
            ("torch.hip", torch.hip or ""),
            ("torch.git_version", torch.git_version or ""),
        ]
    return [(k, _text(v)) for k, v in pairs]


def _timestamp(created: str) -> datetime | None:
    try:
        stamp = datetime.fromisoformat(created)
    except ValueError:
        return None
    return stamp if stamp.tzinfo is not None else None


def serial_number(manifest: Manifest) -> uuid.UUID:
    """The BOM's serial number: the same for the same manifest content, different for any other."""
    digest = hashlib.sha256(dumps(manifest).encode("utf-8", "backslashreplace")).hexdigest()
    return uuid.uuid5(_SERIAL_NAMESPACE, digest)


def cyclonedx(manifest: Manifest) -> str:
    """``manifest`` as CycloneDX 1.6 JSON (see the module's docstring). Raises ``ExportError`` when
    cyclonedx-python-lib is not installed."""
    try:
        from cyclonedx.model import HashAlgorithm, HashType
        from cyclonedx.model.bom import Bom, BomMetaData
        from cyclonedx.model.component import Component, ComponentType
        from cyclonedx.model.tool import ToolRepository
        from cyclonedx.output.json import JsonV1Dot6
        from packageurl import PackageURL
    except ImportError as e:
        raise ExportError(
            f"envcheck export needs cyclonedx-python-lib, which is not installed ({e.name})",
            tip="pip install cyclonedx-python-lib",
        ) from e

    # The distributions: bom-ref = purl; a shadowed copy of the same name and version gets a suffix.
    dists: dict[str, Component] = {}
    importable: dict[str, str] = {}  # canonical name -> bom-ref of the distribution Python imports
    for dist in manifest.packages:
        purl = purl_ref(dist.name, dist.version)
        ref = purl
        n = 1
        while ref in dists:
            n += 1
            ref = f"{purl}#{n}"
        facts = [
            ("local_label", local_label(dist.version) or ""),
            ("installer", _text(dist.installer or "")),
            ("wheel_tags", _text(" ".join(dist.wheel_tags))),
            ("shadowed", "true" if dist.shadowed else ""),
        ]
        dists[ref] = Component(
            type=ComponentType.LIBRARY,
            name=_text(dist.name),
            version=_text(dist.version),
            purl=PackageURL.from_string(purl),
            bom_ref=ref,
            properties=_properties(facts),
        )
        if not dist.shadowed:
            importable.setdefault(canonical(dist.name), ref)

    # The native files, nested in the distribution that ships each (when the manifest knows it).
    files = _files(manifest)
    file_components: dict[str, Component] = {}
    ships: dict[str, list[Component]] = {}  # distribution bom-ref -> the file components it ships
    top: list[Component] = list(dists.values())
    for f in files:
        component = Component(
            type=ComponentType.FILE,
            name=f.name,
            bom_ref=f.ref,
            hashes=[HashType(alg=HashAlgorithm.SHA_256, content=f.sha256)] if f.sha256 else None,
            properties=_properties(f.properties),
        )
        file_components[f.ref] = component
        shipped_by = importable.get(canonical(f.owner))
        if shipped_by is not None:
            dists[shipped_by].components.add(component)
            ships.setdefault(shipped_by, []).append(component)
        else:
            top.append(component)

    label = manifest.meta.label or "python environment"
    subject = Component(
        type=ComponentType.APPLICATION,
        name=_text(label),
        bom_ref="envcheck:environment",
        description="A Python environment recorded by envcheck snapshot",
    )
    envcheck_tool = Component(type=ComponentType.APPLICATION, name="envcheck", version=__version__)
    created = _timestamp(manifest.meta.created)
    bom = Bom(
        serial_number=serial_number(manifest),
        metadata=BomMetaData(
            component=subject,
            tools=ToolRepository(components=[envcheck_tool]),
            properties=_properties(_metadata_properties(manifest)),
            timestamp=created,
        ),
        components=top,
    )
    if created is None:
        # The library stamps "now" in place of None: a manifest without a valid time gets no time at all,
        # so that the same manifest still gives the same bytes.
        bom.metadata.timestamp = None  # type: ignore[assignment]

    requires = _requirement_graph(manifest)
    bom.register_dependency(subject, list(dists.values()))
    for dist in manifest.packages:
        if dist.shadowed:
            continue
        ref = importable[canonical(dist.name)]
        wanted = requires.get(canonical(dist.name), ())
        needed = sorted({importable[n] for n in wanted if n in importable} - {ref})
        bom.register_dependency(dists[ref], [dists[r] for r in needed] + ships.get(ref, []))
    for f in files:
        needed = sorted({r for r in f.needs if r in file_components} - {f.ref})
        bom.register_dependency(file_components[f.ref], [file_components[r] for r in needed])
    return str(JsonV1Dot6(bom).output_as_string(indent=2)) + "\n"
