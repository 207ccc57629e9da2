"""One change anywhere in the index re-renders a bounded number of the export's index pages
(``publishing.paging``: pages cut at break posts, not counted from an end)."""

from datetime import timedelta

import pytest
from django.db.models import F
from django.test import override_settings

from coordination.clock import database_now
from plugins.builtin.static_export import export_site
from publishing.models import Post
from tests.plugins.test_static_export import Keyed, files_of

pytestmark = pytest.mark.django_db

PER_PAGE = 5


@pytest.fixture
def made(db) -> Keyed:
    """Makes post n with id base + n: posts 5, 10, ... are break posts."""
    return Keyed()


POSTS = 60
#: The front page, the page of the change and the one it hands over or takes back: a change
#: moves a page's start only where a break post comes or goes.
BOUND = 3


def index_files(build) -> dict[str, int]:
    return {
        name: inode
        for name, inode in files_of(build).items()
        if name == "index.html" or name.startswith("page/")
    }


def retitle(made: Keyed, n: int) -> None:
    Post.objects.filter(pk=made.pk(n)).update(title="Retitled", version=F("version") + 1)


def unpublish(made: Keyed, n: int) -> None:
    Post.objects.filter(pk=made.pk(n)).update(status=Post.Status.UNPUBLISHED)


def delete(made: Keyed, n: int) -> None:
    Post.objects.get(pk=made.pk(n)).delete()


def publish(made: Keyed, n: int) -> None:
    """Put post n live again where it was (or, for a new one, on top)."""
    if n > POSTS:
        made(n, published_at=database_now())
    else:
        Post.objects.filter(pk=made.pk(n)).update(status=Post.Status.PUBLISHED)


#: Posts 1..60 (break posts every 5th); the change's post at each position. Publishing puts
#: back a post unpublished before the first export (or a new one on top).
POSITIONS = {"oldest": 1, "middle": 30, "newest": 60}
KINDS = {"retitle": retitle, "unpublish": unpublish, "delete": delete, "publish": publish}


@pytest.mark.parametrize("position", POSITIONS)
@pytest.mark.parametrize("kind", KINDS)
@override_settings(INSTATIC_POSTS_PER_PAGE=PER_PAGE)
def test_one_change_re_renders_a_bounded_set_of_index_pages(tmp_path, made, kind, position):
    start = database_now() - timedelta(days=1)
    for n in range(1, POSTS + 1):
        made(n, published_at=start + timedelta(minutes=n))
    n = POSITIONS[position]
    if kind == "publish":
        unpublish(made, n)
        if position == "newest":
            n = POSTS + 1  # a new post on top
    first = export_site(tmp_path)
    before = index_files(first.build)
    assert len(before) >= POSTS // PER_PAGE - 1
    KINDS[kind](made, n)
    second = export_site(tmp_path)
    assert second.changed
    after = index_files(second.build)
    rendered = {name for name, inode in after.items() if before.get(name) != inode}
    assert len(rendered) <= BOUND, sorted(rendered)
    assert len(before.keys() - after.keys()) <= 1, "at most one page's address goes"
    # Breaks (multiples of 5) start pages: a change of one touches a page start.
    if kind != "retitle":
        assert rendered, "the index follows the change"
