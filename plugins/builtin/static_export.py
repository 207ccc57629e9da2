"""Static export: the live public site as static files, switched in atomically.

Layout under ``INSTATIC_EXPORT_ROOT``::

    builds/<stamp>-<hash>/index.html            the index (later pages in page/<n>/index.html)
    builds/<stamp>-<hash>/posts/<slug>/index.html
    builds/<stamp>-<hash>/feed/index.xml        the Atom feed
    builds/<stamp>-<hash>/sitemap.xml
    current -> builds/<stamp>-<hash>            what a web server serves

A build is rendered into a hidden temporary folder, renamed into ``builds/`` once complete,
and then made live by pointing a new symlink at it and renaming that over ``current``
(``os.replace``, one atomic ``rename(2)``). Whoever resolves ``current`` therefore finds either
the complete old build or the complete new one, never a half-written folder. The previous
build is kept (``INSTATIC_EXPORT_KEEP``, at least 2) so a reader that resolved the old build
just before a switch can finish reading it.

Pages are rendered by Django's test ``Client`` through the real URLconf and middleware, so
the export is byte for byte what a visitor gets. Work is skipped when nothing changed: first
by a key over the live posts' ``(id, updated_at)``, then by a hash of the rendered output.
The key is read again after rendering; if posts changed meanwhile the render is repeated, so a
build is one consistent view of the site on every database.
"""

import hashlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings as django_settings
from django.core.paginator import Paginator
from django.test import Client
from django.urls import reverse

from coordination.models import JobRun
from plugins.conf import settings
from plugins.sdk import JobContext, every_minutes, plugin_job
from publishing import selectors
from publishing.conf import settings as publishing_settings

logger = logging.getLogger(__name__)

#: Bump when the export's own output format changes, so existing builds are redone.
RENDER_VERSION = 1
CURRENT = "current"
BUILDS = "builds"
MANIFEST = ".instatic-export.json"
RENDER_ATTEMPTS = 3
STALE_TEMP_AGE = timedelta(hours=1)

_PAGE_LINK = re.compile(rb'href="\?page=(\d+)"')


class ExportError(Exception):
    """The export could not produce a build; the live site is left as it was."""


@dataclass(frozen=True)
class ExportResult:
    """What one export did: whether the live site changed, and the live build."""

    changed: bool
    reason: str
    build: Path | None = None
    content_hash: str = ""
    files: int = 0


def source_key() -> str:
    """Return a hash of what the public site depends on: the live posts' ids and versions."""
    rows = selectors.live_posts().values_list("id", "updated_at")
    payload = [
        RENDER_VERSION,
        int(publishing_settings.POSTS_PER_PAGE),
        int(publishing_settings.FEED_SIZE),
        [(pk, updated.isoformat() if updated else None) for pk, updated in rows],
    ]
    return hashlib.sha256(json.dumps(payload).encode()).hexdigest()


def content_hash(files: dict[str, bytes]) -> str:
    """Return a hash of a rendered site (paths and contents)."""
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.encode() + b"\0")
        digest.update(hashlib.sha256(files[path]).digest())
    return digest.hexdigest()


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


class _Renderer:
    """Fetch pages through the real URLconf and middleware with Django's test client."""

    def __init__(self):
        self.host, self.secure = _target()
        self.client = Client(HTTP_HOST=self.host)

    def get(self, path: str, query: dict | None = None):
        response = self.client.get(path, query, secure=self.secure)
        if response.status_code != 200:
            shown = path + (f"?{'&'.join(f'{k}={v}' for k, v in query.items())}" if query else "")
            raise _PageError(
                f"GET {shown} (as {'https' if self.secure else 'http'}://{self.host}) answered "
                f"{response.status_code}; set INSTATIC_EXPORT_BASE_URL to a host in "
                "ALLOWED_HOSTS if that is the problem",
                status=response.status_code,
            )
        return response


class _PageError(ExportError):
    def __init__(self, message: str, *, status: int):
        super().__init__(message)
        self.status = status


def _file_for(url_path: str, content_type: str) -> str:
    """Return the file a URL path is written to: folders get ``index.html``/``index.xml``."""
    relative = url_path.lstrip("/")
    if relative == "" or relative.endswith("/"):
        relative += "index.xml" if "xml" in content_type else "index.html"
    return relative


def render_site(*, should_stop: Callable[[], bool] = lambda: False) -> dict[str, bytes]:
    """Render the public site: every index page, every live post, the feed and the sitemap."""
    renderer = _Renderer()
    files: dict[str, bytes] = {}
    index_url = reverse("publishing:index")

    def link_to_page(match: re.Match) -> bytes:
        number = int(match.group(1))
        target = index_url if number == 1 else f"{index_url}page/{number}/"
        return b'href="' + target.encode() + b'"'

    pages = Paginator(selectors.live_posts(), int(publishing_settings.POSTS_PER_PAGE)).num_pages
    for number in range(1, pages + 1):
        response = renderer.get(index_url, {"page": number} if number > 1 else None)
        path = index_url if number == 1 else f"{index_url}page/{number}/"
        # The index links to ?page=N; static files live at page/N/ instead.
        files[_file_for(path, response["Content-Type"])] = _PAGE_LINK.sub(
            link_to_page, response.content
        )
    for slug in selectors.live_posts().values_list("slug", flat=True):
        if should_stop():
            raise ExportError("stopped before the export finished; the live site is unchanged")
        url = reverse("publishing:post_detail", kwargs={"slug": slug})
        response = renderer.get(url)
        files[_file_for(url, response["Content-Type"])] = response.content
    for name in ("publishing:feed", "publishing:sitemap"):
        url = reverse(name)
        response = renderer.get(url)
        files[_file_for(url, response["Content-Type"])] = response.content
    return files


def render_consistent(*, should_stop: Callable[[], bool] = lambda: False):
    """Render until the live posts did not change during the render; return (key, files)."""
    key = source_key()
    for _attempt in range(RENDER_ATTEMPTS):
        try:
            files = render_site(should_stop=should_stop)
        except _PageError as exc:
            # A post taken down mid-render answers 404; the key shows whether that is why.
            if exc.status != 404 or source_key() == key:
                raise
            files = None
        after = source_key()
        if files is not None and after == key:
            return key, files
        key = after
    raise ExportError(
        f"the live posts changed during each of {RENDER_ATTEMPTS} renders; trying again later"
    )


# --- writing and switching ----------------------------------------------------------------


def _write_files(folder: Path, files: dict[str, bytes]) -> None:
    base = folder.resolve()
    for relative, content in files.items():
        path = (folder / relative).resolve()
        if not path.is_relative_to(base):
            raise ExportError(f"refusing to write {relative!r} outside the build folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _write_manifest(folder: Path, manifest: dict) -> None:
    """Write the manifest atomically (it is rewritten in a live build when only the key moved)."""
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
    force: bool = False,
    should_stop: Callable[[], bool] = lambda: False,
) -> ExportResult:
    """Export the live site to ``root`` unless it is unchanged; return what happened.

    ``force`` skips the cheap check on the live posts (a deploy may have changed templates)
    but still compares the rendered output with the live build's.
    """
    root = Path(root)
    current = root / CURRENT
    if current.exists() and not current.is_symlink():
        raise ExportError(f"{current} is a real folder; move it away so it can be a symlink")
    manifest = read_manifest(root)
    live = _live_build(root)
    if not force and manifest and manifest.get("source_key") == source_key():
        return ExportResult(changed=False, reason="the live posts did not change", build=live)
    key, files = render_consistent(should_stop=should_stop)
    digest = content_hash(files)
    if manifest and live is not None and manifest.get("content_hash") == digest:
        if manifest.get("source_key") != key:
            _write_manifest(live, {**manifest, "source_key": key})
        return ExportResult(
            changed=False,
            reason="the rendered site is the same",
            build=live,
            content_hash=digest,
            files=len(files),
        )
    builds_dir = root / BUILDS
    builds_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    build = builds_dir / f"{stamp}-{digest[:12]}"
    temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
    try:
        temporary.mkdir()
        _write_files(temporary, files)
        _write_manifest(
            temporary,
            {
                "version": RENDER_VERSION,
                "source_key": key,
                "content_hash": digest,
                "files": sorted(files),
                "created_at": datetime.now(UTC).isoformat(),
            },
        )
        if should_stop():
            raise ExportError("stopped before the export finished; the live site is unchanged")
        temporary.rename(build)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    switch_current(root, build)
    clean_up(root, keep=keep)
    return ExportResult(
        changed=True, reason="exported", build=build, content_hash=digest, files=len(files)
    )


_unset_logged = False


@plugin_job(
    plugin="static_export",
    name="build",
    schedule=every_minutes(1),
    max_duration=timedelta(minutes=10),
)
def build(ctx: JobContext) -> None:
    """Every minute, export the live site to ``INSTATIC_EXPORT_ROOT`` if it changed.

    A manual run ("run now") re-renders even if no post changed, e.g. after a deploy that
    changed templates; the live build is still only replaced if the output differs.
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
        force=ctx.trigger == JobRun.Trigger.MANUAL,
        should_stop=ctx.should_stop,
    )
    if result.changed:
        ctx.logger.info("exported %d file(s) to %s", result.files, result.build)
    else:
        ctx.logger.debug("static export skipped: %s", result.reason)
