"""The testing examples of docs/plugins.md, verbatim: they must keep working."""

from datetime import timedelta

import pytest
from django.db.models.functions import Now

from coordination.models import JobRun
from plugins.contrib.example import jobs
from plugins.contrib.example.models import Beat, Digest
from plugins.testing import context_for, make_due, run_tick
from publishing.models import Post


@pytest.mark.django_db
def test_beat_records_its_slot():
    ctx = context_for(jobs.beat, node="node-a")  # slot: the database's now
    jobs.beat(ctx)
    assert Beat.objects.get().slot == ctx.slot


@pytest.mark.django_db
def test_digest_stops_when_asked():
    Post.objects.create(
        title="Hi", slug="hi", body="one two", status="published", published_at=Now()
    )
    ctx = context_for(jobs.digest, should_stop=lambda: True)
    jobs.digest(ctx)
    assert not Digest.objects.get(slot=ctx.slot).complete


@pytest.mark.django_db(transaction=True)
def test_beat_runs_the_latest_missed_slot_once():
    make_due(jobs.beat, ago=timedelta(minutes=2))  # as if the cluster was down 2 minutes
    run_tick(jobs.beat)
    runs = JobRun.objects.filter(job="example.beat")
    assert runs.filter(status="succeeded").count() == 1
    assert runs.filter(status="missed").exists()
