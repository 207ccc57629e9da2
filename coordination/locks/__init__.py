"""The vendor-aware leader lock: one entry point, one backend module per database vendor.

``leader_lock()`` is the context manager most code wants; the scheduler keeps a long-lived
:class:`~coordination.locks.base.LeaderLock` per group instead. The backend is chosen once,
here, from ``connection.vendor``; an unsupported vendor is ``ImproperlyConfigured``.
"""

from contextlib import contextmanager

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils.module_loading import import_string

from coordination.conf import settings
from coordination.locks.base import LeaderLock, LockHolder

# Behind PgBouncer in transaction pooling mode (INSTATIC_LOCK_MODE=transaction).
PGBOUNCER_BACKEND = "coordination.locks.pgbouncer.PgBouncerLeaderLock"
BACKENDS = {
    "postgresql": "coordination.locks.postgresql.PostgresLeaderLock",
    "sqlite": "coordination.locks.sqlite.SQLiteLeaderLock",
    "mysql": "coordination.locks.mysql.MySQLLeaderLock",
}

__all__ = [
    "LeaderLock",
    "LockHolder",
    "backend_class",
    "leader_lock",
    "list_holders",
    "make_lock",
    "terminate_holder",
]


def backend_class(using: str = DEFAULT_DB_ALIAS) -> type[LeaderLock]:
    """Return the lock class for the vendor of database ``using``."""
    vendor = connections[using].vendor
    if vendor == "postgresql" and settings.LOCK_MODE == "transaction":
        return import_string(PGBOUNCER_BACKEND)
    try:
        path = BACKENDS[vendor]
    except KeyError:
        raise ImproperlyConfigured(
            f"Instatic's leader lock does not support the {vendor!r} database backend. "
            f"Supported vendors: {', '.join(sorted(BACKENDS))}. "
            "Point DATABASE_URL at PostgreSQL, MySQL/MariaDB or SQLite."
        ) from None
    return import_string(path)


def make_lock(key_or_name: int | str, **kwargs) -> LeaderLock:
    """Return an unacquired lock handle for ``key_or_name`` on the configured vendor."""
    return backend_class(kwargs.get("using", DEFAULT_DB_ALIAS))(key_or_name, **kwargs)


@contextmanager
def leader_lock(key_or_name: int | str, *, wait: float = 0.0, **kwargs):
    """Try to take the lock; yield the handle (check ``.acquired``); release and close on exit."""
    lock = make_lock(key_or_name, **kwargs)
    try:
        lock.acquire(wait=wait)
        yield lock
    finally:
        lock.close()


def list_holders(*, using: str = DEFAULT_DB_ALIAS, keys=()) -> list[LockHolder]:
    """List held advisory locks of this database (``keys`` helps vendors without a lock table)."""
    return backend_class(using).list_holders(using=using, keys=keys)


def terminate_holder(key_or_name: int | str, *, pid: int | None = None, using=DEFAULT_DB_ALIAS):
    """End the database session holding ``key_or_name``; return its pid, or ``None``.

    With ``pid``, act only if that session holds the key: a session that does not hold it
    is never terminated.
    """
    return backend_class(using).terminate_holder(key_or_name, pid=pid, using=using)
