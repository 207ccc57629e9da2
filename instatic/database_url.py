"""Turn ``DATABASE_URL`` into a Django ``DATABASES`` entry, or stop with one clear line.

Settings call :func:`database_from_url`; a bad value must not produce a wall of traceback
from deep inside Django, so the error is a :class:`SystemExit` carrying a message that names
the variable, the scheme it saw and the schemes Instatic accepts.
"""

from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url

ACCEPTED_SCHEMES = ("postgres", "postgresql", "sqlite", "mysql")
_ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "sqlite": "django.db.backends.sqlite3",
    "mysql": "django.db.backends.mysql",
}

# Several processes share one SQLite file (web + scheduler): WAL lets readers run beside the
# writer, and IMMEDIATE transactions take the write lock up front, so a read-then-write
# transaction (publishing due posts) cannot interleave with another writer.
SQLITE_OPTIONS = {
    "timeout": 20,
    "transaction_mode": "IMMEDIATE",
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
}


class DatabaseUrlError(SystemExit):
    """A ``DATABASE_URL`` Instatic cannot use; exits the process with its message."""


def _fail(url: str, problem: str) -> DatabaseUrlError:
    scheme = urlsplit(url).scheme or "(none)"
    accepted = ", ".join(f"{s}://" for s in ACCEPTED_SCHEMES)
    return DatabaseUrlError(
        f"DATABASE_URL is invalid ({problem}; scheme {scheme!r}). "
        f"Use one of {accepted}, e.g. postgres://user:pass@host:5432/instatic "
        f"or sqlite:///var/instatic.sqlite3, or unset it for the default SQLite file."
    )


def database_from_url(url: str | None, *, default_sqlite_path: Path) -> dict:
    """Return the ``DATABASES['default']`` dict for ``url`` (``None`` or empty: SQLite file)."""
    if not url:
        default_sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": _ENGINES["sqlite"],
            "NAME": str(default_sqlite_path),
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    scheme = urlsplit(url).scheme
    if scheme not in ACCEPTED_SCHEMES:
        raise _fail(url, "unsupported scheme")
    try:
        config = dj_database_url.parse(url, engine=_ENGINES[scheme])
    except Exception as exc:  # dj-database-url raises assorted errors for malformed URLs
        raise _fail(url, f"cannot parse it: {exc}") from None
    if scheme != "sqlite" and not config.get("NAME"):
        raise _fail(url, "no database name in the path")
    if scheme == "sqlite":
        name = config.get("NAME") or ""
        if name and name != ":memory:":
            Path(name).parent.mkdir(parents=True, exist_ok=True)
        options = config.setdefault("OPTIONS", {})
        for key, value in SQLITE_OPTIONS.items():
            options.setdefault(key, value)
    return config
