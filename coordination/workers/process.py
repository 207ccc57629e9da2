"""One worker process: take queued runs' tasks from the database queue and execute them.

``runscheduler --workers N`` and ``runworker --processes N`` start these (``pool.py``). Each
is a node of its own in the ``Node`` table (``<node>/worker-<i>``, role ``worker``), so the
ledger names the process that executed a run, and the leader finds the runs of a worker
that died by its heartbeat, written only while it executes (an idle worker sends nothing
but its wait for work: a ``LISTEN`` on PostgreSQL, a poll every ``INSTATIC_WORKER_POLL``
seconds elsewhere).

The task row is taken as django-tasks-db's own worker takes it (``SELECT ... FOR UPDATE
SKIP LOCKED``, then marked running with this process's instance as its worker id); what the
task does is ``execution.execute``, where the ledger decides whether the run starts.
"""

import logging
import os
import socket
import threading
import time
import uuid

from django.db import close_old_connections, connection, transaction

from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS, Backoff
from coordination.liveness import NodeIdentity, mark_stopped, register_node
from coordination.models import Node
from coordination.node_setup import jobs_fingerprint, label_database_sessions
from coordination.registry import JobRegistry, registry
from coordination.workers.execution import Delivery, execute
from coordination.workers.host import RunHeartbeat, WorkerHost
from coordination.workers.meeting import BACKEND_ALIAS, QUEUE_NAME, WORKERS_CHANNEL

logger = logging.getLogger(__name__)


def worker_node_name(node_name: str, index: int) -> str:
    """Return the node name of worker process ``index`` of node ``node_name``."""
    return f"{node_name}/worker-{index}"[:200]


class WorkerProcess:
    """This process as a worker: its node row, its heartbeat and the host of its runs."""

    def __init__(self, name: str, *, stop: threading.Event, registry: JobRegistry = registry):
        self.stop = stop
        self.registry = registry
        self.node = NodeIdentity(
            name=name, instance=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid()
        )
        self.host = WorkerHost(
            self.node, stopping=stop.is_set, log_prefix=f"worker {name}", registry=registry
        )
        names = [job.name for job in registry.all()]
        register_node(
            self.node,
            groups=[],
            declared_jobs=names,
            fingerprint=jobs_fingerprint(names, registry),
            role=Node.Role.WORKER,
        )
        self.heartbeat = RunHeartbeat(self.node, fenced=self._fenced)
        self._busy = 0

    def _fenced(self) -> None:
        if not self.stop.is_set():
            logger.error(
                "[%s] fenced: this worker process is no longer live in the database (its "
                "heartbeat stopped too long, or its node name was taken); it stops",
                self.host.log_prefix,
            )
        self.stop.set()

    def busy(self, *, beat: bool = True) -> None:
        """Count this process as executing from now until the matching ``idle()``: it
        heartbeats every interval meanwhile, and with ``beat`` at once when its last beat is
        older than half the interval, so a run it starts is never under a stale heartbeat."""
        self._busy += 1
        if beat:
            self.beat_if_due()
        self.heartbeat.busy()

    def beat_if_due(self) -> bool:
        """Heartbeat now unless the last beat written is younger than half the interval;
        return False if this process was found fenced (it takes no more work). Only a beat
        written counts: looking for work writes none, however often it looks."""
        age = time.monotonic() - self.heartbeat.beaten_at
        if age >= float(settings.HEARTBEAT_INTERVAL) / 2 and not self.heartbeat.beat():
            return False
        return not self.stop.is_set()

    def idle(self) -> None:
        self._busy -= 1
        if not self._busy:
            self.heartbeat.idle()

    def execute(self, run_id: int, attempt: int) -> Delivery:
        """Execute one delivery of a run's task (``execution.execute``), heartbeating."""
        self.busy()
        try:
            return execute(run_id, attempt, host=self.host, registry=self.registry)
        finally:
            self.idle()

    def take_task(self):
        """Take the next ready task of Instatic's queue for this process, or ``None``.

        The heartbeat is written in the same transaction as the take: a task row is never
        ``RUNNING`` under a worker whose heartbeat looks stale (the sweep would fence it).
        A look that finds nothing costs one ``SELECT`` and no transaction.
        """
        from django_tasks_db.models import DBTaskResult

        tasks = DBTaskResult.objects.ready().filter(
            queue_name=QUEUE_NAME, backend_name=BACKEND_ALIAS
        )
        if not tasks.exists():
            return None  # an idle look: one SELECT, no transaction
        with transaction.atomic():
            task = tasks.get_locked()
            if task is not None and not self.beat_if_due():
                task = None  # fenced: the task stays ready for a live worker
            if task is not None:
                task.claim(self.node.instance)
        return task

    def run_task(self, task) -> None:
        """Run a taken task and record its result on its row, as the database backend does."""
        try:
            result = task.task_result
            value = self.execute(*result.args, **result.kwargs).outcome
        except Exception as exc:  # noqa: BLE001 - recorded on the task row, and logged
            logger.exception("[%s] task %s failed", self.host.log_prefix, task.id)
            task.set_failed(exc)
            return
        task.set_successful(value)

    def work(self) -> bool:
        """Take and run one task; return False if none was ready (or this process stops)."""
        if self.host.in_doubt:
            # An idle look writes nothing, so a fenced process would learn it only when work
            # came: find out now, and stop (the pool starts a live one) if so.
            self.host.in_doubt = False
            self.heartbeat.beat()
        self.busy(beat=False)
        try:
            task = None if self.stop.is_set() else self.take_task()
            if task is not None:
                self.run_task(task)
        finally:
            self.idle()
        return task is not None

    def serve(self) -> None:
        """Run tasks until ``stop`` is set, waiting for work in between (``WorkWaiter``)."""
        logger.info("[%s] waiting for runs", self.host.log_prefix)
        waiter = WorkWaiter(self)
        try:
            backoff = Backoff()
            while not self.stop.is_set():
                try:
                    worked = self.work()
                except DATABASE_ERRORS as exc:
                    # The database went away (a restart, a failover): look again shortly on
                    # a new connection; a task taken meanwhile is swept back by the leader.
                    logger.warning("[%s] database error: %s", self.host.log_prefix, exc)
                    self.host.in_doubt = True
                    connection.close()
                    self.stop.wait(backoff.next())
                    continue
                backoff = Backoff()
                if worked:
                    close_old_connections()  # between runs, as between requests
                else:
                    waiter.wait()
        finally:
            waiter.close()
            self.close()
            logger.info("[%s] stopped", self.host.log_prefix)

    def close(self) -> None:
        self.heartbeat.stop()
        try:
            mark_stopped(self.node)
        except Exception as exc:  # noqa: BLE001 - the lease marks it gone all the same
            logger.warning("[%s] could not mark the worker stopped: %s", self.host.log_prefix, exc)


_current: WorkerProcess | None = None
_current_lock = threading.Lock()


def current_process() -> WorkerProcess:
    """Return this process's :class:`WorkerProcess`; made on first use when a run's task
    reaches the worker of another django-tasks backend (named ``<node>/tasks``)."""
    global _current
    with _current_lock:
        if _current is None:
            name = f"{settings.default_node_name()}/tasks"[:200]
            _current = WorkerProcess(name, stop=threading.Event())
        return _current


def install(process: WorkerProcess | None) -> None:
    """Make ``process`` the one :func:`current_process` returns (``None``: none yet)."""
    global _current
    with _current_lock:
        _current = process


def serve(*, node_name: str, index: int, stop: threading.Event) -> None:
    """Run worker process ``index`` of node ``node_name`` until ``stop`` is set."""
    name = worker_node_name(node_name, index)
    label_database_sessions(name)
    # The runs execute on this thread: its connection (opened unlabelled while the command
    # waited for the database) is opened again under the label, so the leader that fences
    # this process finds the session of a run in flight by name and ends it.
    connection.close()
    process = WorkerProcess(name, stop=stop)
    install(process)
    process.serve()


class WorkWaiter:
    """How an idle worker waits for work: a ``NOTIFY`` on PostgreSQL (with a safety-net
    poll every ``INSTATIC_NOTIFY_MAX_TICK`` seconds), a poll every ``INSTATIC_WORKER_POLL``
    seconds elsewhere; ``stop`` ends the wait within a moment either way."""

    def __init__(self, process: WorkerProcess):
        self.process = process
        self.stop = process.stop
        self._conn = None

    def _listening(self):
        if connection.vendor != "postgresql":
            return None
        if self._conn is None:
            from coordination.locks.base import new_raw_connection

            conn = new_raw_connection(
                "default", {"application_name": f"{self.process.node.name}/listen"[:63]}
            )
            conn.autocommit = True
            conn.execute(f"LISTEN {WORKERS_CHANNEL}")
            self._conn = conn
        return self._conn

    def wait(self) -> None:
        try:
            conn = self._listening()
        except Exception as exc:  # noqa: BLE001 - fall back to polling, try again later
            logger.warning("[%s] cannot listen for work: %s", self.process.host.log_prefix, exc)
            self.close()
            conn = None
        if conn is None:
            self.stop.wait(float(settings.WORKER_POLL))
            return
        deadline = time.monotonic() + float(settings.NOTIFY_MAX_TICK)
        while not self.stop.is_set() and time.monotonic() < deadline:
            try:
                if any(True for _ in conn.notifies(timeout=0.5, stop_after=1)):
                    return
            except Exception as exc:  # noqa: BLE001 - the connection died: poll, reconnect
                logger.warning("[%s] lost the wait for work: %s", self.process.host.log_prefix, exc)
                self.close()
                return

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception as exc:  # noqa: BLE001 - closing a connection already dead
                logger.debug(
                    "[%s] closing the wait's connection: %s", self.process.host.log_prefix, exc
                )
            self._conn = None
