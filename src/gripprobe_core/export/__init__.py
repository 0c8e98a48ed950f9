"""``gripprobe export``: a stored run as JUnit XML, OpenTelemetry GenAI spans (OTLP/HTTP) or ATIF trajectories.

Each format reads the run the same way (:mod:`.common`): every case directory, its case.json validated,
the measured phase's normalized events paired into a timeline; nothing on disk is trusted (no symlink is
followed, garbage is skipped and reported, never a crash). See docs/export.md.
"""

from .atif import SCHEMA_VERSION as ATIF_SCHEMA_VERSION, build_trajectory, write_atif
from .common import ExportCase, Timeline, load_cases, read_timeline
from .junit import render_junit, write_junit
from .otlp import DEFAULT_ENDPOINT, OtlpError, OtlpSummary, export_otlp

FORMATS = ("junit", "otlp", "atif")

__all__ = ["ATIF_SCHEMA_VERSION", "DEFAULT_ENDPOINT", "FORMATS", "ExportCase", "OtlpError", "OtlpSummary", "Timeline",
           "build_trajectory", "export_otlp", "load_cases", "read_timeline", "render_junit", "write_atif",
           "write_junit"]
