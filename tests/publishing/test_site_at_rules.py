"""The definition of "live at a moment", as tables: each kind of change, orders and ties at
one instant, takedowns setting revisions aside, and changes that will not happen."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse

from publishing.admin.site_at import admin_links, moment_url
from publishing.site_at import (
    NEW_TEXT,
    NOT_LIVE,
    ORDER,
    PUBLISH,
    SET_ASIDE,
    UNPUBLISH,
    Change,
    Page,
    apply,
    change_key,
    earliest,
    latest,
    newest_live,
)
from publishing.site_at_pages import slug_addresses

T0 = datetime(2027, 3, 1, 9, 0, tzinfo=UTC)


def at(minutes: int) -> datetime:
    return T0 + timedelta(minutes=minutes)


def page(pk: int, *, live: bool, title: str = "Now") -> Page:
    return Page(pk, title, f"post-{pk}", live, T0 - timedelta(days=1) if live else None)


def publish(pk, minutes, **kw):
    return Change(at(minutes), ORDER["publish"], pk, PUBLISH, "its scheduled publish", **kw)


def takedown(pk, minutes, **kw):
    return Change(at(minutes), ORDER["unpublish"], pk, UNPUBLISH, "its unpublish time", **kw)


def new_text(pk, minutes, title, order="revision", **kw):
    return Change(at(minutes), ORDER[order], pk, NEW_TEXT, "revision 2", title=title, **kw)


@pytest.mark.parametrize(
    ("live", "changes", "moment", "shown", "title", "not_done"),
    [
        (False, [publish(1, 10)], 9, False, "Now", []),
        (False, [publish(1, 10)], 10, True, "Now", []),
        (True, [takedown(1, 10)], 10, False, "Now", []),
        (True, [new_text(1, 10, "New")], 10, True, "New", []),
        (True, [new_text(1, 10, "New")], 9, True, "Now", []),
        # A new text of a post not live at its time is superseded.
        (False, [new_text(1, 10, "New")], 20, False, "Now", [NOT_LIVE]),
        # Published first, then the text switches (each at its time).
        (False, [new_text(1, 20, "New"), publish(1, 10)], 30, True, "New", []),
        # At one instant: publish, then take down, then switch (the job's run), whatever
        # order they are listed in.
        (
            False,
            [new_text(1, 10, "New"), takedown(1, 10), publish(1, 10)],
            10,
            False,
            "Now",
            [SET_ASIDE],
        ),
        # A takedown sets pending texts aside, even if the post goes live again later.
        (
            True,
            [takedown(1, 10), publish(1, 20), new_text(1, 30, "New")],
            40,
            True,
            "Now",
            [SET_ASIDE],
        ),
        # A release's change comes after the job's own at the same instant.
        (
            True,
            [new_text(1, 10, "Release", order="other"), new_text(1, 10, "Revision")],
            10,
            True,
            "Release",
            [],
        ),
        # What will not happen changes nothing and says why.
        (
            False,
            [publish(1, 10, why_not="The title is empty.")],
            20,
            False,
            "Now",
            ["The title is empty."],
        ),
        (
            True,
            [takedown(1, 10, why_not="the release is stopped")],
            20,
            True,
            "Now",
            ["the release is stopped"],
        ),
        (False, [takedown(1, 10)], 20, False, "Now", ["it is not live then"]),
        (True, [publish(1, 10)], 20, True, "Now", ["it is live already"]),
    ],
)
def test_changes_apply_in_the_publish_jobs_order(live, changes, moment, shown, title, not_done):
    pages, outcomes = apply({1: page(1, live=live)}, changes, at(moment))
    assert (pages[1].live, pages[1].title) == (shown, title)
    assert [o.why for o in outcomes if not o.done] == not_done


def test_a_publish_dates_the_post_at_its_time_and_leaves_other_posts_alone():
    pages, outcomes = apply(
        {1: page(1, live=False), 2: page(2, live=True, title="Other")},
        [publish(1, 10), publish(3, 5)],
        at(60),
    )
    assert pages[1].published_at == at(10)
    assert pages[2] == page(2, live=True, title="Other")
    assert [(o.change.post_id, o.done, o.why) for o in outcomes] == [
        (3, False, "the post no longer exists"),
        (1, True, ""),
    ]


def live_at(pk: int, minutes: int | None) -> Page:
    return Page(pk, f"Post {pk}", f"post-{pk}", True, None if minutes is None else at(minutes))


@pytest.mark.parametrize(
    ("pages", "unseen_below", "placed"),
    [
        # Nothing unseen: every live page, newest first, ties by id.
        ([live_at(1, 0), live_at(2, 5), live_at(3, 5)], None, [3, 2, 1]),
        # Pages not live are not listed.
        ([live_at(1, 0), page(2, live=False)], None, [1]),
        # Unseen posts come below 3 minutes: only the pages at or above are in place.
        ([live_at(1, 0), live_at(2, 5), live_at(3, 3)], (at(3), 3), [2, 3]),
        ([live_at(1, 0), live_at(2, 5), live_at(3, 3)], (at(3), 4), [2]),
        ([live_at(1, 0), live_at(2, 5)], (at(9), 1), []),
        # A live post with no time of going live is read as going live at the moment.
        ([live_at(1, 0), live_at(2, None)], (at(9), 1), [2]),
    ],
)
def test_the_newest_live_pages_are_those_whose_place_is_sure(pages, unseen_below, placed):
    shown = newest_live(pages, at(30), unseen_below=unseen_below)
    assert [p.post_id for p in shown] == placed


def test_the_first_and_last_changes_are_in_the_jobs_order():
    changes = [takedown(1, 5), publish(2, 5), new_text(1, 5, "B"), publish(1, 0), takedown(0, 5)]
    assert earliest(changes, 3) == [publish(1, 0), publish(2, 5), takedown(0, 5)]
    assert latest(changes, 2) == [new_text(1, 5, "B"), takedown(1, 5)]
    assert earliest(changes, None) == sorted(changes, key=change_key)


@pytest.mark.parametrize("slug", ["a", "spring-menu", "post_1", "X" * 200])
def test_a_posts_address_at_a_moment_is_the_one_reverse_gives(slug):
    at = datetime(2030, 1, 1, 9, 30, tzinfo=UTC)
    name = "admin:publishing_post_site_at_post"
    assert admin_links(at).post(slug) == moment_url(name, at, slug=slug)
    token = "eyJtIjoxNzk2NTYwNTE4fQ:1xa9aQ:_9VSgcP3gxVG"
    shared = slug_addresses("publishing:site_at_shared_post", token=token)
    expected = reverse("publishing:site_at_shared_post", kwargs={"token": token, "slug": slug})
    assert shared(slug) == expected
