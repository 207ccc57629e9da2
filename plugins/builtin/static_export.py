"""Static export: the live public site as static files, incremental, switched in atomically.

Layout under ``INSTATIC_EXPORT_ROOT``::

    builds/<stamp>-<hash>/index.html            the index (later pages in page/<slug>/index.html)
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
finish reading it (until the next export starts, see below).

**Streaming.** The live posts are read a chunk at a time, only the columns each step needs,
and every page is written to the build as soon as it is rendered: memory does not grow with the
size of the site (a 100,000-post site is exported in the same memory as a 10,000-post one).

**Incremental.** The manifest lists every post page (id, file, the post's ``version`` and
``updated_at``, the file's hash), every index page (the ids and versions of the posts on it,
and its links) and every page of the posts sitemap (a range of post ids,
``publishing.sitemaps``). A page whose
inputs did not change is not rendered again; removed posts are simply not carried over. A
*fingerprint* of everything else that shapes the output (the page templates and those they
extend or include, ``RENDER_VERSION``, the settings that change dates, links and pagination,
Django's version) is part of the manifest: when it changes, every page is rendered. The feed,
the sitemap index and the small sections of the sitemap are rendered on every export.

**Rewritten in place.** Making a new folder tree for every export would cost a folder and a
hard link per post (and deleting the oldest build as many unlinks): seconds at 100,000 posts,
whatever changed. So the build the clean-up would delete once this export is live (the oldest
of ``keep`` builds, never the live one) is taken out of ``builds/`` (renamed to a temporary)
and rewritten in place: its pages whose key did not change stay as they are, changed ones are
hard-linked from the live build or rendered, pages the site no longer has are removed. A file
is never written into, since it may be a hard link shared with the live build: it is unlinked
and created anew. After a fingerprint change its pages are all replaced, still without making
or deleting folders.

**A spare build.** Fewer than ``keep`` builds (a site's first export) leave nothing to rewrite:
the next export would make a folder per post and hard-link every page into it, most of its
time at 100,000 posts. So an export that leaves no such build prepares one after its switch
(the new build already serves): ``builds/.spare-...``, a hard-linked copy of the new live
build made from its lists, which nobody serves and the next export rewrites in place like the
oldest build. Without one (hard links impossible, the copy interrupted) the new build is a new
folder, unchanged pages hard-linked from the live build (copied where links are impossible).

Post and index pages are rendered with the templates and context of ``publishing.views``
(the index from the streamed rows, cut into pages by ``publishing.paging.pages`` as the view
cuts them, instead of asking the view for each page); the feed and the sitemap go through
Django's test ``Client``, the real URLconf and middleware. Tests compare every page with
what a visitor gets.

**Consistent.** A key over the live posts' ``(id, version, updated_at)`` is read before and
after rendering. When posts changed meanwhile, the export goes again over the build it just
wrote, in place, so only what changed is redone, until one pass saw no change.
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
from django.db.models import CharField
from django.db.models.functions import Cast
from django.template.loader import get_template
from django.template.loader_tags import ExtendsNode, IncludeNode
from django.test import Client, RequestFactory
from django.urls import reverse
from django.utils.safestring import mark_safe

from coordination.models import JobRun
from plugins.conf import settings
from plugins.sdk import JobContext, every_minutes, plugin_job
from publishing import paging, selectors
from publishing.conf import settings as publishing_settings
from publishing.models import Post
from publishing.sitemaps import POSTS_SECTION, SITEMAPS, PostSitemap, id_page

logger = logging.getLogger(__name__)

#: Bump when the export's own output changes in a way the fingerprint cannot see (e.g. a
#: template tag's code), so every page is rendered again.
RENDER_VERSION = 4
CURRENT = "current"
BUILDS = "builds"
MANIFEST = ".instatic-export.json"
POSTS_MANIFEST = ".instatic-export-posts.jsonl"
PAGES_MANIFEST = ".instatic-export-pages.jsonl"
SITEMAP_MANIFEST = ".instatic-export-sitemap.jsonl"
#: A spare build: a hard-linked copy of the live build for the next export to rewrite in place.
SPARE = ".spare-"
#: The file that marks a folder as an Instatic export's (written by its first export).
ROOT_MARKER = ".instatic-export-root"
#: The names only the export gives, in ``builds/`` (and ``current``'s temporaries at the top):
#: the clean-up deletes nothing else, so an operator's own folder there is left alone.
_STAMP = r"\d{8}T\d{12}Z"
BUILD_NAME = re.compile(rf"{_STAMP}-[0-9a-f]{{12}}")
SPARE_NAME = re.compile(rf"{re.escape(SPARE)}{_STAMP}-[0-9a-f]{{8}}")
TEMPORARY_NAME = re.compile(r"\.tmp-[0-9a-f]{32}")
LINK_NAME = re.compile(rf"\.{CURRENT}-[0-9a-f]{{32}}")
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
    spare: Path | None = None


def _stamp() -> Cast:
    """Return the posts' ``updated_at`` as text, as the database writes it.

    Keys compare and hash it as it comes, instead of parsing 100,000 strings into datetimes on
    every pass over the posts.
    """
    return Cast("updated_at", output_field=CharField())


def post_key(version: int, stamp: str | None) -> str:
    """Return what a post page depends on: the post's version and last change."""
    return f"{version}@{stamp or ''}"


def source_key() -> str:
    """Return a hash of what the public site depends on: the live posts' ids and versions."""
    digest = hashlib.sha256()
    rows = selectors.live_posts().order_by("id").values_list("id", "version", _stamp())
    for pk, version, stamp in rows.iterator(chunk_size=CHUNK):
        digest.update(f"{pk} {post_key(version, stamp)}\n".encode())
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

    def index(self, page: selectors.IndexPage) -> bytes:
        """Return one page of the index, as ``publishing.views.index`` renders it.

        The view links to ``?from=<slug>``; static files live at ``page/<slug>/``, so the
        page is given the export's links.
        """
        query = {"from": page.key} if page.key != selectors.FRONT else None
        request = self.factory.get(self.index_url, query, secure=self.secure)
        entries = [{"post": post, "excerpt": post.excerpt} for post in page.object_list]
        return self.index_template.render({"page": page, "entries": entries}, request).encode()

    def sitemap_index(self) -> bytes:
        """Return the sitemap index, its links to ``?p=N`` pointing at the pages' files."""
        index = self.get(reverse("publishing:sitemap"))
        return _SITEMAP_PAGE_LINK.sub(rb"\1-\2.xml<", index)

    def sitemap_page(self, section: str, number: int) -> bytes:
        """Return page ``number`` of a section of the sitemap, as the sitemap view serves it."""
        url = _sitemap_url(section)
        return self.get(url if number == 1 else f"{url}?p={number}")

    def index_page_url(self, key: str) -> str:
        """Return the address of the index page ``key``: ``/`` or ``/page/<slug>/``."""
        return self.index_url if key == selectors.FRONT else f"{self.index_url}page/{key}/"

    def index_page_file(self, key: str) -> str:
        return _file_for(self.index_page_url(key))


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
#
# Each kind of page with many files (posts, index pages, sitemap pages) has a list in the
# build: one JSON line per file, ``[first, file, key, sha]``, sorted by ``first`` (post id,
# page number), the order the export streams them in. ``key`` is what the file was rendered
# from; ``sha`` its content's hash.


class _DamagedList(Exception):
    """A recycled build's list cannot be read to its end: what it holds is not known."""


def _normal(relative: str) -> str:
    """Return ``relative`` normalized, refusing a path that leaves the build folder.

    A string check, not Path.resolve(): that costs a system call per path component, per
    file, and the names come from URLs, not from symlinks inside the build.
    """
    normal = os.path.normpath(relative)
    if os.path.isabs(normal) or normal == ".." or normal.startswith("../"):
        raise ExportError(f"refusing to write {relative!r} outside the build folder")
    return normal


def _make_parent(folder: str, normal: str) -> None:
    """Make the folder ``normal`` (a file's path in ``folder``) goes in, if it is missing.

    One ``mkdir`` per file in the common case (a post's own folder), not one per component.
    """
    parent = os.path.dirname(normal)
    if parent:
        try:
            os.mkdir(os.path.join(folder, parent))
        except FileExistsError:
            pass
        except FileNotFoundError:
            os.makedirs(os.path.join(folder, parent), exist_ok=True)


def _file_sha(path: str) -> str:
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


def _line(entry: list) -> str:
    return json.dumps(entry, separators=(",", ":")) + "\n"


class _ForwardReader:
    """A build's manifest list, read forward only, one line at a time (never held whole).

    Only a line's first field is parsed to skip it; whole entries are parsed when needed.
    ``strict``: a damaged line raises ``_DamagedList`` (else the rest is taken as absent).
    """

    def __init__(self, path: str, *, strict: bool = False):
        self.strict = strict
        self.count = 0  # lines consumed
        try:
            self._file = open(path, encoding="utf-8")  # noqa: SIM115 (closed by close())
        except OSError:
            if strict:
                raise _DamagedList(f"{path} cannot be read") from None
            self._file = None
        self._next = self._read()

    def _damaged(self, what: str) -> None:
        if self.strict:
            raise _DamagedList(what)
        self._next = None
        self.close()

    def _read(self) -> str | None:
        line = self._file.readline() if self._file is not None else ""
        if line and not line.endswith("\n"):
            self._damaged("a list ends in the middle of a line")
            return None
        return line or None

    def _first(self) -> int | None:
        try:
            return int(self._next[1 : self._next.index(",")])
        except ValueError:
            self._damaged(f"a list's line is damaged: {self._next[:80]!r}")
            return None

    def _pop(self) -> tuple[list, str] | None:
        line, self._next = self._next, self._read()
        self.count += 1
        try:
            return json.loads(line), line
        except ValueError:
            self._damaged(f"a list's line is damaged: {line[:80]!r}")
            return None

    def take(self, first: int, skipped: Callable[[list], None] | None = None):
        """Return ``(entry, line)`` for ``first``, or None; entries before it go to ``skipped``."""
        while self._next is not None:
            current = self._first()
            if current is None or current > first:
                return None
            if current < first and skipped is None:  # not needed: not parsed
                self._next = self._read()
                self.count += 1
                continue
            found = self._pop()
            if found is None:
                return None
            if current == first:
                return found
            skipped(found[0])
        return None

    def drain(self, skipped: Callable[[list], None]) -> None:
        """Hand every entry left to ``skipped``."""
        while self._next is not None:
            found = self._pop()
            if found is not None:
                skipped(found[0])

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


class _Build:
    """A build being written: its files, the manifest lists and the running content hash.

    A *recycled* build already holds a complete earlier build (its lists say what): pages
    whose key did not change are left as they are (when it is ``trusted``: rendered the way
    this export renders), others replaced, and pages the site no longer has removed. A file
    is never written into: it is unlinked and created anew, since its inode may be shared
    (hard-linked) with the live build.
    """

    def __init__(
        self,
        folder: Path,
        base: Path | None,
        *,
        recycled: bool = False,
        trusted: bool = True,
        small: Iterable[str] = (),
        lists: dict[str, int] | None = None,
        name: str | None = None,
    ):
        self.folder = str(folder)
        self.name = name  # where a recycled build was in builds/
        self.trusted = trusted
        self.base = str(base) if base is not None else None
        self.recycled = recycled
        self.old_small = list(small)  # the always-rendered files the recycled build has
        self.old_lists = dict(lists or {})  # the recycled build's lists and their lengths
        self.small: list[str] = []
        self.lists: dict[str, int] = {}
        # Files this pass wrote where the recycled build had another page (a slug that moved
        # from one post to another) or none: not to be removed as that other page's.
        self._moved_in: set[str] = set()
        self._digest = hashlib.sha256()
        self.files = 0
        self.rendered = 0
        self.reused = 0

    def again(self) -> "_Build":
        """Return this folder as a build to rewrite in place (another pass over it)."""
        return _Build(
            Path(self.folder),
            Path(self.base) if self.base else None,
            recycled=True,
            small=self.small,
            lists=self.lists,
            name=self.name,
        )

    def path(self, relative: str) -> str:
        return os.path.join(self.folder, relative)

    def _normal(self, relative: str) -> str:
        return _normal(relative)

    def _target(self, relative: str, *, in_place: bool) -> str:
        """Return the path to create ``relative`` at: its folder made, no file left there.

        ``in_place``: the recycled build has the same page there (an earlier version of it).
        """
        normal = self._normal(relative)
        path = self.path(normal)
        _make_parent(self.folder, normal)
        if self.recycled:
            if not in_place:
                self._moved_in.add(normal)
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        return path

    def write(self, relative: str, content: bytes, *, in_place: bool = False) -> str:
        """Write a rendered file; return its hash."""
        with open(self._target(relative, in_place=in_place), "xb") as stream:
            stream.write(content)
        self.rendered += 1
        return hashlib.sha256(content).hexdigest()

    def link(self, relative: str, *, in_place: bool = False) -> bool:
        """Hard-link (else copy) a file of the base build; False when it is not there."""
        if self.base is None:
            return False
        source = os.path.join(self.base, relative)
        target = self._target(relative, in_place=in_place)
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

    def kept(self) -> None:
        """Count a file a recycled build already has as it should be."""
        self.reused += 1

    def remove(self, relative: str, sha: str | None = None) -> None:
        """Delete a file a recycled build has and the site no longer does (and emptied folders).

        Only a page of the earlier build goes: not if this pass wrote another page there
        (another post took the slug), nor, given the ``sha`` the list gives it, if the file
        there is not that page (slugs traded while an earlier pass ran left another post's
        page there). A fresh build has nothing to remove.
        """
        if not self.recycled:
            return
        normal = self._normal(relative)
        if normal in self._moved_in:
            return
        try:
            if sha is not None and _file_sha(self.path(normal)) != sha:
                return
            os.unlink(self.path(normal))
        except FileNotFoundError:
            pass
        parent = os.path.dirname(normal)
        while parent:
            try:
                os.rmdir(self.path(parent))
            except OSError:  # not empty (or gone)
                break
            parent = os.path.dirname(parent)

    def count(self, relative: str, sha: str) -> None:
        """Add a file to the content hash (in manifest order, the same for the same site)."""
        self._digest.update(f"{relative}\0{sha}\n".encode())
        self.files += 1

    def write_small(self, relative: str, content: bytes) -> None:
        """Write one of the files rendered on every export (the feed, the sitemap index...)."""
        self.count(relative, self.write(relative, content, in_place=True))
        self.small.append(self._normal(relative))

    def remove_old_small(self) -> None:
        """Remove the recycled build's always-rendered files this pass did not write."""
        for relative in self.old_small:
            if relative not in self.small:
                self.remove(relative)

    @property
    def content_hash(self) -> str:
        return self._digest.hexdigest()


class _List:
    """One manifest list of the build being written, beside those of the builds it reuses.

    ``mine``: the same list of the recycled build being written over (what its files are);
    ``theirs``: the live build's (what can be hard-linked from it). Both are read in step with
    the stream, one line at a time. The new list is written beside and replaces the old one
    when the pass completes.
    """

    def __init__(self, build: _Build, name: str):
        self.build = build
        self.name = name
        self.count = 0
        self.mine = _ForwardReader(build.path(name), strict=True) if build.recycled else None
        self.theirs = _ForwardReader(os.path.join(build.base, name)) if build.base else None
        self._new = build.path(f"{name}.new")
        self._out = open(self._new, "w", encoding="utf-8")  # noqa: SIM115 (closed in __exit__)

    def __enter__(self) -> "_List":
        return self

    def __exit__(self, kind, error, traceback) -> None:
        try:
            if kind is None and self.mine is not None:
                self.mine.drain(self._gone)
                expected = self.build.old_lists.get(self.name)
                if expected is not None and self.mine.count != expected:
                    raise _DamagedList(f"{self.name}: {self.mine.count} of {expected} lines")
        finally:
            for reader in (self.mine, self.theirs):
                if reader is not None:
                    reader.close()
            self._out.close()
        if kind is None:
            os.replace(self._new, self.build.path(self.name))
            self.build.lists[self.name] = self.count

    def _gone(self, entry: list) -> None:
        self.build.remove(entry[1], entry[3])

    def reuse(self, first: int, relative: str, key: str) -> tuple[tuple[str, str] | None, bool]:
        """Return ``((sha, line), in_place)``; ``(sha, line)`` when the file for ``first``
        needs no rendering (the build has it already, or it was hard-linked from the live
        build), else None: render it. ``in_place``: the build had this page at this name.
        """
        in_place = False
        if self.mine is not None:
            found = self.mine.take(first, self._gone)
            if found is not None:
                entry, line = found
                in_place = entry[1] == relative
                if in_place and entry[2] == key and self.build.trusted:
                    self.build.kept()
                    return (entry[3], line), True
                if not in_place:
                    self.build.remove(entry[1], entry[3])  # a changed slug: the old page goes
        if self.theirs is not None:
            found = self.theirs.take(first)
            if found is not None:
                entry, line = found
                if (
                    entry[1] == relative
                    and entry[2] == key
                    and self.build.link(relative, in_place=in_place)
                ):
                    return (entry[3], line), in_place
        return None, in_place

    def add(self, relative: str, sha: str, line: str) -> None:
        """Count a file of the build (in list order) and write its line."""
        self.build.count(relative, sha)
        self._out.write(line)
        self.count += 1


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
    pending: dict[int, tuple[str, bool]] = {}  # id -> (the file its row names, in place)
    ready: list[tuple[int, str, str, str]] = []  # (id, file, sha, line) not yet listed
    rows = selectors.live_posts().order_by("id").values_list("id", "slug", "version", _stamp())
    with _List(build, POSTS_MANIFEST) as posts:

        def flush():
            if pending:
                batch = selectors.live_posts().defer("body").filter(id__in=list(pending))
                batch = batch.annotate(export_stamp=_stamp()).order_by("id")
                for post in batch.iterator(chunk_size=RENDER_CHUNK):
                    relative = _post_file(post.slug)
                    streamed, in_place = pending.pop(post.pk)
                    page = renderer.post(post)
                    sha = build.write(relative, page, in_place=in_place and streamed == relative)
                    key = post_key(post.version, post.export_stamp)
                    ready.append((post.pk, relative, sha, _line([post.pk, relative, key, sha])))
                    if streamed != relative:  # renamed since the rows were read
                        build.remove(streamed)
                # Taken down since the rows were read: the old page must go.
                for streamed, _in_place in pending.values():
                    build.remove(streamed)
                pending.clear()
            ready.sort(key=lambda item: item[0])
            for _pk, relative, sha, line in ready:
                posts.add(relative, sha, line)
            ready.clear()

        for pk, slug, version, stamp in rows.iterator(chunk_size=CHUNK):
            live += 1
            if live % CHUNK == 0 and should_stop():
                raise _stopped()
            key = post_key(version, stamp)
            sitemap.add(pk, slug, key)
            relative = _post_file(slug)
            found, in_place = posts.reuse(pk, relative, key)
            if found is None:
                pending[pk] = (relative, in_place)
            else:
                ready.append((pk, relative, *found))
            if len(pending) >= RENDER_BATCH or len(ready) >= CHUNK:
                flush()
        flush()
    return live


def _read_index_list(path: str, *, strict: bool) -> tuple[dict[str, tuple[str, str]], int]:
    """Return file -> (key, sha) of a build's list of index pages, and its number of lines.

    Empty when the list cannot be read (``strict``: ``_DamagedList`` instead).

    Index pages are matched by file (their address), not by position: a page keeps its
    file while its first post is live, wherever the page is in the index. The list is a
    line per page, a page per ``per_page`` posts on average: held whole, it is a tenth of
    the size of the posts' list, which is streamed.
    """
    pages: dict[str, tuple[str, str]] = {}
    reader = _ForwardReader(path, strict=strict)
    try:
        reader.drain(lambda entry: pages.__setitem__(entry[1], (entry[2], entry[3])))
    finally:
        reader.close()
    return pages, reader.count


def _index_layout(per_page: int, *, should_stop) -> Iterable[tuple[str, list[int], str | None]]:
    """Yield (key, [(id, post key), ...], older key) for every index page, top to bottom.

    The live posts are streamed once, newest first, and cut by ``publishing.paging.pages``,
    the function the index view pages with.
    """
    rows = selectors.live_posts().values_list("id", "slug", "version", _stamp())
    cut = paging.pages(rows.iterator(chunk_size=CHUNK), per_page=per_page)
    previous = None
    for count, page in enumerate(cut, start=1):
        if count % 100 == 0 and should_stop():
            raise _stopped()
        if previous is not None:
            yield (*previous, page[0][1])
        key = selectors.FRONT if previous is None else page[0][1]
        previous = (key, [(pk, post_key(version, stamp)) for pk, _slug, version, stamp in page])
    if previous is not None:
        yield (*previous, None)


def _export_index(build: _Build, renderer: _Renderer, *, should_stop) -> None:
    """Write every page of the index, reusing pages that list the same posts as before.

    A page is rendered again when its posts, their versions or its neighbours' addresses
    (its links) changed: one change in the index touches its own page and, when a page
    starts or stops there, the pages around it (``publishing.paging``).
    """
    per_page = int(publishing_settings.POSTS_PER_PAGE)
    mine, mine_count = {}, None
    if build.recycled:
        mine, mine_count = _read_index_list(build.path(PAGES_MANIFEST), strict=True)
        expected = build.old_lists.get(PAGES_MANIFEST)
        if expected is not None and mine_count != expected:
            raise _DamagedList(f"{PAGES_MANIFEST}: {mine_count} of {expected} lines")
    theirs = {}
    if build.base:
        theirs, _count = _read_index_list(os.path.join(build.base, PAGES_MANIFEST), strict=False)
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
        _index_layout(per_page, should_stop=should_stop)
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
            listed.write(_line([number, relative, content_key, sha]))
    os.replace(new, build.path(PAGES_MANIFEST))
    build.lists[PAGES_MANIFEST] = len(done)


def _export_sitemap(build: _Build, renderer: _Renderer, keys: list[str]) -> None:
    """Write every page of the posts sitemap, reusing pages whose posts did not change."""
    with _List(build, SITEMAP_MANIFEST) as listed:
        for number, key in enumerate(keys, start=1):
            relative = _sitemap_file(POSTS_SECTION, number)
            found, _in_place = listed.reuse(number, relative, key)
            if found is None:
                # A page's file is its number's: never another page's, so always in place.
                page = renderer.sitemap_page(POSTS_SECTION, number)
                sha = build.write(relative, page, in_place=True)
                found = (sha, _line([number, relative, key, sha]))
            listed.add(relative, *found)


def _export_small_pages(build: _Build, renderer: _Renderer) -> None:
    """Write the feed, the sitemap index and the sitemap's other sections (every export)."""
    feed = reverse("publishing:feed")
    build.write_small(_file_for(feed, xml=True), renderer.get(feed))
    build.write_small(_file_for(reverse("publishing:sitemap")), renderer.sitemap_index())
    for section, sitemap in SITEMAPS.items():
        if section != POSTS_SECTION:
            for number in range(1, sitemap().paginator.num_pages + 1):
                page = renderer.sitemap_page(section, number)
                build.write_small(_sitemap_file(section, number), page)
    build.remove_old_small()


def _render_build(build: _Build, *, should_stop) -> _Build:
    """Write a complete build into ``build``'s folder, reusing unchanged pages."""
    renderer = _Renderer()
    # The feed and the sitemap index first: they go through the middleware, and a host the
    # site does not answer for fails here, before any other work.
    _export_small_pages(build, renderer)
    sitemap = _SitemapKeys(int(PostSitemap.limit))
    _export_posts(build, renderer, sitemap, should_stop=should_stop)
    _export_sitemap(build, renderer, sitemap.finish())
    _export_index(build, renderer, should_stop=should_stop)
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
    builds = _builds(builds_dir)
    removed = []
    for build in builds[: max(0, len(builds) - keep)]:
        if live is not None and build.resolve() == live:
            continue
        shutil.rmtree(build, ignore_errors=True)
        removed.append(build)
    # A spare is taken only while fewer than ``keep`` builds exist: beyond that, or a second
    # one (two exports at once), it would never be used.
    spares = _spares(builds_dir)
    for spare in spares if len(builds) - len(removed) >= keep else spares[:-1]:
        shutil.rmtree(spare, ignore_errors=True)
        removed.append(spare)
    # Leftovers of an export that crashed (another node may be exporting right now: only old
    # ones go).
    cutoff = time.time() - STALE_TEMP_AGE.total_seconds()
    for leftover in [*_named(builds_dir, TEMPORARY_NAME), *_named(root, LINK_NAME)]:
        try:
            if leftover.lstat().st_mtime < cutoff:
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink(missing_ok=True)
        except OSError:
            continue
    return removed


def _named(folder: Path, name: re.Pattern) -> list[Path]:
    """Return the entries of ``folder`` whose whole name is ``name``'s, sorted."""
    try:
        return sorted(p for p in folder.iterdir() if name.fullmatch(p.name))
    except FileNotFoundError:
        return []


def _builds(builds_dir: Path) -> list[Path]:
    """Return the builds in ``builds_dir``, oldest first (temporaries, spares and any
    folder the export did not name aside)."""
    return _named(builds_dir, BUILD_NAME)


def _spares(builds_dir: Path) -> list[Path]:
    """Return the spare builds in ``builds_dir``, oldest first (normally none or one)."""
    return _named(builds_dir, SPARE_NAME)


def claim_root(root: Path) -> None:
    """Make sure ``root`` is an Instatic export's folder, marking it so on its first export.

    An empty (or missing) folder becomes one; a folder with the marker, or with the
    ``current`` symlink an earlier export made, is one. Anything else is refused: the export
    replaces ``current`` and deletes old builds, and must not do that among someone else's
    files.
    """
    marker = root / ROOT_MARKER
    if marker.is_file():
        return
    current = root / CURRENT
    try:
        entries = [p.name for p in root.iterdir()]
    except FileNotFoundError:
        entries = []
    made_by_an_export = current.is_symlink() and os.readlink(current).startswith(f"{BUILDS}/")
    if entries and not made_by_an_export:
        raise ExportError(
            f"{root} is not empty and is not an Instatic export (it has no {ROOT_MARKER}); "
            "export into a new or empty folder, or into one an earlier export made"
        )
    root.mkdir(parents=True, exist_ok=True)
    marker.write_text("This folder is written by Instatic's static export.\n")


def _build_files(build: Path, manifest: dict) -> Iterable[str]:
    """Yield every file of a complete build, from its manifest: its manifest last."""
    yield from manifest["small"]
    for name in manifest["lists"]:
        with open(build / name, encoding="utf-8") as listed:
            for line in listed:
                yield json.loads(line)[1]
        yield name
    yield MANIFEST


def _prepare_spare(builds_dir: Path, build: Path, *, should_stop) -> Path | None:
    """Hard-link a copy of the complete ``build`` as the next export's starting point.

    Without a build to rewrite in place (fewer than ``keep`` builds on disk: a site's first
    export), the next export would make a folder per post and hard-link every page into it:
    at 100,000 posts that is most of a one-change export's time. Made now, after the switch
    (the new build already serves), the next export rewrites the spare in place instead.
    The copy follows the build's lists (a folder and a link per page, no folder read), into
    a temporary renamed ``.spare-...`` once complete. ``build`` is named by path: were it
    taken meanwhile (renamed to be rewritten, which a later export does before changing
    anything in it), the next link fails and no spare is left rather than a mixed one.
    """
    temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
    try:
        manifest_text = (build / MANIFEST).read_text()
        manifest = json.loads(manifest_text)
        temporary.mkdir()
        folder, source = str(temporary), str(build)
        for count, relative in enumerate(_build_files(build, manifest), start=1):
            if count % CHUNK == 0 and should_stop():
                shutil.rmtree(temporary, ignore_errors=True)
                return None
            normal = _normal(relative)
            _make_parent(folder, normal)
            os.link(os.path.join(source, normal), os.path.join(folder, normal))
        if (build / MANIFEST).read_text() != manifest_text:
            raise ExportError(f"{build} changed while it was copied")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        spare = builds_dir / f"{SPARE}{stamp}-{uuid.uuid4().hex[:8]}"
        temporary.rename(spare)
        return spare
    except (OSError, ValueError, KeyError, TypeError, ExportError) as exc:
        logger.warning("static export: no spare build for the next export: %s", exc)
        shutil.rmtree(temporary, ignore_errors=True)
        return None


def _spare_if_needed(builds_dir: Path, build: Path, *, keep: int, should_stop) -> Path | None:
    """Prepare a spare copy of the new live ``build`` when the next export would have none.

    The next export rewrites the oldest of ``keep`` builds in place; with fewer builds on
    disk and no spare it would make a whole new folder tree. Returns the spare, if made.
    """
    if len(_builds(builds_dir)) >= keep or _spares(builds_dir):
        return None
    started = time.monotonic()
    spare = _prepare_spare(builds_dir, build, should_stop=should_stop)
    if spare is not None:
        logger.info(
            "static export: prepared the spare build %s for the next export in %.2f s",
            spare.name,
            time.monotonic() - started,
        )
    return spare


def _recycle(
    root: Path, *, keep: int, live: Path | None, base: Path | None, fingerprint: str
) -> _Build | None:
    """Take the build the clean-up deletes once this export is live, to write the new one over.

    With ``keep`` builds on disk, the oldest one that is not live goes when the new build
    switches in; with fewer, the spare build an earlier export prepared (``_prepare_spare``)
    is taken instead. Rewritten in place instead, only what changed since it was made is touched:
    no folder of 100,000 hard links to make, none to delete. Its pages are kept as they are
    only when it was rendered as this export renders (same fingerprint, and not a full
    export); otherwise each is replaced, still without making or deleting its folders. It
    leaves ``builds/`` (renamed to a temporary, the clean-up's age check reset) before
    anything in it changes. None when there is no such build.
    """
    builds_dir = root / BUILDS
    builds = _builds(builds_dir)
    old = [p for p in builds if live is None or p.resolve() != live]
    if len(builds) >= keep and old:
        candidate = old[0]
    else:
        spares = _spares(builds_dir)
        if not spares:
            return None
        candidate = spares[-1]
    try:
        manifest = json.loads((candidate / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("version") != RENDER_VERSION or not isinstance(manifest.get("lists"), dict):
        return None  # another layout: what it holds is not known
    temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
    try:
        candidate.rename(temporary)
    except OSError:  # another export took it first
        return None
    os.utime(temporary)
    (temporary / MANIFEST).unlink(missing_ok=True)
    logger.debug("static export: rewriting the older build %s in %s", candidate, temporary)
    return _Build(
        temporary,
        base,
        recycled=True,
        trusted=base is not None and manifest.get("fingerprint") == fingerprint,
        small=manifest.get("small", []),
        lists=manifest["lists"],
        name=candidate.name,
    )


def _render_passes(build: _Build, key: str, *, should_stop) -> tuple[_Build, str]:
    """Render ``build`` until a pass saw the live posts unchanged; return it and their key.

    When posts changed during a pass, the next pass rewrites the same folder in place (its
    lists say what it holds), so only what changed is redone.
    """
    for _attempt in range(RENDER_ATTEMPTS):
        _render_build(build, should_stop=should_stop)
        after = source_key()
        if after == key:
            return build, key
        key = after
        build = build.again()
    raise ExportError(
        f"the live posts changed during each of {RENDER_ATTEMPTS} renders; trying again later"
    )


def _manifest(build: _Build, *, fingerprint: str, key: str) -> dict:
    return {
        "version": RENDER_VERSION,
        "fingerprint": fingerprint,
        "source_key": key,
        "content_hash": build.content_hash,
        "files": build.files,
        "small": build.small,
        "lists": build.lists,
        "created_at": datetime.now(UTC).isoformat(),
    }


def _result(
    build: _Build, *, changed: bool, reason: str, folder: Path | None, spare: Path | None = None
) -> ExportResult:
    return ExportResult(
        changed=changed,
        reason=reason,
        build=folder,
        content_hash=build.content_hash,
        files=build.files,
        rendered=build.rendered,
        reused=build.reused,
        spare=spare,
    )


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
    claim_root(root)
    for pk, slug in selectors.unreachable_live_posts():
        logger.warning(
            "static export: skipped post %s: its slug %r is not a valid address (letters a-z "
            "and A-Z, digits, - and _); give it another one (manage.py migrate adds the "
            "constraint that refuses such slugs)",
            pk,
            slug,
        )
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
    build = _recycle(root, keep=keep, live=live, base=base, fingerprint=fingerprint)
    try:
        if build is not None:
            try:
                build, key = _render_passes(build, key, should_stop=should_stop)
            except _DamagedList as damaged:
                logger.warning("static export: %s; writing a new build instead", damaged)
                shutil.rmtree(build.folder, ignore_errors=True)
                build = None
        if build is None:
            temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
            temporary.mkdir()
            build = _Build(temporary, base)
            build, key = _render_passes(build, key, should_stop=should_stop)
        if should_stop():
            raise _stopped()
        folder = Path(build.folder)
        if (
            same_shape
            and manifest.get("source_key") == key
            and manifest.get("content_hash") == build.content_hash
        ):
            if build.name is not None:
                # A recycled build now holds what the live one does: back among the old builds.
                _write_manifest(folder, _manifest(build, fingerprint=fingerprint, key=key))
                folder.rename(builds_dir / build.name)
            return _result(
                build, changed=False, reason="the rendered site is the same", folder=live
            )
        _write_manifest(folder, _manifest(build, fingerprint=fingerprint, key=key))
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        final = builds_dir / f"{stamp}-{build.content_hash[:12]}"
        folder.rename(final)
        switch_current(root, final)
    finally:
        if build is not None and os.path.isdir(build.folder):
            shutil.rmtree(build.folder, ignore_errors=True)
    clean_up(root, keep=keep)
    spare = _spare_if_needed(builds_dir, final, keep=keep, should_stop=should_stop)
    return _result(build, changed=True, reason="exported", folder=final, spare=spare)


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
