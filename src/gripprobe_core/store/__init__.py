"""Results on disk (SPEC §7): run directories, atomic writes, reading cases back."""

from .layout import RunDir, allocate_run_dir, atomic_write_bytes, atomic_write_json, atomic_write_text, read_case

__all__ = ["RunDir", "allocate_run_dir", "atomic_write_bytes", "atomic_write_json", "atomic_write_text",
           "read_case"]
