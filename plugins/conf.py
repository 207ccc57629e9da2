"""The plugins app's settings, read lazily from Django settings with ``INSTATIC_`` names.

Like :mod:`coordination.conf`: defaults and meanings live here, and tests override any of them
with ``override_settings(INSTATIC_EXPORT_ROOT=...)``. The run-history retention reads
``INSTATIC_RUN_RETENTION`` through :mod:`coordination.conf` (the ledger is the engine's).
"""

from coordination.conf import AppSettings

_DEFAULTS = {
    # Folder the static export writes to (``builds/`` and the ``current`` symlink inside it).
    # Empty: the static export job does nothing.
    "EXPORT_ROOT": "",
    # How many finished builds the static export keeps (the live one included); at least 2, so
    # a reader that resolved ``current`` just before a switch can finish reading.
    "EXPORT_KEEP": 2,
    # Scheme and host the export renders as (absolute URLs in the feed), e.g.
    # ``https://blog.example.com``. Empty: https and the first entry of ``ALLOWED_HOSTS``.
    "EXPORT_BASE_URL": "",
}


settings = AppSettings(_DEFAULTS)
