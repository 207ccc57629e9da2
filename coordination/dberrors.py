"""Turn "cannot reach the database" into one clear line instead of a traceback."""

import threading
import time

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, InterfaceError, OperationalError, connections

from coordination.conf import settings as coordination_settings

#: What a lost or restarting database raises through Django's connections.
DATABASE_ERRORS = (DatabaseError, InterfaceError)


class Backoff:
    """Capped exponential backoff for database outages (``INSTATIC_DB_RETRY_MAX`` by default)."""

    def __init__(self, first: float = 0.2, cap: float | None = None):
        self.first = first
        self.cap = cap
        self.current = 0.0

    def next(self) -> float:
        cap = float(self.cap if self.cap is not None else coordination_settings.DB_RETRY_MAX)
        self.current = min(cap, self.current * 2 if self.current else self.first)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


def describe_database(using: str = DEFAULT_DB_ALIAS) -> str:
    """Return where the database is, without the password (for error messages)."""
    return describe_settings(settings.DATABASES[using])


def describe_settings(s: dict) -> str:
    """Return where the database of a ``DATABASES`` entry is, without the password."""
    engine = s["ENGINE"].rsplit(".", 1)[-1]
    if engine == "sqlite3":
        return f"sqlite:///{s['NAME']}"
    hosts = (s.get("HOST") or "localhost").split(",")
    ports = str(s.get("PORT") or "").split(",")
    # A PostgreSQL host list (primary and standbys) pairs each host with its port.
    where = ",".join(
        f"{host}:{port}" if port else host
        for host, port in zip(hosts, ports + [""] * (len(hosts) - len(ports)), strict=True)
    )
    return f"{engine}://{where}/{s.get('NAME', '')}"


def cannot_connect_message(exc: BaseException, using: str = DEFAULT_DB_ALIAS) -> str:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return (
        f"cannot connect to the database at {describe_database(using)} (DATABASE_URL): {reason}. "
        "Check that the server is running and reachable and that DATABASE_URL is right."
    )


def ensure_connection(using: str = DEFAULT_DB_ALIAS) -> str | None:
    """Return an error message if the database cannot be reached, else ``None``."""
    try:
        connections[using].ensure_connection()
    except OperationalError as exc:
        return cannot_connect_message(exc, using)
    return None


def wait_for_database(
    timeout: float,
    *,
    using: str = DEFAULT_DB_ALIAS,
    log=None,
    stop: threading.Event | None = None,
) -> str | None:
    """Like :func:`ensure_connection`, but keep trying for up to ``timeout`` seconds.

    A scheduler that starts while the database restarts (a deploy, a failover) should wait for
    it, as a running one does, rather than exit and lose its place; one that cannot reach it
    for ``timeout`` seconds gives the one-line reason. ``log(message, delay)`` is called before
    each wait; setting ``stop`` ends the wait early (a SIGTERM).
    """
    stop = stop or threading.Event()
    deadline = time.monotonic() + max(0.0, timeout)
    backoff = Backoff(first=0.5)
    while True:
        problem = ensure_connection(using)
        remaining = deadline - time.monotonic()
        if problem is None or remaining <= 0 or stop.is_set():
            return problem
        delay = min(backoff.next(), remaining)
        if log is not None:
            log(problem, delay)
        connections[using].close()
        stop.wait(delay)
