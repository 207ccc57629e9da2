"""The index's pages: cut as the index view cuts them, rendered only when what they show changed.

The live posts are streamed once, newest first, through ``publishing.paging.pages``; a page
is rendered again only when its posts, their versions or its links (its neighbours'
addresses) changed (docs/architecture.md, "The public index's pages").
"""

import hashlib
import json
import os
from collections.abc import Iterable

from plugins.builtin.static_export.folder import Build
from plugins.builtin.static_export.keys import post_key, stamp
from plugins.builtin.static_export.layout import CHUNK, PAGES_MANIFEST, RENDER_BATCH, stopped
from plugins.builtin.static_export.manifest import DamagedList, ForwardReader, line
from plugins.builtin.static_export.render import Renderer
from publishing import paging, selectors
from publishing.conf import settings as publishing_settings


def read_index_list(path: str, *, strict: bool) -> tuple[dict[str, tuple[str, str]], int]:
    """Return file -> (key, sha) of a build's list of index pages, and its number of lines.

    Empty when the list cannot be read (``strict``: ``DamagedList`` instead).

    Index pages are matched by file (their address), not by position: a page keeps its
    file while its first post is live, wherever the page is in the index. The list is a
    line per page, a page per ``per_page`` posts on average: held whole, it is a tenth of
    the size of the posts' list, which is streamed.
    """
    pages: dict[str, tuple[str, str]] = {}
    reader = ForwardReader(path, strict=strict)
    try:
        reader.drain(lambda entry: pages.__setitem__(entry[1], (entry[2], entry[3])))
    finally:
        reader.close()
    return pages, reader.count


def index_layout(per_page: int, *, should_stop) -> Iterable[tuple[str, list[int], str | None]]:
    """Yield (key, [(id, post key), ...], older key) for every index page, top to bottom.

    The live posts are streamed once, newest first, and cut by ``publishing.paging.pages``,
    the function the index view pages with.
    """
    rows = selectors.live_posts().values_list("id", "slug", "version", stamp())
    cut = paging.pages(rows.iterator(chunk_size=CHUNK), per_page=per_page)
    previous = None
    for count, page in enumerate(cut, start=1):
        if count % 100 == 0 and should_stop():
            raise stopped()
        if previous is not None:
            yield (*previous, page[0][1])
        key = selectors.FRONT if previous is None else page[0][1]
        previous = (key, [(pk, post_key(version, updated)) for pk, _slug, version, updated in page])
    if previous is not None:
        yield (*previous, None)


def export_index(build: Build, renderer: Renderer, *, should_stop) -> None:
    """Write every page of the index, reusing pages that list the same posts as before.

    A page is rendered again when its posts, their versions or its neighbours' addresses
    (its links) changed: one change in the index touches its own page and, when a page
    starts or stops there, the pages around it (``publishing.paging``).
    """
    per_page = int(publishing_settings.POSTS_PER_PAGE)
    mine, mine_count = {}, None
    if build.recycled:
        mine, mine_count = read_index_list(build.path(PAGES_MANIFEST), strict=True)
        expected = build.old_lists.get(PAGES_MANIFEST)
        if expected is not None and mine_count != expected:
            raise DamagedList(f"{PAGES_MANIFEST}: {mine_count} of {expected} lines")
    theirs = {}
    if build.base:
        theirs, _count = read_index_list(os.path.join(build.base, PAGES_MANIFEST), strict=False)
    done: list[tuple[str, str, str]] = []  # (file, key, sha), top to bottom
    pending: list[tuple[int, str, str, list[int], str | None, str | None]] = []

    def flush():
        ids = [pk for *_rest, members, _newer, _older in pending for pk in members]
        fields = selectors.live_posts().defer("body", "body_html").filter(id__in=ids)
        posts = {post.pk: post for post in fields.iterator(chunk_size=RENDER_BATCH)}
        for number, page_key, content_key, members, newer, older in pending:
            relative = renderer.index_page_file(page_key)
            page = selectors.IndexPage(
                key=page_key,
                object_list=[posts[pk] for pk in members if pk in posts],
                newer=newer,
                older=older,
                link=renderer.index_page_url,
            )
            sha = build.write(relative, renderer.index(page), in_place=relative in mine)
            done[number] = (relative, content_key, sha)
        pending.clear()

    newer = None
    for number, (page_key, members, older) in enumerate(
        index_layout(per_page, should_stop=should_stop)
    ):
        relative = renderer.index_page_file(page_key)
        content = json.dumps([members, newer, older], separators=(",", ":"))
        content_key = hashlib.sha256(content.encode()).hexdigest()
        done.append((relative, content_key, ""))
        old, live_one = mine.get(relative), theirs.get(relative)
        if old is not None and old[0] == content_key and build.trusted:
            build.kept()
            done[number] = (relative, content_key, old[1])
        elif (
            live_one is not None
            and live_one[0] == content_key
            and build.link(relative, in_place=old is not None)
        ):
            done[number] = (relative, content_key, live_one[1])
        else:
            pending.append((number, page_key, content_key, [pk for pk, _ in members], newer, older))
            if sum(len(p[3]) for p in pending) >= RENDER_BATCH:
                flush()
        newer = page_key
    flush()
    written = {relative for relative, _key, _sha in done}
    for relative, (_key, sha) in mine.items():
        if relative not in written:
            build.remove(relative, sha)
    new = build.path(f"{PAGES_MANIFEST}.new")
    with open(new, "w", encoding="utf-8") as listed:
        for number, (relative, content_key, sha) in enumerate(done, start=1):
            build.count(relative, sha)
            listed.write(line([number, relative, content_key, sha]))
    os.replace(new, build.path(PAGES_MANIFEST))
    build.lists[PAGES_MANIFEST] = len(done)
