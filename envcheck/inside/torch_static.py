"""torch's static facts: where its package is and what ``torch/version.py`` says, without importing it."""

import ast
import os
import sys

from .system import read_text


def read_version_file(path):
    """Literal assignments of ``torch/version.py`` without executing it."""
    text = read_text(path)
    if text is None:
        return {}
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return {}
    values = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(value)
            except (ValueError, SyntaxError):
                pass
    return values


def torch_static():
    trees = []
    real_trees = set()  # one folder twice on sys.path (a link to it, a trailing slash) is one tree
    for entry in sys.path:
        candidate = os.path.join(entry or os.getcwd(), "torch")
        if not os.path.isfile(os.path.join(candidate, "__init__.py")):
            continue
        try:
            real = os.path.realpath(candidate)
        except (OSError, ValueError):
            real = os.path.normpath(candidate)
        if real not in real_trees:
            real_trees.add(real)
            trees.append(candidate)
    static = None
    if trees:
        static = version_facts(trees[0], read_version_file(os.path.join(trees[0], "version.py")))
    return {"trees": trees, "static": static}


def version_facts(location, values):
    """torch's static facts: the tree at ``location`` and what its ``version.py`` said (``values``)."""
    return {
        "location": location,
        "version": values.get("__version__"),
        "git_version": values.get("git_version"),
        "cuda": values.get("cuda"),
        "hip": values.get("hip"),
        "debug": values.get("debug"),
    }
