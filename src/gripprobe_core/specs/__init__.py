"""Spec loading and validation (SPEC §3): :func:`load_specs` returns a :class:`SpecSet` or raises one
:class:`~gripprobe_core.errors.SpecError` naming file, line and key of every problem."""

from .issues import SpecIssue
from .loader import KIND_DIRS, SpecSet, load_specs, shipped_specs_dir, spec_files, spec_layers
from .schema import SCHEMA_KINDS, schema_for, write_schemas
from .yaml_source import SourceMap, load_yaml_file

__all__ = [
    "KIND_DIRS", "SCHEMA_KINDS", "SourceMap", "SpecIssue", "SpecSet", "load_specs", "load_yaml_file",
    "schema_for", "shipped_specs_dir", "spec_files", "spec_layers", "write_schemas",
]
