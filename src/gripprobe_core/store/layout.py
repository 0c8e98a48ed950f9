"""``results/runs/<RUN_ID>/`` layout and crash-safe writes.

Every file a reader relies on (case.json, manifest.json, events, reports) is written to a temporary
sibling and renamed into place, so a kill never leaves a half-written file behind. A case's files are
written without waiting for the disk (``sync=False``); :func:`flush_folder` then makes them durable in
one go before case.json, which is written last and synced with its directory, so a case.json that
exists after a power cut has its evidence beside it. The temporary file is
created with mode 0666 and the kernel applies the user's umask, so the files a run writes are 0644
under umask 022 and 0640 under 027, like any other file the user creates. Stored files are read back
through :class:`~gripprobe_core.store.files.Stored` (no link followed anywhere below the run folder, never a
FIFO or device).
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, BinaryIO

from ..jsonl import dumps
from ..timeutil import run_id_stamp
from .files import OpenFolder, Stored, read_regular
from .roots import ResultsPathError, explain_os_error

if TYPE_CHECKING:  # the models (pydantic) load when a case is parsed: a reader of lean facts never needs them
    from ..models.results import CaseResult

#: Largest case.json / manifest.json read back (a bigger one is treated as unreadable).
STORED_JSON_LIMIT = 64 * 1024 * 1024


def _create_temp(path: Path) -> tuple[int, Path]:
    """An exclusive new sibling of ``path``; mode 0666 minus the umask (mkstemp would force 0600)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    for _ in range(100):
        tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {path}")  # pragma: no cover


def atomic_write_bytes(path: Path, data: bytes, *, sync: bool = True) -> None:
    """Write ``data`` to a temporary sibling and rename it over ``path``; with ``sync`` (the default) the
    data is on disk before the rename (and the folder after it)."""
    _atomic_write(path, lambda fh: fh.write(data), sync)


def atomic_write_chunks(path: Path, chunks: Iterable[str], *, sync: bool = True) -> None:
    """:func:`atomic_write_text` of text that comes in pieces (a page rendered as a stream): each piece encoded
    and written as it comes, so the whole text is never held (a 10k-case aggregate page is 5.6 MB of UTF-8, twice
    that as a Python string). A stream that fails leaves ``path`` as it was."""
    def write(fh: BinaryIO) -> None:
        for chunk in chunks:
            fh.write(chunk.encode("utf-8", errors="backslashreplace"))

    _atomic_write(path, write, sync)


def _atomic_write(path: Path, write: Callable[[BinaryIO], object], sync: bool) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            if sync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
        if sync:
            _fsync_dir(path.parent)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: Path, text: str, *, sync: bool = True) -> None:
    """UTF-8. A lone surrogate (a file name's undecodable byte that escaped display escaping) becomes
    ``\\udcff`` instead of failing the write; in JSON text that is the same string again."""
    atomic_write_bytes(path, text.encode("utf-8", errors="backslashreplace"), sync=sync)


def json_bytes(obj: Any) -> bytes:
    """The bytes :func:`atomic_write_json` writes for ``obj`` (what a signature over a JSON file covers): strict
    JSON (never ``NaN``/``Infinity``), C1 controls escaped (:func:`gripprobe_core.jsonl.dumps`)."""
    return (dumps(obj, indent=2, ensure_ascii=False, default=str) + "\n").encode("utf-8", errors="backslashreplace")


def atomic_write_json(path: Path, obj: Any, *, sync: bool = True) -> None:
    atomic_write_bytes(path, json_bytes(obj), sync=sync)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@lru_cache(maxsize=1)
def _syncfs() -> Any:
    """libc's ``syncfs`` (Linux), or None; looked up on the first flush (``ctypes.util.find_library`` runs
    ``ldconfig -p``, 5-7 ms of every start; the C library this process already runs is found by ``CDLL(None)``)."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None


def prepare_flush() -> None:
    """Look ``syncfs`` up ahead of the first :func:`flush_folder` (importing ``ctypes``: 1-2 ms that would
    otherwise fall in the first case's write)."""
    _syncfs()


def flush_folder(path: Path) -> None:
    """Make everything written under ``path`` durable at once: one ``syncfs`` of its filesystem (Linux),
    else an fsync of every file and folder in it. Never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return
    try:
        syncfs = _syncfs()
        if syncfs is not None and syncfs(fd) == 0:
            return
        for root, dirs, files in os.walk(path):
            for name in files:
                try:
                    f = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
                except OSError:
                    continue
                try:
                    os.fsync(f)
                except OSError:
                    pass
                finally:
                    os.close(f)
            _fsync_dir(Path(root))
    finally:
        os.close(fd)


def allocate_run_dir(results_root: Path) -> tuple[str, Path]:
    """Create ``runs/<RUN_ID>`` exclusively. RUN_ID is UTC ``YYYYMMDDTHHMMSSZ``; a start in the same
    second as another gets ``-2``, ``-3`` ... so parallel starts never share a directory."""
    runs = results_root / "runs"
    stem = run_id_stamp()
    for n in range(1, 10_000):
        run_id = stem if n == 1 else f"{stem}-{n}"
        path = runs / run_id
        try:
            runs.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError:
            if runs.is_dir():
                continue
            raise ResultsPathError(explain_os_error(f"--results {results_root}", runs, FileExistsError(),
                                                    creating=True)) from None
        except OSError as exc:
            raise ResultsPathError(explain_os_error(f"--results {results_root}", path, exc, creating=True)) from None
        return run_id, path
    raise RuntimeError("cannot allocate a run directory")  # pragma: no cover


@dataclass(frozen=True)
class RunFolder:
    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest(self) -> Path:
        return self.path / "manifest.json"

    @property
    def cases(self) -> Path:
        return self.path / "cases"

    @property
    def reports(self) -> Path:
        return self.path / "reports"

    def case(self, case_id: str) -> Path:
        return self.cases / case_id

    @property
    def stored(self) -> Stored:
        """The run folder, to read below it without following a link (``run.stored / "cases" / name``)."""
        return Stored(self.path)

    def stored_case(self, case_id: str) -> Stored:
        return self.stored / "cases" / case_id

    def case_names(self) -> list[str]:
        """The case folders (real folders: a link in ``cases/``, or ``cases/`` as a link, is no case), sorted."""
        return (self.stored / "cases").folders()

    def read_manifest(self) -> dict[str, Any]:
        """manifest.json as a dict; ``{}`` when it is missing or unreadable (a killed or foreign run)."""
        try:
            data = json.loads(read_regular(self.manifest, STORED_JSON_LIMIT))
        except (OSError, ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) else {}

    def case_entries(self) -> list[tuple[str, CaseResult | None]]:
        """Every case directory with its result (None when case.json is missing or unreadable), sorted."""
        try:  # cases/ opened once, each case.json read below it (no link followed anywhere below the run folder)
            cases = (self.stored / "cases").opened()
        except OSError:
            return []
        with cases:
            return [(name, _read_case_below(cases, name)) for name in cases.folders()]

    def case_results(self) -> list[CaseResult]:
        """Every readable case.json, sorted by case id (unreadable ones are skipped)."""
        return [res for _, res in self.case_entries() if res is not None]


def read_case(path: Path | Stored) -> CaseResult | None:
    """The validated case.json at ``path`` (every field checked, the status one of ``STATUSES``), or None
    when it is missing, not a regular file (a link in its way included, for a :class:`Stored` path), too
    large, not JSON or not a valid result."""
    try:
        limit = STORED_JSON_LIMIT + 1
        data = path.read(limit) if isinstance(path, Stored) else read_regular(path, limit)
    except OSError:
        return None
    return parse_case(data)


def _read_case_below(cases: OpenFolder, name: str) -> CaseResult | None:
    try:
        data = cases.read(f"{name}/case.json", STORED_JSON_LIMIT + 1)
    except OSError:
        return None
    return parse_case(data)


def parse_case(data: bytes) -> CaseResult | None:
    """The validated result in the bytes of a case.json (:func:`read_case` once the file is read), or None.

    Parsed and checked in one pass by the model's own parser (pydantic-core's, in Rust: as strict as the
    stored-value rules want: no ``NaN``/``Infinity``, no number past its range, the whole file validated;
    tests/test_stored_values.py), never ``json.loads`` first and validated after (twice the time)."""
    if len(data) > STORED_JSON_LIMIT:
        return None
    from ..models.results import CaseResult

    try:
        return CaseResult.model_validate_json(data)
    except (ValueError, RecursionError):
        return None
