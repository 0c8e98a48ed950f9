"""Spec loading and validation (SPEC §3): :func:`load_specs` returns a :class:`SpecSet` or raises one
:class:`~gripprobe_core.errors.SpecError` naming file, line and key of every problem."""

from .issues import SpecIssue
from .loader import KIND_DIRS, SpecSet, find_specs_root, load_specs, spec_files
from .schema import SCHEMA_KINDS, schema_for, write_schemas
from .yaml_source import SourceMap, load_yaml_file

__all__ = [
    "KIND_DIRS", "SCHEMA_KINDS", "SourceMap", "SpecIssue", "SpecSet", "find_specs_root", "load_specs",
    "load_yaml_file", "schema_for", "spec_files", "write_schemas",
]
