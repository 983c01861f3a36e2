"""The bottom of envcheck: what every other package may import and nothing here imports from above.

``errors`` (the one-line failures, exit 2), ``deadline`` (one per command), ``findings`` (``Finding``,
``Severity``, ``Rule`` and the registry), ``files`` and ``outputs`` (reading and writing untrusted paths),
``redact`` and ``escape`` (every string on its way out).
"""
