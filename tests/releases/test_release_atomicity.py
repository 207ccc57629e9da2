"""A release goes out in one transaction: a public reader on another connection never sees a part.

The reader runs in its own thread on its own connection, reading what the public index reads
(the live posts) over and over while the publish job sends out a release of a thousand items
that publishes drafts and takes live posts down, and while its transaction is held open
after the changes. Every read sees all of the release or none of it. On every vendor
(``DATABASE_URL``).
"""

import threading
from datetime import timedelta

import pytest
from django.db import connection, transaction

from coordination.clock import database_now
from publishing import selectors
from publishing.models import Post
from releases import actions as releases
from releases.models import ItemAction, Release, ReleaseItem
from tests.publishing.conftest import Actor, run_publish_job
from tests.support.polling import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

S = Post.Status
SIZE = 500


def item(release: Release, post: Post, action: str) -> ReleaseItem:
    return ReleaseItem(
        release=release, post=post, post_title=post.title, action=action, pinned_version=1
    )


def build_release(editor) -> tuple[Release, set[int], set[int]]:
    """A scheduled release publishing SIZE drafts and taking SIZE live posts down."""
    drafts = Post.objects.bulk_create(
        Post(title=f"Draft {n}", slug=f"draft-{n}", body="Body.", body_html="<p>Body.</p>")
        for n in range(SIZE)
    )
    now = database_now()
    live = Post.objects.bulk_create(
        Post(
            title=f"Live {n}",
            slug=f"live-{n}",
            body="Body.",
            body_html="<p>Body.</p>",
            status=S.PUBLISHED,
            published_at=now,
        )
        for n in range(SIZE)
    )
    release = releases.create_release(name="Big launch", user=editor)
    ReleaseItem.objects.bulk_create(
        [item(release, post, ItemAction.PUBLISH) for post in drafts]
        + [item(release, post, ItemAction.UNPUBLISH) for post in live]
    )
    releases.schedule_release(
        release=release, release_at=database_now() + timedelta(hours=1), user=editor
    )
    return release, {p.pk for p in drafts}, {p.pk for p in live}


def test_a_reader_on_another_connection_sees_all_of_a_release_or_none(editor):
    release, drafts, live = build_release(editor)
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def read_like_the_public():
        while not stop.is_set():
            ids = set(selectors.live_posts().values_list("pk", flat=True))
            seen.append((len(ids & drafts), len(ids & live)))

    reader = Actor(read_like_the_public)
    reader.start()
    try:
        wait_until(lambda: seen, message="the reader never read")
        Release.objects.filter(pk=release.pk).update(release_at=database_now())
        with transaction.atomic():
            run_publish_job()
            # Every change is made, not committed: the reader goes on reading meanwhile.
            during = len(seen)
            wait_until(lambda: len(seen) >= during + 3, message="the reader stopped reading")
            during = len(seen)
        wait_until(lambda: seen[-1] == (SIZE, 0), message="the release never showed")
    finally:
        stop.set()
        reader.outcome()
    connection.close()

    assert Release.objects.get(pk=release.pk).status == Release.Status.RELEASED
    assert set(seen) == {(0, SIZE), (SIZE, 0)}, sorted(set(seen))
    assert seen[during - 1] == (0, SIZE), "before the commit, none of the release shows"
