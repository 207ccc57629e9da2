"""System checks for the plugins app's settings (``manage.py check``, ``runscheduler``)."""

from pathlib import Path
from urllib.parse import urlsplit

from django.core import checks

from plugins.conf import settings


def register() -> None:
    checks.register(check_export_settings, "plugins")


def check_export_settings(app_configs=None, **kwargs):
    errors = []
    root = settings.EXPORT_ROOT
    if root:
        path = Path(root)
        if not path.is_absolute():
            errors.append(
                checks.Error(
                    f"INSTATIC_EXPORT_ROOT={root!r} is not an absolute path.",
                    hint="Give the folder the static export writes to as an absolute path.",
                    id="plugins.E001",
                )
            )
        elif (path / "current").exists() and not (path / "current").is_symlink():
            errors.append(
                checks.Error(
                    f"{path / 'current'} is a real folder or file; the static export switches "
                    "builds by replacing a symlink of that name.",
                    hint="Move it away; the export creates the symlink itself.",
                    id="plugins.E002",
                )
            )
    base = settings.EXPORT_BASE_URL
    if base and (urlsplit(base).scheme not in ("http", "https") or not urlsplit(base).netloc):
        errors.append(
            checks.Error(
                f"INSTATIC_EXPORT_BASE_URL={base!r} is not an http(s) URL.",
                hint="Give the scheme and host the static export renders as, e.g. "
                "https://blog.example.com.",
                id="plugins.E004",
            )
        )
    keep = settings.EXPORT_KEEP
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 2:
        errors.append(
            checks.Error(
                f"INSTATIC_EXPORT_KEEP={keep!r} must be an integer of at least 2.",
                hint="The live build and the one before it are kept, so a reader that resolved "
                "the old build just before a switch can finish reading it.",
                id="plugins.E003",
            )
        )
    return errors
