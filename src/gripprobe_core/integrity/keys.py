"""The harness's signing key: an Ed25519 key kept outside every run and every sandbox.

Where it lives: ``$GRIPPROBE_SIGNING_KEY`` (a file path) when set, else
``$XDG_CONFIG_HOME/gripprobe/signing-key``, else ``~/.config/gripprobe/signing-key``. ``gripprobe run``
creates it on first use (folder 0700, file 0600, PKCS#8 PEM, never replaced); every other command only
reads it and never creates one. A key that lies inside the results folder being written or inside what
the sandbox shows an agent (the system folders, the harness's Python runtime) is refused, as is one that
others can read: the point of the key is that neither the agent nor anyone after it holds it.

A public key is shown as base64 of its 32 raw bytes; its fingerprint is ``sha256:`` and the hex sha256 of
those bytes. ``--key`` options take either, or a file holding either (or a PEM public key).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import secrets
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from ..errors import UserError
from ..textsafe import safe_name

__all__ = ["KEY_ENV", "PublicKey", "Signer", "default_key_path", "load_signer", "local_public_key",
           "parse_key", "run_signer"]

KEY_ENV = "GRIPPROBE_SIGNING_KEY"
ALGORITHM = "ed25519"
_PEM_LIMIT = 64 * 1024
#: What every sandboxed agent can read (runner/sandbox.py binds them read-only): no key there.
_SHOWN_TO_AGENTS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def default_key_path(env: Mapping[str, str] | None = None) -> Path:
    """Where this user's harness key is (or will be created)."""
    env = os.environ if env is None else env
    if env.get(KEY_ENV):
        return Path(env[KEY_ENV]).expanduser()
    config = env.get("XDG_CONFIG_HOME")
    base = Path(config) if config and os.path.isabs(config) else Path(env.get("HOME") or Path.home()) / ".config"
    return base / "gripprobe" / "signing-key"


@dataclass(frozen=True)
class PublicKey:
    """An Ed25519 public key (32 raw bytes)."""

    raw: bytes

    @property
    def b64(self) -> str:
        return base64.b64encode(self.raw).decode("ascii")

    @property
    def fingerprint(self) -> str:
        return fingerprint_of(self.raw)

    def verify(self, signature: bytes, data: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, data)
        except (InvalidSignature, ValueError):
            return False
        return True

    @classmethod
    def from_b64(cls, text: object) -> "PublicKey | None":
        """The key ``text`` holds (base64 of 32 bytes), or None when it is not one."""
        if not isinstance(text, str) or len(text) > 100:
            return None
        try:
            raw = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            return None
        return cls(raw) if len(raw) == 32 else None


def fingerprint_of(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


class Signer:
    """The harness's private key, loaded: signs statements (:mod:`.seal`). Never pickled to a worker."""

    def __init__(self, private_key: object, path: Path):
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        assert isinstance(private_key, Ed25519PrivateKey)
        self._key = private_key
        self.path = path
        self.public = PublicKey(private_key.public_key().public_bytes_raw())

    def sign(self, data: bytes) -> bytes:
        return self._key.sign(data)

    def __reduce__(self):  # the key stays with the driver: a Ray task, a pickle, never carries it
        raise TypeError("the harness's signing key is never pickled (it stays with the process that signs)")

    def __repr__(self) -> str:
        return f"Signer({self.public.fingerprint})"


# ------------------------------------------------------------------------------------ where it may live

def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _runtime_folders() -> list[Path]:
    import gripprobe_core

    return [Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix,
                                               os.path.dirname(os.path.realpath(sys.executable)),
                                               os.path.dirname(gripprobe_core.__file__))]


def location_problem(path: Path, results_root: Path | None = None) -> str | None:
    """Why the key must not live at ``path`` (inside the results, or where a sandboxed agent can read it)."""
    real = Path(os.path.realpath(path))
    if results_root is not None and _inside(real, Path(os.path.realpath(results_root))):
        return f"it is inside the results folder {results_root}, which anyone with the results can read"
    for shown in _SHOWN_TO_AGENTS:
        if _inside(real, Path(shown)):
            return f"{shown} is shown (read-only) to every sandboxed agent"
    for runtime in _runtime_folders():
        if _inside(real, runtime):
            return f"it is inside the harness's Python runtime {runtime}, which sandboxed agents can read"
    return None


def _where(path: Path) -> str:
    return f"signing key {safe_name(path)}"


def _fix(path: Path) -> str:
    return (f"keep it in your config folder (the default, ~/.config/gripprobe/signing-key) or point {KEY_ENV} "
            f"at a file outside results/ and the system folders")


# ------------------------------------------------------------------------------------ loading, creating

def _read_private(path: Path) -> Signer:
    """Load the key at ``path``: a regular file of this user, readable by nobody else, holding an Ed25519 key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise UserError(f"{_where(path)}: cannot be read ({exc.strerror}); fix its permissions or set "
                        f"{KEY_ENV} to another file") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UserError(f"{_where(path)}: not a regular file; move it away (a new key is made on the next run)")
        if st.st_mode & 0o077:
            raise UserError(f"{_where(path)}: readable by others (mode {stat.S_IMODE(st.st_mode):04o}); "
                            f"run `chmod 600 {safe_name(path)}`")
        if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            raise UserError(f"{_where(path)}: owned by another user (uid {st.st_uid}); use your own key "
                            f"(set {KEY_ENV})")
        data = os.read(fd, _PEM_LIMIT)
    finally:
        os.close(fd)
    key = _bare_ed25519(data)
    if key is None:
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            key = None
    if not isinstance(key, Ed25519PrivateKey):
        raise UserError(f"{_where(path)}: not an unencrypted Ed25519 private key (PKCS#8 PEM); move it away "
                        f"and a new one is made on the next run")
    return Signer(key, path)


#: RFC 8410's PKCS#8 form of a bare Ed25519 private key, before its 32-byte seed: what :func:`_create` writes.
_PKCS8_ED25519 = bytes.fromhex("302e020100300506032b657004220420")


def _bare_ed25519(pem: bytes) -> object | None:
    """The key of a PEM ``PRIVATE KEY`` block in that exact form (48 bytes: the prefix, then the seed), read
    without cryptography's serialization module (importing it was ~5 ms of every run's start); None for any
    other content, which the library then reads (and refuses if it is not an Ed25519 key)."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    lines = pem.strip().splitlines()
    if len(lines) < 3 or lines[0].strip() != b"-----BEGIN PRIVATE KEY-----" \
            or lines[-1].strip() != b"-----END PRIVATE KEY-----":
        return None
    try:
        der = base64.b64decode(b"".join(line.strip() for line in lines[1:-1]), validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(der) != 48 or not der.startswith(_PKCS8_ED25519):
        return None
    return Ed25519PrivateKey.from_private_bytes(der[len(_PKCS8_ED25519):])


def _create(path: Path) -> None:
    """Write a new key at ``path`` (0600, folder 0700), never replacing one: two runs starting at once
    both end up with the same key."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    pem = Ed25519PrivateKey.generate().private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
    folder = path.parent
    if not folder.is_dir():
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.write(fd, pem)
        os.fsync(fd)
    finally:
        os.close(fd)
    try:
        os.link(tmp, path)  # fails if a key appeared meanwhile: that one wins
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def load_signer(*, create: bool, results_root: Path | None = None,
                env: Mapping[str, str] | None = None) -> Signer | None:
    """This user's harness key (created first when ``create`` and there is none; else None when missing).
    A key that cannot be used is a :class:`UserError` naming it and the fix."""
    path = default_key_path(env)
    problem = location_problem(path, results_root)
    if problem:
        raise UserError(f"{_where(path)}: not used: {problem}; {_fix(path)}")
    if not os.path.lexists(path):
        if not create:
            return None
        try:
            _create(path)
        except OSError as exc:
            raise UserError(f"{_where(path)}: cannot be created ({exc.strerror}); make {safe_name(path.parent)} "
                            f"writable or set {KEY_ENV} to a file you can write") from None
    return _read_private(path)


def local_public_key(env: Mapping[str, str] | None = None) -> PublicKey | None:
    """This machine's harness public key, when there is a usable key (never creates one)."""
    try:
        signer = load_signer(create=False, env=env)
    except UserError:
        return None
    return signer.public if signer else None


def run_signer(run_path: Path) -> Signer | None:
    """The key to re-sign what the harness rewrites in an existing run (reports, recomputed cases): this
    machine's key when the run is signed with it; None for an unsigned run or one signed elsewhere."""
    from .seal import run_public_key

    recorded = run_public_key(run_path)
    if recorded is None:
        return None
    try:
        signer = load_signer(create=False)
    except UserError:
        return None
    return signer if signer is not None and signer.public == recorded else None


# ------------------------------------------------------------------------------------ --key

def _key_text(text: str) -> str | None:
    """The fingerprint a fingerprint or base64 public key names (None when ``text`` is neither)."""
    text = text.strip()
    if text.startswith("sha256:") and len(text) == 71 and all(c in "0123456789abcdef" for c in text[7:]):
        return text
    key = PublicKey.from_b64(text)
    return key.fingerprint if key is not None else None


def parse_key(value: str) -> str:
    """The fingerprint a ``--key`` value names: ``sha256:<hex>``, a base64 public key, or a file holding
    either or a PEM public key. :class:`UserError` when it is none of these."""
    found = _key_text(value)
    path = Path(value).expanduser()
    if found is None and path.is_file():
        try:
            data = path.read_bytes()[:_PEM_LIMIT]
        except OSError as exc:
            raise UserError(f"--key {safe_name(value)}: cannot be read ({exc.strerror})") from None
        if b"-----BEGIN PUBLIC KEY-----" in data:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
            from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat, load_pem_public_key

            try:
                pub = load_pem_public_key(data)
            except ValueError:
                pub = None
            if isinstance(pub, Ed25519PublicKey):
                found = fingerprint_of(pub.public_bytes(Encoding.Raw, PublicFormat.Raw))
        elif b"PRIVATE KEY" not in data and data.strip():
            found = _key_text(data.decode("utf-8", "replace").strip().splitlines()[0])
    if found is None:
        raise UserError(f"--key {safe_name(value)}: not a public key; pass its fingerprint (sha256:<64 hex>), the "
                        f"base64 public key `gripprobe verify` prints, or a file holding either")
    return found
