"""Rendering: each page as a visitor at the export's host gets it, and the file it goes in.

Post and index pages are rendered with the templates and context of ``publishing.views``
straight from the streamed rows (asking the index view for page 9,000 would count and skip
90,000 posts each time); the feed and the sitemap go through Django's test ``Client``, the
real URLconf and middleware.
"""

import functools
import re
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.template.loader import get_template
from django.test import Client, RequestFactory
from django.urls import reverse

from plugins.builtin.static_export.layout import ExportError
from plugins.conf import settings
from publishing import selectors
from publishing.models import Post
from publishing.page_bodies import page_body

#: A sitemap index's link to page N of a section (``sitemap-posts.xml?p=N``).
_SITEMAP_PAGE_LINK = re.compile(rb"(/sitemap-[^/<?]+)\.xml\?p=(\d+)<")


def target() -> tuple[str, bool]:
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


class PageError(ExportError):
    """A page the site serves through its middleware did not answer 200."""

    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


class Renderer:
    """Render pages as a visitor at the export's host gets them."""

    def __init__(self):
        self.host, self.secure = target()
        self.client = Client(HTTP_HOST=self.host)
        self.factory = RequestFactory(HTTP_HOST=self.host)
        self.index_url = reverse("publishing:index")
        self.index_template = get_template("publishing/index.html")
        self.post_template = get_template("publishing/post_detail.html")

    def get(self, path: str) -> bytes:
        """Return the body of ``path`` through the URLconf and middleware (must answer 200)."""
        response = self.client.get(path, secure=self.secure)
        if response.status_code != 200:
            raise PageError(
                f"GET {path} (as {'https' if self.secure else 'http'}://{self.host}) answered "
                f"{response.status_code}; set INSTATIC_EXPORT_BASE_URL to a host in "
                "ALLOWED_HOSTS if that is the problem",
                status=response.status_code,
            )
        return response.content

    def post(self, post: Post) -> bytes:
        """Return the page of a live post, as ``publishing.views.post_detail`` renders it."""
        request = self.factory.get(post.get_absolute_url(), secure=self.secure)
        context = {"post": post, "body": page_body(post.pk, post.body_html)}
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
        """Return the file of the index page ``key``."""
        return file_for(self.index_page_url(key))


@functools.cache
def _sitemap_url(section: str) -> str:
    return reverse("publishing:sitemap_section", kwargs={"section": section})


def sitemap_file(section: str, number: int) -> str:
    """Return the file of a sitemap page: ``sitemap-posts.xml``, ``sitemap-posts-2.xml``, ..."""
    relative = file_for(_sitemap_url(section))
    return relative if number == 1 else f"{relative.removesuffix('.xml')}-{number}.xml"


def file_for(url_path: str, *, xml: bool = False) -> str:
    """Return the file a URL path is written to: folders get ``index.html``/``index.xml``."""
    relative = url_path.lstrip("/")
    if relative == "" or relative.endswith("/"):
        relative += "index.xml" if xml else "index.html"
    return relative


def post_file(slug: str) -> str:
    """Return the file of a post's page (``reverse`` once, not once per post: it is slow)."""
    prefix, suffix = _post_url_parts()
    return file_for(f"{prefix}{slug}{suffix}")


@functools.cache
def _post_url_parts() -> tuple[str, str]:
    marker = "instatic-export-slug"
    return tuple(reverse("publishing:post_detail", kwargs={"slug": marker}).split(marker, 1))
