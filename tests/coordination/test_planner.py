"""The planner as tables: what a tick decides from what it read, with no database or clock.

The states are the rows a tick reads (``selectors.TICK_FIELDS`` and ``busy_elsewhere``), the
jobs real declarations (``make_job``), the runs awaiting a retry unsaved ``JobRun`` rows.
Instants are seconds after ``T0``; a row says what it reads and what the tick must decide.
"""

import dataclasses
from collections import namedtuple
from datetime import UTC, datetime, timedelta

import pytest
from django.db import OperationalError
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from coordination.models import JobRun
from coordination.planner import (
    Advance,
    MissedSlots,
    RunPlan,
    SinceLastTick,
    TickInput,
    needs_full_tick,
    plan_claimable_together,
    plan_tick,
)
from coordination.reasons import UNPLANNABLE
from coordination.registry import Missed, make_job
from coordination.schedules import Every, Schedule, WhenDue, cron, daily, every, hourly
from coordination.selectors import TICK_FIELDS

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MINUTE, HOUR, DAY = 60, 3600, 86400
R = JobRun.MissedReason
TRIGGER = JobRun.Trigger
State = namedtuple("State", (*TICK_FIELDS, "db_now", "busy_elsewhere"))


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def noop(ctx):
    pass


def job(name="plan.job", schedule=None, **options):
    schedule = every(timedelta(minutes=1)) if schedule is None else schedule
    return make_job(noop, name=name, group="plantest", schedule=schedule, **options)


def state(job, **fields) -> State:
    row = dict.fromkeys(State._fields)
    row.update(
        name=job.name,
        group=job.group,
        fingerprint=job.fingerprint,
        run_requested_by="",
        paused=False,
        paused_reason="",
        busy_elsewhere=False,
    )
    row.update(fields)
    return State(**row)


def retry(job, slot, *, retry_at=None) -> JobRun:
    return JobRun(job=job.name, slot=slot, status=JobRun.Status.FAILED, retry_at=retry_at)


def tick_of(now, *pairs, **fields) -> TickInput:
    """A tick at ``now`` over (job, state) pairs."""
    return TickInput(
        now=now,
        states=[s for _, s in pairs],
        declared={j.name: j for j, _ in pairs},
        **fields,
    )


def runs(plan) -> list[tuple[str, datetime, str]]:
    return [(run.job.name, run.slot, run.trigger) for run in plan.runs]


def missed(plan) -> list[tuple[datetime, datetime | None, str]]:
    return [(w.start, w.before, w.reason) for w in plan.writes if isinstance(w, MissedSlots)]


def advanced(plan) -> list[datetime | None]:
    return [w.next_due for w in plan.writes if isinstance(w, Advance)]


# --- each missed policy across downtime lengths (an every-minute job, 30 s grace) ----------
# ``missed='all'`` needs a window: 30 s is the grace's length.
POLICY_ROWS = [
    # id, policy, missed_window, next due, now, previous run finished, run,
    # missed (start, before, reason), advance
    ("latest-on-time", Missed.LATEST, None, 0, 0, None, 0, None, None),
    ("latest-10s-late", Missed.LATEST, None, 0, 10, None, 0, None, None),
    ("latest-29s-late", Missed.LATEST, None, 0, 29, None, 0, None, None),
    ("latest-31s-down", Missed.LATEST, None, 0, 31, None, 0, (0, 0, R.DOWNTIME), None),
    ("latest-90s-down", Missed.LATEST, None, 0, 90, None, 60, (0, 60, R.DOWNTIME), None),
    ("latest-1h-down", Missed.LATEST, None, 0, HOUR + 5, None, HOUR, (0, HOUR, R.DOWNTIME), None),
    ("latest-1d-down", Missed.LATEST, None, 0, DAY + 5, None, DAY, (0, DAY, R.DOWNTIME), None),
    (
        "latest-30d-down",
        Missed.LATEST,
        None,
        0,
        30 * DAY + 5,
        None,
        30 * DAY,
        (0, 30 * DAY, R.DOWNTIME),
        None,
    ),
    ("latest-2-late-in-grace", Missed.LATEST, None, 0, 25, None, 0, None, None),
    ("skip-on-time", Missed.SKIP, None, 0, 0, None, 0, (0, 0, R.DOWNTIME), None),
    ("skip-29s-late", Missed.SKIP, None, 0, 29, None, 0, (0, 0, R.DOWNTIME), None),
    ("skip-31s-down", Missed.SKIP, None, 0, 31, None, None, (0, 60, R.DOWNTIME), 60),
    ("skip-90s-down", Missed.SKIP, None, 0, 90, None, 60, (0, 60, R.DOWNTIME), None),
    ("skip-1h-down", Missed.SKIP, None, 0, HOUR + 10, None, HOUR, (0, HOUR, R.DOWNTIME), None),
    (
        "skip-1h-down-past-grace",
        Missed.SKIP,
        None,
        0,
        HOUR + 45,
        None,
        None,
        (0, HOUR + 60, R.DOWNTIME),
        HOUR + 60,
    ),
    ("skip-1d-down", Missed.SKIP, None, 0, DAY + 1, None, DAY, (0, DAY, R.DOWNTIME), None),
    ("all-on-time", Missed.ALL, 30, 0, 0, None, 0, None, None),
    ("all-20s-late", Missed.ALL, 30, 0, 20, None, 0, None, None),
    ("all-31s-down", Missed.ALL, 30, 0, 31, None, None, (0, 60, R.CATCH_UP_WINDOW), 60),
    ("all-90s-down", Missed.ALL, 30, 0, 90, None, 60, (0, 60, R.CATCH_UP_WINDOW), None),
    ("all-1h-window-30min-down", Missed.ALL, HOUR, 0, 30 * MINUTE, None, 0, None, None),
    (
        "all-10min-window-1h-down",
        Missed.ALL,
        10 * MINUTE,
        0,
        HOUR,
        None,
        50 * MINUTE,
        (0, 50 * MINUTE, R.CATCH_UP_WINDOW),
        None,
    ),
    (
        "all-10min-window-1d-down",
        Missed.ALL,
        10 * MINUTE,
        0,
        DAY + 1,
        None,
        DAY - 9 * MINUTE,
        (0, DAY - 9 * MINUTE, R.CATCH_UP_WINDOW),
        None,
    ),
    ("not-due-yet", Missed.LATEST, None, 60, 30, None, None, None, None),
]


@pytest.mark.parametrize(
    "policy, window, due, now, finished, run_at, missed_slots, advance_to",
    [row[1:] for row in POLICY_ROWS],
    ids=[row[0] for row in POLICY_ROWS],
)
def test_each_missed_policy_across_downtime_lengths(
    policy, window, due, now, finished, run_at, missed_slots, advance_to
):
    declared = job(
        missed=policy, missed_window=None if window is None else timedelta(seconds=window)
    )
    row = state(
        declared,
        next_due=at(due),
        last_finished_at=None if finished is None else at(finished),
    )
    plan = plan_tick(tick_of(at(now), (declared, row), max_tick=HOUR))
    assert runs(plan) == ([] if run_at is None else [(declared.name, at(run_at), TRIGGER.SCHEDULE)])
    if run_at is not None:
        assert plan.runs[0].next_due == at(run_at + 60)
    expected_missed = (
        []
        if missed_slots is None
        else [(at(missed_slots[0]), at(missed_slots[1]), missed_slots[2])]
    )
    assert missed(plan) == expected_missed
    assert advanced(plan) == ([] if advance_to is None else [at(advance_to)])
    if run_at is None:
        assert plan.wake_at == at(advance_to if advance_to is not None else due)


def test_latest_runs_the_slot_after_the_previous_run_and_misses_the_overlap():
    """Slots that fell due while the previous run was still going are missed as ``overlap``."""
    declared = job(schedule=every(timedelta(seconds=10)))
    row = state(declared, next_due=at(0), last_finished_at=at(15))
    plan = plan_tick(tick_of(at(25), (declared, row)))
    assert runs(plan) == [(declared.name, at(20), TRIGGER.SCHEDULE)]
    assert missed(plan) == [(at(0), at(20), R.OVERLAP)]


# --- daylight-saving changes in the job's zone ----------------------------------------------
BERLIN = "Europe/Berlin"
SPRING_27 = datetime(2026, 3, 28, 1, 30, tzinfo=UTC)  # 02:30 CET on the 28th
SPRING_29 = datetime(2026, 3, 29, 1, 0, tzinfo=UTC)  # 02:30 does not exist: 03:00 CEST
FALL_25 = datetime(2026, 10, 25, 0, 30, tzinfo=UTC)  # the first 02:30 (CEST), only once
FALL_26 = datetime(2026, 10, 26, 1, 30, tzinfo=UTC)  # 02:30 CET
S = timedelta(seconds=1)
DST_ROWS = [
    # id, schedule, next due, now, run, missed before (None: none), next due after the run
    ("spring-daily-on-time", daily("02:30", BERLIN), SPRING_29, SPRING_29 + S, SPRING_29, None),
    (
        "spring-daily-down-over-the-change",
        daily("02:30", BERLIN),
        SPRING_27,
        SPRING_29 + 5 * S,
        SPRING_29,
        SPRING_29,
    ),
    ("fall-daily-runs-once", daily("02:30", BERLIN), FALL_25, FALL_25 + HOUR * S, FALL_25, FALL_25),
    (
        "fall-daily-skipped-hour-is-no-second-slot",
        daily("02:30", BERLIN),
        FALL_25 + S,
        FALL_25 + 2 * HOUR * S,
        None,
        FALL_26,
    ),
    (
        "fall-hourly-through-the-repeated-hour",
        hourly(30, BERLIN),
        FALL_25,
        FALL_25 + 2 * HOUR * S + 5 * S,
        FALL_25 + 2 * HOUR * S,
        FALL_25 + 2 * HOUR * S,
    ),
    (
        "spring-hourly-merely-late",
        hourly(30, BERLIN),
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
        datetime(2026, 3, 29, 0, 30, 10, tzinfo=UTC),
        datetime(2026, 3, 29, 0, 30, tzinfo=UTC),
        None,
    ),
    (
        "spring-cron-in-the-missing-hour",
        cron("15 2 * * *", BERLIN),
        datetime(2026, 3, 28, 1, 15, tzinfo=UTC),
        SPRING_29 + S,
        SPRING_29,
        SPRING_29,
    ),
]


@pytest.mark.parametrize(
    "schedule, due, now, run_at, missed_before",
    [row[1:] for row in DST_ROWS],
    ids=[row[0] for row in DST_ROWS],
)
def test_daylight_saving_changes_in_the_jobs_zone(schedule, due, now, run_at, missed_before):
    declared = job(schedule=schedule)
    plan = plan_tick(tick_of(now, (declared, state(declared, next_due=due))))
    if run_at is None:
        assert runs(plan) == []
        assert advanced(plan) == [missed_before], "no slot between: the state moves on"
        assert missed(plan) == []
        return
    assert runs(plan) == [(declared.name, run_at, TRIGGER.SCHEDULE)]
    assert plan.runs[0].next_due == schedule.next_after(run_at)
    assert missed(plan) == ([] if missed_before is None else [(due, missed_before, R.DOWNTIME)])


def test_the_first_autumn_slot_is_followed_by_the_next_day_not_the_repeated_hour():
    declared = job(schedule=daily("02:30", BERLIN))
    plan = plan_tick(tick_of(FALL_25, (declared, state(declared, next_due=FALL_25))))
    assert plan.runs[0].next_due == FALL_26


# --- paused jobs ---------------------------------------------------------------------------
PAUSED_ROWS = [
    # id, paused reason, next due, now, missed (reason, before) or None
    ("paused-slots-passed", "paused by an editor", 0, 150, (R.PAUSED, 180)),
    ("paused-not-due", "paused by an editor", 300, 150, None),
    ("paused-plugin-disabled", R.PLUGIN_DISABLED, 0, 61, (R.PLUGIN_DISABLED, 120)),
    ("paused-unplannable", f"{UNPLANNABLE} (ValueError: no)", 0, 600, None),
    ("paused-no-next-due", "paused by an editor", None, 600, None),
]


@pytest.mark.parametrize(
    "reason, due, now, expected",
    [row[1:] for row in PAUSED_ROWS],
    ids=[row[0] for row in PAUSED_ROWS],
)
def test_a_paused_job_records_its_passing_slots_and_never_runs(reason, due, now, expected):
    declared = job()
    row = state(
        declared, paused=True, paused_reason=reason, next_due=None if due is None else at(due)
    )
    plan = plan_tick(tick_of(at(now), (declared, row), max_tick=HOUR))
    assert runs(plan) == [] and advanced(plan) == [] and plan.unplannable == []
    if expected is None:
        assert plan.writes == []
    else:
        [write] = plan.writes
        assert (write.start, write.before, write.reason) == (at(due), at(expected[1]), expected[0])
        assert not write.by_policy, "not logged as missed by the job's policy"
    assert plan.wake_at == at(now + HOUR)


def test_a_paused_jobs_run_now_request_runs():
    declared = job()
    row = state(
        declared, paused=True, paused_reason="paused", next_due=at(0), run_requested_at=at(5)
    )
    plan = plan_tick(tick_of(at(10), (declared, row)))
    assert runs(plan) == [(declared.name, at(5), TRIGGER.MANUAL)]
    assert plan.writes == []


# --- run now, busy jobs, held jobs, jobs another node runs ---------------------------------
def test_a_run_now_request_runs_first_whatever_the_backlog():
    declared = job()
    row = state(declared, next_due=at(-DAY), run_requested_at=at(5), run_requested_by="editor")
    plan = plan_tick(tick_of(at(10), (declared, row)))
    [run] = plan.runs
    assert (run.slot, run.trigger, run.manual_requested_at, run.requested_by) == (
        at(5),
        TRIGGER.MANUAL,
        at(5),
        "editor",
    )
    assert plan.writes == [], "the backlog waits for the next tick"


def test_run_now_requests_start_before_the_scheduled_runs_of_the_same_tick():
    scheduled, requested = job("plan.a"), job("plan.b")
    plan = plan_tick(
        tick_of(
            at(0),
            (scheduled, state(scheduled, next_due=at(0))),
            (requested, state(requested, next_due=at(30), run_requested_at=at(0))),
        )
    )
    assert [run.job.name for run in plan.runs] == ["plan.b", "plan.a"]


def test_a_ticks_side_effects_start_after_its_other_runs_whatever_their_order():
    mail = job("plan.mail", side_effects=True)
    scheduled, requested = job("plan.a"), job("plan.b")
    plan = plan_tick(
        tick_of(
            at(0),
            (mail, state(mail, next_due=at(0), run_requested_at=at(0))),
            (scheduled, state(scheduled, next_due=at(0))),
            (requested, state(requested, next_due=at(30), run_requested_at=at(0))),
        )
    )
    assert [run.job.name for run in plan.runs] == ["plan.b", "plan.a", "plan.mail"]


BUSY_ROWS = [
    # id, state fields, the busy worker's plan fields, due behind, wake (seconds)
    ("run-now-while-busy", {"next_due": at(60), "run_requested_at": at(1)}, {}, True, None),
    (
        "slot-come-due-behind-a-manual-run",
        {"next_due": at(0)},
        {"trigger": TRIGGER.MANUAL},
        True,
        None,
    ),
    ("scheduled-run-moves-the-job-on", {"next_due": at(0)}, {"next_due": at(60)}, False, 60),
    ("busy-and-paused", {"next_due": at(0), "paused": True}, {}, False, HOUR),
    ("busy-next-due-later", {"next_due": at(300)}, {"trigger": TRIGGER.RETRY}, False, 300),
]


@pytest.mark.parametrize(
    "fields, plan_fields, behind, wake",
    [row[1:] for row in BUSY_ROWS],
    ids=[row[0] for row in BUSY_ROWS],
)
def test_a_busy_job_is_not_started_again(fields, plan_fields, behind, wake):
    declared = job()
    busy = RunPlan(job=declared, slot=at(-60), **plan_fields)
    plan = plan_tick(
        tick_of(
            at(0), (declared, state(declared, **fields)), busy={declared.name: busy}, max_tick=HOUR
        )
    )
    assert plan.runs == [] and plan.writes == []
    assert plan.due_behind == ({declared.name} if behind else set())
    if wake is not None:
        assert plan.wake_at == at(wake)


def test_a_busy_when_due_job_is_due_at_its_wake_at():
    declared = job(schedule=WhenDue(timedelta(minutes=5)))
    row = state(declared, next_due=at(300), wake_at=at(40))
    busy = RunPlan(job=declared, slot=at(-1))
    plan = plan_tick(tick_of(at(0), (declared, row), busy={declared.name: busy}, max_tick=HOUR))
    assert plan.runs == [] and plan.wake_at == at(40)


def test_a_held_off_job_waits_for_its_hold():
    declared = job()
    plan = plan_tick(
        tick_of(at(0), (declared, state(declared, next_due=at(0))), held={declared.name: 0.4})
    )
    assert plan.runs == [] and plan.writes == []
    assert plan.wake_at == at(0.4)


def test_a_job_another_node_still_runs_is_looked_at_again_soon():
    declared = job()
    row = state(declared, next_due=at(0), busy_elsewhere=True)
    plan = plan_tick(tick_of(at(0), (declared, row), soon=1.0, max_tick=30))
    assert plan.runs == [] and plan.wake_at == at(1)


def test_undeclared_and_retired_states_are_left_alone():
    declared, retired = job("plan.a"), job("plan.b")
    stray = state(job("plan.c"), next_due=at(0))
    plan = plan_tick(
        TickInput(
            now=at(0),
            states=[stray, state(retired, next_due=at(0), retired_at=at(-5))],
            declared={declared.name: declared, retired.name: retired},
            max_tick=5,
        )
    )
    assert plan.runs == [] and plan.writes == [] and plan.wake_at == at(5)


# --- jobs that are not periodic (when due) ------------------------------------------------
WHEN_DUE_ROWS = [
    # id, next due, wake at, run, wake
    ("wake-at-come", 300, -1, True, None),
    ("wake-at-later", 300, 40, False, 40),
    ("safety-net-come", 0, None, True, None),
    ("nothing-known", None, None, True, None),
    ("both-later", 300, 500, False, 300),
]


@pytest.mark.parametrize(
    "due, wake_at, started, wake",
    [row[1:] for row in WHEN_DUE_ROWS],
    ids=[row[0] for row in WHEN_DUE_ROWS],
)
def test_a_when_due_job_runs_at_its_wake_at_or_its_safety_net(due, wake_at, started, wake):
    declared = job(schedule=WhenDue(timedelta(minutes=5)))
    row = state(
        declared,
        next_due=None if due is None else at(due),
        wake_at=None if wake_at is None else at(wake_at),
    )
    plan = plan_tick(tick_of(at(0), (declared, row), max_tick=HOUR))
    if started:
        [run] = plan.runs
        assert (run.slot, run.wake_before, run.next_due) == (at(0), at(0), None)
    else:
        assert plan.runs == [] and plan.wake_at == at(wake)


# --- retries ------------------------------------------------------------------------------
RETRY_ROWS = [
    # id, job options, state fields, retry at, busy here, started, still waiting, due behind
    ("retry-due", {"retries": 2}, {}, -1, False, True, False, False),
    ("retry-waiting", {"retries": 2}, {}, 90, False, False, True, False),
    ("abandoned-retried", {"retry_abandoned": True}, {}, None, False, True, False, False),
    ("retry-due-while-busy-here", {"retries": 2}, {}, -1, True, False, True, True),
    ("retry-waiting-while-busy-here", {"retries": 2}, {}, 90, True, False, True, False),
    ("retry-of-a-paused-job", {"retries": 2}, {"paused": True}, -1, False, False, True, False),
    ("no-retries-declared", {}, {}, -1, False, False, False, False),
    # Another node still runs the job: its retry waits like one behind a run of this node
    # (a job never overlaps itself), looked at again soon.
    (
        "retry-due-while-busy-elsewhere",
        {"retries": 2},
        {"busy_elsewhere": True},
        -1,
        False,
        False,
        True,
        False,
    ),
]


@pytest.mark.parametrize(
    "options, fields, retry_at, busy_here, started, waiting, behind",
    [row[1:] for row in RETRY_ROWS],
    ids=[row[0] for row in RETRY_ROWS],
)
def test_runs_awaiting_a_retry(options, fields, retry_at, busy_here, started, waiting, behind):
    declared = job(**options)
    failed = retry(declared, at(-120), retry_at=None if retry_at is None else at(retry_at))
    later = at(2 * HOUR)
    busy = {declared.name: RunPlan(job=declared, slot=at(-60), next_due=later)} if busy_here else {}
    row = state(declared, next_due=later, **fields)
    plan = plan_tick(tick_of(at(0), (declared, row), retries=[failed], busy=busy, max_tick=HOUR))
    assert runs(plan) == ([(declared.name, at(-120), TRIGGER.RETRY)] if started else [])
    if started:
        assert plan.runs[0].retry_run is failed
    assert plan.waiting_retries == ([failed] if waiting else [])
    assert plan.due_behind == ({declared.name} if behind else set())
    if waiting and retry_at > 0:
        assert plan.wake_at == at(retry_at)


def test_a_ready_retry_goes_before_the_slot_its_job_has_due_in_the_same_tick():
    """Oldest slot first: a job whose runs take about its interval (on a worker, whose end
    wakes no leader) would otherwise find its next slot due at every tick, and its retry
    would never start."""
    declared = job(retries=1)
    failed = retry(declared, at(-120))
    plan = plan_tick(
        tick_of(at(0), (declared, state(declared, next_due=at(0))), retries=[failed], soon=1.0)
    )
    assert runs(plan) == [(declared.name, at(-120), TRIGGER.RETRY)]
    assert plan.waiting_retries == []
    assert plan.wake_at <= at(1)  # the due slot right after


def test_a_run_now_request_still_goes_before_a_ready_retry():
    declared = job(retries=1)
    failed = retry(declared, at(-120))
    requested = state(declared, next_due=at(0), run_requested_at=at(-1))
    plan = plan_tick(tick_of(at(0), (declared, requested), retries=[failed]))
    assert runs(plan) == [(declared.name, at(-1), TRIGGER.MANUAL)]
    assert plan.waiting_retries == [failed]


def test_one_retry_per_job_per_tick_oldest_first():
    declared = job(retries=3)
    first, second = retry(declared, at(-180)), retry(declared, at(-120))
    plan = plan_tick(
        tick_of(at(0), (declared, state(declared, next_due=at(60))), retries=[first, second])
    )
    assert [run.retry_run for run in plan.runs] == [first]
    assert plan.waiting_retries == [second]


def test_the_retry_of_a_job_no_longer_declared_is_dropped():
    declared, gone = job("plan.a", retries=1), job("plan.gone", retries=1)
    plan = plan_tick(
        tick_of(at(0), (declared, state(declared, next_due=at(60))), retries=[retry(gone, at(-1))])
    )
    assert plan.runs == [] and plan.waiting_retries == []


# --- --once -------------------------------------------------------------------------------
ONCE_ROWS = [
    # id, state fields, retry at, expected trigger (None: nothing starts); the horizon is 30
    ("slot-due-by-the-horizon", {"next_due": at(30)}, None, TRIGGER.SCHEDULE),
    ("slot-due-after-the-horizon", {"next_due": at(40)}, None, None),
    (
        "run-now-after-the-horizon-waits",
        {"next_due": at(300), "run_requested_at": at(40)},
        None,
        None,
    ),
    (
        "run-now-by-the-horizon",
        {"next_due": at(300), "run_requested_at": at(20)},
        None,
        TRIGGER.MANUAL,
    ),
    ("retry-due-after-the-horizon", {"next_due": at(300)}, 40, None),
    ("retry-due-by-the-horizon", {"next_due": at(300)}, 20, TRIGGER.RETRY),
]


@pytest.mark.parametrize(
    "fields, retry_at, trigger", [row[1:] for row in ONCE_ROWS], ids=[row[0] for row in ONCE_ROWS]
)
def test_once_runs_only_what_was_due_when_it_started(fields, retry_at, trigger):
    """``--once`` ticks until nothing more starts; it never runs what fell due meanwhile."""
    declared = job(schedule=every(timedelta(seconds=10)), retries=1)
    retries = [] if retry_at is None else [retry(declared, at(-120), retry_at=at(retry_at))]
    row = state(declared, **fields)
    plan = plan_tick(tick_of(at(45), (declared, row), retries=retries, once_horizon=at(30)))
    assert [run.trigger for run in plan.runs] == ([] if trigger is None else [trigger])


# --- when to wake -------------------------------------------------------------------------
def test_nothing_due_sleeps_the_longest_tick():
    declared = job(schedule=every(timedelta(hours=1)))
    plan = plan_tick(tick_of(at(0), (declared, state(declared, next_due=at(HOUR))), max_tick=30))
    assert plan.wake_at == at(30)


def test_the_look_for_a_previous_leaders_runs_wakes_the_loop():
    declared = job(schedule=every(timedelta(hours=1)))
    row = state(declared, next_due=at(HOUR))
    assert plan_tick(tick_of(at(0), (declared, row), max_tick=30, recheck_in=7)).wake_at == at(7)
    assert plan_tick(tick_of(at(0), (declared, row), max_tick=30, recheck_in=-3)).wake_at == at(0)


def test_the_sleep_counts_the_started_runs_and_the_time_the_tick_took():
    declared = job(schedule=every(timedelta(seconds=10)))
    plan = plan_tick(tick_of(at(0), (declared, state(declared, next_due=at(0))), max_tick=30))
    assert plan.wake_at == at(30), "the run's next slot is not counted before it starts"
    assert plan.sleep_for(plan.runs, elapsed=0.25) == pytest.approx(9.75)
    assert plan.sleep_for([], elapsed=0.25) == pytest.approx(29.75)
    assert plan.sleep_for(plan.runs, elapsed=11) == 0.0


# --- jobs whose planning raises -------------------------------------------------------------
class Broken(Schedule):
    """Every minute, except that computing the slot after an instant ``breaks`` raises."""

    def __init__(self, breaks):
        self._grid = Every(timedelta(minutes=1))
        self._breaks = breaks

    def next_after(self, instant):
        if self._breaks(instant):
            raise ValueError("no slot after the break")
        return self._grid.next_after(instant)

    def slots_between(self, start, end, *, limit=None):
        return self._grid.slots_between(start, end, limit=limit)

    def describe(self):
        return "broken"

    def fingerprint(self):
        return "broken"


def broken(name, breaks, **options):
    return dataclasses.replace(job(name, **options), schedule=Broken(breaks))


def test_a_job_whose_planning_raises_is_reported_and_the_others_are_planned():
    bad, good = broken("plan.bad", lambda instant: instant >= at(0)), job("plan.good")
    row = state(bad, next_due=at(0))
    plan = plan_tick(tick_of(at(10), (bad, row), (good, state(good, next_due=at(0)))))
    [unplannable] = plan.unplannable
    assert (unplannable.job, unplannable.state) == (bad, row)
    assert isinstance(unplannable.error, ValueError)
    assert runs(plan) == [("plan.good", at(0), TRIGGER.SCHEDULE)]


def test_the_slots_recorded_before_planning_raised_stay_recorded():
    bad = broken(
        "plan.bad",
        lambda instant: instant == at(50 * MINUTE),
        missed=Missed.ALL,
        missed_window=timedelta(minutes=10),
    )
    plan = plan_tick(tick_of(at(HOUR), (bad, state(bad, next_due=at(0)))))
    assert missed(plan) == [(at(0), at(50 * MINUTE), R.CATCH_UP_WINDOW)]
    assert [u.job for u in plan.unplannable] == [bad] and plan.runs == []


def test_a_paused_job_whose_slots_cannot_be_computed_is_reported():
    bad = broken("plan.bad", lambda instant: instant >= at(0))
    row = state(bad, next_due=at(0), paused=True, paused_reason="paused by an editor")
    plan = plan_tick(tick_of(at(10), (bad, row)))
    assert [u.job for u in plan.unplannable] == [bad] and plan.writes == []


def test_a_database_error_while_planning_ends_the_tick():
    class Unreadable(Broken):
        def next_after(self, instant):
            raise OperationalError("the database went away")

    bad = dataclasses.replace(job("plan.bad"), schedule=Unreadable(None))
    with pytest.raises(OperationalError):
        plan_tick(tick_of(at(10), (bad, state(bad, next_due=at(0))), reraise=(OperationalError,)))


# --- a thousand due jobs --------------------------------------------------------------------
def test_a_thousand_due_jobs_each_start_once_and_are_claimed_together():
    declared = [job(f"plan.job{i:04d}") for i in range(1000)]
    pairs = [(j, state(j, next_due=at(0))) for j in declared]
    plan = plan_tick(tick_of(at(5), *pairs, max_tick=HOUR))
    assert [run.job.name for run in plan.runs] == [j.name for j in declared]
    assert {run.slot for run in plan.runs} == {at(0)}
    assert all(plan_claimable_together(run) for run in plan.runs)
    assert plan.sleep_for(plan.runs, elapsed=0) == 55


# --- which runs the loop claims in one batch ------------------------------------------------
CLAIM_ROWS = [
    ("claim-first-scheduled", {}, {"next_due": at(60)}, True),
    ("transactional", {"transactional": True}, {"next_due": at(60)}, False),
    ("manual", {}, {"trigger": TRIGGER.MANUAL, "manual_requested_at": at(0)}, False),
    ("retry", {}, {"trigger": TRIGGER.RETRY, "retry_run": JobRun(job="plan.job", slot=T0)}, False),
    ("no-next-slot", {}, {"next_due": None}, False),
]


@pytest.mark.parametrize(
    "options, plan_fields, together",
    [row[1:] for row in CLAIM_ROWS],
    ids=[row[0] for row in CLAIM_ROWS],
)
def test_only_claim_first_scheduled_slots_are_claimed_together(options, plan_fields, together):
    assert plan_claimable_together(RunPlan(job=job(**options), slot=T0, **plan_fields)) is together


def planned_run(options: dict, due: str):
    """Return the plan of a tick at which one job of ``options`` has ``due`` to start."""
    declared = job(**options)
    fields, retries = {"next_due": at(HOUR)}, []
    if due == "slot":
        fields = {"next_due": at(0)}
    elif due == "run-now":
        fields["run_requested_at"] = at(-5)
    else:
        retries = [retry(declared, at(-60))]
    return plan_tick(tick_of(at(5), (declared, state(declared, **fields)), retries=retries))


# --- how each run starts: one plan says it all --------------------------------------------
ROUTE_ROWS = [
    # (id, job options, what is due, queued for workers, claimed together by the leader)
    ("leader-scheduled", {}, "slot", False, True),
    ("leader-transactional", {"transactional": True}, "slot", False, False),
    ("leader-run-now", {}, "run-now", False, False),
    ("leader-retry", {"retries": 1}, "retry", False, False),
    ("workers-scheduled", {"run_on": "workers"}, "slot", True, True),
    ("workers-transactional", {"run_on": "workers", "transactional": True}, "slot", True, False),
    ("workers-run-now", {"run_on": "workers"}, "run-now", True, False),
    ("workers-retry", {"run_on": "workers", "retries": 1}, "retry", True, False),
]


@pytest.mark.parametrize(
    "options, due, for_workers, together",
    [row[1:] for row in ROUTE_ROWS],
    ids=[row[0] for row in ROUTE_ROWS],
)
def test_the_tick_plan_says_which_runs_go_to_workers_and_which_are_claimed_together(
    options, due, for_workers, together
):
    """The loop applies the one plan: it asks the planner nothing more during the tick."""
    plan = planned_run(options, due)
    [run] = plan.runs
    assert (run in plan.for_workers, run in plan.claim_together) == (for_workers, together)


def test_the_routes_keep_the_order_of_the_runs():
    declared = [job(f"plan.job{i}", run_on="workers" if i % 2 else "leader") for i in range(6)]
    plan = plan_tick(tick_of(at(5), *[(j, state(j, next_due=at(0))) for j in declared]))
    assert [run.job for run in plan.for_workers] == declared[1::2]
    assert [run.job for run in plan.claim_together] == declared


# --- how the runs left start, once receivers have answered ---------------------------------
START_ROWS = [
    # (id, job options, what is due, refused, its write raised, how it starts)
    ("leader-scheduled", {}, "slot", False, False, "together"),
    ("leader-scheduled-refused", {}, "slot", True, False, "together"),
    ("leader-transactional", {"transactional": True}, "slot", False, False, "alone"),
    ("leader-run-now-refused", {}, "run-now", True, False, "alone"),
    ("leader-scheduled-write-raised", {}, "slot", False, True, "not started"),
    ("leader-run-now-write-raised", {}, "run-now", False, True, "not started"),
    ("leader-retry-write-raised", {"retries": 1}, "retry", False, True, "alone"),
    ("workers-scheduled", {"run_on": "workers"}, "slot", False, False, "queued"),
    ("workers-scheduled-refused", {"run_on": "workers"}, "slot", True, False, "together"),
    (
        "workers-transactional-refused",
        {"run_on": "workers", "transactional": True},
        "slot",
        True,
        False,
        "alone",
    ),
    ("workers-run-now-refused", {"run_on": "workers"}, "run-now", True, False, "alone"),
    ("workers-retry-refused", {"run_on": "workers", "retries": 1}, "retry", True, False, "alone"),
    ("workers-scheduled-write-raised", {"run_on": "workers"}, "slot", False, True, "not started"),
    (
        "workers-retry-write-raised",
        {"run_on": "workers", "retries": 1},
        "retry",
        False,
        True,
        "queued",
    ),
]


def how_it_starts(routes, run) -> str:
    if run in routes.queued:
        return "queued"
    if run in routes.together:
        return "together"
    return "alone" if run in routes.here else "not started"


@pytest.mark.parametrize(
    "options, due, refused, write_raised, starts",
    [row[1:] for row in START_ROWS],
    ids=[row[0] for row in START_ROWS],
)
def test_a_refused_run_is_the_leaders_and_a_failed_write_keeps_only_retries(
    options, due, refused, write_raised, starts
):
    """The loop only asks the receivers and applies ``route``'s answer."""
    plan = planned_run(options, due)
    [run] = plan.runs
    left = plan.runs_left({run.job.name} if write_raised else set())
    for planned in left:
        planned.refusal = RuntimeError("the plugin is disabled") if refused else None
    assert how_it_starts(plan.route(left), run) == starts


def test_the_routes_of_the_runs_left_keep_their_order():
    declared = [job(f"plan.job{i}", run_on="workers" if i % 3 else "leader") for i in range(9)]
    plan = plan_tick(tick_of(at(5), *[(j, state(j, next_due=at(0))) for j in declared]))
    left = plan.runs_left({"plan.job4"})
    for run in left:
        run.refusal = RuntimeError("refused") if run.job.name == "plan.job5" else None
    routes = plan.route(left)
    assert [run.job.name for run in routes.queued] == [
        "plan.job1",
        "plan.job2",
        "plan.job7",
        "plan.job8",
    ]
    assert [run.job.name for run in routes.here] == [
        "plan.job0",
        "plan.job3",
        "plan.job5",
        "plan.job6",
    ]
    assert routes.together == routes.here


# --- whether a wake-up needs a full tick ----------------------------------------------------
QUIET = {
    "replan": False,
    "maintenance": False,
    "notified": False,
    "woken": True,
    "listening": True,
    "now": 100.5,
    "ticked_at": 100.0,
    "wake_at": 130.0,
    "finished": [("plan.a", True)],
    "due_behind": frozenset(),
    "replan_every": 1.0,
}
WAKEUP_ROWS = [
    ("runs-finished-as-planned", {}, False),
    ("a-wake-up-asks-for-a-tick", {"replan": True}, True),
    ("maintenance-requested", {"maintenance": True}, True),
    ("a-notify", {"notified": True}, True),
    ("the-sleep-ran-out", {"woken": False}, True),
    ("past-the-wake-up-time", {"now": 130.0}, True),
    ("a-polling-leader", {"listening": False}, True),
    ("a-second-of-runs-finishing", {"now": 101.0}, True),
    ("a-run-not-as-planned", {"finished": [("plan.a", False)]}, True),
    ("a-run-with-work-behind-it", {"due_behind": frozenset({"plan.a"})}, True),
    ("work-behind-another-job", {"due_behind": frozenset({"plan.b"})}, False),
]


@pytest.mark.parametrize(
    "changes, full", [row[1:] for row in WAKEUP_ROWS], ids=[row[0] for row in WAKEUP_ROWS]
)
def test_whether_a_wake_up_needs_a_full_tick(changes, full):
    assert needs_full_tick(SinceLastTick(**{**QUIET, **changes})) is full


# --- no plan starts a slot twice, none is skipped without a reason --------------------------
POLICIES = st.sampled_from(list(Missed))
PERIODS = st.sampled_from([1, 10, 60, 3600])


@st.composite
def ticks(draw):
    """A few jobs in any state: late by any amount, paused, requested, busy, held, retried."""
    pairs, busy, held, retries = [], {}, {}, []
    now = at(draw(st.integers(0, 3 * DAY)))
    for i in range(draw(st.integers(1, 5))):
        declared = job(
            f"plan.job{i}",
            schedule=every(timedelta(seconds=draw(PERIODS))),
            missed=draw(POLICIES),
            missed_window=draw(st.sampled_from([timedelta(seconds=30), timedelta(minutes=10)])),
            retries=draw(st.integers(0, 1)),
        )
        due = now - timedelta(seconds=draw(st.integers(-120, 2 * DAY)))
        finished = draw(st.none() | st.just(due + timedelta(seconds=draw(st.integers(0, 120)))))
        row = state(
            declared,
            next_due=due,
            last_finished_at=finished,
            paused=draw(st.booleans()),
            paused_reason=draw(st.sampled_from(["paused", R.PLUGIN_DISABLED])),
            run_requested_at=draw(st.none() | st.just(now - timedelta(seconds=1))),
            busy_elsewhere=draw(st.booleans()),
        )
        pairs.append((declared, row))
        if draw(st.booleans()):
            busy[declared.name] = RunPlan(job=declared, slot=due)
        if draw(st.booleans()):
            held[declared.name] = 0.5
        if declared.retries and draw(st.booleans()):
            retries.append(retry(declared, due - timedelta(hours=1)))
    horizon = draw(st.none() | st.just(now))
    return tick_of(now, *pairs, busy=busy, held=held, retries=retries, once_horizon=horizon)


@hypothesis_settings(max_examples=100, deadline=None)
@given(ticks())
def test_no_plan_starts_a_slot_twice_or_skips_one_without_a_reason(tick):
    plan = plan_tick(tick)
    started = [(run.job.name, run.slot) for run in plan.runs]
    assert len(started) == len(set(started)), "a slot started twice"
    assert len({run.job.name for run in plan.runs}) == len(plan.runs), "a job overlaps itself"
    assert not {run.job.name for run in plan.runs} & set(tick.busy), "a busy job started again"
    elsewhere = {state.name for state in tick.states if state.busy_elsewhere}
    assert not {run.job.name for run in plan.runs} & elsewhere, "a job another node runs started"
    for write in plan.writes:
        if isinstance(write, MissedSlots):
            assert write.reason in R.values, "a slot missed without a reason"
            assert write.before is None or write.start <= write.before
            for run in plan.runs:
                if run.job == write.job and run.trigger == TRIGGER.SCHEDULE:
                    assert not write.start <= run.slot < (write.before or run.slot), (
                        "a slot both run and recorded missed"
                    )
    assert plan.wake_at <= tick.now + timedelta(seconds=tick.max_tick)
