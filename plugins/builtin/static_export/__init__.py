"""Static export: the live public site as static files, incremental, switched in atomically.

The plugin ``static_export``: its job (``static_export.build``, below) and the names
``exportsite`` and plugin authors use. What the files are and how an export behaves is in
docs/plugins.md ("``static_export.build``"); how it stays cheap at 100,000 posts, and which
module does what, in docs/architecture.md ("The static export at 100,000 posts").
"""

from datetime import timedelta
from pathlib import Path

from coordination.models import JobRun
from plugins.builtin.static_export.export import ExportResult, export_site
from plugins.builtin.static_export.layout import (
    BUILD_NAME,
    CURRENT,
    MANIFEST,
    POSTS_MANIFEST,
    ROOT_MARKER,
    STALE_TEMP_AGE,
    ExportError,
)
from plugins.builtin.static_export.manifest import read_manifest
from plugins.builtin.static_export.rotation import claim_root, clean_up, switch_current
from plugins.conf import settings
from plugins.sdk import JobContext, every_minutes, plugin_job

__all__ = [
    "BUILD_NAME",
    "CURRENT",
    "MANIFEST",
    "POSTS_MANIFEST",
    "ROOT_MARKER",
    "STALE_TEMP_AGE",
    "ExportError",
    "ExportResult",
    "build",
    "claim_root",
    "clean_up",
    "export_site",
    "read_manifest",
    "switch_current",
]

_unset_logged = False


@plugin_job(
    plugin="static_export",
    name="build",
    schedule=every_minutes(1),
    max_duration=timedelta(minutes=10),
    # A full export of a big site takes minutes of CPU: on a worker process, not the leader.
    run_on="workers",
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
