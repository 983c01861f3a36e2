"""Write the manifest's JSON Schema, derived from the models: ``python -m envcheck.manifest.schema``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from envcheck.manifest.codec import json_schema
from envcheck.manifest.io import write_atomic
from envcheck.manifest.model import SCHEMA_VERSION, Manifest

DEFAULT = Path(__file__).parents[2] / "manifests" / "envcheck-manifest.schema.json"


def schema_text() -> str:
    schema = json_schema(Manifest)
    schema["title"] = f"envcheck manifest, schema_version {SCHEMA_VERSION}"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT
    write_atomic(target, schema_text())
    print(f"wrote {target}")
