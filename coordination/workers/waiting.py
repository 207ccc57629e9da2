"""How a worker process waits between looks for work (:class:`WorkWaiter`): a thread that
listens for the leader's ``NOTIFY`` on PostgreSQL, a poll elsewhere."""

import logging
import threading
import time

from django.db import connection

from coordination.conf import settings
from coordination.dberrors import Backoff
from coordination.liveness.sessions import listen_application_name
from coordination.workers.meeting import WORKERS_CHANNEL

logger = logging.getLogger(__name__)


class WorkWaiter:
    """How a worker process waits: for work, or for one of its runs to end, whichever comes
    first (both ring its bell, ``WorkerProcess.changed``).

    On PostgreSQL a thread of its own listens for work (``LISTEN``) and rings the bell on
    each ``NOTIFY``, so a worker with runs in flight hears of new work at once, and a run that
    ends is seen at once too, not at the next turn of a poll; a safety-net look every
    ``INSTATIC_NOTIFY_MAX_TICK`` seconds covers a notification lost with its connection.
    Elsewhere, or while the listening connection is down, the worker looks every
    ``INSTATIC_WORKER_POLL`` seconds. ``stop`` ends a wait within half a second either way.
    """

    def __init__(self, process):
        self.process = process
        self.stop = process.stop
        self.bell = process.changed
        #: True while the listening thread's ``LISTEN`` is in place.
        self.listening = False
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        if connection.vendor == "postgresql":
            self._thread = threading.Thread(
                target=self._listen, name=f"{process.node.name}-listen", daemon=True
            )
            self._thread.start()

    def _connect(self):
        from coordination.locks.base import new_raw_connection

        conn = new_raw_connection(
            "default", {"application_name": listen_application_name(self.process.node.name)}
        )
        conn.autocommit = True
        conn.execute(f"LISTEN {WORKERS_CHANNEL}")
        return conn

    def _listen(self) -> None:
        """Ring the bell on every ``NOTIFY`` of work until closed, listening again (after a
        backoff) when the connection is lost."""
        backoff = Backoff()
        while not self._closed.is_set() and not self.stop.is_set():
            conn = None
            try:
                conn = self._connect()
                self.listening = True
                backoff.reset()
                # Work queued while this was not listening is looked for now.
                self.bell.set()
                while not self._closed.is_set() and not self.stop.is_set():
                    for _ in conn.notifies(timeout=0.5):
                        self.bell.set()
            except Exception as exc:  # noqa: BLE001 - the connection died: poll, listen again
                logger.warning("[%s] lost the wait for work: %s", self.process.host.log_prefix, exc)
            finally:
                self.listening = False
                if conn is not None:
                    _close_quietly(conn, self.process.host.log_prefix)
            self._closed.wait(backoff.next())

    def wait(self) -> None:
        """Wait for the bell, ``stop``, or the next safety-net look, whichever comes first."""
        poll = settings.NOTIFY_MAX_TICK if self.listening else settings.WORKER_POLL
        deadline = time.monotonic() + float(poll)
        while not self.stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self.bell.wait(min(0.5, left)):
                return

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _close_quietly(conn, log_prefix: str) -> None:
    try:
        conn.close()
    except Exception as exc:  # noqa: BLE001 - closing a connection already dead
        logger.debug("[%s] closing the wait's connection: %s", log_prefix, exc)
