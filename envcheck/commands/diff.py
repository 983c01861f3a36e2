"""``envcheck diff``, ``envcheck doctor`` and ``envcheck rules``."""
