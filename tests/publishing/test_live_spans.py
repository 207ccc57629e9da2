"""Which revision of a post is live now, and when each earlier one was: a table over the
revisions, and the revisions page that reads it."""

from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from django.urls import reverse

from publishing import revisions
from publishing.live_spans import LiveSpan, live_spans
from tests.publishing.conftest import live_post, make_due, run_publish_job


def at(hour: int) -> datetime:
    return datetime(2026, 12, 1, hour, tzinfo=UTC)


def rev(number, status, hour=None, body=None):
    return SimpleNamespace(
        number=number,
        status=status,
        published_at=at(hour) if hour is not None else None,
        title="T",
        body=body if body is not None else f"body {number}",
    )


LIVE = "published"


@pytest.mark.parametrize(
    ("revisions", "post", "expected"),
    [
        pytest.param([], ("published", "T", "x"), {}, id="no revisions"),
        pytest.param(
            [rev(1, LIVE, 9)],
            ("published", "T", "body 1"),
            {1: LiveSpan(live_now=True, since=at(9), until=None)},
            id="the only one that went live is live now",
        ),
        pytest.param(
            [rev(3, "scheduled"), rev(2, LIVE, 12), rev(1, LIVE, 9)],
            ("published", "T", "body 2"),
            {
                2: LiveSpan(live_now=True, since=at(12), until=None),
                1: LiveSpan(live_now=False, since=at(9), until=at(12)),
            },
            id="the newest live one is live now, the earlier one was until it",
        ),
        pytest.param(
            [rev(3, LIVE, 10), rev(2, "superseded"), rev(1, LIVE, 9)],
            ("published", "T", "body 3"),
            {
                3: LiveSpan(live_now=True, since=at(10), until=None),
                1: LiveSpan(live_now=False, since=at(9), until=at(10)),
            },
            id="revisions that never went live have no span",
        ),
        pytest.param(
            [rev(2, LIVE, 12), rev(1, LIVE, 9)],
            ("draft", "T", "body 2"),
            {
                2: LiveSpan(live_now=False, since=at(12), until=None),
                1: LiveSpan(live_now=False, since=at(9), until=at(12)),
            },
            id="a post taken off the site has nothing live now",
        ),
        pytest.param(
            [rev(2, LIVE, 12), rev(1, LIVE, 9)],
            ("published", "T", "republished with other text"),
            {
                2: LiveSpan(live_now=False, since=at(12), until=None),
                1: LiveSpan(live_now=False, since=at(9), until=at(12)),
            },
            id="live text that is no revision's is not called any revision's",
        ),
        pytest.param(
            [rev(1, LIVE, 9), rev(2, LIVE, 9, body="same")],
            ("published", "T", "same"),
            {
                2: LiveSpan(live_now=True, since=at(9), until=None),
                1: LiveSpan(live_now=False, since=at(9), until=at(9)),
            },
            id="the same instant: the higher number went live last, in any order given",
        ),
    ],
)
def test_live_spans(revisions, post, expected):
    status, title, body = post
    assert (
        live_spans(revisions, post_is_live=status == "published", live_title=title, live_body=body)
        == expected
    )


@pytest.mark.django_db
def test_the_revisions_page_says_which_revision_is_live_now(as_editor, editor):
    post = live_post(title="T", body="first")
    revision = revisions.schedule_revision(
        post=post,
        title="T",
        body="second",
        publish_at=datetime(2099, 1, 1, tzinfo=UTC),
        user=editor,
    )
    make_due(revision)
    run_publish_job()
    page = as_editor.get(reverse("admin:publishing_post_revisions", args=[post.pk]))
    html = page.content.decode()
    live_row = html[html.index('id="revision-2"') : html.index('id="revision-1"')]
    earlier_row = html[html.index('id="revision-1"') :]
    assert "Live now" in live_row and "Went live" not in live_row
    assert "Was live from" in earlier_row and "Live now" not in earlier_row


@pytest.mark.django_db
def test_the_compare_page_says_which_revision_is_live_now(as_editor, editor):
    post = live_post(title="T", body="first")
    revision = revisions.schedule_revision(
        post=post,
        title="T",
        body="second",
        publish_at=datetime(2099, 1, 1, tzinfo=UTC),
        user=editor,
    )
    make_due(revision)
    run_publish_job()
    url = reverse("admin:publishing_post_revision_compare", args=[post.pk])
    html = as_editor.get(url, {"a": 1, "b": 2}).content.decode()
    assert "Changes from revision 1 (was live) to revision 2 (live now)" in html
