"""One worker process: take queued runs' tasks from the database queue and execute them.

``runscheduler --workers N`` and ``runworker --processes N`` start these (``pool.py``). Each
is a node of its own in the ``Node`` table (``<node>/worker-<i>``, role ``worker``), so the
ledger names the process that executed a run, and the leader finds the runs of a worker
that died by its heartbeat, written only while it executes (an idle worker sends nothing
but its wait for work: a ``LISTEN`` on PostgreSQL, a poll every ``INSTATIC_WORKER_POLL``
seconds elsewhere).

Task rows are taken in batches (``claiming``: one ``SELECT ... FOR UPDATE SKIP LOCKED`` for
as many as the process has idle threads, marked running with this process's instance as
their worker id, and their claim-first runs moved to running in one conditional ``UPDATE``);
each run then executes on a thread of the process (``INSTATIC_WORKER_THREADS``), with the
leader's :class:`coordination.runner.Worker`, so the ledger decides whether a run starts and
fences its outcome exactly as for a single run.
"""

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable

from django.db import connection, transaction

from coordination import ledger
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS, Backoff
from coordination.liveness import NodeIdentity, mark_stopped, register_node
from coordination.models import JobRun, Node
from coordination.node_setup import jobs_fingerprint, label_database_sessions
from coordination.planner import RunPlan
from coordination.registry import JobRegistry, registry
from coordination.runner import Worker
from coordination.threads import JobThreads, discard_broken_connection
from coordination.workers.claiming import (
    TakenTask,
    count_outstanding,
    decide_batch,
    fail_tasks,
    finish_tasks,
    has_ready_tasks,
    read_runs,
    take_ready_tasks,
)
from coordination.workers.execution import Delivery, execute
from coordination.workers.host import RunHeartbeat, WorkerHost
from coordination.workers.limits import NoWatch, RunWatch, watch_from_environment
from coordination.workers.meeting import (
    BACKEND_ALIAS,
    QUEUE_NAME,
    RUN_TASK_PATH,
    worker_node_name,
)
from coordination.workers.postgresql_take import take_and_start
from coordination.workers.sizing import (
    READY_COUNTED,
    first_share,
    refill,
    take_ahead,
    worker_threads,
)
from coordination.workers.waiting import WorkWaiter

logger = logging.getLogger(__name__)


class WorkerProcess:
    """This process as a worker: its node row, its heartbeat, the host of its runs and the
    threads they run on.

    It takes work in batches (``claiming``): as many ready tasks as it has idle threads, in
    one claim, their claim-first runs moved to running in one statement; each run then goes to
    a thread of its own (``INSTATIC_WORKER_THREADS``), and the tasks' ends are written
    together after them.
    """

    def __init__(
        self,
        name: str,
        *,
        stop: threading.Event,
        registry: JobRegistry = registry,
        threads: int | None = None,
    ):
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
        self.thread_count = worker_threads(
            settings.WORKER_THREADS if threads is None else threads, connection.vendor
        )
        #: A run's job function's time, averaged over the recent runs (``take_ahead``).
        self.run_seconds: float | None = None
        self.threads = JobThreads(f"worker-{name}", max_threads=self.thread_count)
        self.watch: RunWatch = NoWatch()
        self._lock = threading.Lock()
        self._busy = 0
        self._in_flight = 0
        #: The tasks of the batch being dispatched whose runs have not started yet.
        self._undispatched: set[uuid.UUID] = set()
        #: The runs of the batch being dispatched, handed to the threads together at its end.
        self._dispatched: list[Callable[[], None]] = []
        self._ended: list[tuple[uuid.UUID, str]] = []
        self._failed: list[tuple[uuid.UUID, str, str]] = []
        #: Set whenever a run ends (the loop may take more work or write the tasks' ends),
        #: a run's job function returns (the pace changed) and the leader queues work
        #: (``WorkWaiter``): what the loop waits on.
        self.changed = threading.Event()
        self.host.paced = self._ran_for

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
        with self._lock:
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
        with self._lock:
            self._busy -= 1
            quiet = not self._busy
        if quiet:
            self.heartbeat.idle()

    @property
    def capacity(self) -> int:
        """Most runs this process holds at once: one per thread running, and as many taken
        ahead, waiting for a thread, as :func:`take_ahead` says for the pace of its runs."""
        return take_ahead(self.thread_count, self.run_seconds)

    def _ran_for(self, seconds: float) -> None:
        """Count one run's time in the recent pace (a moving average) as its job function
        returns (``WorkerHost.function_ended``), and look again: its job function's own time,
        not the writes around it. Those grow when the database is busy, and counting them
        would have the process take fewer runs a claim just when each claim costs most (more
        claims, a busier database); waiting for them would have it take its next batch late."""
        with self._lock:
            if self.run_seconds is None:
                self.run_seconds = seconds
            else:
                self.run_seconds += (seconds - self.run_seconds) / 8
        self.changed.set()

    @property
    def in_flight(self) -> int:
        """How many runs this process holds now: running on its threads or waiting for one."""
        with self._lock:
            return self._in_flight

    def execute(self, run_id: int, attempt: int) -> Delivery:
        """Execute one delivery of a run's task (``execution.execute``), heartbeating: the
        path of a task another django-tasks backend's worker delivers."""
        self.busy()
        try:
            return execute(run_id, attempt, host=self.host, registry=self.registry)
        finally:
            self.idle()

    def take_tasks(self, limit: int, *, share: bool = True) -> list[TakenTask]:
        """Take up to ``limit`` ready tasks of Instatic's queue for this process; with
        ``share``, before it knows the pace of its runs, its share of the outstanding tasks if
        that is more (:func:`first_share`; the processes counted are the worker nodes not stopped,
        a killed one among them until the sweep marks it, which only makes the share smaller).

        The heartbeat is written in the same transaction as the take: a task row is never
        ``RUNNING`` under a worker whose heartbeat looks stale (the sweep would fence it).
        On PostgreSQL the two and the start of the runs that may start unread are one
        statement (:meth:`_take_and_start`): a burst's runs start as it starts, and a task is
        never taken without its startable run. Elsewhere a look that finds nothing costs one
        ``SELECT`` and no transaction; on PostgreSQL, once this process knows its pace, the
        look is that statement alone, which writes nothing when no task is ready.
        """
        names = {"queue_name": QUEUE_NAME, "backend": BACKEND_ALIAS}
        if limit < 1:
            return []
        if share and self.run_seconds is None:
            ready, taken, workers = count_outstanding(**names, most=READY_COUNTED)
            if ready > limit:
                share = first_share(self.thread_count, ready + taken, workers)
                limit = max(limit, share - self.in_flight)
        else:
            ready = connection.vendor == "postgresql" or has_ready_tasks(**names)
        if not ready:
            return []  # an idle look: one SELECT, no transaction
        if connection.vendor == "postgresql":
            return self._take_and_start(names, limit)
        with transaction.atomic():
            if not self.beat_if_due():
                return []  # fenced (or stopping): the tasks stay ready for a live worker
            return take_ready_tasks(**names, limit=limit, worker_id=self.node.instance)

    def _take_and_start(self, names: dict, limit: int) -> list[TakenTask]:
        """Heartbeat, take up to ``limit`` tasks and start the runs that may start unread, in
        one statement (``postgresql_take.take_and_start``); nothing if this process stops or
        was fenced (the tasks stay ready for a live worker)."""
        if self.stop.is_set():
            return []
        started = time.monotonic()
        take = take_and_start(
            **names,
            limit=limit,
            worker_id=self.node.instance,
            beat=self.heartbeat.beat_sql(),
            jobs=[job.name for job in self.registry.all() if not job.transactional],
            node=self.node.name,
            instance=self.node.instance,
            expected_path=RUN_TASK_PATH,
        )
        if take.ready and not self.heartbeat.record(started, written=take.written):
            return []
        return take.tasks

    def take_task(self) -> TakenTask | None:
        """Take the next ready task, or ``None`` (a batch of one)."""
        tasks = self.take_tasks(1, share=False)
        return tasks[0] if tasks else None

    def dispatch(self, tasks: list[TakenTask]) -> int:
        """Start the runs of ``tasks`` on this process's threads; return how many started.

        The runs the take started (``TakenTask.started``) go first, before any statement; of
        the rest, what becomes of each task is :func:`claiming.decide_batch`; the claim-first
        runs move to running in one statement; tasks that end here (taken elsewhere, paused,
        refused) have their ends written before this returns. The runs started go to the
        threads together at the end (``submit_batch``), so that no run's outcome is written
        before every job function of the batch has begun.
        """
        self._undispatched = {task.id for task in tasks}
        try:
            return self._dispatch(tasks)
        except BaseException:
            # A database error before a task's run started: its end is kept for the next
            # flush ("taken"), so the leader's sweep queues its run again, instead of the task
            # staying RUNNING under this live process, which nobody would look at again.
            with self._lock:
                self._ended.extend((task_id, Delivery.TAKEN) for task_id in self._undispatched)
            raise
        finally:
            # Started runs go to the threads however the dispatch ended: their rows are running.
            self._undispatched = set()
            runs, self._dispatched = self._dispatched, []
            self.threads.submit_batch(runs)

    def _dispatch(self, tasks: list[TakenTask]) -> int:
        started = 0
        for task in tasks:
            if task.started is not None:
                self._submit(task, task.started, task.started, next_due=task.started.next_due)
                started += 1
        tasks = [task for task in tasks if task.started is None]
        if not tasks:
            return started
        runs, states = read_runs(tasks)
        plan = decide_batch(
            tasks,
            runs,
            states,
            expected_path=RUN_TASK_PATH,
            transactional=self._transactional,
        )
        for task, reason in plan.refused:
            logger.error("[%s] task %s %s", self.host.log_prefix, task.id, reason)
        ended = [(task.id, outcome) for task, outcome in plan.done]
        for task, run, reason in plan.skipped:
            ended.append((task.id, self._skip(run, reason)))
        taken = ledger.take_queued_batch(
            [run for _, run in plan.start], node=self.node.name, instance=self.node.instance
        )
        for task, run in plan.start:
            if run.pk not in taken:
                ended.append((task.id, Delivery.TAKEN))
                continue
            state = states.get(run.job)
            self._submit(task, run, taken[run.pk], next_due=state.next_due if state else None)
            started += 1
        for task, run in plan.transactional:
            self._submit(task, run, None)
            started += 1
        finish_tasks(ended)
        fail_tasks([(task.id, "", reason) for task, reason in plan.refused])
        return started

    def _transactional(self, job_name: str) -> bool | None:
        job = self.registry.get(job_name)
        if job is None:
            logger.warning(
                "[%s] a run of job %s left queued: this process does not declare the job",
                self.host.log_prefix,
                job_name,
            )
            return None
        return job.transactional

    def _skip(self, run: JobRun, reason: str) -> str:
        with transaction.atomic():
            skipped = ledger.skip_queued(run, reason=reason)
        if skipped:
            logger.info(
                "[%s] job %s slot %s not started: the job was paused while it was queued",
                self.host.log_prefix,
                run.job,
                run.slot.isoformat(),
            )
        return Delivery.SKIPPED if skipped else Delivery.TAKEN

    def _submit(
        self, task: TakenTask, queued: JobRun, claimed: JobRun | None, *, next_due=None
    ) -> None:
        """Add one run to the batch handed to the threads when :meth:`dispatch` ends; its
        task's end is kept for :meth:`flush`.

        The run's worker is made on its thread, as it starts: its max duration counts from
        there, not from the take (a run taken ahead waits for a thread first). A claim-first
        run is given its job's next slot as the leader queued it (``next_due``), so one that
        ends before that slot is due ended as planned and wakes no leader; its outcome never
        writes that slot (the leader moved the job on when it queued the run).
        """
        job = self.registry.get(queued.job)
        plan = RunPlan(
            job=job,
            slot=queued.slot,
            trigger=queued.trigger,
            requested_by=queued.requested_by,
            queued_run=queued,
            claimed_run=claimed,
            next_due=next_due if claimed is not None else None,
        )
        self._undispatched.discard(task.id)
        with self._lock:
            self._in_flight += 1
        self.busy(beat=False)  # the take just wrote the heartbeat
        worker: Worker | None = None
        counted = []  # the run's end is counted once, whoever sees it first

        def ended(failure: tuple[uuid.UUID, str, str] | None = None) -> None:
            with self._lock:
                if counted:
                    return
                counted.append(True)
            if failure is None:
                taken_elsewhere = job.transactional and worker.current_run is None
                self._run_ended(end=(task.id, Delivery.TAKEN if taken_elsewhere else Delivery.RAN))
            else:
                self._run_ended(failure=failure)

        def run() -> None:
            nonlocal worker
            try:
                # The run's outcome waits on these threads behind the runs taken with it, as
                # the leader's does on its job threads: a burst's job functions all begin
                # before the threads turn to writing outcomes (a few, many to a statement).
                worker = Worker(self.host, plan, outcomes=self.threads.submit, on_end=ended)
                worker.mark_started()
                self.watch.started(queued, job)
                worker.run()
            except Exception as exc:
                logger.exception("[%s] task %s failed", self.host.log_prefix, task.id)
                name = f"{type(exc).__module__}.{type(exc).__qualname__}"
                ended(failure=(task.id, name, str(exc)))
            finally:
                # The job function has returned: the run's max duration no longer applies,
                # though its outcome may still wait for a thread.
                self.watch.ended(queued)

        self._dispatched.append(run)

    def _run_ended(
        self,
        *,
        end: tuple[uuid.UUID, str] | None = None,
        failure: tuple[uuid.UUID, str, str] | None = None,
    ) -> None:
        """Count a run of this process as ended, its outcome recorded (``end``) or not
        (``failure``): its task's end is kept for :meth:`flush`, and the loop is woken."""
        self.idle()
        with self._lock:
            if failure is None:
                self._ended.append(end)
            else:
                self._failed.append(failure)
            self._in_flight -= 1
        self.changed.set()

    def flush(self) -> None:
        """Write the ends of the tasks whose runs ended (a few statements for all of them).

        Ends that a database error kept from being written are kept for the next flush (both
        writes touch only tasks still running, so writing one twice changes nothing): a task
        left ``RUNNING`` under a live worker is one that nobody ever looks at again, and its
        run, back in the queue, would wait for ever.
        """
        with self._lock:
            ended, self._ended = self._ended, []
            failed, self._failed = self._failed, []
        try:
            if ended:
                finish_tasks(ended)
            if failed:
                fail_tasks(failed)
        except BaseException:
            with self._lock:
                self._ended[:0] = ended
                self._failed[:0] = failed
            raise

    def wait_for_runs(self, timeout: float | None = None) -> bool:
        """Wait until no run is in flight (``timeout``: at most that long); return whether
        none is."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.in_flight:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            self.changed.wait(0.05 if left is None else min(0.05, left))
            self.changed.clear()
        return True

    def _look(self, free: int) -> int:
        """Take up to ``free`` tasks and start them; return how many were taken (0 when
        stopping)."""
        if self.host.in_doubt:
            # An idle look writes nothing, so a fenced process would learn it only when work
            # came: find out now, and stop (the pool starts a live one) if so.
            self.host.in_doubt = False
            self.heartbeat.beat()
        if self.stop.is_set() or self.watch.overrun():
            return 0
        self.busy(beat=False)
        try:
            tasks = self.take_tasks(free)
            self.dispatch(tasks)
        finally:
            self.idle()
        return len(tasks)

    def work(self) -> bool:
        """Take one batch, run it to its end and write its tasks' ends, then let the threads
        that ran it close their connections; return False if no task was ready (or this
        process stops)."""
        taken = self._look(self.capacity - self.in_flight)
        self.wait_for_runs()
        self.flush()
        # A batch on its own (a test, a one-off caller) leaves no thread, and so no database
        # session, behind it once this returns (a session seen ending later would make the
        # leader's watch take this live process for a killed one); serve() keeps its threads
        # and their connections between looks.
        self.threads.shutdown(wait=True)
        self.threads = JobThreads(self.threads.prefix, max_threads=self.thread_count)
        return bool(taken)

    def serve(self) -> None:
        """Run tasks until ``stop`` is set, waiting for work in between (``WorkWaiter``).

        It looks once half of what it may hold is free (``refill``); after a full batch it
        looks again as soon as that holds, after a short one it waits for work or for a run
        to end.
        """
        logger.info("[%s] waiting for runs (%d thread(s))", self.host.log_prefix, self.thread_count)
        waiter = WorkWaiter(self)
        self.threads.start_all(connection.ensure_connection)
        try:
            backoff = Backoff()
            while not self.stop.is_set():
                try:
                    self.changed.clear()
                    self.flush()
                    capacity = self.capacity
                    free = capacity - self.in_flight
                    taken = self._look(free) if refill(free, capacity) else 0
                except DATABASE_ERRORS as exc:
                    # The database went away (a restart, a failover): look again shortly on
                    # a new connection; a task taken meanwhile is swept back by the leader.
                    logger.warning("[%s] database error: %s", self.host.log_prefix, exc)
                    self.host.in_doubt = True
                    connection.close()
                    self.stop.wait(backoff.next())
                    continue
                backoff = Backoff()
                discard_broken_connection()  # kept between looks, as a job thread keeps it
                if taken and taken == free:
                    continue  # a full batch: there may be more
                waiter.wait()
        finally:
            waiter.close()
            self.wait_for_runs(float(settings.SHUTDOWN_GRACE))
            try:
                self.flush()
            except DATABASE_ERRORS as exc:
                logger.warning("[%s] could not record tasks' ends: %s", self.host.log_prefix, exc)
            self.close()
            logger.info("[%s] stopped", self.host.log_prefix)

    def close(self) -> None:
        self.threads.shutdown()
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
    process.watch = watch_from_environment(
        instance=process.node.instance, grace=float(settings.WORKER_KILL_GRACE)
    )
    install(process)
    process.serve()
