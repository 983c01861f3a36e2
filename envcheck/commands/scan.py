"""``envcheck scan``: the static native tree of a wheel, an unpacked tree or a site-packages folder."""
