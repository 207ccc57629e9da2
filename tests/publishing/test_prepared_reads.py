"""Prepared reads: the rows of the queryset they stand for, from a statement compiled once;
a read whose values do not reach the statement as its parameters is built each time."""

from datetime import timedelta

import pytest
from django.db.models.expressions import RawSQL

from coordination.clock import database_now
from publishing import site_at_facts
from publishing.models import Post
from publishing.prepared_reads import PreparedRead
from tests.publishing.conftest import future_post, live_post

pytestmark = pytest.mark.django_db


class Counted:
    """A read's build, counting how often the read builds its queryset."""

    def __init__(self, build):
        self.build, self.calls = build, 0

    def __call__(self, **values):
        self.calls += 1
        return self.build(**values)


def due_of(moment, ids, newest_first=False):
    rows = Post.objects.filter(publish_at__lte=moment, pk__in=list(ids))
    order = ("-publish_at", "-pk") if newest_first else ("publish_at", "pk")
    return rows.order_by(*order).values_list("pk", "title", "publish_at")


@pytest.fixture
def posts():
    return [future_post(seconds_ahead=600 * (n + 1), title=f"Post {n}") for n in range(6)]


@pytest.mark.parametrize("count", [1, 2, 3, 5, 6])
@pytest.mark.parametrize("newest_first", [False, True])
def test_a_prepared_read_returns_its_querysets_rows_whatever_its_values(posts, count, newest_first):
    read = PreparedRead(due_of)
    now = database_now()
    for minutes in (15, 35, 65):
        moment = now + timedelta(minutes=minutes)
        ids = [post.pk for post in posts[:count]]
        got = read.rows(options={"newest_first": newest_first}, moment=moment, ids=ids)
        assert got == list(due_of(moment, ids, newest_first)), (minutes, count)


def test_a_prepared_read_is_built_twice_then_never_again_for_its_shape(posts):
    build = Counted(due_of)
    read = PreparedRead(build)
    now = database_now()
    for minutes in range(5, 65, 10):
        read.rows(moment=now + timedelta(minutes=minutes), ids=[posts[0].pk, posts[1].pk])
    assert build.calls == 2, "compiled with two sets of markers, then only run"
    # Three ids are four once padded: another statement; four ids share it.
    read.rows(moment=now, ids=[posts[0].pk, posts[1].pk, posts[2].pk])
    read.rows(moment=now, ids=[post.pk for post in posts[:4]])
    assert build.calls == 4
    # No ids: nothing to read, and nothing is compiled for it.
    assert read.rows(moment=now, ids=[]) == []
    assert build.calls == 5


def shifted(moment, ids):
    """A read that changes its moment on the way in: the marker is not in the statement."""
    return due_of(moment + timedelta(minutes=30), ids)


def written_in(moment, ids):
    """A read that writes its moment into its SQL: the two compilations differ."""
    return (
        due_of(moment, ids)
        .annotate(asked=RawSQL(f"'{moment:%Y-%m-%d %H:%M:%S.%f}'", ()))
        .values_list("pk", "title", "publish_at", "asked")
    )


@pytest.mark.parametrize("build", [shifted, written_in])
def test_a_read_whose_values_are_not_its_statements_parameters_is_built_each_time(posts, build):
    counted = Counted(build)
    read = PreparedRead(counted)
    now = database_now()
    ids = [post.pk for post in posts]
    for minutes in (15, 45):
        moment = now + timedelta(minutes=minutes)
        assert read.rows(moment=moment, ids=ids) == list(build(moment, ids))
    assert counted.calls == 2 + 2, "compiled twice to look, then built for each read"


def test_rows_are_converted_as_the_orm_converts_them():
    post = live_post(title="Live", published_at=database_now() - timedelta(days=1))
    read = PreparedRead(
        lambda moment, ids: Post.objects.filter(pk__in=ids, published_at__lte=moment).values_list(
            "published_at", "status"
        )
    )
    [(published_at, status)] = read.rows(moment=database_now(), ids=[post.pk])
    assert (published_at, status) == Post.objects.values_list("published_at", "status").get()
    assert published_at.tzinfo is not None


@pytest.mark.parametrize("posts", [None, [1], [1, 2, 3]])
@pytest.mark.parametrize(
    "cut",
    [
        {"with_first": 30, "first": None, "last": None},
        {"with_first": None, "first": None, "last": 32},
    ],
)
def test_the_site_at_a_moments_reads_run_statements_compiled_once(posts, cut):
    moment = database_now() + timedelta(days=7)
    for read in (
        site_at_facts.PUBLISH_ROWS,
        site_at_facts.TAKEDOWN_ROWS,
        site_at_facts.REVISION_ROWS,
    ):
        values = {"moment": moment} if posts is None else {"moment": moment, "posts": posts}
        assert read.compiled(options=cut, **values)
    assert site_at_facts.TOUCHED_ROWS.compiled(moment=moment)
