"""A leader killed in the middle of sending out a release: all of it or none, then exactly once.

Real ``runscheduler`` processes on PostgreSQL. A trigger on the publish history makes the
leader's release transaction wait, after its posts are changed and before its events are
written, on an advisory lock the test holds: the leader is provably inside the release. The
test SIGKILLs it there, then lets the lock go: the dead leader's transaction rolls back whole,
and the follower that takes over sends the release out once.
"""

import signal
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count

from coordination.clock import database_now
from coordination.models import Leadership
from coordination.services import request_wakeup
from publishing.job_names import PUBLISH_JOB
from publishing.models import Post, PublishEvent
from releases import actions as releases
from releases.models import ItemAction, Release
from tests.publishing.conftest import live_post, make_post
from tests.support.gates import AdvisoryGate
from tests.support.polling import wait_until

pytestmark = [
    pytest.mark.multiprocess,
    pytest.mark.postgresql,
    pytest.mark.django_db(transaction=True),
]

S = Post.Status
K = PublishEvent.Kind
HOLD = 7707
TRIGGER = f"""
CREATE FUNCTION test_hold_release_events() RETURNS trigger AS $$
BEGIN
    IF NEW.data ? 'release_name' THEN
        PERFORM pg_advisory_xact_lock_shared({HOLD});
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE TRIGGER test_hold_release_events BEFORE INSERT ON publishing_publishevent
    FOR EACH ROW EXECUTE FUNCTION test_hold_release_events();
"""
DROP = """
DROP TRIGGER IF EXISTS test_hold_release_events ON publishing_publishevent;
DROP FUNCTION IF EXISTS test_hold_release_events();
"""


def leader() -> str | None:
    row = Leadership.objects.filter(group="publishing").first()
    return row.node if row else None


def test_a_leader_killed_mid_release_changes_nothing_and_the_next_leader_sends_it_once(
    schedulers, editor
):
    drafts = [make_post(title=f"Launch {n}") for n in range(20)]
    old = [live_post(title=f"Old {n}") for n in range(5)]
    release = releases.create_release(name="Launch", user=editor)
    for post in drafts:
        releases.add_item(release=release, post=post, user=editor)
    for post in old:
        releases.add_item(release=release, post=post, action=ItemAction.UNPUBLISH, user=editor)
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(hours=1), user=editor
    )
    hold = AdvisoryGate(HOLD, install=[TRIGGER], drop=[DROP])
    try:
        first = schedulers("rel-1", "publishing")
        wait_until(lambda: leader() == "rel-1", timeout=30, message="rel-1 never led")
        second = schedulers("rel-2", "publishing")
        second.wait_for_log("running groups")

        Release.objects.filter(pk=release.pk).update(release_at=database_now())
        request_wakeup(PUBLISH_JOB, at=database_now())
        wait_until(hold.waiting, timeout=30, message="the release never ran")
        # Inside the release: every post changed, none of it visible.
        assert not Post.objects.filter(pk__in=[p.pk for p in drafts], status=S.PUBLISHED)
        first.signal(signal.SIGKILL)
        first.process.wait(10)
        hold.open()

        wait_until(
            lambda: Release.objects.get(pk=release.pk).status == Release.Status.RELEASED,
            timeout=60,
            message="the next leader never sent the release out",
        )
    finally:
        hold.close()
    connection.close()

    ids = [p.pk for p in drafts + old]
    events = PublishEvent.objects.filter(post_id__in=ids, kind__in=[K.PUBLISHED, K.UNPUBLISHED])
    per_post = dict(events.values_list("post_id").annotate(n=Count("id")))
    assert per_post == dict.fromkeys(ids, 1), "each post changed exactly once"
    assert set(events.values_list("node", flat=True)) == {"rel-2"}
    assert set(
        Post.objects.filter(pk__in=[p.pk for p in drafts]).values_list("status", flat=True)
    ) == {S.PUBLISHED}
    assert set(
        Post.objects.filter(pk__in=[p.pk for p in old]).values_list("status", flat=True)
    ) == {S.UNPUBLISHED}
