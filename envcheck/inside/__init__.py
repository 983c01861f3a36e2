"""Code that runs *inside the target interpreter*: standard library only, Python 3.8 and newer.

envcheck runs this package in a foreign interpreter the way pipdeptree runs its own ``_non_host`` code:
``envcheck.inside.copying.copy_package`` copies it into the runner's temporary folder as the top-level
package ``envcheck_target``, and the runner starts ``python -c BOOT FOLDER envcheck_target.probe OUT ...``,
whose boot line puts FOLDER first on ``sys.path`` and runs the entry module with ``runpy`` (``-m``
semantics, no ``PYTHONPATH``, which would leak into the recorded environment and every child process).

Rules for every module here:
- imports from the standard library, or relative imports inside this package (never ``envcheck``, which
  may not be installed in the target); torch, numpy, threadpoolctl only where the target has them;
- Python 3.8 syntax and library (``tests/inside/test_probe_compat.py`` checks both);
- importing a module has no side effects: envcheck imports ``envcheck.inside.redact`` in its own process.

Entry modules: ``probe`` (the environment facts) and ``suite`` (the smoke-suite harness). Both write their
result through the one ``result.emit``, which passes every string through the one redactor.
"""
