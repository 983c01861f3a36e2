"""The import-and-verify smoke suite: ``runner.run_suite`` runs it in the target interpreter,
``compare.compare`` checks its results against goldens recorded in a manifest, ``compare.outcomes`` reports
a run on its own.

Nothing is imported here: a diff rule that only needs ``verify.fp_mode``'s words must not pay for the
runner, its process registry and ``concurrent.futures`` on every ``envcheck diff``.
"""
