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
from datetime import datetime, timedelta

from django.db import DatabaseError, InterfaceError, connection, transaction
from django.db.models.functions import Now

from coordination import ledger
from coordination.conf import settings
from coordination.keys import format_key
from coordination.locks import make_lock
from coordination.models import JobRun, JobState, Leadership
from coordination.registry import Group, Job, Missed
from coordination.runner import RunPlan, Worker
from coordination.selectors import abandoned_runs_to_retry, declared_by_live_nodes, group_states
from coordination.threads import JobThreads
from coordination.waker import Waker

logger = logging.getLogger(__name__)

DATABASE_ERRORS = (DatabaseError, InterfaceError)
MAINTENANCE_INTERVAL = 300.0
MAX_CATCH_UP_SLOTS = 1000


class Backoff:
    """Capped exponential backoff for database outages."""

    def __init__(self, first: float = 0.2, cap: float | None = None):
        self.first = first
        self.cap = cap
        self.current = 0.0

    def next(self) -> float:
        cap = float(self.cap if self.cap is not None else settings.DB_RETRY_MAX)
        self.current = min(cap, self.current * 2 if self.current else self.first)
        return self.current

    def reset(self) -> None:
        self.current = 0.0


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
        self.leading = False
        self._wake = Waker()
        self._maintenance_requested = True
        self._last_maintenance = 0.0
        self._retries: list[JobRun] = []
        self._recheck_at: float | None = None

    # --- control from other threads -----------------------------------------------------
    @property
    def stopping(self) -> bool:
        return self.scheduler.stop_event.is_set()

    def wake(self) -> None:
        self._wake.set()

    def interrupt(self) -> None:
        """Wake the loop and cancel a blocking lock wait (shutdown)."""
        self._wake.set()
        self.lock.cancel_wait()

    def request_maintenance(self) -> None:
        self._maintenance_requested = True
        self._wake.set()

    def lock_still_held(self) -> bool:
        return self.leading and self.lock.still_held()

    # --- the loop -------------------------------------------------------------------------
    def run(self) -> None:
        try:
            if self.once:
                self._run_once()
            else:
                self._run_forever()
        except Exception:
            logger.exception("[%s] scheduler loop crashed", self.group.log_prefix)
        finally:
            self._shutdown()

    def _run_forever(self) -> None:
        backoff = Backoff()
        lock_wait = float(settings.LOCK_WAIT)
        while not self.stopping:
            if not self.leading:
                waited = time.monotonic()
                if self._try_lead(wait=lock_wait if self._interruptible_wait else 1.0):
                    backoff.reset()
                    continue
                # A failed acquire that returned at once means an error: back off.
                if time.monotonic() - waited < 0.05 and not self.stopping:
                    self._wake.wait(backoff.next())
                    self._wake.clear()
                continue
            try:
                sleep_for = self.tick()
                self.scheduler.db_health.ok()
                backoff.reset()
            except DATABASE_ERRORS as exc:
                self.scheduler.db_health.failed(exc)
                connection.close()
                sleep_for = backoff.next()
            if self.leading and not self.lock.acquired:
                self._lost()
                continue
            if sleep_for > 0 and not self.stopping:
                self.lock.wait_for_wakeup(sleep_for, self._wake)
                if self.leading and not self.lock.acquired:
                    self._lost()

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

    @property
    def _interruptible_wait(self) -> bool:
        return self.lock.vendor == "postgresql"

    def _run_once(self) -> None:
        if not self._try_lead(wait=0):
            logger.info(
                "[%s] another node leads (key %s); nothing to do in --once mode",
                self.group.log_prefix,
                format_key(self.lock.key),
            )
            return
        self.tick()
        for worker in list(self.workers.values()):
            worker.join()

    def _try_lead(self, *, wait: float) -> bool:
        if not self.lock.acquire(wait=wait):
            return False
        try:
            self._record_leadership()
            self.lock.listen(self.group.channel)
        except DATABASE_ERRORS as exc:
            logger.warning(
                "[%s] could not record leadership (%s); releasing the lock",
                self.group.log_prefix,
                exc,
            )
            self.lock.release()
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
        Leadership.objects.update_or_create(
            group=self.group.name,
            defaults={
                "node": self.node.name,
                "instance": self.node.instance,
                "key": self.lock.key,
                "since": Now(),
                "session_id": self.lock.session_id(),
            },
        )

    def _lost(self) -> None:
        self.leading = False
        logger.warning(
            "[%s] no longer leader (key %s); stopping this group's work and following",
            self.group.log_prefix,
            format_key(self.lock.key),
        )

    # --- one tick -------------------------------------------------------------------------
    def tick(self) -> float:
        """Run what is due; return how long to sleep (seconds)."""
        self._wake.clear()
        if not self.lock.keep_alive():
            return 0.0
        now, states = group_states(self.group.name)
        self.clock.sync(now)
        declared = {job.name: job for job in self.scheduler.jobs_for(self.group.name)}
        by_name = {state.name: state for state in states}
        if self._needs_maintenance(declared, by_name):
            self._maintain(now, declared, by_name)
            now, states = group_states(self.group.name)
            self.clock.sync(now)
            by_name = {state.name: state for state in states}
        self._reap_workers()
        self._check_timeouts()

        plans: list[RunPlan] = []
        next_wake = now + timedelta(seconds=self._max_tick())
        if self._recheck_at is not None:
            next_wake = min(
                next_wake, now + timedelta(seconds=max(0.0, self._recheck_at - time.monotonic()))
            )
        for state in states:
            job = declared.get(state.name)
            if job is None or state.retired_at is not None or job.name in self.workers:
                continue
            plan, due_at = self._plan(job, state, now)
            if plan is not None:
                plans.append(plan)
            elif due_at is not None:
                next_wake = min(next_wake, due_at)
        plans += self._retry_plans(declared)
        if plans:
            if not self.scheduler.heartbeat_fresh():
                logger.warning(
                    "[%s] own heartbeat is stale; not starting work until it is written",
                    self.group.log_prefix,
                )
                return 0.5
            if not self.lock.still_held():
                return 0.0
            for plan in plans:
                worker = Worker(self, plan)
                self.workers[plan.job.name] = worker
                worker.start()
        return max(0.0, (next_wake - now).total_seconds())

    def _plan(self, job: Job, state: JobState, now: datetime):
        """Return (plan or None, the instant it becomes due when not due yet)."""
        if state.run_requested_at is not None:
            return (
                RunPlan(
                    job=job,
                    slots=[state.run_requested_at],
                    trigger=JobRun.Trigger.MANUAL,
                    manual_requested_at=state.run_requested_at,
                    requested_by=state.run_requested_by,
                    wake_before=None,
                ),
                None,
            )
        if state.paused:
            return None, None
        if not job.schedule.periodic:
            candidates = [d for d in (state.next_due, state.wake_at) if d is not None]
            due = min(candidates) if candidates else now
            if due > now:
                return None, due
            return RunPlan(job=job, slots=[now], wake_before=now), None
        if state.next_due is None or state.next_due > now:
            return None, state.next_due
        slots = job.schedule.slots_between(state.next_due, now, limit=MAX_CATCH_UP_SLOTS)
        if not slots:
            ledger.advance(job, job.schedule.next_after(now))
            return None, None
        run, missed = self._apply_missed_policy(job, slots, now)
        next_due = job.schedule.next_after(slots[-1])
        if not run:
            with transaction.atomic():
                ledger.record_missed(job, missed)
                ledger.advance(job, next_due)
            logger.info(
                "[%s] job %s: %d slot(s) missed (policy %s); next slot %s",
                self.group.log_prefix,
                job.name,
                len(missed),
                job.missed,
                next_due.isoformat(),
            )
            return None, next_due
        return RunPlan(job=job, slots=run, missed=missed, next_due=next_due), None

    def _apply_missed_policy(self, job: Job, slots: list[datetime], now: datetime):
        grace = timedelta(seconds=float(settings.MISFIRE_GRACE))
        latest = slots[-1]
        if job.missed is Missed.LATEST:
            # Slots that are merely late (a busy database, a takeover) all run, in order; only
            # after real downtime, beyond the grace, do the older ones collapse into the newest.
            if now - slots[0] <= grace:
                return slots, []
            return [latest], slots[:-1]
        if job.missed is Missed.SKIP:
            if now - latest <= grace:
                return [latest], slots[:-1]
            return [], slots
        window = job.missed_window or grace
        run = [slot for slot in slots if now - slot <= window] or []
        return run, [slot for slot in slots if now - slot > window]

    def _retry_plans(self, declared: dict[str, Job]) -> list[RunPlan]:
        plans, self._retries = [], self._retries
        remaining = []
        for run in self._retries:
            job = declared.get(run.job)
            if job is None or not job.retry_abandoned:
                continue
            if job.name in self.workers or any(p.job.name == job.name for p in plans):
                remaining.append(run)
                continue
            plans.append(
                RunPlan(job=job, slots=[run.slot], trigger=JobRun.Trigger.RETRY, retry_run=run)
            )
        self._retries = remaining
        return plans

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
        ledger.ensure_states(list(declared.values()), by_name, now)
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
        if abandoned:
            logger.warning(
                "[%s] marked %d run(s) of dead nodes as abandoned",
                self.group.log_prefix,
                abandoned,
            )
        retryable = [name for name, job in declared.items() if job.retry_abandoned]
        self._retries = abandoned_runs_to_retry(retryable)

    # --- workers --------------------------------------------------------------------------
    def _reap_workers(self) -> None:
        for name, worker in list(self.workers.items()):
            if not worker.is_alive():
                del self.workers[name]

    def _check_timeouts(self) -> None:
        for worker in self.workers.values():
            if worker.timed_out or not worker.past_deadline():
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
            if (
                not job.transactional
                and run is not None
                and ledger.mark_timed_out(run, instance=self.node.instance)
            ):
                JobState.objects.filter(name=job.name).update(last_status="timed_out")
            self.scheduler.metrics_run(job, "timed_out", None)

    def report_outcome(
        self, job: Job, slot, status: str, duration: float, *, error=None, paused=False
    ):
        """Log a finished run (and feed metrics)."""
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
        self.wake()

    # --- shutdown -------------------------------------------------------------------------
    def _shutdown(self) -> None:
        deadline = self.scheduler.grace_deadline()
        for worker in list(self.workers.values()):
            worker.join(timeout=max(0.0, deadline - time.monotonic()))
        still_running = [w for w in self.workers.values() if w.is_alive()]
        try:
            if still_running:
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
                Leadership.objects.filter(
                    group=self.group.name, instance=self.node.instance
                ).delete()
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
