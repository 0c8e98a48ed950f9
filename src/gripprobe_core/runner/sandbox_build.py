"""The sandbox's compiled init (``sandbox_init.c``): built with the system's C compiler on first use, cached.

A sandboxed phase's init is on its critical path: the Python init (:mod:`.sandbox_init`) costs an
interpreter's start, about 11 ms a phase on an idle machine; the same contract compiled costs under 1 ms
(docs/sandbox.md, Cost). The harness ships the C source as package data and compiles it here, once per
machine, source and compiler:

* **the cache**: ``$XDG_CACHE_HOME/gripprobe/sandbox-init/<key>/sandbox_init`` (default ``~/.cache``), where
  ``<key>`` is the sha256 of the source, the compiler's ``--version`` output, its resolved path and the
  flags; beside it ``sandbox_init.sha256``, the binary's own digest. A changed source or compiler is a new
  key, so a new binary; the folders are the harness user's (0700).
* **never run blindly**: a cached binary is used only while its sha256 matches the digest written when it
  was built (checked once per process, and again whenever the file's inode, size or times change); a binary
  that does not match is rebuilt.
* **one compile at a time**: a lock file per key (``flock``), so two runs starting at once build it once;
  the binary is compiled into a temporary name, run once (``-- /bin/sh -c 'exit 7'`` must exit 7), then
  renamed into place (atomic), and its digest likewise.
* **the fallback**: no compiler (``$CC``, else ``cc`` on ``PATH``), a compile or self-test that fails, a
  cache that cannot be written: the Python init runs instead, and :func:`compiled_init` says why (the run
  prints it once, ``gripprobe doctor`` shows it, and each phase's stored command names the init it ran).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

SOURCE = Path(__file__).with_name("sandbox_init.c")
#: The compiled init's file name (also what an agent sees as PID 1's command: ``.../sandbox_init``).
BINARY_NAME = "sandbox_init"
CFLAGS = ("-std=gnu11", "-O2", "-Wall", "-Wextra", "-D_FORTIFY_SOURCE=2", "-fstack-protector-strong", "-pthread")
#: Bumped when what is cached, or how, changes.
FORMAT = "gripprobe-sandbox-init-1"
COMPILE_TIMEOUT_S = 120.0
LOCK_TIMEOUT_S = 180.0
SELF_TEST_STATUS = 7

INSTALL_CC = "install a C compiler (Debian/Ubuntu: apt-get install gcc libc6-dev; ./dev does it)"


@dataclass(frozen=True)
class CompiledInit:
    """A built init on this machine: its path and the sha256 it must have."""

    path: Path
    sha256: str
    compiler: str
    """The compiler's resolved path and the first line of its ``--version``."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/gripprobe/sandbox-init``, else ``~/.cache/gripprobe/sandbox-init``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gripprobe" / "sandbox-init"


def find_compiler() -> list[str] | None:
    """The C compiler's argv: ``$CC`` (split as a shell would) else ``cc``, its program resolved on ``PATH``."""
    argv = shlex.split(os.environ.get("CC") or "cc")
    exe = shutil.which(argv[0]) if argv else None
    return [exe, *argv[1:]] if exe else None


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _stat_key(path: Path) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


_lock = threading.Lock()
_verified: dict[Path, tuple] = {}
_latest: dict[Path, CompiledInit] = {}


def verified(init: CompiledInit) -> bool:
    """Whether the file at ``init.path`` is still the binary that was built: its sha256 equals ``init.sha256``
    (hashed once, then again only when its inode, size or times change)."""
    key = _stat_key(init.path)
    if key is None:
        return False
    with _lock:
        if _verified.get(init.path) == key:
            return True
    try:
        good = _sha256_file(init.path) == init.sha256
    except OSError:
        good = False
    with _lock:
        if good:
            _verified[init.path] = key
        else:
            _verified.pop(init.path, None)
    return good


def _identity(cc: list[str]) -> tuple[str, str] | None:
    """(the full ``--version`` output, its first line), or None when the compiler does not answer."""
    try:
        proc = subprocess.run([*cc, "--version"], capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0 or not out.strip():
        return None
    return out, out.strip().splitlines()[0]


def build_key(source: bytes, cc: list[str], version: str) -> str:
    h = hashlib.sha256()
    for part in (FORMAT.encode(), source, os.path.realpath(cc[0]).encode(), shlex.join(cc[1:]).encode(),
                 version.encode(), shlex.join(CFLAGS).encode()):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def _read_digest(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else None


def _cached(folder: Path, compiler: str) -> CompiledInit | None:
    digest = _read_digest(folder / f"{BINARY_NAME}.sha256")
    if digest is None:
        return None
    init = CompiledInit(folder / BINARY_NAME, digest, compiler)
    return init if verified(init) else None


def _self_test(binary: Path) -> str | None:
    """Run the fresh binary once, outside any sandbox: a command's status must come back. None when it does."""
    try:
        proc = subprocess.run([str(binary), "-C", "/", "--", "/bin/sh", "-c", f"exit {SELF_TEST_STATUS}"],
                              capture_output=True, timeout=30, stdin=subprocess.DEVNULL, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"the compiled init did not run: {exc}"
    if proc.returncode != SELF_TEST_STATUS:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"the compiled init's self-test exited {proc.returncode}: {err[-1] if err else 'no output'}"
    return None


def _write_atomic(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def _compile(cc: list[str], source: Path, folder: Path, compiler: str) -> tuple[CompiledInit | None, str | None]:
    fd, tmp_name = tempfile.mkstemp(dir=folder, prefix=f".{BINARY_NAME}.")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        try:
            proc = subprocess.run([*cc, *CFLAGS, "-o", str(tmp), str(source)], capture_output=True,
                                  timeout=COMPILE_TIMEOUT_S, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError) as exc:
            return None, f"{cc[0]} could not compile the sandbox's init: {exc}"
        if proc.returncode != 0:
            err = [ln for ln in proc.stderr.decode("utf-8", "replace").splitlines() if "error" in ln.lower()]
            last = (err or proc.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
            return None, f"{cc[0]} failed to compile the sandbox's init (exit {proc.returncode}): {last.strip()}"
        os.chmod(tmp, 0o755)
        why = _self_test(tmp)
        if why is not None:
            return None, why
        digest = _sha256_file(tmp)
        final = folder / BINARY_NAME
        os.replace(tmp, final)  # atomic: a run starting now sees the old file or the new one, whole
        _write_atomic(folder / f"{BINARY_NAME}.sha256", (digest + "\n").encode("ascii"))
        with _lock:
            _verified.pop(final, None)
        return CompiledInit(final, digest, compiler), None
    finally:
        with suppress(OSError):
            os.unlink(tmp)


def _locked(lock_path: Path) -> int | None:
    """An fd holding the exclusive lock, or None when another process held it for LOCK_TIMEOUT_S."""
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                return None
            time.sleep(0.05)


def compiled_init(*, source: Path = SOURCE, root: Path | None = None) -> tuple[CompiledInit | None, str | None]:
    """The compiled init for ``source`` and this machine's compiler, built into the cache when it is missing or
    does not match its digest. ``(init, None)``, or ``(None, why)`` when there is none (then the Python init
    runs)."""
    cc = find_compiler()
    if cc is None:
        return None, f"no C compiler ({os.environ.get('CC') or 'cc'} is not on PATH)"
    ident = _identity(cc)
    if ident is None:
        return None, f"the C compiler {cc[0]} did not answer --version"
    version, first = ident
    compiler = f"{os.path.realpath(cc[0])}: {first}"
    try:
        data = source.read_bytes()
    except OSError as exc:
        return None, f"the init's source is unreadable: {exc}"
    folder = (root or cache_root()) / build_key(data, cc, version)
    try:
        found = _cached(folder, compiler)
        if found is not None:
            return found, None
        folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        folder.mkdir(mode=0o700, exist_ok=True)
        fd = _locked(folder.parent / f"{folder.name}.lock")
        if fd is None:
            return None, f"another process held the compile lock for {LOCK_TIMEOUT_S:.0f} s ({folder}.lock)"
        try:
            found = _cached(folder, compiler)  # built by whoever held the lock before us
            if found is not None:
                return found, None
            # the exact source compiled is the one hashed into the key: a copy in the folder, not the package's
            # file, which could change between the read above and the compile
            src = folder / "sandbox_init.c"
            _write_atomic(src, data)
            return _compile(cc, src, folder, compiler)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, f"the init's cache {folder} cannot be written: {exc}"


def usable(init: CompiledInit) -> CompiledInit | None:
    """``init`` (or what rebuilt it in this process) when its file still has its sha256; else the init rebuilt
    now (a changed or corrupt binary is never run); None when that fails (the Python init runs instead)."""
    with _lock:
        latest = _latest.get(init.path, init)
    if verified(latest):
        return latest
    rebuilt, _why = compiled_init(root=init.path.parent.parent)
    if rebuilt is not None:
        with _lock:
            _latest[init.path] = rebuilt
    return rebuilt
