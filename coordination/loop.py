"""One group's scheduler loop: read, plan, apply, sleep; from one wake-up to the next.

Each group (publishing, plugins, ...) has its own thread, lock and database connections, so a
slow plugin job never delays a publish. A tick reads the group's job states and the database
time in one query, asks the planner (coordination/planner.py, pure) once what to do, records
what it decided (missed slots, states moved on), queues the runs the plan gives to worker
processes, claims together the slots it says to, starts a worker for every other run, and
sleeps until the next due instant (bounded by ``INSTATIC_MAX_TICK``); on PostgreSQL a
``NOTIFY`` on the group's channel ends the sleep early. Following, taking and losing the lock
and restarting after a crash are coordination/supervision.py's; the group's upkeep between
ticks (states, retirement, dead nodes' runs, the sweep of runs on workers) is
coordination/maintenance.py's.
"""

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.dispatch import Signal

from coordination import alerts, ledger, outcomes
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.holdoff import HoldOffs
from coordination.journal import ClaimJournal, Entry
from coordination.locks import make_lock
from coordination.maintenance import Maintenance
from coordination.models import JobRun, JobState
from coordination.planner import (
    Advance,
    MissedSlots,
    RunPlan,
    SinceLastTick,
    TickInput,
    TickPlan,
    needs_full_tick,
    plan_tick,
)
from coordination.registry import Group, Job
from coordination.runner import Worker
from coordination.selectors import group_states, runs_awaiting_retry
from coordination.supervision import Supervision
from coordination.threads import JobThreads
from coordination.waker import Waker
from coordination.workers.queueing import queue_plans

logger = logging.getLogger(__name__)

#: Sent by a group's leader once per tick that starts runs, before it claims them, with
#: ``group`` (the group's name) and ``jobs`` (the jobs about to run). A receiver returns
#: ``{job name: exception}`` for runs that must not do their work: each such run is still
#: claimed, and recorded failed with that exception as if the job had raised it. The plugins
#: app refuses the jobs of a disabled plugin this way: one read a tick, not one a run.
runs_starting = Signal()

#: While runs keep finishing, the leader still reads its states at least this often (seconds),
#: as a safety net for a wake-up it did not hear.
REPLAN_WHILE_FINISHING = 1.0


class Wakeups:
    """What woke the loop since its last tick, set from other threads."""

    def __init__(self):
        self.waker = Waker()
        #: Set by every wake-up but a run finishing as planned: the next pass is a full tick.
        self.replan = True
        self._finished: list[tuple[str, bool]] = []
        self._mutex = threading.Lock()

    def run_finished(self, job_name: str, as_planned: bool) -> None:
        with self._mutex:
            self._finished.append((job_name, as_planned))
        self.waker.set()

    def take_finished(self) -> list[tuple[str, bool]]:
        """Return the runs finished since the last call, (job name, finished as planned)."""
        with self._mutex:
            finished, self._finished = self._finished, []
        return finished

    def take_all(self) -> None:
        """Forget every wake-up so far: the tick that calls this reads every state after it."""
        self.waker.clear()
        self.waker.take_notified()
        self.replan = False
        self.take_finished()


@dataclass
class LastTick:
    """What a tick leaves for the next pass: the runs still awaiting a retry, the busy jobs
    with work due behind their run, the ``--once`` horizon, and when it ran and asked to be
    woken (monotonic seconds)."""

    retries: list[JobRun] = field(default_factory=list)
    due_behind: frozenset[str] = frozenset()
    once_horizon: datetime | None = None
    ticked_at: float = 0.0
    wake_at: float = 0.0


class GroupLoop(threading.Thread):
    """The tick loop of one group, in its own thread (led by its ``supervision``)."""

    def __init__(self, scheduler, group: Group, *, once: bool = False):
        super().__init__(name=f"group:{group.name}", daemon=True)
        self.scheduler = scheduler
        self.node = scheduler.node
        self.clock = scheduler.clock
        self.group = group
        self.once = once
        key = settings.group_key(group.name)
        self.lock = make_lock(key, node_name=self.node.name, label=group.log_prefix)
        self.journal = ClaimJournal(
            node=self.node.name, instance=self.node.instance, log_prefix=group.log_prefix
        )
        self.supervision = Supervision(self)
        self.workers: dict[str, Worker] = {}
        self.job_threads = JobThreads(f"jobs:{group.name}")
        self.holds = HoldOffs()
        self.wakeups = Wakeups()
        self.maintenance = Maintenance(self.group.name, instance=self.node.instance)
        self.last_tick = LastTick()
        self.started_last_tick = 0

    def run(self) -> None:
        self.supervision.run()

    @property
    def leading(self) -> bool:
        return self.supervision.leading

    @property
    def down_since(self) -> float | None:
        """Monotonic time since which this loop is down after a crash (None: running)."""
        return self.supervision.down_since

    @property
    def waker(self) -> Waker:
        return self.wakeups.waker

    # --- control from other threads -----------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self.scheduler.stop_event.is_set()

    def wake(self) -> None:
        """Wake the loop for a full tick: something may have become due."""
        self.wake_for_tick()
        self.waker.set()

    def wake_for_tick(self) -> None:
        """Make the next pass a full tick (without waking the loop)."""
        self.wakeups.replan = True

    def run_finished(self, job_name: str, *, as_planned: bool) -> None:
        """Wake the loop for a finished run; ``as_planned``: a scheduled slot that finished and
        left its job's next slot where its tick planned it (nothing new can be due).

        The runs of a burst finish one after another; a full tick after each (every state
        read and planned again) would cost the leader more than the runs. So the loop plans
        again only when a run did not finish as planned, or its job had work due behind it.
        """
        self.wakeups.run_finished(job_name, as_planned)

    def interrupt(self) -> None:
        """Wake the loop and cancel a blocking lock wait (shutdown)."""
        self.wake()
        self.lock.cancel_wait()

    def request_maintenance(self) -> None:
        self.maintenance.requested = True
        self.waker.set()

    def fence_work_transaction(self, connection) -> bool:
        return self.leading and self.lock.fence_work_transaction(connection)

    def hold_off(self, job_name: str) -> bool:
        """Do not plan ``job_name`` for a while (doubling up to ``INSTATIC_MAX_TICK``).

        For a run that could not start (its previous run is still alive elsewhere) or that
        broke in the scheduler itself: planning it again at once would spin. Return True for
        the first hold of a streak.
        """
        return self.holds.hold(job_name, cap=float(settings.MAX_TICK))

    # --- what a run needs from its loop (``coordination.runhost.RunHost``) -----------------
    @property
    def log_prefix(self) -> str:
        return self.group.log_prefix

    def release_hold(self, job_name: str) -> None:
        self.holds.release(job_name)

    def submit(self, task) -> None:
        self.job_threads.submit(task)

    def cut_off(self, what: str) -> None:
        self.scheduler.cut_off(what)

    def database_failed(self, exc: BaseException) -> None:
        self.scheduler.db_health.failed(exc)

    def grace_deadline(self) -> float:
        return self.scheduler.grace_deadline()

    def took_over(self) -> None:
        """The lock is ours: look after the states at the first tick, and again once the
        previous leader's node counts as dead (its lease has run out), for its unfinished runs."""
        self.maintenance.requested = True
        self.maintenance.recheck_at = (
            time.monotonic() + float(settings.LEASE) + 2 * float(settings.HEARTBEAT_INTERVAL)
        )

    # --- one pass -------------------------------------------------------------------------
    def step(self) -> float:
        """Make one pass of a leader: a full tick, or only the finished workers' bookkeeping
        when all that woke it is runs finished as planned; return the sleep (seconds)."""
        if not self.needs_tick():
            return self.between_ticks()
        self.last_tick.ticked_at = time.monotonic()
        sleep_for = self.tick()
        self.last_tick.wake_at = time.monotonic() + sleep_for
        return sleep_for

    def needs_tick(self) -> bool:
        """Return whether what woke the loop since its last tick needs a full tick
        (``planner.needs_full_tick``); the runs finished meanwhile are taken either way."""
        waker = self.waker
        return needs_full_tick(
            SinceLastTick(
                replan=self.wakeups.replan,
                maintenance=self.maintenance.requested,
                notified=waker.notified,
                woken=waker.is_set(),
                listening=self.lock.listening,
                now=time.monotonic(),
                ticked_at=self.last_tick.ticked_at,
                wake_at=self.last_tick.wake_at,
                finished=self.wakeups.take_finished(),
                due_behind=self.last_tick.due_behind,
                replan_every=REPLAN_WHILE_FINISHING,
            )
        )

    def between_ticks(self) -> float:
        """Forget finished workers and check deadlines without a tick; return the sleep left.

        A ``NOTIFY`` marked since the check that chose this pass survives the clear: then
        the loop does not sleep but ticks at once.
        """
        self.waker.clear()
        if self.waker.notified or not self.lock.keep_alive():
            return 0.0
        self._reap_workers()
        self.check_timeouts()
        return max(0.0, self.last_tick.wake_at - time.monotonic())

    def tick(self) -> float:
        """Read, plan once, apply: start what is due (one slot per job); return the sleep
        (seconds)."""
        self.wakeups.take_all()
        self.started_last_tick = 0
        if not self.lock.keep_alive():
            return 0.0
        # Workers first, state second: a worker seen finished here committed before the read
        # below, so its job's next slot has moved on in what the tick sees.
        self._reap_workers()
        now, states, declared, read_at = self._read_states()
        self.check_timeouts()
        if self.once:
            # --once runs what was due when it started, not what falls due meanwhile.
            self.last_tick.once_horizon = self.last_tick.once_horizon or now
        plan = plan_tick(self._tick_input(now, states, declared))
        self.last_tick.retries, self.last_tick.due_behind = plan.waiting_retries, plan.due_behind
        runs = self._record(plan, {state.name: state for state in states})
        self.started_last_tick = len(runs)
        if runs:
            if not self.scheduler.heartbeat_fresh():
                logger.warning(
                    "[%s] own heartbeat is stale; not starting work until it is written",
                    self.group.log_prefix,
                )
                self._keep_retries(runs)
                return 0.5
            started = self._start(plan, runs)
            if started is None:
                self._keep_retries(runs)
                return 0.0
            runs = started
        sleep = plan.sleep_for(runs, elapsed=time.monotonic() - read_at)
        # Runs queued for workers just now are to be watched (``Maintenance.runs_queued``),
        # which the plan, made before they went out, could not know.
        recheck_at = self.maintenance.recheck_at
        return sleep if recheck_at is None else min(sleep, max(0.0, recheck_at - time.monotonic()))

    def _keep_retries(self, runs: list[RunPlan]) -> None:
        """Keep the retries among ``runs``, which this tick planned but does not start, waiting
        for the next tick: the retries are read from the ledger again only by maintenance (every
        few minutes) and the sweep of runs on workers."""
        kept = [plan.retry_run for plan in runs if plan.retry_run is not None]
        self.last_tick.retries = [*self.last_tick.retries, *kept]

    def _start(self, plan: TickPlan, runs: list[RunPlan]) -> list[RunPlan] | None:
        """Start ``runs`` (the plan's runs that its writes left) as ``plan`` routes them once
        the ``runs_starting`` receivers have answered (``TickPlan.route``): queue the runs for
        workers, claim the slots to claim together, start the rest here; return the runs
        started (a queued run's job moves on to its next slot as a started one's does), or
        ``None`` when the lock turned out lost before any started.

        The lock is confirmed once: by the queueing transaction's fence when every run goes
        to workers (a round trip less before a burst's tasks are in), else here first.
        """
        self._refuse(runs)
        routes = plan.route(runs)
        if routes.here and not self.lock.still_held():
            return None
        self._queue_for_workers(routes.queued)
        here = self._claim_together(routes.here, routes.together)
        self._start_workers(here)
        return routes.queued + here

    def _read_states(self) -> tuple[datetime, list, dict[str, Job], float]:
        """Read the database time and the group's states (after maintenance, when it is
        due); return them with the jobs declared and the monotonic time of the read."""
        declared = {job.name: job for job in self.scheduler.jobs_for(self.group.name)}
        if self.maintenance.sweep_due():
            self.maintenance.sweep(declared)
            self._read_retries(declared)
        now, states = group_states(self.group.name, exclude_instance=self.node.instance)
        read_at = time.monotonic()
        self.clock.sync(now)
        by_name = {state.name: state for state in states}
        if self.maintenance.due(declared, by_name):
            self.maintenance.run(
                now, declared, by_name, log_prefix=self.log_prefix, paused=self._unplannable_paused
            )
            self._read_retries(declared)
            now, states = group_states(self.group.name, exclude_instance=self.node.instance)
            read_at = time.monotonic()
            self.clock.sync(now)
        return now, states, declared, read_at

    def _tick_input(self, now: datetime, states: list, declared: dict[str, Job]) -> TickInput:
        recheck_at = self.maintenance.recheck_at
        return TickInput(
            now=now,
            states=states,
            declared=declared,
            busy={name: worker.plan for name, worker in self.workers.items()},
            held=self.holds.held(),
            retries=self.last_tick.retries,
            once_horizon=self.last_tick.once_horizon,
            max_tick=self._max_tick(),
            soon=float(settings.MAX_TICK),
            grace=timedelta(seconds=float(settings.MISFIRE_GRACE)),
            recheck_in=None if recheck_at is None else recheck_at - time.monotonic(),
            reraise=DATABASE_ERRORS,
        )

    def _max_tick(self) -> float:
        """Return the longest sleep between ticks.

        A leader that listens for ``NOTIFY`` (PostgreSQL) hears every change that makes work
        due sooner (scheduling a post, run now, resume), so it only re-reads state as a safety
        net, every ``INSTATIC_NOTIFY_MAX_TICK`` seconds; elsewhere it polls every
        ``INSTATIC_MAX_TICK`` seconds. This keeps an idle replica under a statement a second.
        """
        if self.lock.listening:
            return float(settings.NOTIFY_MAX_TICK)
        return float(settings.MAX_TICK)

    def _record(self, plan: TickPlan, by_name: dict) -> list[RunPlan]:
        """Record the missed slots and move the states on as ``plan`` says, and pause the jobs
        it could not plan; return the runs still to start (``TickPlan.runs_left``: none but
        retries for a job whose record raised other than a database error, which is paused
        like one whose planning raised)."""
        failed: set[str] = set()
        for write in plan.writes:
            if write.job.name in failed:
                continue
            try:
                self._write(write)
            except DATABASE_ERRORS:
                raise
            except Exception as exc:
                failed.add(write.job.name)
                self._planning_failed(write.job, by_name[write.job.name], exc)
        for unplannable in plan.unplannable:
            self._planning_failed(unplannable.job, unplannable.state, unplannable.error)
        return plan.runs_left(failed)

    def _write(self, write: MissedSlots | Advance) -> None:
        if isinstance(write, Advance):
            ledger.advance(write.job, write.next_due)
            return
        job = write.job
        skipped = ledger.skip_slots(job, write.start, before=write.before, reason=write.reason)
        if skipped and write.by_policy:
            logger.info(
                "[%s] job %s: %d slot(s) missed (%s, policy %s)",
                self.group.log_prefix,
                job.name,
                skipped,
                write.reason,
                job.missed,
            )

    def _start_workers(self, plans: list[RunPlan]) -> None:
        """Start a worker for each plan, handed to the job threads in one step.

        Handing the pool a thousand runs one by one kept this thread competing for the GIL
        with the job threads already running them; as one batch (``JobThreads.submit_batch``)
        each job thread runs them one after another until none is left.
        """
        workers = [Worker(self, plan) for plan in plans]
        for worker in workers:
            self.workers[worker.job.name] = worker
            worker.mark_started()
        self.job_threads.submit_batch([worker.run for worker in workers])

    def _refuse(self, plans: list[RunPlan]) -> None:
        """Ask the ``runs_starting`` receivers which of ``plans`` must not do their work.

        A receiver's database error ends the tick before anything is claimed (fail closed).
        """
        refusals: dict[str, BaseException] = {}
        jobs = [plan.job for plan in plans]
        for _receiver, answer in runs_starting.send(
            sender=type(self), group=self.group.name, jobs=jobs
        ):
            refusals.update(answer or {})
        for plan in plans:
            plan.refusal = refusals.get(plan.job.name)

    def _queue_for_workers(self, queued: list[RunPlan]) -> None:
        """Queue runs of jobs on workers (claim and task in one fenced transaction,
        ``workers.queueing``)."""
        if not queued:
            return
        runs = queue_plans(queued, node=self.node, fence=self.lock.fence_work_transaction)
        self._remember_queued(runs, {plan.job.name: plan.job for plan in queued})
        if runs:
            self.maintenance.runs_queued()
        logger.debug(
            "[%s] queued %d of %d run(s) for worker processes",
            self.group.log_prefix,
            len(runs),
            len(queued),
        )

    def _remember_queued(self, runs: list[JobRun], jobs: dict[str, Job]) -> None:
        """Note the claim-first runs this leader queued in its journal (``journal``), as
        abandoned: if a failover loses such a claim, no one can tell whether a worker ran it,
        so it is written back as an abandoned run, which the job's ``retry_abandoned``
        decides about, rather than planned again as a slot that never ran. A transactional
        run lost with it was lost with its effects and runs again, as on the leader."""
        for run in runs:
            if run.trigger == JobRun.Trigger.RETRY or jobs[run.job].transactional:
                continue
            self.journal.record(
                Entry(
                    job=run.job,
                    slot=run.slot,
                    transactional=False,
                    trigger=run.trigger,
                    status=JobRun.Status.ABANDONED,
                    queued=True,
                )
            )

    def _claim_together(self, plans: list[RunPlan], batch: list[RunPlan]) -> list[RunPlan]:
        """Claim ``batch``'s slots (of ``plans``; claim-first scheduled slots) in one
        transaction; return the plans to start.

        A thousand jobs due at the same instant then cost a few statements to claim, not a
        transaction each, and every row is committed before any of them starts. Slots another
        node holds are skipped (their jobs have moved on), like a worker's taken claim.
        """
        if not batch:
            return plans
        claimed = ledger.claim_scheduled(
            [(plan.job, plan.slot, plan.next_due) for plan in batch],
            node=self.node.name,
            instance=self.node.instance,
        )
        for plan in batch:
            plan.claimed_run = claimed.get(plan.job.name)
            if plan.claimed_run is None:
                logger.info(
                    "[%s] job %s slot %s already claimed elsewhere; skipping",
                    self.group.log_prefix,
                    plan.job.name,
                    plan.slot.isoformat(),
                )
        batched = {id(plan) for plan in batch}
        return [plan for plan in plans if id(plan) not in batched or plan.claimed_run is not None]

    def _planning_failed(self, job: Job, state: JobState, exc: Exception) -> None:
        """Pause ``job``, whose planning raised ``exc``, with the reason; log and alert once.

        A job paused already (by an operator, say) keeps its reason; it is held off like a
        run that could not start, so a failure that lasts does not cost every tick.
        """
        self.hold_off(job.name)
        if state.paused or not ledger.pause_unplannable(job, exc):
            logger.debug("[%s] planning paused job %s failed", self.group.log_prefix, job.name)
            return
        self._unplannable_paused(job, exc)

    def _unplannable_paused(self, job: Job, exc: Exception) -> None:
        """Say that ``job`` was paused because planning it raised ``exc``."""
        logger.error(
            "[%s] job %s paused: the scheduler could not plan it (%s: %s); the other jobs of "
            "its group go on",
            self.group.log_prefix,
            job.name,
            type(exc).__name__,
            exc,
            exc_info=exc,
        )
        alerts.job_cannot_be_planned(job.name, f"{type(exc).__name__}: {exc}")

    def _read_retries(self, declared: dict[str, Job]) -> None:
        """Read the runs waiting for another attempt (planned as their time comes)."""
        self.last_tick.retries = runs_awaiting_retry(
            abandoned=[name for name, job in declared.items() if job.retry_abandoned],
            failed=[name for name, job in declared.items() if job.retries],
        )

    # --- workers --------------------------------------------------------------------------
    def _reap_workers(self) -> None:
        for name, worker in list(self.workers.items()):
            if not worker.is_alive():
                del self.workers[name]

    def check_timeouts(self) -> None:
        for worker in self.workers.values():
            # A run whose function returned in time is only waiting for its outcome's write.
            if worker.timed_out or worker.function_returned or not worker.past_deadline():
                continue
            worker.timed_out = True
            job = worker.job
            logger.error(
                "[%s] job %s timed out: still running after its max_duration of %s; "
                "it is not started again until it returns",
                self.group.log_prefix,
                job.name,
                job.max_duration,
            )
            run = worker.current_run
            if not job.transactional and run is not None:
                ledger.record_timed_out(run, instance=self.node.instance)
            self.scheduler.metrics_run(job, "timed_out", None)

    def function_ended(self, seconds: float) -> None:
        """The leader's threads take no work ahead: nothing paces them."""

    def finish_run(self, run: JobRun, job: Job, outcome: ledger.RunOutcome) -> bool | None:
        """Record a claim-first run's outcome: one statement on the run's own job thread."""
        return ledger.finish_with_state(run, job, outcome, instance=self.node.instance)

    def report_outcome(
        self, job: Job, slot, status: str, duration: float, *, error=None, paused=False
    ):
        """Log a finished run and feed the metrics; its worker wakes the loop as it returns."""
        self.scheduler.metrics_run(job, status, duration)
        outcomes.report_outcome(
            job,
            slot,
            status,
            duration,
            log_prefix=self.group.log_prefix,
            error=error,
            paused=paused,
        )
