"""The database clock, carried forward between queries with the monotonic clock.

Due times and leases are compared against the database's time, never a replica's wall clock:
a replica whose clock is an hour off must neither run slots early nor late. Each query that
returns the database's ``now`` re-anchors the estimate; in between, elapsed monotonic time is
added (monotonic time is immune to wall-clock jumps).
"""

import threading
import time
from datetime import datetime, timedelta

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models.functions import Now
from django.db.models.sql import Query


def database_now(using: str = DEFAULT_DB_ALIAS) -> datetime:
    """Return the database server's current time as an aware datetime (one round trip)."""
    connection = connections[using]
    expression = Now()
    compiler = connection.ops.compiler("SQLCompiler")(Query(None), connection, using)
    sql, params = compiler.compile(expression)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {sql}", list(params))
        value = cursor.fetchone()[0]
    for converter in connection.ops.get_db_converters(expression):
        value = converter(value, expression, connection)
    return value


class DatabaseClock:
    """An estimate of the database's time between queries."""

    def __init__(self):
        self._anchor: datetime | None = None
        self._mono = 0.0
        self._lock = threading.Lock()

    def sync(self, db_now: datetime) -> None:
        """Record the database time just read."""
        with self._lock:
            self._anchor, self._mono = db_now, time.monotonic()

    def now(self) -> datetime:
        """Return the estimated database time (reads it when never synced)."""
        with self._lock:
            anchor, mono = self._anchor, self._mono
        if anchor is None:
            value = database_now()
            self.sync(value)
            return value
        return anchor + timedelta(seconds=time.monotonic() - mono)
