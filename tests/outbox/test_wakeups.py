"""The outbox's wake-ups are never lost: a subscriber is woken in the transaction that
commits its deliveries, and a dispatcher run that found nothing looks again after its commit
for events whose wake-up it kept out (its run held the state row); changes committed close
together share one dispatcher run."""

import threading
from datetime import timedelta

import pytest
from django.db import transaction

from coordination.clock import database_now
from coordination.ledger import lock_state_nowait
from coordination.models import JobState
from coordination.registry import JobRegistry
from coordination.registry import registry as default_registry
from outbox.job_names import DISPATCH_JOB
from outbox.wakeups import DISPATCH_AFTER
from plugins.sdk import on_post_event
from plugins.testing import context_for, make_due
from publishing.models import PublishEvent
from publishing.public_events import announce_events
from tests.publishing.conftest import Actor, make_post, run_job

registry = JobRegistry()


@on_post_event("published", plugin="demo", registry=registry)
def told(event, ctx):
    """A claim-first subscriber: its runs never hold its state row for long."""


@on_post_event("published", plugin="demo", name="slow", transactional=True, registry=registry)
def slow(event, ctx):
    """A transactional subscriber: its runs hold its state row until they commit."""


def publish_event():
    """Write a ``published`` event as a change does: in its transaction, announced on commit."""
    with transaction.atomic():
        PublishEvent.objects.create(post=make_post(status="published"), kind="published")
        announce_events()


def woken(job_name: str) -> bool:
    wake_at = JobState.objects.get(name=job_name).wake_at
    return wake_at is not None and wake_at <= database_now()


def not_due_for_an_hour(job_name: str) -> None:
    job = default_registry.get(job_name) or registry.get(job_name)
    make_due(job, next_due=database_now() + timedelta(hours=1), wake_at=None)


@pytest.mark.django_db
def test_a_subscriber_is_woken_in_the_transaction_of_its_deliveries(
    django_capture_on_commit_callbacks,
):
    not_due_for_an_hour(DISPATCH_JOB)
    not_due_for_an_hour(told.job.name)
    PublishEvent.objects.create(post=make_post(status="published"), kind="published")

    # The node dies once the dispatcher's run committed: no after-commit step runs.
    with default_registry.temporary(told.job), django_capture_on_commit_callbacks(execute=False):
        run_job(DISPATCH_JOB)

    assert woken(told.job.name)


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_an_event_committed_while_an_empty_dispatcher_run_holds_its_row_is_not_left_waiting():
    dispatcher = default_registry.get(DISPATCH_JOB)
    not_due_for_an_hour(DISPATCH_JOB)
    looked, published = threading.Event(), threading.Event()

    def empty_run():
        with transaction.atomic():
            lock_state_nowait(DISPATCH_JOB)  # as the engine's transactional run does
            answer = dispatcher.func(context_for(dispatcher))
            looked.set()
            assert published.wait(30)
        return answer

    run = Actor(empty_run)
    run.start()
    assert looked.wait(30)
    publish_event()  # its wake-up skips the row the run holds
    published.set()

    assert run.outcome() is None  # the run found nothing: its schedule alone would wait
    assert woken(DISPATCH_JOB)


@pytest.mark.django_db(transaction=True)
def test_changes_committed_close_together_share_one_dispatcher_run():
    not_due_for_an_hour(DISPATCH_JOB)
    before = database_now()
    publish_event()
    first = JobState.objects.get(name=DISPATCH_JOB).wake_at
    publish_event()
    after = database_now()

    assert before + DISPATCH_AFTER <= first <= after + DISPATCH_AFTER
    assert JobState.objects.get(name=DISPATCH_JOB).wake_at == first  # never raised


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_transactional_subscribers_run_never_holds_up_the_dispatcher_and_looks_again_after():
    not_due_for_an_hour(DISPATCH_JOB)
    not_due_for_an_hour(slow.job.name)
    looked, dispatched = threading.Event(), threading.Event()

    def subscriber_run():
        with transaction.atomic():
            lock_state_nowait(slow.job.name)  # as the engine's transactional run does
            answer = slow.job.func(context_for(slow.job))
            looked.set()
            assert dispatched.wait(30)  # a long batch, still going
        return answer

    with default_registry.temporary(slow.job):
        run = Actor(subscriber_run)
        run.start()
        assert looked.wait(30)
        PublishEvent.objects.create(post=make_post(status="published"), kind="published")
        dispatcher = Actor(lambda: run_job(DISPATCH_JOB))
        dispatcher.start()
        dispatcher.join(10)
        finished_meanwhile = not dispatcher.is_alive()
        dispatched.set()
        dispatcher.outcome()
        assert run.outcome() is None  # it saw nothing: its schedule alone would wait

    assert finished_meanwhile, "the dispatcher waited for the subscriber's run to commit"
    assert woken(slow.job.name)


@pytest.mark.server
@pytest.mark.django_db(transaction=True)
def test_a_transactional_subscribers_run_that_commits_before_the_dispatcher_is_still_woken():
    """The dispatcher finds the subscriber's row held and leaves it; that run ends and looks
    for new deliveries before the dispatcher has committed them, so it sees none. The
    dispatcher looks once more after its own commit."""
    not_due_for_an_hour(DISPATCH_JOB)
    not_due_for_an_hour(slow.job.name)
    looked, dispatched, committed = threading.Event(), threading.Event(), threading.Event()

    def subscriber_run():
        with transaction.atomic():
            lock_state_nowait(slow.job.name)  # as the engine's transactional run does
            answer = slow.job.func(context_for(slow.job))
            looked.set()
            assert dispatched.wait(30)
        committed.set()  # and its look for new deliveries has run: it saw none
        return answer

    def dispatcher_run():
        job = default_registry.get(DISPATCH_JOB)
        with transaction.atomic():
            answer = job.func(context_for(job))  # its wake-up finds the row held
            dispatched.set()
            assert committed.wait(30)
        return answer

    with default_registry.temporary(slow.job):
        run = Actor(subscriber_run)
        run.start()
        assert looked.wait(30)
        PublishEvent.objects.create(post=make_post(status="published"), kind="published")
        dispatcher = Actor(dispatcher_run)
        dispatcher.start()
        assert run.outcome() is None  # it saw nothing
        dispatcher.outcome()

    assert woken(slow.job.name), "the delivery waits for the subscriber's fallback"
