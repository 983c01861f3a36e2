"""Comparing environments: rules over manifests produce ranked ``Finding``s. Pure: no I/O."""
