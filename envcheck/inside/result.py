"""The one result writer of the target side: ``emit`` redacts the whole result, then writes it atomically.

The entry modules (``probe``, ``suite``, ``app_imports``) keep their result in a dict and call ``emit``
after every step, so a crash or a hang part-way leaves everything learnt before it on disk. Every string
of the result passes ``redact.redact_json`` here, the choke point: no field can reach the file, and so
envcheck's manifest or reports, without passing it (docs/architecture.md, docs/guarantees.md).
"""

import json
import os
import sys

from .redact import redact_json


def emit(path, result):
    # type: (str | None, dict) -> None
    """Write ``redact_json(result)`` to ``path`` through ``path + '.part'`` and a rename: a reader sees the
    previous complete result or this one, never half of one. ``path`` None (imported, not run) writes
    nothing. Raises ``OSError`` when the file cannot be written."""
    if path is None:
        return
    data = redact_json(result)
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def finish(path, result):
    # type: (str | None, dict) -> None
    """The last step of an entry module: mark ``result`` done, write it, and leave at once with exit 0.
    The result is on disk, so the interpreter's teardown is skipped: the modules imported in the target
    (torch, the application's) run atexit hooks and join thread pools there, which only add to the wall
    time, and may hang or crash after the work is done."""
    result["stage"] = "done"
    result["done"] = True
    emit(path, result)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
