"""One group's scheduler loop: follow until the lock is ours, then tick until it is not.

Each group (publishing, plugins, ...) has its own thread, lock and database connections, so a
slow plugin job never delays a publish. A tick reads the group's job states and the database
time in one query, starts a worker for every due job that is not already running, and sleeps
until the next due instant (bounded by ``INSTATIC_MAX_TICK``); on PostgreSQL a ``NOTIFY`` on the
group's channel ends the sleep early.
"""

import logging
import threading
import time
from collections import deque
from datetime import datetime, timedelta

from django.db import connection
from django.dispatch import Signal

from coordination import alerts, catchup, leadership, ledger
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS, Backoff
from coordination.holdoff import HoldOffs
from coordination.journal import ClaimJournal
from coordination.keys import format_key
from coordination.locks import make_lock
from coordination.models import JobRun, JobState
from coordination.registry import Group, Job
from coordination.runner import RunPlan, Worker, plan_claimable_together
from coordination.selectors import declared_by_live_nodes, group_states, runs_awaiting_retry
from coordination.services import paused_reason
from coordination.threads import JobThreads, between_runs
from coordination.waker import Waker

logger = logging.getLogger(__name__)

#: Sent by a group's leader once per tick that starts runs, before it claims them, with
#: ``group`` (the group's name) and ``jobs`` (the jobs about to run). A receiver returns
#: ``{job name: exception}`` for runs that must not do their work: each such run is still
#: claimed, and recorded failed with that exception as if the job had raised it. The plugins
#: app refuses the jobs of a disabled plugin this way: one read a tick, not one a run.
runs_starting = Signal()

MAINTENANCE_INTERVAL = 300.0
#: Longest pause before a crashed loop is started again (it starts at one second).
MAX_RESTART_DELAY = 30.0
#: While runs keep finishing, the leader still reads its states at least this often (seconds),
#: as a safety net for a wake-up it did not hear.
REPLAN_WHILE_FINISHING = 1.0


class GroupLoop(threading.Thread):
    """The leader election and tick loop of one group, in its own thread."""

    def __init__(self, scheduler, group: Group, *, once: bool = False):
        super().__init__(name=f"group:{group.name}", daemon=True)
        self.scheduler = scheduler
        self.node = scheduler.node
        self.clock = scheduler.clock
        self.group = group
        self.once = once
        self.key = settings.group_key(group.name)
        self.lock = make_lock(self.key, node_name=self.node.name, label=group.log_prefix)
        self.workers: dict[str, Worker] = {}
        self.job_threads = JobThreads(f"jobs:{group.name}")
        #: Workers started by a tick, waiting for a job thread (see ``_start_workers``).
        self._starting: deque[Worker] = deque()
        self.leading = False
        #: Monotonic time since which this loop is down after a crash (None: running).
        self.down_since: float | None = None
        self._restart_backoff = Backoff(first=1.0, cap=MAX_RESTART_DELAY)
        self._wake = Waker()
        self._maintenance_requested = True
        self._last_maintenance = 0.0
        self._retries: list[JobRun] = []
        self._recheck_at: float | None = None
        self.holds = HoldOffs()
        self._once_horizon: datetime | None = None
        self.started_last_tick = 0
        self.journal = ClaimJournal(
            node=self.node.name, instance=self.node.instance, log_prefix=group.log_prefix
        )
        #: Set by every wake-up but a run finishing as planned: the next pass is a full tick.
        self._replan = True
        #: Runs finished since the last tick: (job name, finished as planned).
        self._finished: list[tuple[str, bool]] = []
        self._finished_mutex = threading.Lock()
        #: Busy jobs that had work due behind their run at the last tick (a run-now request,
        #: a slot come due, a retry): when one of them finishes, the loop plans again.
        self._due_behind: set[str] = set()
        #: When the last tick ran and when it asked to be woken (monotonic).
        self._last_tick_mono = 0.0
        self._next_tick_mono = 0.0

    # --- control from other threads -----------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self.scheduler.stop_event.is_set()

    def wake(self) -> None:
        """Wake the loop for a full tick: something may have become due."""
        self._replan = True
        self._wake.set()

    def run_finished(self, job_name: str, *, as_planned: bool) -> None:
        """Wake the loop for a finished run; ``as_planned``: a scheduled slot that finished and
        left its job's next slot where its tick planned it (nothing new can be due).

        The runs of a burst finish one after another; a full tick after each (every state
        read and planned again) would cost the leader more than the runs. So the loop plans
        again only when a run did not finish as planned, or its job had work due behind it.
        """
        with self._finished_mutex:
            self._finished.append((job_name, as_planned))
        self._wake.set()

    def interrupt(self) -> None:
        """Wake the loop and cancel a blocking lock wait (shutdown)."""
        self.wake()
        self.lock.cancel_wait()

    def request_maintenance(self) -> None:
        self._maintenance_requested = True
        self._wake.set()

    def lock_still_held(self) -> bool:
        return self.leading and self.lock.still_held()

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

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        """Run the loop; if it crashes, log it, start it again with backoff, and say so.

        A loop that died for good would leave the process up and heartbeating but never
        leading its group again. While it is down, ``down_since`` is set, which the node's
        health check reports.
        """
        try:
            while True:
                try:
                    if self.once:
                        self._run_once()
                    else:
                        self._run_forever()
                    return
                except Exception as exc:
                    delay = self._crashed(exc)
                    if self.once or self.stopping:
                        return
                    self._wake.wait(delay)
                    self._wake.clear()
        finally:
            self._shutdown()

    def _crashed(self, exc: Exception) -> float:
        """Log a crash, drop the lock (another node can lead meanwhile); return the delay."""
        if self.down_since is None:
            self.down_since = time.monotonic()
        delay = self._restart_backoff.next()
        logger.error(
            "[%s] scheduler loop crashed; starting it again in %.0fs",
            self.group.log_prefix,
            delay,
            exc_info=exc,
        )
        self.scheduler.cut_off(f"the {self.group.name} loop crashed")
        self.journal.doubt()
        if self.leading:
            leadership.end(
                self.group.name,
                instance=self.node.instance,
                reason=leadership.EndReason.LOOP_CRASHED,
                detail=f"{type(exc).__name__}: {exc}",
            )
        self.leading = False
        try:
            self.lock.close()
        except Exception:
            logger.debug("[%s] closing the lock after a crash failed", self.group.log_prefix)
        connection.close()
        return delay

    def _running_again(self) -> None:
        if self.down_since is not None:
            logger.warning(
                "[%s] scheduler loop is running again after %.1fs",
                self.group.log_prefix,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
            self._restart_backoff.reset()

    def _run_forever(self) -> None:
        backoff = Backoff()
        while not self.stopping:
            if not self.leading:
                if not self._journal_checked():
                    self._wake.wait(backoff.next())
                    self._wake.clear()
                    continue
                waited = time.monotonic()
                led = self._try_lead(wait=float(settings.LOCK_WAIT))
                self._running_again()
                if led:
                    backoff.reset()
                    continue
                # A failed acquire that returned at once means an error: back off.
                if time.monotonic() - waited < 0.05 and not self.stopping:
                    self.journal.doubt()
                    self._wake.wait(backoff.next())
                    self._wake.clear()
                continue
            try:
                if self._only_planned_runs_finished():
                    sleep_for = self._between_ticks()
                else:
                    self._last_tick_mono = time.monotonic()
                    sleep_for = self.tick()
                    self._next_tick_mono = time.monotonic() + sleep_for
                self.scheduler.db_health.ok()
                backoff.reset()
            except DATABASE_ERRORS as exc:
                self.scheduler.db_health.failed(exc)
                self.journal.doubt()
                connection.close()
                sleep_for = backoff.next()
                self._replan = True
            self._running_again()
            if self.leading and not self.lock.acquired:
                self._lost()
                continue
            if sleep_for > 0 and not self.stopping:
                self.lock.wait_for_wakeup(sleep_for, self._wake)
                if self.leading and not self.lock.acquired:
                    self._lost()

    def _only_planned_runs_finished(self) -> bool:
        """Return True when all that woke the loop is runs finished as planned, whose jobs had
        nothing due behind them, before the last tick's wake-up time: no tick is needed.

        Anything else (a ``NOTIFY``, which the lock marks on the waker however it was read:
        by the sleep or by a job thread's ``still_held()``; a maintenance request; a run-now;
        the wake-up time) makes the next pass a full tick. So does every finished run where
        no wake-up reaches the leader (SQLite polls), and one a second
        (``REPLAN_WHILE_FINISHING``) at most.
        """
        if (
            self._replan
            or self._maintenance_requested
            or self._wake.notified
            or not self._wake.is_set()
        ):
            return False
        now = time.monotonic()
        if now >= self._next_tick_mono or not self.lock.listening:
            return False
        if now - self._last_tick_mono >= REPLAN_WHILE_FINISHING:
            return False
        with self._finished_mutex:
            finished, self._finished = self._finished, []
        if any(not as_planned or name in self._due_behind for name, as_planned in finished):
            self._replan = True
            return False
        return True

    def _between_ticks(self) -> float:
        """Forget finished workers and check deadlines without a tick; return the sleep left.

        A ``NOTIFY`` marked since the check that chose this pass survives the clear: then
        the loop does not sleep but ticks at once.
        """
        self._wake.clear()
        if self._wake.notified or not self.lock.keep_alive():
            return 0.0
        self._reap_workers()
        self._check_timeouts()
        return max(0.0, self._next_tick_mono - time.monotonic())

    def _journal_checked(self) -> bool:
        """Check this node's recent runs against the ledger if the database was in doubt.

        Before leading again after an error or a lost lock: a failover to a standby that
        missed the last commits would otherwise make this node (or another) run those slots
        again (see coordination/journal.py). Return False while the database cannot be read.
        """
        if not self.journal.needs_check:
            return True
        try:
            self.journal.check()
        except DATABASE_ERRORS as exc:
            self.scheduler.db_health.failed(exc)
            connection.close()
            return False
        return True

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

    def _run_once(self) -> None:
        if not self._try_lead(wait=0):
            logger.info(
                "[%s] another node leads (key %s); nothing to do in --once mode",
                self.group.log_prefix,
                format_key(self.lock.key),
            )
            return
        # One slot per job per tick: tick again until everything that was due when this
        # started has run (a catch-up of several slots, a run-now behind a slot), no further.
        self._once_horizon = None
        while not self.stopping:
            self.tick()
            for worker in list(self.workers.values()):
                worker.join()
            if not self.started_last_tick:
                return

    def _due_at_start(self, plan: RunPlan) -> bool:
        """In --once mode: was ``plan`` due when this run started (a retry by its retry time)?"""
        retry_at = plan.retry_run.retry_at if plan.retry_run is not None else None
        return plan.slot <= self._once_horizon and (
            retry_at is None or retry_at <= self._once_horizon
        )

    def _try_lead(self, *, wait: float) -> bool:
        if not self.lock.acquire(wait=wait):
            return False
        try:
            self._record_leadership()
            self.lock.listen(self.group.channel)
        except Exception as exc:
            # Django's errors from the work connection, psycopg's from the lock connection
            # (a database restarting at takeover): either way, not leader yet.
            logger.warning(
                "[%s] could not record leadership (%s); releasing the lock",
                self.group.log_prefix,
                exc,
            )
            self.lock.close()
            connection.close()
            return False
        self.leading = True
        self._maintenance_requested = True
        # The previous leader's node only counts as dead once its lease has run out, so look
        # again for its unfinished runs then.
        self._recheck_at = (
            time.monotonic() + float(settings.LEASE) + 2 * float(settings.HEARTBEAT_INTERVAL)
        )
        self.scheduler.metrics_leader_changed(self.group.name)
        logger.info(
            "[%s] acquired advisory lock, %s (key %s, node %s)",
            self.group.log_prefix,
            self.group.running_text,
            format_key(self.lock.key),
            self.node.name,
        )
        return True

    def _record_leadership(self) -> None:
        leadership.begin(
            self.group.name,
            node=self.node.name,
            instance=self.node.instance,
            key=self.lock.key,
            session_id=self.lock.session_id(),
        )

    def _lost(self) -> None:
        self.leading = False
        self.journal.doubt()
        leadership.end(
            self.group.name, instance=self.node.instance, reason=leadership.lost_reason()
        )
        if self.workers:
            self.scheduler.cut_off(f"the {self.group.name} lock was lost with work running")
        logger.warning(
            "[%s] no longer leader (key %s); stopping this group's work and following",
            self.group.log_prefix,
            format_key(self.lock.key),
        )

    # --- one tick -------------------------------------------------------------------------
    def tick(self) -> float:
        """Start what is due (one slot per job); return how long to sleep (seconds)."""
        self._wake.clear()
        self._wake.take_notified()  # this tick reads every state after it
        self._replan = False
        with self._finished_mutex:
            self._finished = []
        self.started_last_tick = 0
        if not self.lock.keep_alive():
            return 0.0
        # Workers first, state second: a worker seen finished here committed before the read
        # below, so its job's next slot has moved on in what the tick sees.
        self._reap_workers()
        now, states = group_states(self.group.name, exclude_instance=self.node.instance)
        read_at = time.monotonic()
        self.clock.sync(now)
        declared = {job.name: job for job in self.scheduler.jobs_for(self.group.name)}
        by_name = {state.name: state for state in states}
        if self._needs_maintenance(declared, by_name):
            self._maintain(now, declared, by_name)
            now, states = group_states(self.group.name, exclude_instance=self.node.instance)
            read_at = time.monotonic()
            self.clock.sync(now)
            by_name = {state.name: state for state in states}
        self._check_timeouts()

        plans: list[RunPlan] = []
        next_wake = now + timedelta(seconds=self._max_tick())
        if self._recheck_at is not None:
            next_wake = min(
                next_wake, now + timedelta(seconds=max(0.0, self._recheck_at - time.monotonic()))
            )
        soon = now + timedelta(seconds=float(settings.MAX_TICK))
        if self.once:
            # --once runs what was due when it started, not what falls due meanwhile.
            self._once_horizon = self._once_horizon or now
        due_behind: set[str] = set()
        for state in states:
            job = declared.get(state.name)
            if job is None or state.retired_at is not None:
                continue
            if job.name in self.workers:
                due_at = self._due_after_run(job, state, self.workers[job.name].plan, now)
                if due_at is not None and due_at <= now:
                    due_behind.add(job.name)
                elif due_at is not None:
                    next_wake = min(next_wake, due_at)
                continue
            held = self.holds.remaining(job.name)
            if held > 0:
                next_wake = min(next_wake, now + timedelta(seconds=held))
                continue
            if state.busy_elsewhere:
                # A live node (an ex-leader that lost only its lock) still runs this job:
                # a job never overlaps itself, so look again shortly.
                next_wake = min(next_wake, soon)
                continue
            try:
                plan, due_at = self._plan(job, state, now)
            except DATABASE_ERRORS:
                raise
            except Exception as exc:
                # One job's broken schedule (or planner) must not stop its group: pause it
                # with the reason and plan the others in this same tick.
                self._planning_failed(job, state, exc)
                continue
            if plan is not None:
                plans.append(plan)
            elif due_at is not None:
                next_wake = min(next_wake, due_at)
        retries, retry_at = self._retry_plans(declared, by_name, plans, now, due_behind)
        self._due_behind = due_behind
        plans += retries
        if retry_at is not None:
            next_wake = min(next_wake, retry_at)
        if self.once:
            plans = [plan for plan in plans if self._due_at_start(plan)]
        self.started_last_tick = len(plans)
        if plans:
            if not self.scheduler.heartbeat_fresh():
                logger.warning(
                    "[%s] own heartbeat is stale; not starting work until it is written",
                    self.group.log_prefix,
                )
                return 0.5
            if not self.lock.still_held():
                return 0.0
            self._refuse(plans)
            plans = self._claim_together(plans)
            for plan in plans:
                if plan.next_due is not None:
                    # Its state moves on with the run; the loop may not read it again first.
                    next_wake = min(next_wake, plan.next_due)
            self._start_workers(plans)
        # Counted from the read that gave ``now``, not from here: the time this tick took
        # (a thousand states planned, a burst claimed) would otherwise make the next start late.
        return max(0.0, (next_wake - now).total_seconds() - (time.monotonic() - read_at))

    def _start_workers(self, plans: list[RunPlan]) -> None:
        """Start a worker for each plan: queue them all at once, then ask for job threads.

        Handing the pool a thousand runs one by one kept this thread competing for the GIL
        with the job threads already running them; now the tick's workers are queued here
        in one step and each job thread runs them one after another until none is left.
        """
        workers = [Worker(self, plan) for plan in plans]
        for worker in workers:
            self.workers[worker.job.name] = worker
            worker.mark_started()
        self._starting.extend(workers)
        for _ in range(min(len(workers), self.job_threads.max_threads)):
            self.job_threads.submit(self._run_started_workers)

    def _run_started_workers(self) -> None:
        """On a job thread: run queued workers until none is left (connections checked as
        between any two runs)."""
        while True:
            try:
                worker = self._starting.popleft()
            except IndexError:
                return
            with between_runs():
                worker.run()

    @staticmethod
    def _due_after_run(job: Job, state: JobState, plan: RunPlan, now: datetime) -> datetime | None:
        """When a busy job next has work (``now`` if already: a run-now request, a slot come
        due), or None; a paused job's passing slots are recorded by a later tick."""
        if state.run_requested_at is not None:
            return now
        if state.paused:
            return None
        if job.schedule.periodic:
            if plan.trigger == JobRun.Trigger.SCHEDULE and plan.next_due is not None:
                # Where the run moves the job (a transactional run: as it commits).
                return plan.next_due
            return state.next_due
        candidates = [d for d in (state.next_due, state.wake_at) if d is not None]
        return min(candidates) if candidates else now

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

    def _claim_together(self, plans: list[RunPlan]) -> list[RunPlan]:
        """Claim the scheduled slots of claim-first jobs in one transaction; return what to start.

        A thousand jobs due at the same instant then cost a few statements to claim, not a
        transaction each, and every row is committed before any of them starts. Slots another
        node holds are skipped (their jobs have moved on), like a worker's taken claim.
        """
        batch = [plan for plan in plans if plan_claimable_together(plan)]
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

    def _plan(self, job: Job, state: JobState, now: datetime):
        """Return (plan or None, the instant it becomes due when not due yet).

        A run-now request comes first, whatever the backlog. Slots that pass while a job is
        paused are recorded as missed as they go (and, on resume, the rest of them).
        """
        if state.run_requested_at is not None and (
            self._once_horizon is None or state.run_requested_at <= self._once_horizon
        ):
            plan = RunPlan(
                job=job,
                slot=state.run_requested_at,
                trigger=JobRun.Trigger.MANUAL,
                manual_requested_at=state.run_requested_at,
                requested_by=state.run_requested_by,
            )
            return plan, None
        periodic = job.schedule.periodic
        if state.paused:
            if state.paused_reason.startswith(ledger.UNPLANNABLE):
                return None, None  # its slots cannot be computed: resuming records the gap
            if periodic and state.next_due is not None and state.next_due <= now:
                ledger.skip_slots(
                    job,
                    state.next_due,
                    before=job.schedule.next_after(now),
                    reason=paused_reason(state),
                )
            return None, None
        if not periodic:
            candidates = [d for d in (state.next_due, state.wake_at) if d is not None]
            due = min(candidates) if candidates else now
            if due > now:
                return None, due
            return RunPlan(job=job, slot=now, wake_before=now), None
        if state.next_due is None or state.next_due > now:
            return None, state.next_due
        decision = catchup.decide(
            job,
            next_due=state.next_due,
            now=now,
            grace=timedelta(seconds=float(settings.MISFIRE_GRACE)),
            previous_finished_at=state.last_finished_at,
        )
        if decision.skip_before is not None:
            skipped = ledger.skip_slots(
                job, state.next_due, before=decision.skip_before, reason=decision.reason
            )
            if skipped:
                logger.info(
                    "[%s] job %s: %d slot(s) missed (%s, policy %s)",
                    self.group.log_prefix,
                    job.name,
                    skipped,
                    decision.reason,
                    job.missed,
                )
        if decision.run is None:
            next_due = job.schedule.next_after(now)
            ledger.advance(job, next_due)
            return None, next_due
        plan = RunPlan(job=job, slot=decision.run, next_due=job.schedule.next_after(decision.run))
        return plan, None

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

    def _retry_plans(
        self,
        declared: dict[str, Job],
        by_name: dict[str, JobState],
        planned,
        now: datetime,
        due_behind: set[str],
    ) -> tuple[list[RunPlan], datetime | None]:
        """Plan one retry per job of runs waiting for one: abandoned by dead nodes
        (``retry_abandoned``) or failed with attempts left (``retries``, once their retry time
        has come). A paused job's retries wait for it to be resumed. Return the plans and the
        earliest retry time still to come."""
        busy = set(self.workers) | {plan.job.name for plan in planned}
        plans, remaining, soonest = [], [], None
        for run in self._retries:
            job = declared.get(run.job)
            if job is None or not (job.retry_abandoned or job.retries):
                continue
            state = by_name.get(run.job)
            waiting = run.retry_at is not None and run.retry_at > now
            if job.name in busy or waiting or state is None or state.paused:
                remaining.append(run)
                if job.name in self.workers and not waiting:
                    due_behind.add(job.name)  # its retry can start once its run is done
                if waiting and (soonest is None or run.retry_at < soonest):
                    soonest = run.retry_at
                continue
            busy.add(job.name)
            plans.append(
                RunPlan(job=job, slot=run.slot, trigger=JobRun.Trigger.RETRY, retry_run=run)
            )
        self._retries = remaining
        return plans, soonest

    # --- maintenance --------------------------------------------------------------------
    def _needs_maintenance(self, declared: dict[str, Job], by_name: dict[str, JobState]) -> bool:
        if self._maintenance_requested:
            return True
        if self._recheck_at is not None and time.monotonic() >= self._recheck_at:
            self._recheck_at = None
            return True
        if time.monotonic() - self._last_maintenance > MAINTENANCE_INTERVAL:
            return True
        for name, job in declared.items():
            state = by_name.get(name)
            if state is None or state.fingerprint != job.fingerprint or state.retired_at:
                return True
        return any(name not in declared and not s.retired_at for name, s in by_name.items())

    def _maintain(self, now, declared: dict[str, Job], by_name: dict[str, JobState]) -> None:
        logger.debug(
            "[%s] maintenance (requested %s, states %s, declared %s)",
            self.group.log_prefix,
            self._maintenance_requested,
            sorted(by_name),
            sorted(declared),
        )
        self._maintenance_requested = False
        self._last_maintenance = time.monotonic()
        unplannable = ledger.ensure_states(list(declared.values()), by_name, now)
        for name, exc in unplannable.items():
            self._unplannable_paused(declared[name], exc)
        undeclared = {n for n, s in by_name.items() if n not in declared and not s.retired_at}
        if undeclared:
            retired = ledger.retire_undeclared(
                self.group.name, set(declared), declared_by_live_nodes()
            )
            if retired:
                logger.info(
                    "[%s] retired %d job(s) no live node declares", self.group.log_prefix, retired
                )
        abandoned = ledger.abandon_orphans(list(declared))
        abandoned += ledger.abandon_vanished(list(declared), instance=self.node.instance)
        if abandoned:
            logger.warning(
                "[%s] marked %d run(s) of dead nodes as abandoned",
                self.group.log_prefix,
                abandoned,
            )
        self._retries = runs_awaiting_retry(
            abandoned=[name for name, job in declared.items() if job.retry_abandoned],
            failed=[name for name, job in declared.items() if job.retries],
        )

    # --- workers --------------------------------------------------------------------------
    def _reap_workers(self) -> None:
        for name, worker in list(self.workers.items()):
            if not worker.is_alive():
                del self.workers[name]

    def _check_timeouts(self) -> None:
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

    def report_outcome(
        self, job: Job, slot, status: str, duration: float, *, error=None, paused=False
    ):
        """Log a finished run (and feed metrics); its worker wakes the loop as it returns."""
        self.scheduler.metrics_run(job, status, duration)
        if status == JobRun.Status.SUCCEEDED:
            logger.info(
                "[%s] job %s slot %s succeeded in %.3fs",
                self.group.log_prefix,
                job.name,
                slot.isoformat(),
                duration,
            )
        else:
            logger.error(
                "[%s] job %s slot %s %s after %.3fs: %s",
                self.group.log_prefix,
                job.name,
                slot.isoformat(),
                status,
                duration,
                (str(error).strip().splitlines() or [type(error).__name__])[0] if error else status,
            )
        if paused:
            logger.warning(
                "[%s] job %s paused itself after %s failures in a row; resume it in the admin",
                self.group.log_prefix,
                job.name,
                settings.FAILURE_PAUSE_THRESHOLD,
            )
        if status != JobRun.Status.SUCCEEDED:
            self._alert_on_failure(job, status, error, paused=paused)

    def _alert_on_failure(self, job: Job, status: str, error, *, paused: bool) -> None:
        """Alert when the job paused itself or reached ``INSTATIC_ALERT_AFTER_FAILURES``."""
        text = str(error).strip() if error else status
        if paused:
            alerts.job_paused_itself(job.name, int(settings.FAILURE_PAUSE_THRESHOLD), text)
            return
        threshold = int(settings.ALERT_AFTER_FAILURES)
        if threshold <= 0:
            return
        try:
            failures = (
                JobState.objects.filter(name=job.name)
                .values_list("consecutive_failures", flat=True)
                .first()
            )
        except DATABASE_ERRORS:
            return
        if failures is not None and failures >= threshold:
            alerts.job_failing(job.name, failures, text)

    # --- shutdown -------------------------------------------------------------------------
    def _shutdown(self) -> None:
        deadline = self.scheduler.grace_deadline()
        for worker in list(self.workers.values()):
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        still_running = [w for w in self.workers.values() if w.is_alive()]
        try:
            if still_running:
                self.scheduler.cut_off(f"{len(still_running)} run(s) outlived the grace period")
                logger.warning(
                    "[%s] %d job(s) still running after the grace period: %s",
                    self.group.log_prefix,
                    len(still_running),
                    ", ".join(w.job.name for w in still_running),
                )
                names = [w.job.name for w in still_running if not w.job.transactional]
                ledger.abandon_own(
                    self.node.instance,
                    names,
                    reason="the node shut down before the run finished (grace period exceeded)",
                )
            if self.leading and self.lock.acquired:
                leadership.step_down(self.group.name, instance=self.node.instance)
        except DATABASE_ERRORS as exc:
            logger.warning("[%s] could not tidy up at shutdown: %s", self.group.log_prefix, exc)
        was_held = self.lock.acquired
        if was_held and self.lock.release():
            logger.info(
                "[%s] released advisory lock key %s",
                self.group.log_prefix,
                format_key(self.lock.key),
            )
        self.leading = False
        self.lock.close()
        self.job_threads.shutdown()
        connection.close()
