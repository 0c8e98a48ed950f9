"""JSON Schemas of the spec kinds, generated from the pydantic models, for editor completion.

Point an editor at them with a first line such as
``# yaml-language-server: $schema=../../schemas/test.schema.json`` (see docs/specs.md).
"""

from __future__ import annotations

import json

from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..models.specs import CliAgentSpec, HardwareProfiles, ModelSpec, SuiteSpec, TestSpec

#: kind → model; the file written for a kind is ``<kind>.schema.json``.
SCHEMA_KINDS: dict[str, type[BaseModel]] = {
    "model": ModelSpec,
    "cli_agent": CliAgentSpec,
    "test": TestSpec,
    "suite": SuiteSpec,
    "hardware_profiles": HardwareProfiles,
}
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def schema_for(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of one spec kind; ``KeyError`` for an unknown kind."""
    model = SCHEMA_KINDS[kind]
    schema = model.model_json_schema(mode="validation")
    return {"$schema": _DIALECT, "title": f"GripProbe {kind} spec", **{k: v for k, v in schema.items()
                                                                       if k != "title"}}


def write_schemas(out_dir: Path) -> list[Path]:
    """Write ``<kind>.schema.json`` for every spec kind into ``out_dir`` (created if needed).

    Returns the written paths in :data:`SCHEMA_KINDS` order. Output is deterministic, so the files
    can be committed and diffed.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for kind in SCHEMA_KINDS:
        path = out_dir / f"{kind}.schema.json"
        path.write_text(json.dumps(schema_for(kind), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        written.append(path)
    return written
