"""Rotation of the builds: which folder an export writes over, the switch, and the clean-up.

The new build goes live by renaming a fresh symlink over ``current`` (one atomic
``rename(2)``); the clean-up keeps the newest ``keep`` builds and deletes only names the
export gave; the build it would delete next is the one the next export rewrites in place.
"""

import json
import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path

from plugins.builtin.static_export.folder import Build
from plugins.builtin.static_export.keys import RENDER_VERSION
from plugins.builtin.static_export.layout import (
    BUILD_NAME,
    BUILDS,
    CURRENT,
    LINK_NAME,
    MANIFEST,
    ROOT_MARKER,
    SPARE_NAME,
    STALE_TEMP_AGE,
    TEMPORARY_NAME,
    ExportError,
)

# The package's logger: every line of the export is on one name, whichever module writes it.
logger = logging.getLogger(__package__)


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


def switch_current(root: Path, build: Path) -> None:
    """Point ``root/current`` at ``build`` in one atomic rename of a fresh symlink."""
    link = root / f".{CURRENT}-{uuid.uuid4().hex}"
    os.symlink(os.path.relpath(build, root), link)
    try:
        os.replace(link, root / CURRENT)
    except OSError:
        link.unlink(missing_ok=True)
        raise


def live_build(root: Path) -> Path | None:
    """Return the folder ``current`` points at, or None when there is no live build."""
    try:
        return (root / CURRENT).resolve(strict=True)
    except OSError:
        return None


def clean_up(root: Path, *, keep: int) -> list[Path]:
    """Delete all but the newest ``keep`` builds (never the live one) and stale temporaries."""
    builds_dir = root / BUILDS
    if not builds_dir.is_dir():
        return []
    live = live_build(root)
    builds = builds_in(builds_dir)
    removed = []
    for build in builds[: max(0, len(builds) - keep)]:
        if live is not None and build.resolve() == live:
            continue
        shutil.rmtree(build, ignore_errors=True)
        removed.append(build)
    # A spare is taken only while fewer than ``keep`` builds exist: beyond that, or a second
    # one (two exports at once), it would never be used.
    spares = spares_in(builds_dir)
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


def builds_in(builds_dir: Path) -> list[Path]:
    """Return the builds in ``builds_dir``, oldest first (temporaries, spares and any
    folder the export did not name aside)."""
    return _named(builds_dir, BUILD_NAME)


def spares_in(builds_dir: Path) -> list[Path]:
    """Return the spare builds in ``builds_dir``, oldest first (normally none or one)."""
    return _named(builds_dir, SPARE_NAME)


def recycle(
    root: Path, *, keep: int, live: Path | None, base: Path | None, fingerprint: str
) -> Build | None:
    """Take the build the clean-up deletes once this export is live, to write the new one over.

    With ``keep`` builds on disk, the oldest one that is not live goes when the new build
    switches in; with fewer, the spare build an earlier export prepared
    (``spare.prepare_spare``) is taken instead. Rewritten in place, only what changed since
    it was made is touched: no folder of 100,000 hard links to make, none to delete. Its
    pages are kept as they are only when it was rendered as this export renders (same
    fingerprint, and not a full export); otherwise each is replaced, still without making or
    deleting its folders. It leaves ``builds/`` (renamed to a temporary, the clean-up's age
    check reset) before anything in it changes. None when there is no such build.
    """
    builds_dir = root / BUILDS
    builds = builds_in(builds_dir)
    old = [p for p in builds if live is None or p.resolve() != live]
    if len(builds) >= keep and old:
        candidate = old[0]
    else:
        spares = spares_in(builds_dir)
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
    return Build(
        temporary,
        base,
        recycled=True,
        trusted=base is not None and manifest.get("fingerprint") == fingerprint,
        small=manifest.get("small", []),
        lists=manifest["lists"],
        name=candidate.name,
    )
