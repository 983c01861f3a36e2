"""The installation can run on its interpreter: every wheel's tags and every extension module's suffix are
ones the interpreter takes, and the venv agrees with the interpreter that runs it (PEP 405, PEP 425).

The facts are the target's own (``envcheck/inside/venv_facts.py``): the tags are evaluated there with
``packaging.tags.sys_tags()``, the suffixes are its ``importlib.machinery.EXTENSION_SUFFIXES``, and
``pyvenv.cfg`` and the scripts are read there. A manifest from before they were recorded has none, and these
rules say nothing of it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.model import BrokenScript, Distribution, Manifest
from envcheck.manifest.query import canon, windows
from envcheck.manifest.remedy import pip_install, shell_word

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
    """A pasteable command that recreates ``m``'s environment with the interpreter that runs it, then
    reinstalls from the project's requirements."""
    py = m.python
    prefix = shell_word(py.prefix, m)
    minor = _minor(py.version) or "3"
    if windows(m):
        python = shell_word(py.prefix.rstrip(BACKSLASH) + SCRIPTS_EXE, m)
        return f"`py -{minor} -m venv --clear {prefix}; & {python} -m pip install -r requirements.txt`"
    return (
        f"`python{minor} -m venv --clear {prefix} && {shell_word(py.prefix.rstrip('/') + '/bin/python', m)} "
        "-m pip install -r requirements.txt` (or `uv venv --clear` and `uv pip sync` from your lock)"
    )


def _reinstall(m: Manifest, name: str, version: str) -> str:
    """The pasteable reinstall of one distribution's exact version, for this interpreter."""
    return pip_install([(name, version)], on=m, options="--force-reinstall --no-deps")


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
        yield rule.finding(
            wheel.name,
            f"{wheel.name} {wheel.version} was installed from a wheel tagged {tags}; this interpreter "
            f"({py.implementation} {py.version}) supports none of those tags: {what}.",
            f"Reinstall it for this interpreter: {_reinstall(m, wheel.name, wheel.version)}"
            f"; if the whole environment was copied from another Python, recreate it: {_recreate(m)}.",
            target=tags,
            severity="error" if native or not pure else "warning",
        )
    if support.count > len(support.unsupported):
        yield rule.finding(
            "more wheels",
            f"{support.count - len(support.unsupported)} more distributions have wheel tags this interpreter "
            "does not support (the probe records the first ones).",
            f"Recreate the environment with the interpreter that runs it: {_recreate(m)}.",
            target=str(support.count),
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
        yield rule.finding(
            dist.name,
            f"{len(wrong)} extension module(s) of {dist.name} {dist.version} have a suffix this interpreter "
            f"never imports ({shown}); it imports {', '.join(m.python.extension_suffixes)}: "
            f"`import {modules[0]}` fails or falls back to slower code.",
            f"Reinstall it for this interpreter: {_reinstall(m, dist.name, dist.version)}"
            f"; if the environment was copied from another Python, recreate it: {_recreate(m)}.",
            target=", ".join(wrong[:SHOWN]),
            caused_by=cause,
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
    yield rule.finding(
        "pyvenv.cfg",
        f"{cfg.path}: " + "; ".join(problems) + ".",
        f"Recreate the venv with the interpreter that runs it and reinstall: {_recreate(m)}.",
        base=cfg.version or cfg.home,
        target=running,
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
        yield rule.finding(
            "scripts",
            f"None of the console and GUI scripts the distributions declare ({scripts.count}: {shown}) is in "
            f"{scripts.folder}: the site-packages was assembled without its scripts. Running one fails with "
            "'command not found', or runs a command of that name from another environment on PATH; "
            "`python -m` of the module still works.",
            "Install the distributions with pip or uv, which write the scripts: "
            f"{pip_install(dists[:SHOWN], on=m, options='--force-reinstall --no-deps')}.",
            target=str(scripts.count),
            severity="info",
        )
        return
    by_interpreter: dict[tuple[str, str], list[BrokenScript]] = {}
    for script in scripts.broken:
        if script.problem in ("interpreter-missing", "foreign-interpreter") and script.interpreter:
            by_interpreter.setdefault((script.problem, script.interpreter), []).append(script)
            continue
        fix = pip_install(
            [(script.distribution, script.version)], on=m, options="--force-reinstall --no-deps"
        )
        yield rule.finding(
            script.name,
            f"The {script.kind} script {script.name} of {script.distribution} {script.version} "
            f"({script.path}) {_PROBLEMS.get(script.problem, script.problem)}.",
            f"Reinstall the distribution to rewrite its scripts: {fix}.",
            target=script.problem,
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
        yield rule.finding(
            f"#!{interpreter}",
            f"{len(names)} script(s) in {scripts.folder} ({shown}) {_PROBLEMS[problem]}: #!{interpreter}; "
            f"{moved}{total}.",
            f"Recreate the environment where it runs (a venv cannot be moved): {_recreate(m)}; or build it "
            "in place with `uv venv --relocatable`.",
            target=interpreter,
        )
