"""The installed distributions, from their metadata files (no ``Distribution.metadata`` parsing)."""

import json
import os

from .names import canonical_name
from .record import parse_record_natives


def metadata_headers(text):
    """Name, Version and Requires-Dist from a METADATA / PKG-INFO text.

    Only the header block is read: ``Distribution.metadata`` runs the email parser over the whole long
    description, three times per distribution when name, version and requires are asked for, which made
    it the slowest part of the static snapshot.
    """
    header = text.split("\n\n", 1)[0]
    name = version = None
    requires = []
    for line in header.splitlines():
        if line[:1] in (" ", "\t"):
            continue  # a folded continuation line: none of the fields read here use them
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "name" and name is None:
            name = value.strip()
        elif key == "version" and version is None:
            version = value.strip()
        elif key == "requires-dist":
            requires.append(value.strip())
    return name, version, requires


def dist_path(dist):
    # PathDistribution._path is the .dist-info folder; public API has no better way (3.8 - 3.13).
    path = getattr(dist, "_path", None)
    return str(path) if path is not None else None


def real_metadata_dir(mdir, real_folders):
    """The real path of the metadata folder ``mdir``, resolving its parent once per folder (a folder holds
    hundreds of distributions)."""
    folder, name = os.path.split(mdir)
    real = real_folders.get(folder)
    if real is None:
        try:
            real = os.path.realpath(folder)
        except (OSError, ValueError):
            real = os.path.normpath(folder)
        real_folders[folder] = real
    return os.path.join(real, name)


def distributions():
    # type: () -> tuple
    """``(distributions, error)``: one dict per installed distribution in ``sys.path`` order (``shadowed``
    when an earlier one has the same canonical name), or an error text when metadata is unavailable.

    A folder on ``sys.path`` twice (two spellings of it: a linked ``lib64``, a link to the venv in
    ``PYTHONPATH``) lists its distributions twice; the second listing is the same copy, not a second
    install, and is left out (its metadata folder's real path was seen)."""
    try:
        from importlib import metadata
    except ImportError:  # Python < 3.8 is out of scope; say so instead of crashing
        return [], "importlib.metadata is unavailable"
    seen = set()
    seen_dirs = set()
    real_folders = {}
    out = []
    for dist in metadata.distributions():
        mdir = dist_path(dist)
        if mdir and os.path.basename(mdir).startswith("~"):
            # pip's uninstall stash (``~orch-2.12.0.dist-info``): the old install, renamed until the new
            # one commits. Never the live distribution; ``install_facts`` names it as an interrupted install.
            continue
        if mdir:
            real = real_metadata_dir(mdir, real_folders)
            if real in seen_dirs:
                continue
            seen_dirs.add(real)
        text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
        if not text:
            continue
        name, version, requires = metadata_headers(text)
        if not name or version is None:
            continue
        if not requires and dist.read_text("requires.txt"):  # egg-info keeps them apart
            requires = list(dist.requires or [])
        location = os.path.dirname(mdir) if mdir else ""
        canonical = canonical_name(name)
        wheel = dist.read_text("WHEEL") or ""
        direct_url = dist.read_text("direct_url.json")
        try:
            direct = json.loads(direct_url) if direct_url else None
        except ValueError:
            direct = None
        installer = dist.read_text("INSTALLER")
        out.append(
            {
                "name": name,
                "version": version,
                "installer": installer.strip() if installer else None,
                "requires": requires,
                "direct_url": direct,
                "wheel_tags": [
                    line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")
                ],
                "location": location,
                "metadata_dir": mdir or "",
                "shadowed": canonical in seen,
                "native_files": parse_record_natives(dist.read_text("RECORD") or ""),
            }
        )
        seen.add(canonical)
    return out, None
