"""The missed-slot policies as a pure function: which slot runs now, which are recorded missed."""

from datetime import UTC, datetime, timedelta

from coordination.catchup import CatchUp, decide
from coordination.models import JobRun
from coordination.registry import Missed, make_job
from coordination.schedules import every

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GRACE = timedelta(seconds=30)
R = JobRun.MissedReason


def job(missed=Missed.LATEST, window=None, seconds=1):
    return make_job(
        lambda ctx: None,
        name="catchup.job",
        group="catchuptest",
        schedule=every(timedelta(seconds=seconds)),
        missed=missed,
        missed_window=window,
    )


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_latest_runs_merely_late_slots_in_order():
    assert decide(job(), next_due=at(0), now=at(5.5), grace=GRACE) == CatchUp(run=at(0))


def test_latest_after_downtime_runs_the_newest_and_skips_the_rest():
    decision = decide(job(), next_due=at(0), now=at(1800.2), grace=GRACE)
    assert decision == CatchUp(run=at(1800), skip_before=at(1800), reason=R.DOWNTIME)


def test_latest_skips_slots_that_fell_due_while_the_previous_run_was_going():
    """A job slower than its period runs back to back instead of falling ever further behind."""
    decision = decide(job(), next_due=at(1), now=at(3.6), grace=GRACE, previous_finished_at=at(3.5))
    assert decision == CatchUp(run=at(3), skip_before=at(3), reason=R.OVERLAP)


def test_latest_runs_the_first_slot_after_the_previous_run_finished():
    decision = decide(job(), next_due=at(1), now=at(6.2), grace=GRACE, previous_finished_at=at(2.5))
    assert decision == CatchUp(run=at(3), skip_before=at(3), reason=R.OVERLAP)


def test_latest_after_a_takeover_gap_runs_every_slot_in_order():
    """Slots after the previous run finished were not overlapped: none is skipped."""
    decision = decide(job(), next_due=at(1), now=at(4.2), grace=GRACE, previous_finished_at=at(0.3))
    assert decision == CatchUp(run=at(1))


def test_skip_runs_only_the_newest_slot_within_the_grace():
    decision = decide(job(Missed.SKIP), next_due=at(0), now=at(10.5), grace=GRACE)
    assert decision == CatchUp(run=at(10), skip_before=at(10), reason=R.DOWNTIME)
    decision = decide(job(Missed.SKIP, seconds=60), next_due=at(0), now=at(100), grace=GRACE)
    assert decision == CatchUp(run=None, skip_before=at(120), reason=R.DOWNTIME)


def test_all_runs_every_slot_within_the_window_and_skips_older_ones():
    window = timedelta(seconds=5)
    decision = decide(job(Missed.ALL, window), next_due=at(0), now=at(20.5), grace=GRACE)
    assert decision == CatchUp(run=at(16), skip_before=at(16), reason=R.CATCH_UP_WINDOW)
    assert decide(job(Missed.ALL, window), next_due=at(16), now=at(20.5), grace=GRACE) == (
        CatchUp(run=at(16))
    )


def test_nothing_runs_when_next_due_falls_between_slots():
    decision = decide(job(seconds=60), next_due=at(30), now=at(45), grace=GRACE)
    assert decision == CatchUp(run=None)
