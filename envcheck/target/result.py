"""The one result writer of the target side: ``emit`` redacts the whole result, then writes it atomically.

Both entry modules (``probe``, ``suite``) keep their result in a dict and call ``emit`` after every step,
so a crash or a hang part-way leaves everything learnt before it on disk. Every string of the result
passes ``redact.redact_json`` here, the choke point: no field can reach the file, and so envcheck's
manifest or reports, without passing it (DESIGN §5.8).
"""

import json
import os

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
