"""What a group's leader does at one tick, decided from what the tick read: pure functions.

``plan_tick`` takes the database time, the job states and everything else a tick knows (the
jobs declared, the runs going and the plan each runs, the jobs held off, the runs awaiting a
retry, the ``--once`` horizon and the tick's bounds) and returns the tick's decisions in one
``TickPlan``: the runs to start (a run-now request first), which of them go to worker
processes and which slots the leader claims together, the slots to record as missed with their
reason, the states to move on, the jobs whose planning raised, the retries still waiting, the
busy jobs with work due behind their run, and when to wake. A tick reads, plans once, applies.
``needs_full_tick`` decides whether a wake-up needs a tick at all. Neither reads a clock, the
database or a setting: the loop (coordination/loop.py) reads, calls them and applies the
answer, and every rule is a row of a table test.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from coordination import catchup
from coordination.models import JobRun
from coordination.priorities import by_priority
from coordination.reasons import UNPLANNABLE, paused_reason
from coordination.registry import Job


@dataclass
class RunPlan:
    """What one worker does: run ``job`` for ``slot``, then move it to ``next_due``."""

    job: Job
    slot: datetime
    trigger: str = JobRun.Trigger.SCHEDULE
    next_due: datetime | None = None
    wake_before: datetime | None = None
    manual_requested_at: datetime | None = None
    requested_by: str = ""
    retry_run: JobRun | None = None
    #: The slot's ledger row, already claimed (and committed) by the loop with others due
    #: at the same tick (``ledger.claim_scheduled``).
    claimed_run: JobRun | None = None
    #: Why this run must not do its work (a ``runs_starting`` receiver's answer): raised in
    #: place of the job's function, so the run is recorded failed with it.
    refusal: BaseException | None = None
    #: The queued ledger row a worker process runs (a job on workers; see ``workers``).
    queued_run: JobRun | None = None


def plan_claimable_together(plan: RunPlan) -> bool:
    """Return True if the loop may claim ``plan``'s slot in a batch before starting it.

    Only a claim-first job's scheduled slot: a transactional run claims inside its own
    transaction, a retry takes an existing row, and a run-now request is served by its claim.
    """
    return not plan.job.transactional and plan_queueable_together(plan)


def plan_queueable_together(plan: RunPlan) -> bool:
    """Return True if ``plan``'s slot can be claimed in a batch with others: a scheduled slot
    with a next one (a retry takes an existing row, a run-now request is served by its claim)."""
    return (
        plan.trigger == JobRun.Trigger.SCHEDULE
        and plan.retry_run is None
        and plan.manual_requested_at is None
        and plan.next_due is not None
    )


@dataclass(frozen=True)
class TickInput:
    """What a tick read, and its bounds.

    ``states`` are the rows ``selectors.group_states`` reads (``JobState``'s attribute names
    and ``busy_elsewhere``), in the order read. ``busy`` maps each job with a worker to the
    plan that worker runs; ``held`` each held-off job to the seconds it is still held.
    ``once_horizon`` is set in ``--once`` mode: the database time of its first tick, by which a
    run must have been due. ``max_tick`` is the longest sleep, ``soon`` (``INSTATIC_MAX_TICK``)
    how soon to look again at a job another node still runs, ``recheck_in`` the seconds until
    the loop looks again for a previous leader's unfinished runs (None: it does not).
    ``reraise`` are the errors that end the tick instead of pausing the job whose planning
    raised them (the loop passes the database's: a schedule that reads the database and
    finds it away is not broken).
    """

    now: datetime
    states: Sequence
    declared: Mapping[str, Job]
    busy: Mapping[str, RunPlan] = field(default_factory=dict)
    held: Mapping[str, float] = field(default_factory=dict)
    retries: Sequence[JobRun] = ()
    once_horizon: datetime | None = None
    max_tick: float = 1.0
    soon: float = 1.0
    grace: timedelta = timedelta(seconds=30)
    recheck_in: float | None = None
    reraise: tuple[type[BaseException], ...] = ()


@dataclass(frozen=True)
class MissedSlots:
    """Record ``job``'s slots from ``start`` until ``before`` (None: every one left) as missed.

    ``by_policy``: missed by the job's catch-up policy (the loop logs how many), not while
    it is paused.
    """

    job: Job
    start: datetime
    before: datetime | None
    reason: str
    by_policy: bool = True


@dataclass(frozen=True)
class Advance:
    """Move ``job``'s next slot to ``next_due`` without a run (nothing of it is due yet)."""

    job: Job
    next_due: datetime | None


@dataclass(frozen=True)
class Unplannable:
    """Planning ``job`` raised ``error``: the loop pauses it and plans the others."""

    job: Job
    state: object
    error: Exception


@dataclass(frozen=True)
class Routes:
    """How the runs a tick starts go, once the ``runs_starting`` receivers have answered.

    ``queued``: for a worker process (claim and task in one transaction). ``here``: run by
    the leader, in the plan's order; of them, ``together`` have their slots claimed in one
    transaction before any starts (one another node took is not started).
    """

    queued: list[RunPlan]
    here: list[RunPlan]
    together: list[RunPlan]


@dataclass(frozen=True)
class TickPlan:
    """A tick's decisions. ``writes`` are applied in order (a job's missed slots before its
    advance), before any run starts; ``wake_at`` does not yet count the runs that start (see
    ``sleep_for``).

    ``for_workers`` are the runs (of ``runs``) of jobs on workers: the leader queues them for a
    worker process, claim and task in one transaction, unless a ``runs_starting`` receiver
    refuses one (the leader then records it failed at once, like its own). ``claim_together``
    are the claim-first scheduled slots (``plan_claimable_together``) that the leader claims in
    one transaction before starting them, when it runs them itself; the others it runs claim
    on their own. What a failed write or a refusal changes in that is ``runs_left`` and
    ``route``, so the loop applies the plan without deciding anything itself.
    """

    now: datetime
    runs: list[RunPlan]
    for_workers: list[RunPlan]
    claim_together: list[RunPlan]
    writes: list[MissedSlots | Advance]
    unplannable: list[Unplannable]
    waiting_retries: list[JobRun]
    due_behind: frozenset[str]
    wake_at: datetime

    def runs_left(self, failed: Collection[str]) -> list[RunPlan]:
        """Return the runs to start once the writes of the jobs named in ``failed`` raised
        (each such job is paused, like one whose planning raised): all but theirs, except
        their retries (a retry takes a row of its own, not the slots the writes moved)."""
        return [run for run in self.runs if run.job.name not in failed or run.retry_run is not None]

    def route(self, runs: Sequence[RunPlan]) -> Routes:
        """Return how ``runs`` (the plan's runs still to start, each with its ``refusal``)
        start: a run in ``for_workers`` is queued unless refused; every other run is the
        leader's (a refused one is recorded failed at once, like its own), its slot claimed
        together with the others' when it is in ``claim_together``."""
        starting = {id(run) for run in runs}
        queued = [run for run in self.for_workers if id(run) in starting and run.refusal is None]
        starting -= {id(run) for run in queued}
        return Routes(
            queued=queued,
            here=[run for run in runs if id(run) in starting],
            together=[run for run in self.claim_together if id(run) in starting],
        )

    def sleep_for(self, started: Sequence[RunPlan], *, elapsed: float) -> float:
        """Return the seconds to sleep once ``started`` run, ``elapsed`` seconds after the read.

        A run's job moves on to its ``next_due`` with the run, and the loop may not read it
        again first. Counted from the read that gave ``now``: the time the tick took (a
        thousand states planned, a burst claimed) would otherwise make the next start late.
        """
        wake_at = min(
            [self.wake_at, *(plan.next_due for plan in started if plan.next_due is not None)]
        )
        return max(0.0, (wake_at - self.now).total_seconds() - elapsed)


def plan_tick(tick: TickInput) -> TickPlan:
    """Return what the tick described by ``tick`` does: one slot per job at most."""
    now = tick.now
    wakes = [now + timedelta(seconds=tick.max_tick)]
    if tick.recheck_in is not None:
        wakes.append(now + timedelta(seconds=max(0.0, tick.recheck_in)))
    soon = now + timedelta(seconds=tick.soon)
    manual, scheduled, writes, unplannable = [], [], [], []
    due_behind: set[str] = set()
    by_name = {state.name: state for state in tick.states}
    retry_first = ready_retries(tick, by_name)
    for state in tick.states:
        job = tick.declared.get(state.name)
        if job is None or state.retired_at is not None:
            continue
        if job.name in tick.busy:
            due_at = due_after_run(job, state, tick.busy[job.name], now)
            if due_at is not None and due_at <= now:
                due_behind.add(job.name)
            elif due_at is not None:
                wakes.append(due_at)
            continue
        held = tick.held.get(job.name, 0.0)
        if held > 0:
            wakes.append(now + timedelta(seconds=held))
            continue
        if state.busy_elsewhere:
            # A live node (an ex-leader that lost only its lock) still runs this job: a job
            # never overlaps itself, so look again shortly.
            wakes.append(soon)
            continue
        job_writes: list[MissedSlots | Advance] = []
        try:
            plan, due_at = plan_job(job, state, tick, job_writes)
        except tick.reraise:
            raise
        except Exception as exc:
            # One job's broken schedule must not stop its group: it is paused with the
            # reason (the slots recorded before it raised stay recorded).
            writes += job_writes
            unplannable.append(Unplannable(job, state, exc))
            continue
        writes += job_writes
        if plan is not None and plan.manual_requested_at is None and job.name in retry_first:
            # An older slot waits for its retry: it goes first, the due slot right after it.
            wakes.append(soon)
        elif plan is not None:
            (manual if plan.manual_requested_at is not None else scheduled).append(plan)
        elif due_at is not None:
            wakes.append(due_at)
    # Publishing's runs first, side effects last: the order they start and are queued in.
    runs = by_priority(manual + scheduled)
    retries, waiting, retry_at = plan_retries(tick, by_name, runs, due_behind)
    runs += retries
    if retry_at is not None:
        wakes.append(retry_at)
    if tick.once_horizon is not None:
        runs = [plan for plan in runs if due_at_start(plan, tick.once_horizon)]
    return TickPlan(
        now=now,
        runs=runs,
        for_workers=[plan for plan in runs if plan.job.on_workers],
        claim_together=[plan for plan in runs if plan_claimable_together(plan)],
        writes=writes,
        unplannable=unplannable,
        waiting_retries=waiting,
        due_behind=frozenset(due_behind),
        wake_at=min(wakes),
    )


def plan_job(
    job: Job, state, tick: TickInput, writes: list
) -> tuple[RunPlan | None, datetime | None]:
    """Return (plan or None, the instant ``job`` becomes due when not due yet); append the
    ledger writes its planning decides to ``writes``.

    A run-now request comes first, whatever the backlog. Slots that pass while a job is
    paused are recorded as missed as they go (and, on resume, the rest of them).
    """
    now, horizon = tick.now, tick.once_horizon
    if state.run_requested_at is not None and (
        horizon is None or state.run_requested_at <= horizon
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
        if state.paused_reason.startswith(UNPLANNABLE):
            return None, None  # its slots cannot be computed: resuming records the gap
        if periodic and state.next_due is not None and state.next_due <= now:
            before = job.schedule.next_after(now)
            writes.append(
                MissedSlots(job, state.next_due, before, paused_reason(state), by_policy=False)
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
        grace=tick.grace,
        previous_finished_at=state.last_finished_at,
    )
    if decision.skip_before is not None:
        writes.append(MissedSlots(job, state.next_due, decision.skip_before, decision.reason))
    if decision.run is None:
        next_due = job.schedule.next_after(now)
        writes.append(Advance(job, next_due))
        return None, next_due
    plan = RunPlan(job=job, slot=decision.run, next_due=job.schedule.next_after(decision.run))
    return plan, None


def ready_retries(tick: TickInput, by_name: Mapping) -> set[str]:
    """Return the jobs with a retry that can start now: its retry time has come (an abandoned
    run has none), the job is neither paused nor busy here or elsewhere. Such a retry goes
    before the job's next scheduled slot: otherwise a job whose runs take about its interval
    (a run on a worker, which wakes no leader when it ends) would find a new slot due at
    every tick and never be retried."""
    ready = set()
    for run in tick.retries:
        job = tick.declared.get(run.job)
        state = by_name.get(run.job)
        if job is None or state is None or not (job.retry_abandoned or job.retries):
            continue
        if run.retry_at is not None and run.retry_at > tick.now:
            continue
        if job.name in tick.busy or state.busy_elsewhere or state.paused:
            continue
        ready.add(job.name)
    return ready


def plan_retries(
    tick: TickInput, by_name: Mapping, planned: Sequence[RunPlan], due_behind: set[str]
) -> tuple[list[RunPlan], list[JobRun], datetime | None]:
    """Plan one retry per job of runs waiting for one: abandoned by dead nodes
    (``retry_abandoned``) or failed with attempts left (``retries``, once their retry time
    has come). A paused job's retries wait for it to be resumed; a busy job's retry is due
    behind its run (added to ``due_behind``); a job another node still runs keeps its retry
    waiting (a job never overlaps itself), and the tick looks again soon for it. Return the
    plans, the runs still waiting, and the earliest retry time still to come."""
    busy = set(tick.busy) | {plan.job.name for plan in planned}
    plans, remaining, soonest = [], [], None
    for run in tick.retries:
        job = tick.declared.get(run.job)
        if job is None or not (job.retry_abandoned or job.retries):
            continue
        state = by_name.get(run.job)
        waiting = run.retry_at is not None and run.retry_at > tick.now
        elsewhere = state is not None and state.busy_elsewhere
        if job.name in busy or waiting or elsewhere or state is None or state.paused:
            remaining.append(run)
            if job.name in tick.busy and not waiting:
                due_behind.add(job.name)  # its retry can start once its run is done
            if waiting and (soonest is None or run.retry_at < soonest):
                soonest = run.retry_at
            continue
        busy.add(job.name)
        plans.append(RunPlan(job=job, slot=run.slot, trigger=JobRun.Trigger.RETRY, retry_run=run))
    return plans, remaining, soonest


def due_after_run(job: Job, state, plan: RunPlan, now: datetime) -> datetime | None:
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


def due_at_start(plan: RunPlan, horizon: datetime) -> bool:
    """In ``--once`` mode: was ``plan`` due by ``horizon`` (a retry by its retry time)?"""
    retry_at = plan.retry_run.retry_at if plan.retry_run is not None else None
    return plan.slot <= horizon and (retry_at is None or retry_at <= horizon)


@dataclass(frozen=True)
class SinceLastTick:
    """What woke a leader since its last tick, and when that tick ran and asked to be woken.

    ``finished`` are the runs finished since (job name, finished as planned); ``due_behind``
    the busy jobs that had work due behind their run at that tick; times are monotonic
    seconds. ``replan_every`` is the longest a leader goes without a tick while runs finish.
    """

    replan: bool
    maintenance: bool
    notified: bool
    woken: bool
    listening: bool
    now: float
    ticked_at: float
    wake_at: float
    finished: Sequence[tuple[str, bool]] = ()
    due_behind: Collection[str] = frozenset()
    replan_every: float = 1.0


def needs_full_tick(wakeup: SinceLastTick) -> bool:
    """Return False only when all that woke the leader is runs finished as planned, whose jobs
    had nothing due behind them, before the last tick's wake-up time: no tick is needed.

    Anything else (a ``NOTIFY``, which the lock marks on the waker however it was read; a
    maintenance request; a run-now; the wake-up time) needs a full tick. So does every
    finished run where no wake-up reaches the leader (it polls), and one every
    ``replan_every`` seconds at most.
    """
    if wakeup.replan or wakeup.maintenance or wakeup.notified or not wakeup.woken:
        return True
    if wakeup.now >= wakeup.wake_at or not wakeup.listening:
        return True
    if wakeup.now - wakeup.ticked_at >= wakeup.replan_every:
        return True
    return any(not as_planned or name in wakeup.due_behind for name, as_planned in wakeup.finished)
