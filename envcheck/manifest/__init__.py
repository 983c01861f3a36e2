"""The manifest: models, validation, and atomic load / save."""

from envcheck.manifest.io import dumps, load, loads, save
from envcheck.manifest.model import SCHEMA_VERSION, Manifest

__all__ = ["SCHEMA_VERSION", "Manifest", "dumps", "load", "loads", "save"]
