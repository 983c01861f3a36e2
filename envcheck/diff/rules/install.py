"""The installation agrees with its own metadata (PEP 376, 427, 491; how pip and uv install): one dist-info
per project name in a folder, every file owned by one RECORD, no interrupted install left behind, a
package's own version file agreeing with its dist-info.

Each rule states one invariant that a correct installation keeps, whatever broke it: an interrupted
upgrade, ``pip install --ignore-installed``, two installers writing one folder, a tree copied by hand. The
facts come from ``envcheck/inside/install_facts.py`` (stashes, orphans, files two RECORDs claim) and the
distributions' own metadata; the questions are ``envcheck/manifest/installation.py``'s, which the native
rules and the cause linker ask too, so the mechanism (a file that fails its RECORD, an import that fails)
folds under the invariant it comes from.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.installation import (
    duplicates,
    orphan_groups,
    shared_is_duplicate,
    shared_names,
    shared_subject,
    stash_groups,
    stashed_project,
)
from envcheck.manifest.model import Manifest
from envcheck.manifest.query import local_label, pkg, public, torch_index_label
from envcheck.manifest.remedy import pip_install, shell_word

FAMILY = "installation"
FM = ("FM-27",)


def _folder(path: str) -> str:
    return posixpath.dirname(path.replace("\\", "/").rstrip("/"))


def _after(first: str, install: str) -> str:
    """``first && install`` as one pasteable command: ``install`` is ``pip_install``'s "`command` note"."""
    if install.startswith("`"):
        return f"`{first} && {install[1:]}"
    return f"`{first}` then {install}"


def _reinstall(m: Manifest, pins: list[tuple[str, str]], options: str = "") -> str:
    """``pip_install`` of ``pins``; one installed from a file or a URL (``direct_url.json``: a local build, a
    wheel no index serves) is installed from there again, never looked up by name on an index."""
    urls = []
    for name, version in pins:
        dist = next((d for d in m.packages if d.name == name and d.version == version), None)
        url = dist.direct_url.get("url") if dist is not None and isinstance(dist.direct_url, dict) else None
        if isinstance(url, str) and url:
            urls.append(shell_word(f"{name} @ {url}", m))
    if urls and len(urls) == len(pins):
        return f"`pip install {options + ' ' if options else ''}{' '.join(urls)}`"
    return pip_install(pins, on=m, options=options)


def _uninstall(m: Manifest, names: list[str], times: int = 1) -> str:
    words = " ".join(shell_word(n, m) for n in names)
    return " && ".join([f"pip uninstall -y {words}"] * times)


@single_rule(
    "ENV-DIST-DUPLICATE",
    family=FAMILY,
    severity="error",
    title="one project has two dist-info folders in one sys.path folder",
    why=(
        "Invariant: a sys.path folder holds one .dist-info per project name (PEP 376: one installed "
        "distribution per name). With two, which version importlib.metadata and pip report is an accident "
        "of directory order, and the files of both (C extensions of the old release among them) stay on "
        "disk and importable. `pip install --ignore-installed`, two installers writing one folder, or a "
        "copied tree leave it. Two copies of one release (a distributor's .egg-info beside its "
        ".dist-info) mix nothing: a warning."
    ),
    fm=FM,
    evidence=("python/cpython#100666", "python/importlib_metadata#291", "pypa/pip#3089"),
    static_facts=True,
)
def dist_duplicate(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for duplicate in duplicates(m):
        versions = [d.version for d in duplicate.dists]
        keep = duplicate.newest
        display = duplicate.dists[0].name
        reinstall = _reinstall(m, [(keep.name, keep.version)])
        # One release twice (a distributor's .egg-info beside its .dist-info, a reinstall with
        # --ignore-installed of the same version): the same files, so nothing mixes; tools still see the
        # project twice.
        same = len(set(versions)) == 1
        yield rule.finding(
            duplicate.subject,
            f"{display} is installed {len(versions)} times in {duplicate.location} "
            f"({', '.join(versions)}): "
            + (
                "one release, so the files agree, but pip and importlib.metadata see two distributions "
                "and an uninstall of one removes files the other lists."
                if same
                else f"importlib.metadata reports {versions[0]}, and the files of every copy are on disk, so "
                "what `import` loads mixes releases."
            ),
            "Remove every copy with their own RECORDs, then install the one you want (the newest here, or "
            f"the reference's): {_after(_uninstall(m, [display], len(versions)), reinstall)}",
            target=", ".join(versions),
            severity="warning" if same else "error",
        )


@single_rule(
    "ENV-INSTALL-INTERRUPTED",
    family=FAMILY,
    severity="error",
    title="an install was interrupted: pip's stash of the old tree is still there",
    why=(
        "Invariant: pip's uninstall stashes (the old tree renamed to `~orch`, `~orch-2.12.0.dist-info`) "
        "exist only while pip runs; pip removes them when the install commits and puts them back when it "
        "fails. One left behind means pip was killed mid-install (a CI timeout, the OOM killer, a closed "
        "terminal): the live tree beside it is another build, partly installed, not a tampered one."
    ),
    fm=FM,
    evidence=("pypa/pip#11849", "pypa/pip#12077", "astral-sh/uv#2304"),
)
def install_interrupted(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for subject, stashes in sorted(stash_groups(m).items()):
        meta = next((s for s in stashes if s.kind == "dist-info"), None)
        live = pkg(m, subject)
        before = f"{meta.name} {meta.version}" if meta is not None and meta.version else subject
        partial = [o for o in (m.install.orphans if m.install else []) if stashed_project(o) == subject]
        half = sum(o.count for o in partial)
        now = (
            f"{live.name} {live.version} is installed beside it"
            if live is not None
            else f"no dist-info of {subject} is installed, and {half:,} files of another build are, partly"
            if half
            else f"no dist-info of {subject} is installed"
        )
        stash_list = ", ".join(s.path for s in stashes)
        version = live.version if live is not None else (meta.version if meta and meta.version else None)
        removed = [s.path for s in stashes] + [o.folder for o in partial if live is None]
        remove = "rm -rf " + " ".join(shell_word(p, m) for p in sorted(set(removed)))
        reinstall = (
            _reinstall(m, [(live.name if live else subject, version)], "--force-reinstall --no-deps")
            if version
            else f"`pip install --force-reinstall --no-deps {shell_word(subject, m)}`"
        )
        yield rule.finding(
            subject,
            f"An install of {subject} was interrupted: pip's stash of {before} ({stash_list}) is still "
            f"there, and {now}. What imports is neither the old build nor the new one.",
            f"Remove the stash{' and the partial tree' if live is None and partial else ''}, then install "
            f"the build you want (the reference's, or {version or 'the version you need'}): "
            f"{_after(remove, reinstall)}",
            base=before,
            target=live.version if live is not None else ("partial" if half else "absent"),
        )


@single_rule(
    "ENV-FILE-ORPHAN",
    family=FAMILY,
    severity="error",
    title="files under an installed package that no RECORD lists",
    why=(
        "Invariant: every file under a distribution's top-level package folders is listed by exactly one "
        "RECORD (PEP 376/627): that is how pip uninstalls and upgrades it. A file no RECORD lists is a "
        "leftover of another release, a half-done install or a hand copy; pip never removes it, and a "
        "module or library among them is imported or loaded beside the installed release. An error when "
        "code is among them, a warning for data files only."
    ),
    fm=FM,
    evidence=("numpy/numpy#12736", "numpy/numpy#12976", "nautobot/nautobot-docker-compose#126"),
)
def file_orphan(rule: Rule, m: Manifest) -> Iterator[Finding]:
    stashed = set(stash_groups(m))
    for subject, group in orphan_groups(m).items():
        project = stashed_project(group[0])
        cause = f"ENV-INSTALL-INTERRUPTED:{project}" if project in stashed else None
        count = sum(o.count for o in group)
        code = sum(o.modules for o in group)
        examples = [e for o in group for e in o.examples]
        shown = ", ".join(examples[:5]) + (" …" if count > len(examples[:5]) else "")
        folders = [o.folder for o in group]
        owners = [o.split("==", 1) for o in group[0].owners if "==" in o]
        where = (
            f"an interrupted install of {project} (another build, partly installed)"
            if project is not None
            else "another release, a half-done install or a hand copy"
            if group[0].likely == "unknown"
            else "no distribution: a package copied in without its metadata, its dist-info deleted, or an "
            "install killed before it wrote its dist-info"
            if group[0].likely == "no distribution"
            else group[0].likely
        )
        remove = "rm -rf " + " ".join(shell_word(f, m) for f in folders)
        code_text = f"{code:,} of them code" if code else "none of them code"
        remedy = (
            f"Remove {'the folder' if len(folders) == 1 else 'the folders'} and reinstall what owns "
            "them, so only their RECORDs' files remain: "
            + _after(remove, _reinstall(m, [(n, v) for n, v in owners], "--force-reinstall --no-deps"))
            if owners
            else f"Reinstall the distribution that ships {' and '.join(folders)} (the reference names "
            "it) with `pip install --force-reinstall`, which writes its files with their RECORD; or delete "
            "the folder if nothing needs it."
            if group[0].likely == "no distribution"
            else f"Remove the files no RECORD lists under {' and '.join(folders)} (such as {examples[0]})."
            if examples
            else f"Remove the files no RECORD lists under {' and '.join(folders)}."
        )
        yield rule.finding(
            subject,
            f"{count:,} files under {' and '.join(folders)} are listed by no RECORD ({code_text}): {shown}. "
            f"Most likely from: {where}.",
            remedy,
            base="owned by one RECORD",
            target=f"{count} unowned",
            severity="error" if code else "warning",
            caused_by=cause,
        )


@single_rule(
    "ENV-FILE-SHARED",
    family=FAMILY,
    severity="error",
    title="files two distributions' RECORDs both claim, with different content",
    why=(
        "Invariant: each file belongs to one distribution's RECORD. When two distributions list the same "
        "file with different hashes (opencv-python beside opencv-python-headless, a fork beside the "
        "original), the one installed last overwrote the other's files, the other's RECORD no longer "
        "matches, and uninstalling either deletes files the other needs. The same bytes in both (a "
        "pkgutil namespace package's __init__.py) is legal and not reported."
    ),
    fm=FM,
    evidence=("roboflow/supervision#351", "ltdrdata/ComfyUI-Impact-Pack#395"),
)
def file_shared(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    for shared in m.install.shared:
        if shared_is_duplicate(m, shared):
            continue  # one project twice: ENV-DIST-DUPLICATE says it
        names = shared_names(m, shared)
        projects = sorted({n.split(" ", 1)[0] for n in names})
        keep = names[-1].split(" ", 1)
        shown = ", ".join(shared.examples) + (" …" if shared.count > len(shared.examples) else "")
        reinstall = (
            _reinstall(m, [(keep[0], keep[1])])
            if len(keep) == 2
            else f"`pip install {shell_word(keep[0], m)}`"
        )
        yield rule.finding(
            shared_subject(m, shared),
            f"{' and '.join(names)} both install {shared.count:,} of the same files with different content "
            f"({shown}): the last one installed overwrote the other's, and removing either breaks the "
            "other.",
            f"Keep one of them: {_after(_uninstall(m, projects), reinstall)} (or the other one, if that is "
            "the one you need).",
            target=", ".join(names),
        )


@single_rule(
    "ENV-VERSION-FILE",
    family=FAMILY,
    severity="error",
    title="torch's own version file disagrees with its dist-info",
    why=(
        "Invariant: what a package says of its own version agrees with its dist-info. torch/version.py "
        "(`__version__`, `cuda`, `hip`) is written by the same build as the wheel's METADATA; when they "
        "disagree, the metadata (what pip, the resolver and envcheck's lock read) describes another build "
        "than the one that imports: a tree copied or half-installed over another."
    ),
    fm=FM,
    evidence=("huggingface/transformers#29022",),
    static_facts=True,
)
def version_file(rule: Rule, m: Manifest) -> Iterator[Finding]:
    static, dist = m.torch.static, pkg(m, "torch")
    if static is None or dist is None or static.version is None:
        return
    folder = _folder(static.location) if static.location.endswith(("/torch", "\\torch")) else static.location
    if dist.location and folder and posixpath.normpath(folder) != posixpath.normpath(dist.location):
        return  # another tree first on sys.path: ENV-TORCH-TREES says it
    # A wheel from the default index has no local label in its METADATA while its version.py has one
    # (``2.14.1`` beside ``2.14.1+cu130``): only a label both state can disagree.
    label, file_label = local_label(dist.version), local_label(static.version)
    variant = "cuda" if static.cuda else "rocm" if static.hip else "cpu"
    prefix = {"cuda": "cu", "rocm": "rocm", "cpu": "cpu"}[variant]
    wrong_label = (
        label is not None and torch_index_label(dist.version) is not None and not label.startswith(prefix)
    )
    other_label = label is not None and file_label is not None and label != file_label
    if public(static.version) == public(dist.version) and not wrong_label and not other_label:
        return
    said = (
        f"{static.version} ({variant}{' ' + (static.cuda or static.hip or '') if variant != 'cpu' else ''})"
    )
    yield rule.finding(
        "torch",
        f"torch/version.py says {said}, its dist-info says {dist.version}: the files that import are "
        "another build than the metadata pip and envcheck read.",
        "Reinstall the exact build: "
        + pip_install([("torch", dist.version)], on=m, options="--force-reinstall --no-deps"),
        target=f"{static.version} (dist-info {dist.version})",
    )


@single_rule(
    "ENV-FILE-GONE",
    family=FAMILY,
    severity="error",
    title="files a distribution's RECORD lists are not on disk",
    why=(
        "Invariant: every file a RECORD lists is installed (PEP 376: RECORD is the list of what the "
        "install wrote). A module gone (a cleanup script, a half-done uninstall, a COPY that missed it) "
        "fails the import that needs it: an error, and the gate's imports that fail for it fold under it. "
        "Only a package's own tests or data gone (what slimmed images drop on purpose) is a warning. "
        "Native files are ENV-NATIVE-FILE-MISSING's; byte-code is rewritten."
    ),
    fm=FM,
    evidence=("nautobot/nautobot-docker-compose#126",),
)
def file_gone(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    by_dir = {d.metadata_dir: d for d in m.packages}
    for gone in m.install.missing:
        dist = by_dir.get(gone.owner)
        if dist is None:
            continue
        shown = ", ".join(gone.examples) + (" …" if gone.count > len(gone.examples) else "")
        modules = (
            f"{gone.modules:,} of them modules" if gone.modules else "no module outside its tests among them"
        )
        yield rule.finding(
            dist.name,
            f"{gone.count:,} files that {dist.name} {dist.version}'s RECORD lists are not on disk "
            f"({modules}): {shown}. An import that needs one of them fails.",
            "Reinstall it, so that every file its RECORD lists is there again: "
            + _reinstall(m, [(dist.name, dist.version)], "--force-reinstall --no-deps"),
            base="installed",
            target=f"{gone.count} missing",
            severity="error" if gone.modules else "warning",
        )


@single_rule(
    "ENV-SOURCE-GONE",
    family=FAMILY,
    severity="error",
    title="an editable install's source folder does not exist",
    why=(
        "Invariant: an editable install (PEP 660) imports its code from the folder its direct_url.json "
        "names; the metadata stays when that checkout is moved or deleted (an image that installed with "
        "`pip install -e` and then copied only site-packages), and the import fails while pip still lists "
        "the distribution."
    ),
    fm=FM,
)
def source_gone(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    for gone in m.install.sources_missing:
        yield rule.finding(
            gone.name,
            f"{gone.name} {gone.version} is installed editable from {gone.path}, which does not exist here: "
            f"`import` of it fails, while pip and importlib.metadata still list {gone.name} {gone.version}.",
            f"Put the checkout back at {gone.path} (or reinstall it editable from where it is: "
            f"`pip install -e <its folder>`), or install a built release: "
            + pip_install([(gone.name, gone.version)], on=m),
            base="editable source",
            target=f"{gone.path} missing",
        )
