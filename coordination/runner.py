"""Running one job for one slot: the transactional and the claim-first paths.

A transactional job runs inside one transaction together with its ledger row and its next
slot, so a crash rolls all of it back and the next leader runs the slot again. Any other job
has its ledger row committed as ``running`` first; if its node dies the row becomes
``abandoned`` and the job's ``retry_abandoned`` decides what happens.
"""

import logging
import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from coordination import ledger
from coordination.models import JobRun
from coordination.registry import Job, JobContext
from coordination.threads import discard_broken_connection

logger = logging.getLogger(__name__)


class JobTimedOut(Exception):
    """Raised inside a transactional run that outlived its max duration, to roll it back."""


class SlotTaken(Exception):
    """The (job, slot) ledger row already exists: another node ran or is running it."""


class LeadershipLost(Exception):
    """Raised inside a transactional run when the lock is gone before commit."""


@dataclass
class RunPlan:
    """What one worker does: the slots to run, the slots to record as missed, the next slot."""

    job: Job
    slots: list[datetime]
    trigger: str = JobRun.Trigger.SCHEDULE
    missed: list[datetime] = field(default_factory=list)
    next_due: datetime | None = None
    wake_before: datetime | None = None
    manual_requested_at: datetime | None = None
    requested_by: str = ""
    retry_run: JobRun | None = None


class Worker:
    """One plan run on one of the group's job threads; a job never runs while its worker does."""

    def __init__(self, loop, plan: RunPlan):
        self.loop = loop
        self._done: threading.Event | None = None
        self.plan = plan
        self.job = plan.job
        self.started_mono = time.monotonic()
        max_duration = self.job.max_duration
        self.deadline_mono = (
            self.started_mono + max_duration.total_seconds() if max_duration else None
        )
        self.timed_out = False
        self.current_run: JobRun | None = None

    @property
    def log_prefix(self) -> str:
        return self.loop.group.log_prefix

    def past_deadline(self) -> bool:
        return self.deadline_mono is not None and time.monotonic() > self.deadline_mono

    def should_stop(self) -> bool:
        return self.timed_out or self.past_deadline() or self.loop.stopping or not self.loop.leading

    def start(self) -> None:
        self._done = self.loop.job_threads.submit(self.run)

    def is_alive(self) -> bool:
        return self._done is not None and not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        if self._done is not None:
            self._done.wait(timeout)

    def run(self) -> None:
        try:
            for index, slot in enumerate(self.plan.slots):
                if index and self.should_stop():
                    break
                if self.job.transactional:
                    self._run_transactional(slot, first=index == 0)
                else:
                    self._run_claim_first(slot, first=index == 0)
        except Exception:
            logger.exception(
                "[%s] job %s: unexpected scheduler error", self.log_prefix, self.job.name
            )
        finally:
            self.loop.wake()

    def _context(self, slot: datetime) -> JobContext:
        deadline = None
        if self.job.max_duration:
            deadline = self.loop.clock.now() + self.job.max_duration
        return JobContext(
            job=self.job,
            slot=slot,
            node=self.loop.node.name,
            logger=logging.getLogger(f"instatic.jobs.{self.job.name}"),
            deadline=deadline,
            trigger=self.plan.trigger,
            _stop=self.should_stop,
        )

    def _claim(self, slot: datetime) -> JobRun:
        """Insert this slot's ledger row inside the caller's transaction; raise ``SlotTaken``."""
        try:
            return ledger.claim(
                self.job,
                slot,
                trigger=self.plan.trigger,
                node=self.loop.node.name,
                instance=self.loop.node.instance,
                requested_by=self.plan.requested_by,
                savepoint=False,
            )
        except IntegrityError as exc:
            raise SlotTaken from exc

    def _slot_taken(self, slot: datetime, *, first: bool) -> None:
        """Skip a slot another node claimed; keep the plan's missed slots and move on."""
        logger.info(
            "[%s] job %s slot %s already claimed elsewhere; skipping",
            self.log_prefix,
            self.job.name,
            slot.isoformat(),
        )
        # The rolled-back claim held this plan's missed slots too: record them again.
        with transaction.atomic():
            if first:
                ledger.record_missed(self.job, self.plan.missed)
            next_due = self._next_due(None, after=slot)
            if next_due is not None:
                ledger.advance(self.job, next_due)

    def _lateness(self, slot: datetime) -> float:
        return max(0.0, (self.loop.clock.now() - slot).total_seconds())

    # --- transactional --------------------------------------------------------------------
    def _run_transactional(self, slot: datetime, *, first: bool) -> None:
        job, plan, node = self.job, self.plan, self.loop.node
        lateness = self._lateness(slot)
        started = time.monotonic()
        result = None
        try:
            with transaction.atomic():
                if first:
                    ledger.record_missed(job, plan.missed)
                run = self._claim(slot)
                self.current_run = run
                result = job.func(self._context(slot))
                if self.timed_out or self.past_deadline():
                    raise JobTimedOut(f"ran past its max_duration of {job.max_duration}")
                if not self.loop.lock_still_held():
                    raise LeadershipLost("the group's lock was lost before commit")
                duration = time.monotonic() - started
                JobRun.objects.filter(pk=run.pk).update(
                    status=JobRun.Status.SUCCEEDED, duration=duration, finished_at=Now()
                )
                ledger.update_state_after_run(
                    job,
                    slot=slot,
                    status=JobRun.Status.SUCCEEDED,
                    duration=duration,
                    lateness=lateness,
                    error="",
                    node=node.name,
                    next_due=self._next_due(result, after=slot),
                    wake_before=plan.wake_before,
                    manual_requested_at=plan.manual_requested_at,
                )
        except SlotTaken:
            self._slot_taken(slot, first=first)
            return
        except LeadershipLost:
            logger.warning(
                "[%s] job %s slot %s rolled back: lock lost mid-run; the new leader runs it",
                self.log_prefix,
                job.name,
                slot.isoformat(),
            )
            return
        except Exception as exc:
            duration = time.monotonic() - started
            status = (
                JobRun.Status.TIMED_OUT if isinstance(exc, JobTimedOut) else JobRun.Status.FAILED
            )
            self._record_transactional_failure(slot, status, exc, duration, lateness, first=first)
            return
        self.loop.report_outcome(job, slot, JobRun.Status.SUCCEEDED, time.monotonic() - started)

    def _record_transactional_failure(
        self, slot, status, exc, duration, lateness, *, first: bool
    ) -> None:
        """Record a rolled-back run as failed (and the plan's missed slots) in a new transaction."""
        job, plan, node = self.job, self.plan, self.loop.node
        error = "".join(traceback.format_exception(exc))
        discard_broken_connection()
        if not self.loop.lock_still_held():
            logger.warning(
                "[%s] job %s slot %s failed after the lock was lost; leaving it to the new leader",
                self.log_prefix,
                job.name,
                slot.isoformat(),
            )
            return
        try:
            with transaction.atomic():
                if first:
                    ledger.record_missed(job, plan.missed)
                try:
                    with transaction.atomic():
                        JobRun.objects.create(
                            job=job.name,
                            slot=slot,
                            status=status,
                            trigger=plan.trigger,
                            node=node.name,
                            node_instance=node.instance,
                            duration=duration,
                            error=error[: ledger.MAX_ERROR_LENGTH],
                            requested_by=plan.requested_by,
                        )
                except IntegrityError:
                    pass
                paused = ledger.update_state_after_run(
                    job,
                    slot=slot,
                    status=status,
                    duration=duration,
                    lateness=lateness,
                    error=error,
                    node=node.name,
                    next_due=self._next_due(None, after=slot),
                    wake_before=plan.wake_before,
                    manual_requested_at=plan.manual_requested_at,
                )
        except Exception:
            logger.exception("[%s] job %s: could not record its failure", self.log_prefix, job.name)
            return
        self.loop.report_outcome(job, slot, status, duration, error=exc, paused=paused)

    # --- claim first ----------------------------------------------------------------------
    def _run_claim_first(self, slot: datetime, *, first: bool) -> None:
        job, plan, node = self.job, self.plan, self.loop.node
        lateness = self._lateness(slot)
        if plan.retry_run is not None:
            if not ledger.claim_retry(plan.retry_run, node=node.name, instance=node.instance):
                return
            run = JobRun.objects.get(pk=plan.retry_run.pk)
        else:
            try:
                with transaction.atomic():
                    if first:
                        ledger.record_missed(job, plan.missed)
                    run = self._claim(slot)
                    next_due = self._next_due(None, after=slot)
                    if next_due is not None:
                        ledger.advance(job, next_due)
            except SlotTaken:
                self._slot_taken(slot, first=first)
                return
        self.current_run = run
        started = time.monotonic()
        error: BaseException | None = None
        result = None
        try:
            result = job.func(self._context(slot))
        except Exception as exc:
            error = exc
        duration = time.monotonic() - started
        discard_broken_connection()
        if self.timed_out or self.past_deadline():
            status = JobRun.Status.TIMED_OUT
        else:
            status = JobRun.Status.SUCCEEDED if error is None else JobRun.Status.FAILED
        text = "".join(traceback.format_exception(error)) if error else ""
        if status == JobRun.Status.TIMED_OUT and not text:
            text = f"ran past its max_duration of {job.max_duration}"
        if not ledger.finish(
            run, status=status, duration=duration, error=text, instance=node.instance
        ):
            logger.warning(
                "[%s] job %s slot %s finished but its run was taken over; outcome not recorded",
                self.log_prefix,
                job.name,
                slot.isoformat(),
            )
            return
        paused = ledger.update_state_after_run(
            job,
            slot=slot,
            status=status,
            duration=duration,
            lateness=lateness,
            error=text,
            node=node.name,
            next_due=self._next_due(result) if not job.schedule.periodic else None,
            wake_before=plan.wake_before,
            manual_requested_at=plan.manual_requested_at,
        )
        self.loop.report_outcome(job, slot, status, duration, error=error, paused=paused)

    def _next_due(self, result, *, after: datetime | None = None) -> datetime | None:
        """Return the job's next slot: from the plan (periodic) or the job's answer (when due).

        While catching up several slots (``missed="all"``), each committed slot only moves the
        job to the plan's next slot, so a crash mid-catch-up loses none of the rest.
        """
        if self.job.schedule.periodic:
            later = [s for s in self.plan.slots if after is not None and s > after]
            if later and self.plan.trigger == JobRun.Trigger.SCHEDULE:
                return later[0]
            return self.plan.next_due
        fallback = self.job.schedule.next_after(self.loop.clock.now())
        if isinstance(result, datetime):
            return min(result, fallback)
        return fallback if self.plan.next_due is None else min(self.plan.next_due, fallback)
