"""The sitemap: an index (``/sitemap.xml``) of sections, the posts section paged by post id.

Django's ``sitemaps.views.index`` lists every page of every section (``sitemap-posts.xml``,
``sitemap-posts.xml?p=2``, ...) and ``sitemaps.views.sitemap`` serves one page; a page number
that is not a number, or is past the last page, is a 404.

The posts section is paged by ranges of post ids, not by position in a list: page N holds the
live posts with ids ``(N - 1) * limit + 1`` to ``N * limit``. A page is then one primary-key range
read (never an ``OFFSET`` that walks every post before it, nor a count of the live posts), and a
post stays on the same page for its whole life: publishing, editing or taking down a post
changes only its own page, so the static export re-renders one page, not every page after it.
Ids skipped by drafts, scheduled or deleted posts leave pages with fewer than ``limit`` posts
(one with none at all is an empty ``urlset``).

A post's address is its ``get_absolute_url()``: the database refuses a slug the URL pattern
does not take (``publishing.slugs``), and nothing else of a post is written into the XML.
"""

from collections.abc import Callable

from django.contrib.sitemaps import Sitemap
from django.core.paginator import Paginator
from django.db.models import Max
from django.urls import reverse
from django.utils.functional import cached_property

from publishing import selectors
from publishing.models import Post


class IndexSitemap(Sitemap):
    changefreq = "hourly"
    priority = 1.0

    def items(self):
        return ["publishing:index"]

    def location(self, item: str) -> str:
        return reverse(item)

    def lastmod(self, item: str):
        return selectors.live_version().last_change


def id_page(post_id: int, per_page: int) -> int:
    """Return the number of the sitemap page a post with ``post_id`` is listed on."""
    return (post_id - 1) // per_page + 1


def last_live_id() -> int | None:
    """Return the highest id of a live post, without reading every live post.

    Two index probes of ``(status, unpublish_at, id)``: live posts without an unpublish time
    are one range of it in id order (the last is read from its end), and those with one still
    ahead (a few posts scheduled to go down) are their own range.
    """
    live = selectors.live_posts()
    # In the index's own order (unpublish_at is NULL throughout): its end, without a sort.
    forever = live.filter(unpublish_at__isnull=True).order_by("-unpublish_at", "-id")
    going = live.filter(unpublish_at__isnull=False).aggregate(last=Max("id"))["last"]
    last = forever.values_list("id", flat=True).first()
    return max((pk for pk in (last, going) if pk is not None), default=None)


class IdRangePaginator(Paginator):
    """Pages of a queryset by ranges of ids: page N is ids ``(N-1)*per_page+1 .. N*per_page``.

    ``num_pages`` is the page of the highest id ``last_id()`` returns; nothing counts the rows.
    Out-of-range and non-numeric page numbers raise Django's ``EmptyPage``/``PageNotAnInteger``
    (``validate_number``), which the sitemap view turns into a 404.
    """

    def __init__(self, object_list, per_page: int, *, last_id: Callable[[], int | None]):
        super().__init__(object_list, per_page)
        self._last_id = last_id

    @cached_property
    def num_pages(self) -> int:
        last = self._last_id()
        return id_page(last, self.per_page) if last else 1

    def page(self, number):
        number = self.validate_number(number)
        low = (number - 1) * self.per_page
        rows = self.object_list.filter(id__gt=low, id__lte=low + self.per_page).order_by("id")
        return self._get_page(list(rows), number, self)


class PostSitemap(Sitemap):
    changefreq = "weekly"
    priority = 0.6
    #: Posts per page at most (the protocol allows 50,000): a page is one read of at most this
    #: many rows and renders in about a tenth of a second, and a changed post makes the static
    #: export render this many entries again.
    limit = 2000

    def items(self):
        return selectors.live_posts().only("id", "slug", "updated_at").order_by("id")

    def last_id(self) -> int | None:
        """Return the highest id of a post the section lists (its last page is that id's)."""
        return last_live_id()

    @property
    def paginator(self) -> IdRangePaginator:
        return IdRangePaginator(self.items(), self.limit, last_id=self.last_id)

    def location(self, item: Post) -> str:
        return item.get_absolute_url()

    def lastmod(self, item: Post):
        return item.updated_at

    def get_latest_lastmod(self):
        """The index's date of every posts page: the latest change of what the public sees.

        (Django's default would read every live post to take the latest of their dates.)
        """
        return selectors.live_version().last_change

    def get_urls(self, page=1, site=None, protocol=None):
        urls = super().get_urls(page=page, site=site, protocol=protocol)
        # A page's Last-Modified must move when a post leaves it too, not only when one on it
        # changes: the site's latest change does both.
        self.latest_lastmod = self.get_latest_lastmod()
        return urls


SITEMAPS = {"pages": IndexSitemap, "posts": PostSitemap}
#: The section paged by post id (the static export renders only its changed pages).
POSTS_SECTION = "posts"
