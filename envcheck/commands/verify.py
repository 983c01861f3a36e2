"""``envcheck verify`` and ``envcheck gate``."""
