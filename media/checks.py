"""System checks: images can be stored where the settings say."""

import os
from pathlib import Path

from django.core.checks import Error
from django.core.files.storage import FileSystemStorage, storages


def check_storage(app_configs=None, **kwargs) -> list[Error]:
    """Refuse a filesystem storage whose folder cannot be made or written to.

    Found at start-up rather than at an editor's first upload. Other storages (S3 through
    django-storages) are checked by their own library when used.
    """
    try:
        storage = storages["default"]
    except Exception as exc:
        return [
            Error(
                f"the default storage cannot be made: {exc}",
                hint="Check STORAGES['default'] (docs/media.md); for S3, install "
                "django-storages[s3] and set the INSTATIC_MEDIA_S3_* variables.",
                id="media.E001",
            )
        ]
    if not isinstance(storage, FileSystemStorage):
        return []
    root = Path(storage.location)
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        return [
            Error(
                f"images are stored in {root}, which cannot be written to",
                hint="Set INSTATIC_MEDIA_ROOT to a folder this process may write to, or "
                "give it that permission.",
                id="media.E002",
            )
        ]
    return []
