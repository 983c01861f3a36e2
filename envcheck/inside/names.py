"""The one native-file suffix pattern and the one distribution-name normaliser of the target side."""

import re

# Shared libraries and extension modules: `.so` with any version parts that start with a digit
# (`libcudart.so.12`, `libMLIRDialectPlugin.so.23.0git`), `.pyd`, `.dll`, `.dylib`. A version part must
# start with a digit so that `notes.so.txt` or `x.so.bak` are not taken for libraries.
NATIVE_SUFFIX = re.compile(r"\.(?:so(?:\.[0-9][0-9A-Za-z_+~-]*)*|pyd|dll|dylib)$", re.I)
# Substrings every native file name holds (see record.hinted_lines): `str.find` skips the rest quickly.
NATIVE_HINTS = (".so", ".pyd", ".dll", ".dylib", ".PYD", ".DLL")

_SEPARATORS = re.compile(r"[-_.]+")


def canonical_name(name):
    # type: (str) -> str
    """PEP 503 normalised distribution name (``Foo.Bar_baz`` -> ``foo-bar-baz``), as
    ``packaging.utils.canonicalize_name``, which the target may lack."""
    return _SEPARATORS.sub("-", name).lower()
