"""Turn ``DATABASE_URL`` into a Django ``DATABASES`` entry, or stop with one clear line.

Settings call :func:`database_from_url`; a bad value must not produce a wall of traceback
from deep inside Django, so the error is a :class:`~instatic.environment.ConfigurationError`
whose one line names the variable, what is wrong and the forms Instatic accepts.

Parsing only looks: nothing is created here (``manage.py check`` creates nothing). The folder
of an SQLite file is created by the first connection to it (:mod:`instatic.sqlite3`).
"""

import importlib
import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import dj_database_url

from instatic.environment import ConfigurationError

ACCEPTED_SCHEMES = ("postgres", "postgresql", "sqlite", "mysql")
_ENGINES = {
    "postgres": "django.db.backends.postgresql",
    "postgresql": "django.db.backends.postgresql",
    "sqlite": "instatic.sqlite3",
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


#: What each SQLite option in the URL's query may be, and how it is read.
SQLITE_OPTION_KINDS = {
    "timeout": ("a number of seconds of at least 0", "timeout=20"),
    "transaction_mode": ("DEFERRED, IMMEDIATE or EXCLUSIVE", "transaction_mode=IMMEDIATE"),
    "init_command": ("SQL run on each new connection", "init_command=PRAGMA%20foreign_keys%3DON"),
}


class DatabaseUrlError(ConfigurationError):
    """A ``DATABASE_URL`` Instatic cannot use; exits the process with its message."""


def _scheme(url: str) -> str:
    return url.partition("://")[0] if "://" in url else ""


def _fail(url: str, problem: str) -> DatabaseUrlError:
    scheme = _scheme(url) or "(none)"
    accepted = ", ".join(f"{s}://" for s in ACCEPTED_SCHEMES)
    return DatabaseUrlError(
        f"DATABASE_URL is invalid ({problem}; scheme {scheme!r}). "
        f"Use one of {accepted}, e.g. postgres://user:pass@host:5432/instatic "
        f"or sqlite:///var/instatic.sqlite3, or unset it for the default SQLite file."
    )


def _in_memory(url: str) -> DatabaseUrlError:
    return DatabaseUrlError(
        f"DATABASE_URL={url!r} names no SQLite file, so it would be an in-memory database that "
        "the scheduler and the other processes cannot see and that is lost at exit. Write "
        "sqlite:///relative/path.sqlite3 (three slashes: relative to the working directory) "
        "or sqlite:////absolute/path.sqlite3 (four), or unset it for var/instatic.sqlite3."
    )


def _require_mysql_driver() -> None:
    """Stop with one line if the MySQL driver is missing (Django would print a traceback)."""
    try:
        importlib.import_module("MySQLdb")
    except ImportError:
        raise DatabaseUrlError(
            "DATABASE_URL is a mysql:// URL but its driver, mysqlclient, is not installed: "
            "pip install --require-hashes -r requirements-mysql.txt (it builds against the "
            "client headers: apt-get install libmariadb-dev pkg-config), or use postgres:// "
            "or sqlite:///."
        ) from None


def _check_sqlite_file(path: Path, *, variable: str) -> None:
    """Stop with one line unless an SQLite file at ``path`` can be created or written.

    SQLite writes its ``-wal`` and ``-shm`` files (and Instatic its lock file) beside the
    database, so the folder itself must be writable, not only the file. A folder that does not
    exist yet is fine when the nearest one that does can be written: the first connection
    creates it.
    """
    folder = path.parent
    try:
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        exists = path.exists()
    except OSError as exc:  # a name too long for the filesystem, a loop of links
        raise DatabaseUrlError(
            f"cannot use the SQLite database {path} ({exc.strerror}); point {variable} at a "
            "writable folder."
        ) from None
    if not folder.is_dir():
        problem = f"{folder} is a file, not a folder"
    elif not os.access(folder, os.W_OK | os.X_OK):
        problem = f"the folder {folder} is not writable"
    elif exists and not os.access(path, os.R_OK | os.W_OK):
        problem = "the file is not writable"
    else:
        return
    raise DatabaseUrlError(
        f"cannot create the SQLite database {path} ({problem}); point {variable} at a "
        "writable folder (or fix its permissions)."
    )


def _sqlite_options(url: str, options: dict) -> dict:
    """Return the URL's SQLite options checked and typed, over Instatic's defaults."""
    checked = dict(SQLITE_OPTIONS)
    for key, value in options.items():
        text = str(value)
        if key not in SQLITE_OPTION_KINDS:
            accepted = ", ".join(SQLITE_OPTION_KINDS)
            raise DatabaseUrlError(
                f"DATABASE_URL has the SQLite option {key!r}, which Instatic does not pass on; "
                f"use {accepted}, e.g. sqlite:///var/instatic.sqlite3?timeout=20"
            )
        if key == "timeout":
            try:
                value = float(text)
            except ValueError:
                value = -1.0
            if not 0 <= value < float("inf"):
                raise _bad_option(key, text)
        elif key == "transaction_mode":
            value = text.upper()
            if value not in ("DEFERRED", "IMMEDIATE", "EXCLUSIVE"):
                raise _bad_option(key, text)
        checked[key] = value
    return checked


def _bad_option(key: str, text: str) -> DatabaseUrlError:
    kind, example = SQLITE_OPTION_KINDS[key]
    return DatabaseUrlError(
        f"DATABASE_URL has the SQLite option {key}={text!r}, which is not {kind}; use e.g. "
        f"DATABASE_URL=sqlite:///var/instatic.sqlite3?{example}"
    )


def _split_hosts(url: str) -> tuple[str, list[tuple[str, str]]]:
    """Return ``url`` with one host left in it, and every ``(host, port)`` it listed.

    libpq's multi-host form, ``postgres://u:p@h1:5432,h2:5433/db?target_session_attrs=
    read-write``, names a primary and its standbys: libpq tries them in order and keeps the
    first that accepts writes, which is how a node finds the new primary after a failover.
    dj-database-url cannot parse it, so the host list is taken out here and put back into
    ``HOST``/``PORT`` as the comma-separated lists libpq accepts. A host without a port gets
    5432, so the two lists stay the same length.
    """
    parts = urlsplit(url)
    userinfo, _, hostlist = parts.netloc.rpartition("@")
    if "," not in hostlist:
        return url, []
    hosts = []
    for entry in hostlist.split(","):
        if entry.startswith("["):  # an IPv6 address: [::1]:5432
            host, _, port = entry[1:].partition("]")
            port = port.removeprefix(":")
        else:
            host, _, port = entry.partition(":")
        if not host or (port and not port.isdigit()):
            raise _fail(url, f"bad host {entry!r} in the host list")
        hosts.append((host, port or "5432"))
    first = f"{userinfo}@{hostlist.split(',')[0]}" if userinfo else hostlist.split(",")[0]
    return urlunsplit(parts._replace(netloc=first)), hosts


def database_from_url(url: str | None, *, default_sqlite_path: Path) -> dict:
    """Return the ``DATABASES['default']`` dict for ``url`` (``None``: the default SQLite file)."""
    if url is None:
        _check_sqlite_file(default_sqlite_path, variable="INSTATIC_VAR_DIR")
        return {
            "ENGINE": _ENGINES["sqlite"],
            "NAME": str(default_sqlite_path),
            "OPTIONS": dict(SQLITE_OPTIONS),
        }
    if not url.strip():
        raise DatabaseUrlError(
            "DATABASE_URL is set but empty; unset it for the default SQLite file "
            "(INSTATIC_VAR_DIR/instatic.sqlite3) or give a URL, e.g. "
            "DATABASE_URL=postgres://user:pass@host:5432/instatic"
        )
    scheme = _scheme(url)
    if scheme not in ACCEPTED_SCHEMES:
        raise _fail(url, "unsupported scheme")
    try:
        single_host_url, hosts = _split_hosts(url)
        config = dj_database_url.parse(single_host_url, engine=_ENGINES[scheme])
    except DatabaseUrlError:
        raise
    except Exception as exc:  # urllib and dj-database-url raise assorted errors for bad URLs
        raise _fail(url, f"cannot parse it: {exc}") from None
    if hosts and _ENGINES[scheme] != _ENGINES["postgres"]:
        raise _fail(url, "a list of hosts works with postgres:// only")
    if scheme != "sqlite" and not config.get("NAME"):
        raise _fail(url, "no database name in the path")
    if hosts:
        config["HOST"] = ",".join(host for host, _ in hosts)
        config["PORT"] = ",".join(port for _, port in hosts)
    if scheme == "mysql":
        _require_mysql_driver()
    if scheme == "sqlite":
        name = config.get("NAME") or ""
        # sqlite://relative.db parses as a host with no path: dj-database-url makes that
        # ":memory:", which no other process can share.
        if urlsplit(url).netloc or name in ("", ":memory:"):
            raise _in_memory(url)
        if "\0" in name:
            raise _fail(url, "a NUL character in the file name")
        _check_sqlite_file(Path(name), variable="DATABASE_URL")
        config["OPTIONS"] = _sqlite_options(url, config.get("OPTIONS") or {})
    return config


def parse_database_url(name: str, value: str | None, *, default_sqlite_path: Path) -> dict:
    """Return the database of ``DATABASE_URL`` (``name``), as the settings' other parsers do."""
    assert name == "DATABASE_URL", name
    return database_from_url(value, default_sqlite_path=default_sqlite_path)
