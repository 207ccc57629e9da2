"""One export: render the live site into a build, consistently, and switch it in if it differs.

A key over the live posts is read before and after rendering; when posts changed meanwhile,
the export goes again over the build it just wrote, in place, so only what changed is
redone, until one pass saw no change.
"""

import logging
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.apps import apps
from django.urls import reverse

from plugins.builtin.static_export.folder import Build
from plugins.builtin.static_export.index_pages import export_index
from plugins.builtin.static_export.keys import render_fingerprint, source_key
from plugins.builtin.static_export.layout import (
    BUILDS,
    CURRENT,
    STAMP_FORMAT,
    ExportError,
    stopped,
)
from plugins.builtin.static_export.manifest import (
    DamagedList,
    manifest_of,
    read_manifest,
    write_manifest,
)
from plugins.builtin.static_export.post_pages import SitemapKeys, export_posts, export_sitemap
from plugins.builtin.static_export.render import Renderer, file_for, sitemap_file
from plugins.builtin.static_export.rotation import (
    claim_root,
    clean_up,
    live_build,
    recycle,
    switch_current,
)
from plugins.builtin.static_export.spare import spare_if_needed
from publishing import selectors
from publishing.sitemaps import POSTS_SECTION, SITEMAPS, PostSitemap

# The package's logger: every line of the export is on one name, whichever module writes it.
logger = logging.getLogger(__package__)

#: Passes over a build while the live posts keep changing, before the export gives up.
RENDER_ATTEMPTS = 3


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


def export_small_pages(build: Build, renderer: Renderer) -> None:
    """Write the feed, the sitemap index, the sitemap's other sections and the public images
    (every export)."""
    feed = reverse("publishing:feed")
    build.write_small(file_for(feed, xml=True), renderer.get(feed))
    build.write_small(file_for(reverse("publishing:sitemap")), renderer.sitemap_index())
    for section, sitemap in SITEMAPS.items():
        if section != POSTS_SECTION:
            for number in range(1, sitemap().paginator.num_pages + 1):
                page = renderer.sitemap_page(section, number)
                build.write_small(sitemap_file(section, number), page)
    export_images(build)
    build.remove_old_small()


def export_images(build: Build) -> None:
    """Copy the images the public may see (the media app's, when it is installed)."""
    if not apps.is_installed("media"):
        return
    from media.exporting import public_files

    for relative, content in public_files():
        build.write_small(relative, content)


def render_build(build: Build, *, should_stop) -> Build:
    """Write a complete build into ``build``'s folder, reusing unchanged pages."""
    renderer = Renderer()
    # The feed and the sitemap index first: they go through the middleware, and a host the
    # site does not answer for fails here, before any other work.
    export_small_pages(build, renderer)
    sitemap = SitemapKeys(int(PostSitemap.limit))
    export_posts(build, renderer, sitemap, should_stop=should_stop)
    export_sitemap(build, renderer, sitemap.finish())
    export_index(build, renderer, should_stop=should_stop)
    return build


def render_passes(build: Build, key: str, *, should_stop) -> tuple[Build, str]:
    """Render ``build`` until a pass saw the live posts unchanged; return it and their key.

    When posts changed during a pass, the next pass rewrites the same folder in place (its
    lists say what it holds), so only what changed is redone.
    """
    for _attempt in range(RENDER_ATTEMPTS):
        render_build(build, should_stop=should_stop)
        after = source_key()
        if after == key:
            return build, key
        key = after
        build = build.again()
    raise ExportError(
        f"the live posts changed during each of {RENDER_ATTEMPTS} renders; trying again later"
    )


def _result(
    build: Build, *, changed: bool, reason: str, folder: Path | None, spare: Path | None = None
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
    live = live_build(root)
    fingerprint = render_fingerprint()
    key = source_key()
    same_shape = bool(manifest and live and manifest.get("fingerprint") == fingerprint)
    if not full and same_shape and manifest.get("source_key") == key:
        return ExportResult(changed=False, reason="the live posts did not change", build=live)
    builds_dir = root / BUILDS
    builds_dir.mkdir(parents=True, exist_ok=True)
    base = live if same_shape and not full else None
    build = recycle(root, keep=keep, live=live, base=base, fingerprint=fingerprint)
    try:
        if build is not None:
            try:
                build, key = render_passes(build, key, should_stop=should_stop)
            except DamagedList as damaged:
                logger.warning("static export: %s; writing a new build instead", damaged)
                shutil.rmtree(build.folder, ignore_errors=True)
                build = None
        if build is None:
            temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
            temporary.mkdir()
            build = Build(temporary, base)
            build, key = render_passes(build, key, should_stop=should_stop)
        if should_stop():
            raise stopped()
        folder = Path(build.folder)
        if (
            same_shape
            and manifest.get("source_key") == key
            and manifest.get("content_hash") == build.content_hash
        ):
            if build.name is not None:
                # A recycled build now holds what the live one does: back among the old builds.
                write_manifest(folder, manifest_of(build, fingerprint=fingerprint, key=key))
                folder.rename(builds_dir / build.name)
            return _result(
                build, changed=False, reason="the rendered site is the same", folder=live
            )
        write_manifest(folder, manifest_of(build, fingerprint=fingerprint, key=key))
        stamp = datetime.now(UTC).strftime(STAMP_FORMAT)
        final = builds_dir / f"{stamp}-{build.content_hash[:12]}"
        folder.rename(final)
        switch_current(root, final)
    finally:
        if build is not None and os.path.isdir(build.folder):
            shutil.rmtree(build.folder, ignore_errors=True)
    clean_up(root, keep=keep)
    spare = spare_if_needed(builds_dir, final, keep=keep, should_stop=should_stop)
    return _result(build, changed=True, reason="exported", folder=final, spare=spare)
