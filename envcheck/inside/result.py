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


def emit(path, result, growing=None):
    # type: (str | None, dict, Growing | None) -> None
    """Write ``redact_json(result)`` to ``path`` through ``path + '.part'`` and a rename: a reader sees the
    previous complete result or this one, never half of one. ``path`` None (imported, not run) writes
    nothing. ``growing``: the lists of ``result`` that only grow by appends, each item redacted and
    encoded once (the file is the same). Raises ``OSError`` when the file cannot be written."""
    if path is None:
        return
    text = json.dumps(redact_json(result)) if growing is None else growing.encode(result)
    tmp = path + ".part"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


class Growing(object):
    """The JSON text of a result whose lists named ``keys`` only grow by appends (an item, once appended,
    never changes): each item passes ``redact_json`` and ``json.dumps`` once, at the depth it has in the
    result, so a result written after every step costs the new items, not the whole result again (the
    smoke suite's, 40 checks and their outputs written twice a check, spent 0.4 s re-encoding itself)."""

    def __init__(self, keys):
        # type: (tuple[str, ...]) -> None
        self.keys = keys
        self.texts = {key: [] for key in keys}  # type: dict[str, list[str]]

    def encode(self, result):
        # type: (dict) -> str
        head = {k: v for k, v in result.items() if k not in self.keys}
        parts = []
        for key in self.keys:
            items = result.get(key)
            if not isinstance(items, list):
                continue
            texts = self.texts[key]
            if len(items) < len(texts):  # the list was replaced: start again
                del texts[:]
            for item in items[len(texts) :]:
                texts.append(json.dumps(redact_json(item, 2)))
            parts.append("%s: [%s]" % (json.dumps(redact_json(key)), ", ".join(texts)))
        text = json.dumps(redact_json(head))
        if not parts:
            return text
        return text[:-1] + (", " if head else "") + ", ".join(parts) + "}"


def finish(path, result, growing=None):
    # type: (str | None, dict, Growing | None) -> None
    """The last step of an entry module: mark ``result`` done, write it, and leave at once with exit 0.
    The result is on disk, so the interpreter's teardown is skipped: the modules imported in the target
    (torch, the application's) run atexit hooks and join thread pools there, which only add to the wall
    time, and may hang or crash after the work is done."""
    result["stage"] = "done"
    result["done"] = True
    emit(path, result, growing)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
