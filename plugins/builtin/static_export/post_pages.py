"""The posts' pages and the posts sitemap's pages, from one stream of the live posts.

The live posts are streamed in id order as ``(id, slug, version, updated_at)``, in step with
the builds' lists: an unchanged page is kept or hard-linked, a changed one rendered, with
bodies fetched only for those (``RENDER_BATCH`` at a time).
"""

import hashlib

from plugins.builtin.static_export.folder import Build
from plugins.builtin.static_export.keys import post_key, stamp
from plugins.builtin.static_export.layout import (
    CHUNK,
    POSTS_MANIFEST,
    RENDER_BATCH,
    RENDER_CHUNK,
    SITEMAP_MANIFEST,
    stopped,
)
from plugins.builtin.static_export.manifest import ManifestList, line
from plugins.builtin.static_export.render import Renderer, post_file, sitemap_file
from publishing import selectors
from publishing.sitemaps import POSTS_SECTION, id_page


class SitemapKeys:
    """The key of each page of the posts sitemap, from the live posts streamed in id order.

    A page (a range of ids, ``publishing.sitemaps.IdRangePaginator``) lists each post's
    address and ``updated_at``: its key covers the page size, its number and each post's id,
    slug and key. Pages without live posts between two with some exist too (empty).
    """

    def __init__(self, per_page: int):
        self.per_page = per_page
        self.keys: list[str] = []  # keys[n - 1]: the key of page n
        self._digest = None

    def _open(self) -> None:
        number = len(self.keys) + 1
        self._digest = hashlib.sha256(f"{self.per_page} {number}\n".encode())

    def _close(self) -> None:
        self.keys.append(self._digest.hexdigest())
        self._digest = None

    def add(self, pk: int, slug: str, key: str) -> None:
        """Add a live post (in id order) to the key of its page."""
        number = id_page(pk, self.per_page)
        while self._digest is None or len(self.keys) + 1 < number:
            if self._digest is not None:
                self._close()
            self._open()
        self._digest.update(f"{pk} {slug} {key}\n".encode())

    def finish(self) -> list[str]:
        """Return the keys of pages 1 to the last (page 1 exists on an empty site)."""
        if self._digest is None and not self.keys:
            self._open()
        if self._digest is not None:
            self._close()
        return self.keys


def export_posts(build: Build, renderer: Renderer, sitemap: SitemapKeys, *, should_stop) -> int:
    """Write every live post's page, reusing unchanged ones; return how many posts are live.

    The streamed rows also give ``sitemap`` the keys of the posts sitemap's pages.
    """
    live = 0
    pending: dict[int, tuple[str, bool]] = {}  # id -> (the file its row names, in place)
    ready: list[tuple[int, str, str, str]] = []  # (id, file, sha, line) not yet listed
    rows = selectors.live_posts().order_by("id").values_list("id", "slug", "version", stamp())
    with ManifestList(build, POSTS_MANIFEST) as posts:

        def flush():
            if pending:
                batch = selectors.live_posts().defer("body").filter(id__in=list(pending))
                batch = batch.annotate(export_stamp=stamp()).order_by("id")
                for post in batch.iterator(chunk_size=RENDER_CHUNK):
                    relative = post_file(post.slug)
                    streamed, in_place = pending.pop(post.pk)
                    page = renderer.post(post)
                    sha = build.write(relative, page, in_place=in_place and streamed == relative)
                    key = post_key(post.version, post.export_stamp)
                    ready.append((post.pk, relative, sha, line([post.pk, relative, key, sha])))
                    if streamed != relative:  # renamed since the rows were read
                        build.remove(streamed)
                # Taken down since the rows were read: the old page must go.
                for streamed, _in_place in pending.values():
                    build.remove(streamed)
                pending.clear()
            ready.sort(key=lambda item: item[0])
            for _pk, relative, sha, text in ready:
                posts.add(relative, sha, text)
            ready.clear()

        for pk, slug, version, updated in rows.iterator(chunk_size=CHUNK):
            live += 1
            if live % CHUNK == 0 and should_stop():
                raise stopped()
            key = post_key(version, updated)
            sitemap.add(pk, slug, key)
            relative = post_file(slug)
            found, in_place = posts.reuse(pk, relative, key)
            if found is None:
                pending[pk] = (relative, in_place)
            else:
                ready.append((pk, relative, *found))
            if len(pending) >= RENDER_BATCH or len(ready) >= CHUNK:
                flush()
        flush()
    return live


def export_sitemap(build: Build, renderer: Renderer, keys: list[str]) -> None:
    """Write every page of the posts sitemap, reusing pages whose posts did not change."""
    with ManifestList(build, SITEMAP_MANIFEST) as listed:
        for number, key in enumerate(keys, start=1):
            relative = sitemap_file(POSTS_SECTION, number)
            found, _in_place = listed.reuse(number, relative, key)
            if found is None:
                # A page's file is its number's: never another page's, so always in place.
                page = renderer.sitemap_page(POSTS_SECTION, number)
                sha = build.write(relative, page, in_place=True)
                found = (sha, line([number, relative, key, sha]))
            listed.add(relative, *found)
