"""What a run on a worker process sees of its process: the :class:`WorkerHost`.

A worker process runs a queued run with the same :class:`coordination.runner.Worker` that
the leader's job threads use, so retries, max duration, ``should_stop()``, outcomes, alerts
and the log lines are the same wherever a run executes. Only the host differs: a worker has
no lock to lead by, no journal to keep, no loop to wake and no tick to hold off; its
liveness is its own heartbeat, written while it executes a run.
"""

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime

from django.db import connection, transaction
from django.db.models.functions import Now

from coordination import outcomes, quoting
from coordination.clock import DatabaseClock
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.liveness import NodeIdentity
from coordination.models import Node
from coordination.registry import Job, JobRegistry
from coordination.registry import registry as default_registry
from coordination.selectors import live_nodes_q
from coordination.services import notify_group
from coordination.workers.finishing import Finishes

logger = logging.getLogger(__name__)


class NoJournal:
    """A worker keeps no claim journal: the leader that queued a run remembers it."""

    def record(self, entry) -> None:
        pass

    def finished(self, job: str, slot: datetime, status: str) -> None:
        pass


class WorkerHost:
    """The :class:`~coordination.runhost.RunHost` of runs on one worker process."""

    def __init__(
        self,
        node: NodeIdentity,
        *,
        stopping: Callable[[], bool],
        log_prefix: str,
        registry: JobRegistry = default_registry,
    ):
        self._node = node
        self._registry = registry
        self._stopping = stopping
        self._log_prefix = log_prefix
        self._clock = DatabaseClock()
        self._journal = NoJournal()
        self._grace_deadline: float | None = None
        self._finishes = Finishes(instance=node.instance)
        #: Told each run's job function's time as it returns (the process's pace).
        self.paced: Callable[[float], None] = lambda seconds: None
        #: Set when something this process saw suggests it was fenced (a refused outcome, a
        #: lost database): its next look for work first checks its own row.
        self.in_doubt = False

    @property
    def node(self) -> NodeIdentity:
        return self._node

    @property
    def clock(self) -> DatabaseClock:
        return self._clock

    @property
    def journal(self) -> NoJournal:
        return self._journal

    @property
    def log_prefix(self) -> str:
        return self._log_prefix

    @property
    def stopping(self) -> bool:
        return self._stopping()

    @property
    def leading(self) -> bool:
        """A worker leads nothing; its run goes on until it ends, times out or the process
        stops (the fence at commit keeps a worker that lost its liveness from writing)."""
        return True

    def fence_work_transaction(self, conn) -> bool:
        """Check inside the run's transaction, just before its commit, that this worker
        process is still live: its heartbeat within the lease. A worker frozen past the lease
        (whose run the leader may have queued again) rolls its run back instead; on
        PostgreSQL and MariaDB the leader also ends such a worker's sessions, so a commit
        after this check fails in the database. A check that fails (the session was ended:
        a fencer's or an operator's kill, a server restart) is a refusal too: the run rolls
        back to ``queued`` and the leader's sweep queues it again.

        SQLite has one writer: the run's transaction has held the database's write lock since
        it moved the row to running, so no one could queue the run again meanwhile, and this
        worker's own heartbeat waits on that lock (a run longer than the lease would never
        pass the check). There only a fenced process refuses.
        """
        if conn.vendor == "sqlite":
            return not self.stopping
        try:
            return (
                Node.objects.using(conn.alias)
                .filter(live_nodes_q(), name=self._node.name, instance=self._node.instance)
                .exists()
            )
        except DATABASE_ERRORS as exc:
            logger.warning(
                "[%s] could not confirm this worker process is live before commit: %s",
                self._log_prefix,
                exc,
            )
            return False

    def hold_off(self, job_name: str) -> bool:
        return False

    def release_hold(self, job_name: str) -> None:
        pass

    def submit(self, task: Callable[[], None]) -> None:
        """Run ``task`` (a claim-first run's outcome) at once: the run of a task another
        django-tasks backend's worker delivers ends as its delivery returns. The process's own
        runs queue theirs on its threads instead (``WorkerProcess._submit``)."""
        task()

    def request_maintenance(self) -> None:
        """The leader's maintenance finds a failed run's retry by itself (every few seconds)."""

    def function_ended(self, seconds: float) -> None:
        """Count the run's job function in the process's pace at once, before its outcome is
        written: a burst's first outcomes meet the burst's other writes, and a process that
        learnt its pace only from them took its second batch late."""
        self.paced(seconds)

    def finish_run(self, run, job: Job, outcome) -> bool | None:
        """Record a run's outcome together with those the process's other threads finish
        meanwhile (``finishing.Finishes``)."""
        return self._finishes.finish(run, job, outcome)

    def report_outcome(
        self,
        job: Job,
        slot: datetime,
        status: str,
        duration: float,
        *,
        error: BaseException | None = None,
        paused: bool = False,
    ) -> None:
        outcomes.report_outcome(
            job,
            slot,
            status,
            duration,
            log_prefix=self._log_prefix,
            error=error,
            paused=paused,
        )

    def run_finished(self, job_name: str, *, as_planned: bool) -> None:
        """Wake the job's group leader when a run ends otherwise than its tick planned (a
        when-due job's answer, such as the dispatcher's "more is waiting", a failure's retry,
        a manual run): the job may be due again before the leader would look. A scheduled
        slot that ends as planned leaves the leader nothing new, and wakes nobody."""
        job = self._registry.get(job_name)
        if as_planned or job is None:
            return
        try:
            with transaction.atomic():
                notify_group(job.group)
        except DATABASE_ERRORS as exc:
            logger.warning(
                "[%s] could not wake the %s leader after %s (%s); it looks at its next tick",
                self._log_prefix,
                job.group,
                job_name,
                exc,
            )

    def cut_off(self, what: str) -> None:
        """A run's outcome was refused (taken over): this process may have been fenced."""
        logger.warning("[%s] %s", self._log_prefix, what)
        self.in_doubt = True

    def database_failed(self, exc: BaseException) -> None:
        """The database went away mid-run: this process may have been fenced meanwhile."""
        logger.warning("[%s] database error: %s", self._log_prefix, exc)
        self.in_doubt = True

    def grace_deadline(self) -> float:
        if self._grace_deadline is None:
            self._grace_deadline = time.monotonic() + float(settings.SHUTDOWN_GRACE)
        return self._grace_deadline


class RunHeartbeat:
    """The worker process's heartbeat while it executes a run, on a thread of its own.

    An idle worker writes nothing (no statements while the cluster is idle); a busy one
    heartbeats every ``INSTATIC_HEARTBEAT_INTERVAL``, so the leader marks the run of a worker
    that died or froze abandoned after the lease, as it does a dead leader's.
    """

    def __init__(self, node: NodeIdentity, *, fenced: Callable[[], None]):
        self.node = node
        self._fenced = fenced
        #: When this process last wrote its heartbeat (``time.monotonic()``); registering
        #: the node, just before this is made, wrote the first.
        self.beaten_at = time.monotonic()
        self._busy = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-heartbeat", daemon=True)
        self._thread.start()

    def beat(self) -> bool:
        """Write the heartbeat now; return False (and call ``fenced``) if this process is no
        longer live in the database: another process took its node's row, or the leader
        fenced it after its heartbeat had stopped (``sweep``). Such a process must take no
        more work; it stops, and its pool starts a new one in its place."""
        started = time.monotonic()
        return self.record(started, written=bool(self._row().update(last_heartbeat=Now())))

    def beat_sql(self) -> tuple[str, tuple]:
        """Return the SQL and parameters of the heartbeat's ``UPDATE``, for a statement that
        writes it with more (the worker's take on PostgreSQL); :meth:`record` records it."""
        return quoting.update_sql(self._row(), {"last_heartbeat": Now()})

    def record(self, started: float, *, written: bool) -> bool:
        """Record a heartbeat sent at ``started`` (``time.monotonic()``): written, or found
        fenced (``fenced`` is called); return ``written``."""
        if not written:
            self._fenced()
            return False
        self.beaten_at = max(self.beaten_at, started)
        return True

    def _row(self):
        return Node.objects.filter(
            name=self.node.name, instance=self.node.instance, stopped_at__isnull=True
        )

    def busy(self) -> None:
        self._busy.set()

    def idle(self) -> None:
        self._busy.clear()

    def stop(self) -> None:
        self._stop.set()
        self._busy.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        interval = float(settings.HEARTBEAT_INTERVAL)
        try:
            while not self._stop.is_set():
                self._busy.wait()
                if self._stop.wait(interval) or not self._busy.is_set():
                    continue
                try:
                    self.beat()
                except Exception as exc:  # noqa: BLE001 - a lost beat is retried next interval
                    logger.warning("worker %s: heartbeat failed: %s", self.node.name, exc)
                    connection.close()
        finally:
            connection.close()  # this thread's own session ends with it
