"""Count the statements that touch something, on every connection opened meanwhile.

The engine's loop and job threads open their own connections, so a wrapper on the test's
connection alone would miss them; ``connection_created`` installs the counter on each.
"""

import threading

from django.db.backends.signals import connection_created


class StatementCount:
    """A context manager counting statements whose SQL contains ``marker``."""

    def __init__(self, marker: str):
        self.marker = marker
        self.count = 0
        self._mutex = threading.Lock()

    def __enter__(self):
        connection_created.connect(self._watch, dispatch_uid=id(self))
        return self

    def __exit__(self, *exc):
        connection_created.disconnect(dispatch_uid=id(self))

    def _watch(self, sender, connection, **kwargs):
        connection.execute_wrappers.append(self._count)

    def _count(self, execute, sql, params, many, context):
        if self.marker in sql:
            with self._mutex:
                self.count += 1
        return execute(sql, params, many, context)
