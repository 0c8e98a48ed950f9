"""Files on disk: results (SPEC §7: run directories, atomic writes, reading cases back, checking results
paths), and the trees agents leave (``trees``: opened without following a link, removed without recursion)."""

from .files import NotRegularFile, Stored, read_regular, read_stored
from .layout import (
    RunFolder, allocate_run_dir, atomic_write_bytes, atomic_write_json, atomic_write_text, flush_folder, read_case,
)
from .roots import ResultsPathError, check_readable_root, check_run_dir, prepare_results_root

__all__ = ["NotRegularFile", "ResultsPathError", "Stored", "RunFolder", "allocate_run_dir", "atomic_write_bytes",
           "atomic_write_json", "atomic_write_text", "check_readable_root", "flush_folder", "check_run_dir",
           "prepare_results_root", "read_case", "read_regular", "read_stored"]
