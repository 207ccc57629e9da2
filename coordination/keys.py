"""Advisory-lock keys: explicit 64-bit integers or names hashed with SHA-256.

PostgreSQL advisory locks take a signed 64-bit key. Names are hashed (not Python's ``hash()``,
which is salted per process) so every replica, machine and Python version derives the same key.
"""

import hashlib

_MIN_KEY = -(2**63)
_MAX_SIGNED = 2**63 - 1
_MAX_UNSIGNED = 2**64 - 1
NAMESPACE = "instatic:"


def derive_key(name: str) -> int:
    """Return the signed 64-bit key for ``name``: 8 bytes of SHA-256 of "instatic:" + name."""
    if not isinstance(name, str) or not name:
        raise ValueError("a lock name must be a non-empty string")
    digest = hashlib.sha256((NAMESPACE + name).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def normalize_key(key_or_name: int | str) -> int:
    """Return a signed 64-bit key for an explicit integer or a name.

    Integers from 2**63 up to 2**64 - 1 are read as unsigned and folded to their signed
    64-bit equivalent, so hexadecimal literals of any width in that range work.
    """
    if isinstance(key_or_name, bool):
        raise TypeError("a lock key must be an int or a str, not a bool")
    if isinstance(key_or_name, str):
        return derive_key(key_or_name)
    if not isinstance(key_or_name, int):
        raise TypeError(f"a lock key must be an int or a str, not {type(key_or_name).__name__}")
    if not _MIN_KEY <= key_or_name <= _MAX_UNSIGNED:
        raise ValueError(f"lock key {key_or_name} does not fit in 64 bits")
    if key_or_name > _MAX_SIGNED:
        return key_or_name - 2**64
    return key_or_name


def format_key(key: int) -> str:
    """Return the key as shown in log lines: signed decimal and unsigned hex."""
    return f"{key} (0x{key & _MAX_UNSIGNED:x})"


def split_key(key: int) -> tuple[int, int]:
    """Return (classid, objid) as PostgreSQL's ``pg_locks`` shows a bigint advisory key."""
    unsigned = key & _MAX_UNSIGNED
    return unsigned >> 32, unsigned & 0xFFFFFFFF


def join_key(classid: int, objid: int) -> int:
    """Return the signed key for a ``pg_locks`` (classid, objid) pair."""
    return normalize_key((int(classid) << 32) | int(objid))
