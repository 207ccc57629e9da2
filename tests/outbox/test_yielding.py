"""The lookout of a batch under way: how often it asks whether posts are going out."""

import pytest

from coordination.clock import database_now
from coordination.models import JobState
from coordination.priorities import Priority
from outbox.yielding import Lookout


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.django_db
def test_a_lookout_asks_at_most_once_per_period_and_holds_its_yes(django_assert_num_queries):
    clock = Clock()
    lookout = Lookout(Priority.SIDE_EFFECTS, every=0.05, clock=clock)
    with django_assert_num_queries(0):
        clock.now += 0.049
        assert not lookout()  # not a period yet: no query
    with django_assert_num_queries(1):
        clock.now += 0.001
        assert not lookout()  # publishing idle
        assert not lookout()  # asked just now
    JobState.objects.create(
        name="publishing.publish_due", group="publishing", wake_at=database_now()
    )
    with django_assert_num_queries(1):
        clock.now += 0.05
        assert lookout()
    with django_assert_num_queries(0):
        clock.now += 10
        assert lookout() and lookout.stepped_aside  # the batch has stepped aside for good


@pytest.mark.django_db
def test_publishings_own_work_never_steps_aside(django_assert_num_queries):
    JobState.objects.create(
        name="publishing.publish_due", group="publishing", wake_at=database_now()
    )
    clock = Clock()
    lookout = Lookout(Priority.PUBLISHING, every=0.0, clock=clock)
    with django_assert_num_queries(0):
        assert not lookout()
