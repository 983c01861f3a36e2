"""Formatters: each returns a ``str``; only the CLI writes."""
