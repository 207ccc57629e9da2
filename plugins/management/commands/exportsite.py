"""``exportsite [DIR]``: write the public site once, for static hosting pipelines.

The same code as the static export plugin job (``plugins.builtin.static_export.export_site``)
and so the same layout and atomic switch of ``DIR/current``: a pipeline (or a web server)
reading ``current`` while this runs sees the complete old site or the complete new one. Like
the job it is incremental: only pages whose posts changed are rendered, the rest are linked
from the live build, and a change of the templates or of settings that shape the pages
renders everything. ``--full`` renders every page regardless (after a change the export cannot
see, such as a template tag's code); the live build is swapped only when something differs.
It can run beside the schedulers' own export job: each build is written to its own folder
first. It writes only into a new or empty folder or one an export made (marked by
``.instatic-export-root``), and deletes only builds it named itself.
"""

import os
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from coordination.dberrors import DATABASE_ERRORS, ensure_connection
from plugins.builtin import static_export
from plugins.conf import settings


class Command(BaseCommand):
    help = (
        "Write the public site once to DIR (default INSTATIC_EXPORT_ROOT) as static files: "
        "DIR/builds/<build>, made live by switching the DIR/current symlink atomically."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "dir",
            nargs="?",
            default=None,
            metavar="DIR",
            help="Folder to export to (created if missing); default INSTATIC_EXPORT_ROOT.",
        )
        parser.add_argument(
            "--keep",
            type=int,
            default=None,
            help="Builds kept on disk, the live one included (default INSTATIC_EXPORT_KEEP; "
            "at least 2).",
        )
        parser.add_argument(
            "--full",
            action="store_true",
            help="Render every page again instead of reusing unchanged ones from the live build.",
        )

    def handle(self, *args, **options):
        root = self._root(options["dir"])
        keep = options["keep"] if options["keep"] is not None else int(settings.EXPORT_KEEP)
        if keep < 2:
            raise CommandError(
                f"--keep {keep}: keep at least 2 builds (the live one and one before)."
            )
        problem = ensure_connection()
        if problem:
            raise CommandError(problem)
        try:
            result = static_export.export_site(root, keep=keep, full=options["full"])
        except (static_export.ExportError, OSError) as exc:
            raise CommandError(f"export to {root} failed: {_one_line(exc)}") from None
        except DATABASE_ERRORS as exc:
            raise CommandError(
                f"cannot read the posts: {_one_line(exc)} (has manage.py migrate run?)"
            ) from None
        if result.changed:
            self.stdout.write(
                self.style.SUCCESS(
                    f"exported {result.files} file(s) to {result.build} ({result.rendered} "
                    f"rendered, {result.reused} reused); "
                    f"{root / static_export.CURRENT} points at it"
                )
            )
        else:
            self.stdout.write(f"unchanged ({result.reason}); live build {result.build}")

    @staticmethod
    def _root(given: str | None) -> Path:
        """Return the export folder, created if missing; refuse one that cannot be used."""
        value = given if given is not None else settings.EXPORT_ROOT
        if not value:
            raise CommandError(
                "no folder to export to: give one (manage.py exportsite DIR) or set "
                "INSTATIC_EXPORT_ROOT."
            )
        root = Path(value).expanduser().absolute()
        if root.exists() and not root.is_dir():
            raise CommandError(f"{root} is not a folder.")
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CommandError(f"cannot create {root}: {exc.strerror or exc}.") from None
        if not os.access(root, os.W_OK | os.X_OK):
            raise CommandError(f"{root} is not writable by this user.")
        current = root / static_export.CURRENT
        if current.exists() and not current.is_symlink():
            raise CommandError(
                f"{current} is a real folder; move it away so the export can make it a symlink."
            )
        try:
            static_export.claim_root(root)
        except static_export.ExportError as exc:
            raise CommandError(f"{exc}.") from None
        return root


def _one_line(exc: BaseException) -> str:
    """Return the first line of an error's message (an OSError's without its traceback)."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
