"""A run-now request is served once, whatever instant it was made at.

SQLite keeps times as text: ``Now()`` writes ``'...:SS.000'`` at a whole second, while Django
writes a Python time at a whole second as ``'...:SS'``, which sorts before it. A request made at
a whole second was never cleared by the run that served it, and a ``--once`` tick planned it
again for ever (about one request in a thousand).
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection

from coordination import ledger
from coordination.clock import database_now
from coordination.models import JobState
from tests.coordination.enginekit import Recorder, declare, make_due, tick

pytestmark = pytest.mark.django_db(transaction=True)


def request_at_whole_second(job):
    """Write what ``request_run`` writes when the database clock reads a whole second."""
    whole = (database_now() - timedelta(seconds=1)).replace(microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE coordination_jobstate SET run_requested_at = %s, run_requested_by = 't'"
            " WHERE name = %s",
            [whole.strftime("%Y-%m-%d %H:%M:%S.000"), job.name],
        )
    return whole


def test_serving_a_request_made_at_a_whole_second_clears_it():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    requested = request_at_whole_second(job)
    assert JobState.objects.get(name=job.name).run_requested_at == requested
    ledger.slot_dealt_with(job, None, requested)
    assert JobState.objects.get(name=job.name).run_requested_at is None


def test_serving_a_wake_up_due_at_a_whole_second_clears_it():
    reg, job = declare(Recorder())
    make_due(job, ago=timedelta(0))
    whole = (database_now() - timedelta(seconds=1)).replace(microsecond=0)
    with connection.cursor() as cursor:  # as Now() writes it on SQLite: '...:SS.000'
        cursor.execute(
            "UPDATE coordination_jobstate SET wake_at = %s WHERE name = %s",
            [whole.strftime("%Y-%m-%d %H:%M:%S.000"), job.name],
        )
    ledger.slot_dealt_with(job, None, None, wake_before=whole)
    assert JobState.objects.get(name=job.name).wake_at is None


def test_a_once_tick_runs_a_request_made_at_a_whole_second_once_and_ends():
    recorder = Recorder()
    reg, job = declare(recorder)
    make_due(job, ago=timedelta(0))
    JobState.objects.filter(name=job.name).update(next_due=database_now() + timedelta(hours=1))
    request_at_whole_second(job)
    done = threading.Event()
    threading.Thread(target=lambda: (tick(reg), done.set()), daemon=True).start()
    assert done.wait(20), f"the tick never ended; the job ran {len(recorder.slots)} time(s)"
    assert len(recorder.slots) == 1
