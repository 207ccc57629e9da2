"""Daemon threads that run a group's jobs and keep their database connections between runs.

Opening a connection per run would cost a connect and its set-up statements every time a job
runs. Threads are daemons so that a job hung past its max duration can never keep a stopping
scheduler alive past its grace period (``concurrent.futures`` joins its threads at exit).
"""

import logging
import queue
import select
import threading
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager

from django.db import connection

logger = logging.getLogger(__name__)


def discard_broken_connection() -> None:
    """Close this thread's connection only if an error left it unusable (it is kept otherwise).

    Django's ``close_old_connections()`` would also close it for ``CONN_MAX_AGE=0``, which is
    meant for request threads, not for long-lived job threads.
    """
    if connection.connection is None or connection.in_atomic_block:
        return
    if connection.errors_occurred:
        if connection.is_usable():
            connection.errors_occurred = False
        else:
            connection.close()


def drop_dead_connection() -> None:
    """Close this thread's connection if the server hung up on it while it sat idle.

    A kept connection may have been ended by a server restart or a session termination; the
    first statement of the next run would fail and be recorded as the job's failure. An idle
    connection has nothing to read unless the server closed it (job threads never ``LISTEN``),
    so a zero-timeout ``poll()`` tells, without a round trip.
    """
    raw = connection.connection
    if raw is None or connection.in_atomic_block:
        return
    try:
        if getattr(raw, "closed", False) or getattr(raw, "broken", False):
            connection.close()
            return
        fileno = raw.fileno()
    except Exception:
        return  # this driver has no socket to look at (SQLite)
    poller = select.poll()  # not select(): descriptors above 1024 are fine
    poller.register(fileno, select.POLLIN)
    if poller.poll(0):
        connection.close()


@contextmanager
def between_runs():
    """Around one run on a job thread: a connection that died while idle is dropped first, and
    one the run left broken is discarded after (the thread keeps its connection between runs)."""
    drop_dead_connection()
    try:
        yield
    finally:
        discard_broken_connection()


#: Most threads (and so database connections) one group's jobs use at once. A thousand jobs
#: due at the same instant would otherwise open a thousand connections and exhaust the
#: server's ``max_connections``; beyond this many, runs wait in line for a free thread.
MAX_THREADS = 32


class JobThreads:
    """A pool that grows (up to ``max_threads``) when every thread is busy; idle threads wait
    for the next run, and runs wait for a thread once all of them are busy."""

    def __init__(self, prefix: str, *, max_threads: int = MAX_THREADS):
        self.prefix = prefix
        self.max_threads = max_threads
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = 0
        self._waiting = 0
        self._count = 0
        self._closed = False
        self._threads: list[threading.Thread] = []
        #: Runs handed on together (``submit_batch``), taken in turn by the threads asked.
        self._batch: deque[Callable[[], None]] = deque()

    def submit(self, func: Callable[[], None]) -> threading.Event:
        """Run ``func`` on an idle thread (or a new one); return an event set when it is done.

        After :meth:`shutdown` (a run that outlived the grace period still records its end),
        ``func`` runs on a thread of its own that closes its connection and ends after it.
        """
        done = threading.Event()
        with self._lock:
            if self._closed:
                name = f"{self.prefix}-after-shutdown"
                threading.Thread(
                    target=self._run_once, args=(func, done), name=name, daemon=True
                ).start()
                return done
            self._waiting += 1
            spawn = self._waiting > self._idle and self._count < self.max_threads
            if spawn:
                self._count += 1
                name = f"{self.prefix}-{self._count}"
        self._tasks.put((func, done))
        if spawn:
            self._start(threading.Thread(target=self._work, name=name, daemon=True))
        return done

    def submit_batch(self, funcs: list[Callable[[], None]]) -> None:
        """Run ``funcs`` on the pool's threads, every one of them queued before any begins.

        Up to one thread per run is asked; each runs them one after another until none is
        left, so what they submit meanwhile (their outcomes' writes) waits behind all of
        them. Handed on one by one, a run could end and queue its outcome before the next was
        handed on, however briefly its submitter was kept from the CPU.
        """
        self._batch.extend(funcs)
        for _ in range(min(len(funcs), self.max_threads)):
            self.submit(self._run_batch)

    def _run_batch(self) -> None:
        while True:
            try:
                func = self._batch.popleft()
            except IndexError:
                return
            self._run(func)

    def start_all(self, prepare: Callable[[], None]) -> None:
        """Start every thread the pool may have now, each running ``prepare`` before its first
        run: a worker process opens its threads' connections before work comes, so that the
        first runs of a burst do not each wait for a connection of their own (dozens opened
        at once on a busy machine held a burst's first runs for a quarter of a second)."""
        with self._lock:
            if self._closed:
                return
            first, self._count = self._count, self.max_threads
        for number in range(first + 1, self.max_threads + 1):
            name = f"{self.prefix}-{number}"
            thread = threading.Thread(target=self._work, args=(prepare,), name=name, daemon=True)
            self._start(thread)

    def _start(self, thread: threading.Thread) -> None:
        with self._lock:
            self._threads.append(thread)
        thread.start()

    def _work(self, prepare: Callable[[], None] | None = None) -> None:
        if prepare is not None:
            try:
                prepare()
            except Exception as exc:  # noqa: BLE001 - the first run connects again
                logger.warning("%s: could not prepare a thread: %s", self.prefix, exc)
        with self._lock:
            self._idle += 1
        while True:
            func, done = self._tasks.get()
            with self._lock:
                self._idle -= 1
                if func is not None:
                    self._waiting -= 1
            if func is None:
                connection.close()
                return
            try:
                self._run(func)
            finally:
                # Idle before done: a run submitted once this one is seen done reuses it.
                with self._lock:
                    self._idle += 1
                done.set()

    def _run_once(self, func: Callable[[], None], done: threading.Event) -> None:
        try:
            self._run(func)
        finally:
            connection.close()
            done.set()

    def _run(self, func: Callable[[], None]) -> None:
        """Run ``func`` between runs' connection care; log what its own handling let through."""
        try:
            with between_runs():
                func()
        except Exception:
            logger.exception("%s: a job run failed outside its own error handling", self.prefix)

    def shutdown(self, *, wait: bool = False) -> None:
        """Let idle threads close their connections and end; busy ones end after their run.
        With ``wait``, return once every thread has ended (its connection closed)."""
        with self._lock:
            self._closed = True
            count = self._count
            threads = list(self._threads)
        for _ in range(count):
            self._tasks.put((None, None))
        if wait:
            for thread in threads:
                thread.join()
