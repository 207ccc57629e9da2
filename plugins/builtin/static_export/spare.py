"""The spare build: a hard-linked copy of the new live build for the next export to rewrite.

Without a build to rewrite in place (fewer than ``keep`` builds on disk: a site's first
export), the next export would make a folder per post and hard-link every page into it; the
spare moves that cost to just after a switch, when the new site already serves.
"""

import json
import logging
import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

from plugins.builtin.static_export.layout import (
    CHUNK,
    MANIFEST,
    SPARE,
    STAMP_FORMAT,
    ExportError,
    make_parent,
    normal,
)
from plugins.builtin.static_export.manifest import build_files
from plugins.builtin.static_export.rotation import builds_in, spares_in

# The package's logger: every line of the export is on one name, whichever module writes it.
logger = logging.getLogger(__package__)


def prepare_spare(builds_dir: Path, build: Path, *, should_stop) -> Path | None:
    """Hard-link a copy of the complete ``build`` as the next export's starting point.

    At 100,000 posts a new folder tree is most of a one-change export's time; made now,
    after the switch (the new build already serves), the next export rewrites the spare in
    place instead. The copy follows the build's lists (a folder and a link per page, no
    folder read), into a temporary renamed ``.spare-...`` once complete. ``build`` is named
    by path: were it taken meanwhile (renamed to be rewritten, which a later export does
    before changing anything in it), the next link fails and no spare is left rather than a
    mixed one.
    """
    temporary = builds_dir / f".tmp-{uuid.uuid4().hex}"
    try:
        manifest_text = (build / MANIFEST).read_text()
        manifest = json.loads(manifest_text)
        temporary.mkdir()
        folder, source = str(temporary), str(build)
        for count, relative in enumerate(build_files(build, manifest), start=1):
            if count % CHUNK == 0 and should_stop():
                shutil.rmtree(temporary, ignore_errors=True)
                return None
            normalized = normal(relative)
            make_parent(folder, normalized)
            os.link(os.path.join(source, normalized), os.path.join(folder, normalized))
        if (build / MANIFEST).read_text() != manifest_text:
            raise ExportError(f"{build} changed while it was copied")
        stamp = datetime.now(UTC).strftime(STAMP_FORMAT)
        spare = builds_dir / f"{SPARE}{stamp}-{uuid.uuid4().hex[:8]}"
        temporary.rename(spare)
        return spare
    except (OSError, ValueError, KeyError, TypeError, ExportError) as exc:
        logger.warning("static export: no spare build for the next export: %s", exc)
        shutil.rmtree(temporary, ignore_errors=True)
        return None


def spare_if_needed(builds_dir: Path, build: Path, *, keep: int, should_stop) -> Path | None:
    """Prepare a spare copy of the new live ``build`` when the next export would have none.

    The next export rewrites the oldest of ``keep`` builds in place; with fewer builds on
    disk and no spare it would make a whole new folder tree. Returns the spare, if made.
    """
    if len(builds_in(builds_dir)) >= keep or spares_in(builds_dir):
        return None
    started = time.monotonic()
    spare = prepare_spare(builds_dir, build, should_stop=should_stop)
    if spare is not None:
        logger.info(
            "static export: prepared the spare build %s for the next export in %.2f s",
            spare.name,
            time.monotonic() - started,
        )
    return spare
