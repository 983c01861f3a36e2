"""The installation can run on its interpreter: every wheel's tags and every extension module's suffix are
ones the interpreter takes, and the venv agrees with the interpreter that runs it (PEP 405, PEP 425).

The facts are the target's own (``envcheck/inside/venv_facts.py``): the tags are evaluated there with
``packaging.tags.sys_tags()``, the suffixes are its ``importlib.machinery.EXTENSION_SUFFIXES``, and
``pyvenv.cfg`` and the scripts are read there. A manifest from before they were recorded has none, and these
rules say nothing of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from urllib.parse import unquote, urlsplit

from envcheck.core.escape import one_line
from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import Action, Install, Manual, Rebuild, make
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.model import BrokenScript, Distribution, Manifest
from envcheck.manifest.provenance import source
from envcheck.manifest.query import canon, torch_index_label, windows
from envcheck.manifest.remedy import install_action, remedy_text, shell_word

FAMILY = "interpreter"

# The part of an extension module's file name after its module name that says which interpreter it is
# for: ``.cpython-312-x86_64-linux-gnu.so``, ``.abi3.so``, ``.cp312-win_amd64.pyd``, ``.pypy310-pp73-...so``;
# a bare ``.pyd`` is an extension module too. A plain ``.so`` (``libtorch_cpu.so``) says nothing: shared
# libraries are loaded by path and are no business of the import system.
PYTHON_TAGGED = re.compile(
    r"\.(?:(?:cpython-\d|cp\d|pypy\d|graalpy|abi3)[^/\\]*\.(?:so|pyd)|pyd)", re.IGNORECASE
)
# A venv's python on Windows, below its prefix.
BACKSLASH = "\\"
SCRIPTS_EXE = BACKSLASH + "Scripts" + BACKSLASH + "python.exe"
# How many files, scripts or tags a message names.
SHOWN = 4


def _minor(version: str | None) -> str | None:
    found = re.match(r"(\d+)\.(\d+)", version or "")
    return f"{found.group(1)}.{found.group(2)}" if found else None


def _recreate(m: Manifest) -> str:
    """How to recreate ``m``'s environment with the interpreter that runs it, as a manual step's sentence:
    no command does it, since what the environment held comes from the project's own lock or requirements,
    which envcheck does not know."""
    py = m.python
    minor = _minor(py.version) or "3"
    if windows(m):
        command = f"py -{minor} -m venv --clear {shell_word(py.prefix, m)}"
    else:
        command = f"python{minor} -m venv --clear {shell_word(py.prefix, m)}"
    return (
        f"recreate the environment at {_inert(py.prefix)} with Python {minor}, the interpreter that runs it "
        f"(`{command}`, or `uv venv --clear`), then install its packages again from the project's lock or "
        "requirements file"
    )


def _direct(dist: Distribution | None) -> tuple[str, dict[str, object]]:
    """The URL ``dist``'s ``direct_url.json`` names and the file itself (empty for an index's install)."""
    direct = dist.direct_url if dist is not None and isinstance(dist.direct_url, dict) else {}
    url = direct.get("url")
    return (url if isinstance(url, str) else ""), direct


def _file_path(url: str) -> str:
    """The path of a ``file:`` URL (``file:///srv/pkg`` -> ``/srv/pkg``; ``file:///C:/x`` -> ``C:/x``)."""
    path = unquote(urlsplit(url).path)
    return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" else path


def _reinstall(m: Manifest, name: str, version: str, *, same_wheel: bool) -> Action:
    """``name==version`` installed again for this interpreter (``--force-reinstall --no-deps``: every file of
    its RECORD and its scripts written again), from where it came: its index (PyTorch's for a labelled
    torch build, ``install_action``), the wheel its ``direct_url.json`` names when ``same_wheel`` (a wheel
    for this interpreter), its source folder or archive built again. A wheel file for another interpreter,
    an editable checkout or a VCS commit is a manual step that names it."""
    dist = next((d for d in m.packages if canon(d.name) == canon(name) and not d.shadowed), None)
    url, direct = _direct(dist)
    what = f"reinstall {name}=={version} for this interpreter"
    if dist is None or not url:
        return install_action([(name, version)], source=m, force=True, no_deps=True)
    info = direct.get("dir_info")
    if isinstance(direct.get("vcs_info"), dict) or (isinstance(info, dict) and info.get("editable") is True):
        return Manual(text=_inert(f"{what} from its source ({source(dist).shown}), as it was installed"))
    if urlsplit(url).path.lower().endswith(".whl"):
        if same_wheel:
            return make(
                lambda: Install(pins=((name, version),), wheel_url=url, force=True, no_deps=True), what
            )
        return Manual(
            text=_inert(
                f"install the {name} {version} wheel built for this interpreter ({m.python.implementation} "
                f"{m.python.version}): the one installed came from a wheel file for another one "
                f"({source(dist).shown})"
            )
        )
    built = _file_path(url) if url.startswith("file:") else url
    return make(lambda: Rebuild(name=name, version=version, source=built), what)


def _reinstalls(m: Manifest, pins: Iterable[tuple[str, str]], *, same_wheel: bool) -> list[Action]:
    """``_reinstall`` of each pin, the ones from the default index in one command."""
    out: list[Action] = []
    plain: list[tuple[str, str]] = []
    for name, version in dict.fromkeys(pins):
        dist = next((d for d in m.packages if canon(d.name) == canon(name) and not d.shadowed), None)
        if not _direct(dist)[0] and not torch_index_label(version):
            plain.append((name, version))
        else:
            out.append(_reinstall(m, name, version, same_wheel=same_wheel))
    if plain:
        out.insert(0, install_action(plain, source=m, force=True, no_deps=True))
    return out


def _inert(text: str) -> str:
    return one_line(text).replace("`", "'")


def _trust(actions: Iterable[Action]) -> str:
    """What a command built from the manifest's recorded URL asks of the reader."""
    if any(isinstance(a, Install) and a.wheel_url is not None for a in actions):
        return "(the wheel's URL as its direct_url.json recorded it: check that you trust it)"
    if any(isinstance(a, Rebuild) for a in actions):
        return "(built again from the source its direct_url.json recorded, as it was installed)"
    return ""


def _extension_file(path: str) -> tuple[str, str] | None:
    """``(module, suffix)`` of a RECORD path that is an extension module with a python-tagged suffix
    (``torch/_C.cpython-312-x86_64-linux-gnu.so`` -> ``torch._C``, ``.cpython-312-x86_64-linux-gnu.so``), or
    None for anything else (a plain shared library, a file installed outside the site folder)."""
    if path.startswith(("../", "/")) or ".data/" in path:
        return None
    folder, _, name = path.rpartition("/")
    stem, dot, rest = name.partition(".")
    if not dot or not stem:
        return None
    suffix = "." + rest
    if not PYTHON_TAGGED.fullmatch(suffix):
        return None
    module = (folder.replace("/", ".") + "." + stem) if folder else stem
    return module, suffix


def wrong_suffix_files(m: Manifest, dist: Distribution) -> list[str]:
    """The RECORD paths of ``dist``'s extension modules whose suffix ``m``'s interpreter never imports."""
    suffixes = set(m.python.extension_suffixes or ())
    out = []
    for native in dist.native_files:
        found = _extension_file(native.path)
        if found is not None and found[1] not in suffixes:
            out.append(native.path)
    return out


def _unsupported(m: Manifest) -> dict[str, tuple[str, ...]]:
    """Canonical name -> tags of each distribution whose wheel this interpreter does not take."""
    support = m.python.wheel_support
    if support is None:
        return {}
    return {canon(w.name): tuple(w.tags) for w in support.unsupported}


@single_rule(
    "ENV-WHEEL-TAG",
    family=FAMILY,
    severity="error",
    title="a wheel was installed for another interpreter",
    why=(
        "A wheel's WHEEL file lists the tags (PEP 425: python-abi-platform) of the interpreters that may "
        "run it, and pip and uv install one only where a tag matches packaging.tags.sys_tags(). A wheel "
        "that no tag of this interpreter matches got here another way (a site-packages or a venv copied "
        "from a build stage with another Python, an install for another --python-version): its compiled "
        "modules are for another ABI and are never imported. A pure-Python wheel of another tag may still "
        "run (a warning)."
    ),
    fm=("FM-28",),
    fixes=("install", "rebuild"),
    static_facts=False,  # live facts of the target: a predicted manifest has none
    evidence=("laoshanxi/app-mesh#214",),
)
def wheel_tag(rule: Rule, m: Manifest) -> Iterator[Finding]:
    support = m.python.wheel_support
    if support is None:
        return
    py = m.python
    for wheel in support.unsupported:
        dist = next((d for d in m.packages if canon(d.name) == canon(wheel.name) and not d.shadowed), None)
        native = dist is not None and bool(dist.native_files)
        pure = all(t.split("-")[1:2] == ["none"] and t.endswith("-any") for t in wheel.tags)
        tags = ", ".join(wheel.tags[:SHOWN]) or "none"
        what = (
            "its compiled modules are built for that ABI and are never imported here"
            if native or not pure
            else "it ships no compiled code, so it may still run, but no installer would have put it here"
        )
        actions = (_reinstall(m, wheel.name, wheel.version, same_wheel=False),)
        note = f"If the whole environment was copied from another Python, {_recreate(m)} instead."
        yield rule.finding(
            wheel.name,
            f"{wheel.name} {wheel.version} was installed from a wheel tagged {tags}; this interpreter "
            f"({py.implementation} {py.version}) supports none of those tags: {what}.",
            f"Reinstall it for this interpreter: {remedy_text(actions, m, note=_trust(actions))}. {note}",
            target=tags,
            severity="error" if native or not pure else "warning",
            actions=actions,
        )
    if support.count > len(support.unsupported):
        step = Manual(text=_recreate(m))
        yield rule.finding(
            "more wheels",
            f"{support.count - len(support.unsupported)} more distributions have wheel tags this interpreter "
            "does not support (the probe records the first ones).",
            f"The environment was made for another Python: {remedy_text([step], m)}.",
            target=str(support.count),
            actions=(step,),
        )


@single_rule(
    "ENV-EXT-SUFFIX",
    family=FAMILY,
    severity="error",
    title="extension modules carry a suffix this interpreter never imports",
    why=(
        "The import system looks for an extension module only under the file names of "
        "importlib.machinery.EXTENSION_SUFFIXES (.cpython-311-x86_64-linux-gnu.so, .abi3.so, .so on "
        "CPython 3.11): torch/_C.cpython-312-x86_64-linux-gnu.so is invisible to 3.11, and `import torch` "
        "fails with 'No module named torch._C' although the file is there. A stable-ABI .abi3.so is taken "
        "by every CPython that lists it; a plain shared library (torch/lib/libtorch_cpu.so) is loaded by "
        "path and is not checked."
    ),
    fm=("FM-28",),
    fixes=("install", "rebuild"),
    static_facts=False,  # live facts of the target: a predicted manifest has none
    evidence=("laoshanxi/app-mesh#214",),
)
def extension_suffix(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if not m.python.extension_suffixes:
        return
    unsupported = _unsupported(m)
    for dist in m.packages:
        if dist.shadowed:
            continue
        wrong = wrong_suffix_files(m, dist)
        if not wrong:
            continue
        cause = f"ENV-WHEEL-TAG:{dist.name}" if canon(dist.name) in unsupported else None
        shown = ", ".join(wrong[:SHOWN]) + (f" and {len(wrong) - SHOWN} more" if len(wrong) > SHOWN else "")
        modules = sorted({found[0] for path in wrong[:SHOWN] if (found := _extension_file(path))})
        # Not the same wheel again: a wheel whose tag this interpreter takes holds these files.
        actions = (_reinstall(m, dist.name, dist.version, same_wheel=False),)
        note = f"If the environment was copied from another Python, {_recreate(m)} instead."
        yield rule.finding(
            dist.name,
            f"{len(wrong)} extension module(s) of {dist.name} {dist.version} have a suffix this interpreter "
            f"never imports ({shown}); it imports {', '.join(m.python.extension_suffixes)}: "
            f"`import {modules[0]}` fails or falls back to slower code.",
            f"Reinstall it for this interpreter: {remedy_text(actions, m, note=_trust(actions))}. {note}",
            target=", ".join(wrong[:SHOWN]),
            caused_by=cause,
            actions=actions,
        )


@single_rule(
    "ENV-VENV-INTERPRETER",
    family=FAMILY,
    severity="error",
    title="the venv's pyvenv.cfg disagrees with the interpreter that runs it",
    why=(
        "A venv is bound to its base interpreter by pyvenv.cfg (PEP 405): `home` is the base's folder and "
        "`version` the Python it was made with. Packages live in lib/pythonX.Y/site-packages of that "
        "version: when the base is replaced by another minor (a base-image bump under a kept venv) the "
        "venv's python runs the new one, its site-packages is not on sys.path and every installed package "
        "is gone; when `home` no longer exists, the venv cannot find its base (python -m venv --upgrade, "
        "the Windows launcher and getpath's prefix search all start from it)."
    ),
    fm=("FM-28",),
    static_facts=False,  # live facts of the target: a predicted manifest has none
    evidence=("python/cpython#122099", "python/cpython#127440"),
)
def venv_interpreter(rule: Rule, m: Manifest) -> Iterator[Finding]:
    cfg = m.python.venv_config
    if cfg is None or not cfg.read:
        return
    running = m.python.version
    problems = []
    made = _minor(cfg.version)
    if made is not None and made != _minor(running):
        problems.append(
            f"it was made with Python {cfg.version} and Python {running} runs it: the packages installed "
            f"under lib/python{made} are not on this interpreter's sys.path"
        )
    if not cfg.home:
        problems.append("it names no `home` (the base interpreter's folder)")
    elif not cfg.home_exists:
        problems.append(f"its `home` {cfg.home} does not exist (the base interpreter was moved or removed)")
    elif cfg.home_python is None:
        problems.append(f"its `home` {cfg.home} holds no python")
    if not problems:
        return
    step = Manual(text=_recreate(m))
    yield rule.finding(
        "pyvenv.cfg",
        f"{cfg.path}: " + "; ".join(problems) + ".",
        f"The venv cannot be repaired in place: {remedy_text([step], m)}.",
        base=cfg.version or cfg.home,
        target=running,
        actions=(step,),
    )


_PROBLEMS = {
    "missing": "is declared but not in the scripts folder",
    "interpreter-missing": "names an interpreter that does not exist",
    "foreign-interpreter": "names another environment's interpreter, which runs without this one's packages",
    "no-interpreter-line": "has no #! line",
    "not-executable": "is not executable",
    "unreadable": "cannot be read",
}


@single_rule(
    "ENV-SCRIPT-BROKEN",
    family=FAMILY,
    severity="error",
    title="declared console or GUI scripts would not run",
    why=(
        "Every console_scripts / gui_scripts entry of an entry_points.txt is a launcher the installer wrote "
        "into the environment's scripts folder, whose #! line names the environment's python by absolute "
        "path (or, from `uv venv --relocatable`, the python beside the script). A venv moved or copied to "
        "another path keeps #!/old/path/bin/python: the script fails with 'bad interpreter: No such file "
        "or directory', or runs another environment's python without this one's packages."
    ),
    fm=("FM-28",),
    fixes=("install", "rebuild"),
    static_facts=False,  # live facts of the target: a predicted manifest has none
    evidence=("astral-sh/uv-docker-example#38", "pypa/virtualenv#2113"),
)
def script_broken(rule: Rule, m: Manifest) -> Iterator[Finding]:
    scripts = m.python.scripts
    if scripts is None or not scripts.broken:
        return
    if scripts.count == scripts.checked and all(s.problem == "missing" for s in scripts.broken):
        # Not one declared script exists: no installer wrote this folder (the site-packages was copied or
        # unpacked alone). Python code runs; only the commands are absent, and that is said, not failed.
        names = sorted({s.name for s in scripts.broken})
        dists = sorted({(s.distribution, s.version) for s in scripts.broken})
        shown = ", ".join(names[:SHOWN]) + (
            f" and {scripts.count - SHOWN} more" if scripts.count > SHOWN else ""
        )
        actions = tuple(_reinstalls(m, dists, same_wheel=True))
        yield rule.finding(
            "scripts",
            f"None of the console and GUI scripts the distributions declare ({scripts.count}: {shown}) is in "
            f"{scripts.folder}: the site-packages was assembled without its scripts. Running one fails with "
            "'command not found', or runs a command of that name from another environment on PATH; "
            "`python -m` of the module still works.",
            "Install the distributions again with pip, which writes their scripts: "
            f"{remedy_text(actions, m, note=_trust(actions))}.",
            target=str(scripts.count),
            severity="info",
            actions=actions,
        )
        return
    by_interpreter: dict[tuple[str, str], list[BrokenScript]] = {}
    for script in scripts.broken:
        if script.problem in ("interpreter-missing", "foreign-interpreter") and script.interpreter:
            by_interpreter.setdefault((script.problem, script.interpreter), []).append(script)
            continue
        actions = (_reinstall(m, script.distribution, script.version, same_wheel=True),)
        yield rule.finding(
            script.name,
            f"The {script.kind} script {script.name} of {script.distribution} {script.version} "
            f"({script.path}) {_PROBLEMS.get(script.problem, script.problem)}.",
            "Reinstall the distribution, which writes its scripts again: "
            f"{remedy_text(actions, m, note=_trust(actions))}.",
            target=script.problem,
            actions=actions,
        )
    for (problem, interpreter), group in sorted(by_interpreter.items()):
        names = sorted(s.name for s in group)
        shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        moved = (
            "the environment was moved or copied from where it was built"
            if problem == "interpreter-missing"
            else "the scripts were written by another environment"
        )
        total = f" ({scripts.count} broken scripts in all)" if scripts.count > len(scripts.broken) else ""
        # pip writes each script's #! line for the interpreter that runs it: this environment's own python.
        actions = tuple(_reinstalls(m, sorted({(s.distribution, s.version) for s in group}), same_wheel=True))
        note = (
            "A venv keeps other absolute paths of where it was made (bin/activate): where it is meant to "
            "move, build it with `uv venv --relocatable`, or make it where it runs."
        )
        yield rule.finding(
            f"#!{interpreter}",
            f"{len(names)} script(s) in {scripts.folder} ({shown}) {_PROBLEMS[problem]}: #!{interpreter}; "
            f"{moved}{total}.",
            "Reinstall the distributions that own them, which writes their scripts for this environment's "
            f"python: {remedy_text(actions, m, note=_trust(actions))}. {note}",
            target=interpreter,
            actions=actions,
        )
