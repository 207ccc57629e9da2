"""Static export: the live public site as static files, incremental, switched in atomically.

Layout under ``INSTATIC_EXPORT_ROOT``::

    builds/<stamp>-<hash>/index.html            the index (later pages in page/<n>/index.html)
    builds/<stamp>-<hash>/posts/<slug>/index.html
    builds/<stamp>-<hash>/feed/index.xml        the Atom feed
    builds/<stamp>-<hash>/sitemap.xml           the sitemap index, linking to
    builds/<stamp>-<hash>/sitemap-<section>.xml and sitemap-<section>-<n>.xml (its pages)
    builds/<stamp>-<hash>/.instatic-export*     the manifest (see below)
    current -> builds/<stamp>-<hash>            what a web server serves

A build is written into a hidden temporary folder, renamed into ``builds/`` once complete, and
then made live by pointing a new symlink at it and renaming that over ``current``
(``os.replace``, one atomic ``rename(2)``). Whoever resolves ``current`` therefore finds either
the complete old build or the complete new one, never a half-written folder; an export that
crashes or fails leaves the old build serving. The previous build is kept
(``INSTATIC_EXPORT_KEEP``, at least 2) so a reader that resolved it just before a switch can
finish reading it.

**Streaming.** The live posts are read a chunk at a time, only the columns each step needs,
and every page is written to the build as soon as it is rendered: memory does not grow with the
size of the site (a 100,000-post site is exported in the same memory as a 10,000-post one).

**Incremental.** The manifest lists every post page (id, slug, the post's ``version`` and
``updated_at``, the file's hash) and every index page (the ids and versions of the posts on it).
A post or index page whose inputs did not change since the live build is hard-linked from it
(copied where links are impossible) instead of being rendered again; removed posts are simply
not carried over. A *fingerprint* of everything else that shapes the output (the page templates
and those they extend or include, ``RENDER_VERSION``, the settings that change dates, links and
pagination, Django's version) is part of the manifest: when it changes, every page is rendered.
The feed, the sitemap index and the small sections of the sitemap are rendered on every
export; a page of the posts section (a range of post ids, ``publishing.sitemaps``) only when
the posts on it changed.

Post and index pages are rendered with the templates and context of ``publishing.views``
(the index from the streamed rows, since asking the view for page 9,000 would count and skip
90,000 posts each time); the feed and the sitemap go through Django's test ``Client``, the real
URLconf and middleware. Tests compare every page with what a visitor gets.

**Consistent.** A key over the live posts' ``(id, version, updated_at)`` is read before and
after rendering. When posts changed meanwhile, the export goes again using the build it just
wrote as the base, so only what changed is redone, until one pass saw no change.
"""

import functools
import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

import django
from django.conf import settings as django_settings
from django.core.paginator import Page, Paginator
from django.template.loader import get_template
from django.template.loader_tags import ExtendsNode, IncludeNode
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils.safestring import mark_safe

from coordination.models import JobRun
from plugins.conf import settings
from plugins.sdk import JobContext, every_minutes, plugin_job
from publishing import selectors
from publishing.conf import settings as publishing_settings
from publishing.models import Post
from publishing.sitemaps import POSTS_SECTION, SITEMAPS, PostSitemap, id_page

logger = logging.getLogger(__name__)

#: Bump when the export's own output changes in a way the fingerprint cannot see (e.g. a
#: template tag's code), so every page is rendered again.
RENDER_VERSION = 3
CURRENT = "current"
BUILDS = "builds"
MANIFEST = ".instatic-export.json"
POSTS_MANIFEST = ".instatic-export-posts.jsonl"
PAGES_MANIFEST = ".instatic-export-pages.jsonl"
SITEMAP_MANIFEST = ".instatic-export-sitemap.jsonl"
RENDER_ATTEMPTS = 3
STALE_TEMP_AGE = timedelta(hours=1)
#: Rows per fetch while streaming the live posts' ids and versions.
CHUNK = 2000
#: Posts fetched with their bodies per query when rendering, and held at once while rendering.
RENDER_BATCH = 100
RENDER_CHUNK = 20
#: The templates of the pages the export renders itself (with what they extend or include).
PAGE_TEMPLATES = ("publishing/index.html", "publishing/post_detail.html")
#: Django settings that change the rendered pages (dates, language, links).
OUTPUT_SETTINGS = ("TIME_ZONE", "USE_TZ", "LANGUAGE_CODE", "USE_I18N", "FORCE_SCRIPT_NAME")

_PAGE_LINK = re.compile(rb'href="\?page=(\d+)"')
#: A sitemap index's link to page N of a section (``sitemap-posts.xml?p=N``).
_SITEMAP_PAGE_LINK = re.compile(rb"(/sitemap-[^/<?]+)\.xml\?p=(\d+)<")


class ExportError(Exception):
    """The export could not produce a build; the live site is left as it was."""


@dataclass(frozen=True)
class ExportResult:
    """What one export did: whether the live site changed, the live build, and the work."""

    changed: bool
    reason: str
    build: Path | None = None
    content_hash: str = ""
    files: int = 0
    rendered: int = 0
    reused: int = 0


def post_key(version: int, updated_at: datetime | None) -> str:
    """Return what a post page depends on: the post's version and last change."""
    return f"{version}@{updated_at.isoformat() if updated_at else ''}"


def source_key() -> str:
    """Return a hash of what the public site depends on: the live posts' ids and versions."""
    digest = hashlib.sha256()
    rows = selectors.live_posts().order_by("id").values_list("id", "version", "updated_at")
    for pk, version, updated_at in rows.iterator(chunk_size=CHUNK):
        digest.update(f"{pk} {post_key(version, updated_at)}\n".encode())
    return digest.hexdigest()


def render_fingerprint() -> str:
    """Return a hash of everything besides the posts that shapes the rendered pages."""
    host, secure = _target()
    payload = {
        "render_version": RENDER_VERSION,
        "django": django.get_version(),
        "templates": _template_sources(PAGE_TEMPLATES),
        "posts_per_page": int(publishing_settings.POSTS_PER_PAGE),
        "target": [host, secure],
        "settings": {name: str(getattr(django_settings, name, None)) for name in OUTPUT_SETTINGS},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _template_sources(names: Iterable[str]) -> dict[str, str]:
    """Return name -> hash of the source for templates and those they extend or include.

    Templates are found through the configured loaders, so a project's override counts. Only
    constant names are followed (``{% extends "base.html" %}``); a template chosen by a
    variable needs ``RENDER_VERSION`` bumped or a full export.
    """
    hashes: dict[str, str] = {}
    queue = list(names)
    while queue:
        name = queue.pop()
        if name in hashes:
            continue
        template = get_template(name).template
        hashes[name] = hashlib.sha256(template.source.encode()).hexdigest()
        for node in template.nodelist.get_nodes_by_type((ExtendsNode, IncludeNode)):
            target = node.parent_name if isinstance(node, ExtendsNode) else node.template
            if isinstance(getattr(target, "var", None), str):
                queue.append(str(target.var))
    return hashes


def read_manifest(root: Path) -> dict | None:
    """Return the live build's manifest, or None when there is no (readable) live build."""
    try:
        return json.loads((root / CURRENT / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


# --- rendering ----------------------------------------------------------------------------


def _target() -> tuple[str, bool]:
    """Return (host, secure) to render as: ``INSTATIC_EXPORT_BASE_URL`` or an allowed host."""
    base = settings.EXPORT_BASE_URL
    if base:
        parts = urlsplit(base)
        return parts.netloc, parts.scheme != "http"
    for host in django_settings.ALLOWED_HOSTS:
        host = host.lstrip(".")
        if host and host != "*":
            return host, True
    return "localhost", True


class _PageError(ExportError):
    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


class _Renderer:
    """Render pages as a visitor at the export's host gets them."""

    def __init__(self):
        self.host, self.secure = _target()
        self.client = Client(HTTP_HOST=self.host)
        self.factory = RequestFactory(HTTP_HOST=self.host)
        self.index_url = reverse("publishing:index")
        self.index_template = get_template("publishing/index.html")
        self.post_template = get_template("publishing/post_detail.html")

    def get(self, path: str) -> bytes:
        """Return the body of ``path`` through the URLconf and middleware (must answer 200)."""
        response = self.client.get(path, secure=self.secure)
        if response.status_code != 200:
            raise _PageError(
                f"GET {path} (as {'https' if self.secure else 'http'}://{self.host}) answered "
                f"{response.status_code}; set INSTATIC_EXPORT_BASE_URL to a host in "
                "ALLOWED_HOSTS if that is the problem",
                status=response.status_code,
            )
        return response.content

    def post(self, post: Post) -> bytes:
        """Return the page of a live post, as ``publishing.views.post_detail`` renders it."""
        request = self.factory.get(post.get_absolute_url(), secure=self.secure)
        # Safe: sanitized by nh3 when the body was saved (publishing.rendering.render).
        context = {"post": post, "body": mark_safe(post.body_html)}
        return self.post_template.render(context, request).encode()

    def index(self, page: Page, posts: list[Post]) -> bytes:
        """Return one page of the index, as ``publishing.views.index`` renders it.

        The index links to ``?page=N``; static files live at ``page/N/``, so links are
        rewritten.
        """
        query = {"page": page.number} if page.number > 1 else None
        request = self.factory.get(self.index_url, query, secure=self.secure)
        entries = [{"post": post, "excerpt": post.excerpt} for post in posts]
        html = self.index_template.render({"page": page, "entries": entries}, request)
        return _PAGE_LINK.sub(self._link_to_page, html.encode())

    def sitemap_index(self) -> bytes:
        """Return the sitemap index, its links to ``?p=N`` pointing at the pages' files."""
        index = self.get(reverse("publishing:sitemap"))
        return _SITEMAP_PAGE_LINK.sub(rb"\1-\2.xml<", index)

    def sitemap_page(self, section: str, number: int) -> bytes:
        """Return page ``number`` of a section of the sitemap, as the sitemap view serves it."""
        url = _sitemap_url(section)
        return self.get(url if number == 1 else f"{url}?p={number}")

    def _link_to_page(self, match: re.Match) -> bytes:
        return b'href="' + self.index_page_url(int(match.group(1))).encode() + b'"'

    def index_page_url(self, number: int) -> str:
        return self.index_url if number == 1 else f"{self.index_url}page/{number}/"


@functools.cache
def _sitemap_url(section: str) -> str:
    return reverse("publishing:sitemap_section", kwargs={"section": section})


def _sitemap_file(section: str, number: int) -> str:
    """Return the file of a sitemap page: ``sitemap-posts.xml``, ``sitemap-posts-2.xml``, ..."""
    relative = _file_for(_sitemap_url(section))
    return relative if number == 1 else f"{relative.removesuffix('.xml')}-{number}.xml"


def _file_for(url_path: str, *, xml: bool = False) -> str:
    """Return the file a URL path is written to: folders get ``index.html``/``index.xml``."""
    relative = url_path.lstrip("/")
    if relative == "" or relative.endswith("/"):
        relative += "index.xml" if xml else "index.html"
    return relative


# --- the manifest of a build --------------------------------------------------------------


class _ForwardReader:
    """A previous build's manifest list, read forward only in the order it was written.

    Lists are sorted by their first field (post id, page number), the order the export streams
    them in, so looking entries up is a merge: nothing is held in memory but the next line.
    """

    def __init__(self, path: Path | None):
        self._file = None
        if path is not None:
            try:
                self._file = path.open(encoding="utf-8")
            except OSError:
                self._file = None
        self._next = self._read()

    def _read(self) -> list | None:
        if self._file is None:
            return None
        line = self._file.readline()
        try:
            return json.loads(line) if line else None
        except ValueError:  # a damaged manifest: what follows is rendered again
            return None

    def take(self, first: int) -> list | None:
        """Return the entry whose first field is ``first``, skipping those before it."""
        while self._next is not None and self._next[0] < first:
            self._next = self._read()
        return self._next if self._next is not None and self._next[0] == first else None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()


class _Build:
    """A build being written: its files, the manifest lists and the running content hash."""

    def __init__(self, folder: Path, base: Path | None):
        self.folder = folder
        self.base = base
        self._digest = hashlib.sha256()
        self.files = 0
        self.rendered = 0
        self.reused = 0

    def _path(self, relative: str) -> Path:
        # A string check, not Path.resolve(): that costs a system call per path component,
        # per file, and the names come from URLs, not from symlinks inside the build.
        normal = os.path.normpath(relative)
        if os.path.isabs(normal) or normal == ".." or normal.startswith("../"):
            raise ExportError(f"refusing to write {relative!r} outside the build folder")
        path = self.folder / normal
        os.makedirs(path.parent, exist_ok=True)
        return path

    def write(self, relative: str, content: bytes) -> str:
        """Write a rendered file; return its hash."""
        self._path(relative).write_bytes(content)
        self.rendered += 1
        return hashlib.sha256(content).hexdigest()

    def reuse(self, relative: str) -> bool:
        """Hard-link (else copy) a file of the base build; False when it is not there."""
        if self.base is None:
            return False
        source, target = self.base / relative, self._path(relative)
        try:
            os.link(source, target)
        except FileNotFoundError:
            return False
        except OSError:  # another filesystem, no hard links, too many links: copy
            try:
                shutil.copyfile(source, target)
            except FileNotFoundError:
                return False
        self.reused += 1
        return True

    def count(self, relative: str, sha: str) -> None:
        """Add a file to the content hash (in manifest order, the same for the same site)."""
        self._digest.update(f"{relative}\0{sha}\n".encode())
        self.files += 1

    @property
    def content_hash(self) -> str:
        return self._digest.hexdigest()


def _write_lines(stream, entries: list[list]) -> None:
    for entry in entries:
        stream.write(json.dumps(entry, separators=(",", ":")) + "\n")


def _stopped() -> ExportError:
    return ExportError("stopped before the export finished; the live site is unchanged")


def _post_file(slug: str) -> str:
    """Return the file of a post's page (``reverse`` once, not once per post: it is slow)."""
    prefix, suffix = _post_url_parts()
    return _file_for(f"{prefix}{slug}{suffix}")


@functools.cache
def _post_url_parts() -> tuple[str, str]:
    marker = "instatic-export-slug"
    return tuple(reverse("publishing:post_detail", kwargs={"slug": marker}).split(marker, 1))


class _SitemapKeys:
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


def _export_posts(build: _Build, renderer: _Renderer, sitemap: _SitemapKeys, *, should_stop) -> int:
    """Write every live post's page, reusing unchanged ones; return how many posts are live.

    The streamed rows also give ``sitemap`` the keys of the posts sitemap's pages.
    """
    live = 0
    pending: list[int] = []  # ids to render
    ready: list[list] = []  # manifest entries [id, slug, key, sha] not yet written
    previous = _ForwardReader(build.base / POSTS_MANIFEST if build.base else None)
    rows = selectors.live_posts().order_by("id").values_list("id", "slug", "version", "updated_at")
    with (build.folder / POSTS_MANIFEST).open("w", encoding="utf-8") as manifest:

        def flush():
            if pending:
                batch = selectors.live_posts().defer("body").filter(id__in=pending)
                for post in batch.order_by("id").iterator(chunk_size=RENDER_CHUNK):
                    relative = _post_file(post.slug)
                    sha = build.write(relative, renderer.post(post))
                    ready.append([post.pk, post.slug, post_key(post.version, post.updated_at), sha])
                pending.clear()
            ready.sort(key=lambda entry: entry[0])
            for entry in ready:
                build.count(_post_file(entry[1]), entry[3])
            _write_lines(manifest, ready)
            ready.clear()

        try:
            for pk, slug, version, updated_at in rows.iterator(chunk_size=CHUNK):
                live += 1
                if live % CHUNK == 0 and should_stop():
                    raise _stopped()
                key = post_key(version, updated_at)
                sitemap.add(pk, slug, key)
                old = previous.take(pk)
                if old and old[1] == slug and old[2] == key and build.reuse(_post_file(slug)):
                    ready.append([pk, slug, key, old[3]])
                else:
                    pending.append(pk)
                if len(pending) >= RENDER_BATCH or len(ready) >= CHUNK:
                    flush()
            flush()
        finally:
            previous.close()
    return live


def _index_pages(rows, per_page: int):
    """Yield (number, [(id, key), ...]) for the index pages of the streamed live posts."""
    number, members = 1, []
    for pk, version, updated_at in rows:
        members.append((pk, post_key(version, updated_at)))
        if len(members) == per_page:
            yield number, members
            number, members = number + 1, []
    if members:
        yield number, members


def _export_index(build: _Build, renderer: _Renderer, *, live: int, should_stop) -> None:
    """Write every page of the index, reusing pages that list the same posts as before."""
    paginator = Paginator(range(live), int(publishing_settings.POSTS_PER_PAGE))
    pending: list[tuple[int, str, list[int]]] = []  # (number, key, ids) to render
    ready: list[list] = []  # manifest entries [number, key, sha]
    previous = _ForwardReader(build.base / PAGES_MANIFEST if build.base else None)
    rows = selectors.live_posts().values_list("id", "version", "updated_at")
    with (build.folder / PAGES_MANIFEST).open("w", encoding="utf-8") as manifest:

        def flush():
            ids = [pk for _number, _key, members in pending for pk in members]
            fields = selectors.live_posts().defer("body", "body_html").filter(id__in=ids)
            posts = {post.pk: post for post in fields.iterator(chunk_size=RENDER_BATCH)}
            for number, key, members in pending:
                page = paginator.page(number)
                listed = [posts[pk] for pk in members if pk in posts]
                relative = _file_for(renderer.index_page_url(number))
                ready.append([number, key, build.write(relative, renderer.index(page, listed))])
            pending.clear()
            ready.sort(key=lambda entry: entry[0])
            for number, _key, sha in ready:
                build.count(_file_for(renderer.index_page_url(number)), sha)
            _write_lines(manifest, ready)
            ready.clear()

        try:
            pages = _index_pages(rows.iterator(chunk_size=CHUNK), paginator.per_page)
            streamed = 0
            for number, members in pages:
                if number > paginator.num_pages:
                    break  # posts were published meanwhile: the key check redoes the export
                streamed = number
                if number % 100 == 0 and should_stop():
                    raise _stopped()
                key = hashlib.sha256(
                    json.dumps([number, paginator.num_pages, members]).encode()
                ).hexdigest()
                old = previous.take(number)
                relative = _file_for(renderer.index_page_url(number))
                if old and old[1] == key and build.reuse(relative):
                    ready.append([number, key, old[2]])
                else:
                    pending.append((number, key, [pk for pk, _ in members]))
                if sum(len(p[2]) for p in pending) >= RENDER_BATCH or len(ready) >= CHUNK:
                    flush()
            # An empty site still has page 1 ("nothing published yet"); posts taken down
            # meanwhile leave pages the key check will redo.
            for number in range(streamed + 1, paginator.num_pages + 1):
                pending.append((number, "", []))
            flush()
        finally:
            previous.close()


def _export_sitemap(build: _Build, renderer: _Renderer, keys: list[str]) -> None:
    """Write every page of the posts sitemap, reusing pages whose posts did not change."""
    previous = _ForwardReader(build.base / SITEMAP_MANIFEST if build.base else None)
    with (build.folder / SITEMAP_MANIFEST).open("w", encoding="utf-8") as manifest:
        try:
            for number, key in enumerate(keys, start=1):
                relative = _sitemap_file(POSTS_SECTION, number)
                old = previous.take(number)
                if old and old[1] == key and build.reuse(relative):
                    sha = old[2]
                else:
                    sha = build.write(relative, renderer.sitemap_page(POSTS_SECTION, number))
                build.count(relative, sha)
                _write_lines(manifest, [[number, key, sha]])
        finally:
            previous.close()


def _export_small_pages(build: _Build, renderer: _Renderer) -> None:
    """Write the feed, the sitemap index and the sitemap's other sections (every export)."""
    feed = reverse("publishing:feed")
    pages = [(_file_for(feed, xml=True), lambda: renderer.get(feed))]
    pages.append((_file_for(reverse("publishing:sitemap")), renderer.sitemap_index))
    for section, sitemap in SITEMAPS.items():
        if section != POSTS_SECTION:
            for number in range(1, sitemap().paginator.num_pages + 1):
                pages.append(
                    (
                        _sitemap_file(section, number),
                        functools.partial(renderer.sitemap_page, section, number),
                    )
                )
    for relative, render in pages:
        build.count(relative, build.write(relative, render()))


def _render_build(folder: Path, *, base: Path | None, should_stop) -> _Build:
    """Write a complete build into ``folder``, reusing unchanged pages of ``base``."""
    renderer = _Renderer()
    build = _Build(folder, base)
    # The feed and the sitemap index first: they go through the middleware, and a host the
    # site does not answer for fails here, before any other work.
    _export_small_pages(build, renderer)
    sitemap = _SitemapKeys(int(PostSitemap.limit))
    live = _export_posts(build, renderer, sitemap, should_stop=should_stop)
    _export_sitemap(build, renderer, sitemap.finish())
    _export_index(build, renderer, live=live, should_stop=should_stop)
    return build


# --- writing and switching ----------------------------------------------------------------


def _write_manifest(folder: Path, manifest: dict) -> None:
    """Write the manifest atomically, as the last file of a build."""
    temporary = folder / f"{MANIFEST}.{uuid.uuid4().hex}"
    temporary.write_text(json.dumps(manifest, indent=1, sort_keys=True))
    os.replace(temporary, folder / MANIFEST)


def switch_current(root: Path, build: Path) -> None:
    """Point ``root/current`` at ``build`` in one atomic rename of a fresh symlink."""
    link = root / f".{CURRENT}-{uuid.uuid4().hex}"
    os.symlink(os.path.relpath(build, root), link)
    try:
        os.replace(link, root / CURRENT)
    except OSError:
        link.unlink(missing_ok=True)
        raise


def _live_build(root: Path) -> Path | None:
    try:
        return (root / CURRENT).resolve(strict=True)
    except OSError:
        return None


def clean_up(root: Path, *, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` builds (never the live one) and stale temporaries."""
    builds_dir = root / BUILDS
    if not builds_dir.is_dir():
        return []
    live = _live_build(root)
    builds = sorted(p for p in builds_dir.iterdir() if not p.name.startswith("."))
    removed = []
    for build in builds[: max(0, len(builds) - keep)]:
        if live is not None and build.resolve() == live:
            continue
        shutil.rmtree(build, ignore_errors=True)
        removed.append(build)
    # Leftovers of an export that crashed (another node may be exporting right now: only old
    # ones go).
    cutoff = time.time() - STALE_TEMP_AGE.total_seconds()
    for leftover in [*builds_dir.glob(".tmp-*"), *root.glob(f".{CURRENT}-*")]:
        try:
            if leftover.lstat().st_mtime < cutoff:
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink(missing_ok=True)
        except OSError:
            continue
    return removed


def export_site(
    root: Path,
    *,
    keep: int = 2,
    full: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> ExportResult:
    """Export the live site to ``root`` unless it is unchanged; return what happened.

    Pages whose inputs did not change are reused from the live build; ``full`` renders every
    page again (after a change the fingerprint cannot see, e.g. a template tag's code), and
    the live build is still only replaced when something differs.
    """
    root = Path(root)
    current = root / CURRENT
    if current.exists() and not current.is_symlink():
        raise ExportError(f"{current} is a real folder; move it away so it can be a symlink")
    manifest = read_manifest(root)
    live = _live_build(root)
    fingerprint = render_fingerprint()
    key = source_key()
    same_shape = bool(manifest and live and manifest.get("fingerprint") == fingerprint)
    if not full and same_shape and manifest.get("source_key") == key:
        return ExportResult(changed=False, reason="the live posts did not change", build=live)
    builds_dir = root / BUILDS
    builds_dir.mkdir(parents=True, exist_ok=True)
    base = live if same_shape and not full else None
    temporaries: list[Path] = []
    try:
        for _attempt in range(RENDER_ATTEMPTS):
            temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
            temporary.mkdir()
            temporaries.append(temporary)
            written = _render_build(temporary, base=base, should_stop=should_stop)
            after = source_key()
            if after == key:
                break
            # Posts changed while rendering: go again on top of this build, so only what
            # changed is redone, until a pass sees no change.
            key, base = after, temporary
        else:
            raise ExportError(
                f"the live posts changed during each of {RENDER_ATTEMPTS} renders; "
                "trying again later"
            )
        if should_stop():
            raise _stopped()
        if (
            same_shape
            and manifest.get("source_key") == key
            and manifest.get("content_hash") == written.content_hash
        ):
            result = ExportResult(
                changed=False,
                reason="the rendered site is the same",
                build=live,
                content_hash=written.content_hash,
                files=written.files,
                rendered=written.rendered,
                reused=written.reused,
            )
        else:
            _write_manifest(
                temporary,
                {
                    "version": RENDER_VERSION,
                    "fingerprint": fingerprint,
                    "source_key": key,
                    "content_hash": written.content_hash,
                    "files": written.files,
                    "created_at": datetime.now(UTC).isoformat(),
                },
            )
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            build = builds_dir / f"{stamp}-{written.content_hash[:12]}"
            temporary.rename(build)
            temporaries.remove(temporary)
            switch_current(root, build)
            result = ExportResult(
                changed=True,
                reason="exported",
                build=build,
                content_hash=written.content_hash,
                files=written.files,
                rendered=written.rendered,
                reused=written.reused,
            )
    finally:
        for leftover in temporaries:
            shutil.rmtree(leftover, ignore_errors=True)
    if result.changed:
        clean_up(root, keep=keep)
    return result


_unset_logged = False


@plugin_job(
    plugin="static_export",
    name="build",
    schedule=every_minutes(1),
    max_duration=timedelta(minutes=10),
)
def build(ctx: JobContext) -> None:
    """Every minute, export the live site to ``INSTATIC_EXPORT_ROOT`` if it changed.

    Only changed pages are rendered. A manual run ("run now") renders every page, e.g. after
    a deploy that changed template tags; the live build is still only replaced if the output
    differs.
    """
    global _unset_logged
    root = settings.EXPORT_ROOT
    if not root:
        if not _unset_logged:
            _unset_logged = True
            ctx.logger.debug("INSTATIC_EXPORT_ROOT is not set; the static export does nothing")
        return
    result = export_site(
        Path(root),
        keep=int(settings.EXPORT_KEEP),
        full=ctx.trigger == JobRun.Trigger.MANUAL,
        should_stop=ctx.should_stop,
    )
    if result.changed:
        ctx.logger.info(
            "exported %d file(s) to %s (%d rendered, %d reused)",
            result.files,
            result.build,
            result.rendered,
            result.reused,
        )
    else:
        ctx.logger.debug("static export skipped: %s", result.reason)
