"""The release stream: releases put together and scheduled through releases.actions.

Beside the editors' stream, every few seconds a release of a few to a few dozen new draft
posts (and, now and then, takedowns of live posts in no pending release) is put together and
scheduled a few seconds ahead by the database clock, as an editor would. Nothing edits a
release's posts afterwards, so every release must go out whole, once, at or after its time.
A quiet spell keeps releases off its probe's slot (:func:`postpone_releases`).

Also what the invariants and the report read of releases: the rows, the items, and the
events that carry a release's id.
"""

import json
import random
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from typing import NamedTuple

from devtools.chaos.clock import utc
from devtools.chaos.config import (
    POSTPONE_STEP,
    RELEASE_AHEAD,
    RELEASE_EVERY,
    RELEASE_POSTS,
    RELEASE_SLUG,
    RELEASE_TAKEDOWN_CHANCE,
    RELEASE_TAKEDOWNS,
)
from devtools.chaos.records import ReleaseRecord
from devtools.chaos.soak import Soak

#: The event kind of each change a release item makes.
CHANGE_KINDS = {
    "publish": "published",
    "unpublish": "unpublished",
    "revision": "revision_published",
}


def release_stream(soak: Soak, seed: int) -> None:
    """Put releases together and schedule them, until the soak stops the streams.

    Each release's numbers are drawn before any database work, so an error (a restarting
    server: counted, as the editors' are) does not shift the next releases'.
    """
    from django.db import close_old_connections, connection

    rng = random.Random(f"releases-{seed}")
    number = 0
    while not soak.stop_stream.wait(rng.uniform(*RELEASE_EVERY)):
        number += 1
        size = rng.randint(*RELEASE_POSTS)
        takedowns = rng.randint(*RELEASE_TAKEDOWNS) if rng.random() < RELEASE_TAKEDOWN_CHANCE else 0
        ahead = timedelta(seconds=rng.uniform(*RELEASE_AHEAD))
        picker = random.Random(rng.random())
        name = f"chaos-{seed}{RELEASE_SLUG}{number}"
        try:
            close_old_connections()
            make_release(soak, name, size, takedowns, ahead, picker)
        except Exception:
            # A racing job, a restarting server: the release is left a draft (it never goes
            # out, which the invariants check too) and the stream carries on.
            soak.release_errors += 1
            try:
                connection.close()
            except Exception:
                pass
    connection.close()


def make_release(
    soak: Soak, name: str, size: int, takedowns: int, ahead: timedelta, picker: random.Random
) -> None:
    """Create release ``name`` of ``size`` new drafts and ``takedowns`` live posts, and
    schedule it ``ahead`` of the database clock (past a quiet spell's window if it falls in
    it); record each step on ``soak`` once it is done."""
    from coordination.clock import database_now
    from publishing.models import Post, PostStatus
    from releases import actions as releases
    from releases.models import ItemAction, ReleaseStatus
    from reviews import actions as reviews

    release = releases.create_release(name=name, user=None)
    record = soak.releases[release.pk] = ReleaseRecord(release.pk, name)
    soak.release_ops["create"] += 1
    for i in range(size):
        if not wait_unpaused(soak):
            return  # left a draft
        post = Post.objects.create(
            title=f"Chaos release post {name} {i}", slug=f"{name}-{i}", body="Body."
        )
        releases.add_item(release=release, post=post, user=None)
        record.posts[post.pk] = ItemAction.PUBLISH
    if takedowns:
        live = sorted(
            Post.objects.filter(status=PostStatus.PUBLISHED)
            .exclude(slug__contains="-lone-")  # the quiet spells' evidence stays as it was
            .exclude(
                release_items__release__status__in=(ReleaseStatus.DRAFT, ReleaseStatus.SCHEDULED)
            )
            .values_list("pk", flat=True)
        )
        for pk in picker.sample(live, min(takedowns, len(live))):
            if not wait_unpaused(soak):
                return
            post = Post.objects.get(pk=pk)
            releases.add_item(release=release, post=post, action=ItemAction.UNPUBLISH, user=None)
            record.posts[pk] = ItemAction.UNPUBLISH
            soak.release_ops["takedown"] += 1
    if not wait_unpaused(soak):
        return
    # Review is on: the release's items, as pinned now, are submitted and approved.
    review = releases.submit_release(release=release, user=None)
    reviews.decide(review=review, user=None, approve=True)
    with soak.release_lock:
        release_at = database_now() + ahead
        window = soak.quiet_window
        if window is not None and window[0] <= release_at < window[1]:
            release_at = window[1] + timedelta(seconds=POSTPONE_STEP)
            soak.release_ops["after a quiet spell"] += 1
        releases.schedule_release(release=release, release_at=release_at, user=None)
        record.release_at = release_at
    soak.release_ops["schedule"] += 1


@contextmanager
def releases_paused(soak: Soak) -> Iterator[None]:
    """Make the release stream wait between its steps while the block runs."""
    soak.release_pause.set()
    try:
        yield
    finally:
        soak.release_pause.clear()


def wait_unpaused(soak: Soak) -> bool:
    """Wait while :func:`releases_paused` holds the stream; False once the soak stops it."""
    while soak.release_pause.is_set() and not soak.stop_stream.is_set():
        time.sleep(0.01)
    return not soak.stop_stream.is_set()


def postpone_releases(soak: Soak, start: datetime, until: datetime, first: int) -> int:
    """Keep releases out of ``[start, until)`` (a quiet spell's window): none is scheduled in
    it from now on, and the scheduled ones due in it are moved to ``until`` and after, from
    the ``first``-th POSTPONE_STEP on, as an editor would (errors counted); return how many.
    """
    from django.db import connection

    from releases import actions as releases
    from releases.models import Release, ReleaseStatus

    with soak.release_lock:
        soak.quiet_window = (start, until)
        due = list(
            Release.objects.filter(
                status=ReleaseStatus.SCHEDULED,
                problem="",
                release_at__gte=start,
                release_at__lt=until,
            )
            .order_by("release_at", "pk")
            .values_list("pk", flat=True)
        )
        for i, pk in enumerate(due):
            at = until + timedelta(seconds=POSTPONE_STEP * (first + i))
            try:
                release = Release.objects.get(pk=pk)
                releases.schedule_release(release=release, release_at=at, user=None)
            except Exception:
                soak.release_errors += 1
                connection.close()
                continue
            soak.release_ops["postpone"] += 1
            record = soak.releases.get(pk)
            if record is not None:
                record.release_at = at
                record.postponed += 1
    return len(due)


# --- what the invariants and the report read ---------------------------------------------


class ReleaseRow(NamedTuple):
    """A release as the database has it at the end (times aware, UTC)."""

    pk: int
    name: str
    status: str
    release_at: datetime | None
    released_at: datetime | None
    problem: str

    @property
    def lateness(self) -> float | None:
        if self.released_at is None or self.release_at is None:
            return None
        return (self.released_at - self.release_at).total_seconds()


class ReleaseEvent(NamedTuple):
    """A post event that carries a release's id (``data["release"]``)."""

    release: int
    post_id: int
    kind: str
    at: datetime


def release_rows(soak: Soak) -> dict[int, ReleaseRow]:
    return {
        pk: ReleaseRow(
            pk,
            name,
            status,
            utc(release_at) if release_at else None,
            utc(released_at) if released_at else None,
            problem,
        )
        for pk, name, status, release_at, released_at, problem in soak.query(
            "SELECT id, name, status, release_at, released_at, problem FROM publishing_release"
            " ORDER BY id"
        )
    }


def release_items(soak: Soak) -> dict[int, dict[int, str]]:
    """Return release id -> {post id: change} of every item (of a post not deleted)."""
    items: dict[int, dict[int, str]] = defaultdict(dict)
    for release_id, post_id, action in soak.query(
        "SELECT release_id, post_id, action FROM publishing_releaseitem WHERE post_id IS NOT NULL"
    ):
        items[release_id][post_id] = action
    return items


def release_events(soak: Soak) -> list[ReleaseEvent]:
    """Every published, unpublished and revision_published event that names a release."""
    kinds = sorted(CHANGE_KINDS.values())
    events = []
    for post_id, kind, at, data in soak.query(
        "SELECT post_id, kind, at, data FROM publishing_publishevent"
        f" WHERE kind IN ({', '.join(['%s'] * len(kinds))})",
        kinds,
    ):
        if isinstance(data, (str, bytes)):
            data = json.loads(data)  # MariaDB's JSON is text
        if isinstance(data, dict) and data.get("release") is not None:
            events.append(ReleaseEvent(int(data["release"]), post_id, kind, utc(at)))
    return events


def post_states(soak: Soak, post_ids) -> dict[int, tuple[str, datetime | None]]:
    """Return post id -> (status, published_at) of ``post_ids``."""
    wanted = set(post_ids)
    return {
        pk: (status, utc(published_at) if published_at else None)
        for pk, status, published_at in soak.query(
            "SELECT id, status, published_at FROM publishing_post"
        )
        if pk in wanted
    }
