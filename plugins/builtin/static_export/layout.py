"""The names in an export folder, and the path rules every file of a build follows.

One place for them: the writer, the clean-up and ``exportsite`` must agree on what the
export named, since the clean-up deletes only those names (an operator's own folder in
``builds/`` is left alone).
"""

import os
import re
from datetime import timedelta

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
#: Temporaries older than this are an export's that crashed (a younger one may be in use).
STALE_TEMP_AGE = timedelta(hours=1)
#: Rows per fetch while streaming the live posts, and files between two ``should_stop`` checks.
CHUNK = 2000
#: Posts fetched with their bodies per query when rendering, and held at once while rendering.
RENDER_BATCH = 100
RENDER_CHUNK = 20
#: The ``strftime`` of a build's stamp (``BUILD_NAME``, ``SPARE_NAME``): sorts by time.
STAMP_FORMAT = "%Y%m%dT%H%M%S%fZ"


class ExportError(Exception):
    """The export could not produce a build; the live site is left as it was."""


def stopped() -> ExportError:
    """Return the error that ends an export asked to stop (the job's ``should_stop``)."""
    return ExportError("stopped before the export finished; the live site is unchanged")


def normal(relative: str) -> str:
    """Return ``relative`` normalized, refusing a path that leaves the build folder.

    A string check, not Path.resolve(): that costs a system call per path component, per
    file, and the names come from URLs, not from symlinks inside the build.
    """
    normalized = os.path.normpath(relative)
    if os.path.isabs(normalized) or normalized == ".." or normalized.startswith("../"):
        raise ExportError(f"refusing to write {relative!r} outside the build folder")
    return normalized


def make_parent(folder: str, normalized: str) -> None:
    """Make the folder ``normalized`` (a file's path in ``folder``) goes in, if it is missing.

    One ``mkdir`` per file in the common case (a post's own folder), not one per component.
    """
    parent = os.path.dirname(normalized)
    if parent:
        try:
            os.mkdir(os.path.join(folder, parent))
        except FileExistsError:
            pass
        except FileNotFoundError:
            os.makedirs(os.path.join(folder, parent), exist_ok=True)
