"""Collectors: from a target interpreter (through the probe) and its files to manifest sections."""
