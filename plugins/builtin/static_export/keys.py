"""What the exported pages depend on, as keys an export compares with the live build's.

``source_key`` covers the live posts, ``post_key`` one post page, ``render_fingerprint``
everything else that shapes the output: when the fingerprint changes, every page is rendered.
"""

import hashlib
import json
from collections.abc import Iterable

import django
from django.conf import settings as django_settings
from django.db.models import CharField
from django.db.models.functions import Cast
from django.template.loader import get_template
from django.template.loader_tags import ExtendsNode, IncludeNode

from plugins.builtin.static_export.layout import CHUNK
from plugins.builtin.static_export.render import target
from publishing import selectors
from publishing.conf import settings as publishing_settings

#: Bump when the export's own output changes in a way the fingerprint cannot see (e.g. a
#: template tag's code), so every page is rendered again.
RENDER_VERSION = 4
#: The templates of the pages the export renders itself (with what they extend or include).
PAGE_TEMPLATES = ("publishing/index.html", "publishing/post_detail.html")
#: Django settings that change the rendered pages (dates, language, links).
OUTPUT_SETTINGS = ("TIME_ZONE", "USE_TZ", "LANGUAGE_CODE", "USE_I18N", "FORCE_SCRIPT_NAME")


def stamp() -> Cast:
    """Return the posts' ``updated_at`` as text, as the database writes it.

    Keys compare and hash it as it comes, instead of parsing 100,000 strings into datetimes on
    every pass over the posts.
    """
    return Cast("updated_at", output_field=CharField())


def post_key(version: int, updated: str | None) -> str:
    """Return what a post page depends on: the post's version and last change."""
    return f"{version}@{updated or ''}"


def source_key() -> str:
    """Return a hash of what the public site depends on: the live posts' ids and versions."""
    digest = hashlib.sha256()
    rows = selectors.live_posts().order_by("id").values_list("id", "version", stamp())
    for pk, version, updated in rows.iterator(chunk_size=CHUNK):
        digest.update(f"{pk} {post_key(version, updated)}\n".encode())
    return digest.hexdigest()


def render_fingerprint() -> str:
    """Return a hash of everything besides the posts that shapes the rendered pages."""
    host, secure = target()
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
            source = node.parent_name if isinstance(node, ExtendsNode) else node.template
            if isinstance(getattr(source, "var", None), str):
                queue.append(str(source.var))
    return hashes
