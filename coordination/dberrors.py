"""Turn "cannot reach the database" into one clear line instead of a traceback."""

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, OperationalError, connections


def describe_database(using: str = DEFAULT_DB_ALIAS) -> str:
    """Return where the database is, without the password (for error messages)."""
    s = settings.DATABASES[using]
    engine = s["ENGINE"].rsplit(".", 1)[-1]
    if engine == "sqlite3":
        return f"sqlite:///{s['NAME']}"
    host = s.get("HOST") or "localhost"
    port = f":{s['PORT']}" if s.get("PORT") else ""
    return f"{engine}://{host}{port}/{s.get('NAME', '')}"


def cannot_connect_message(exc: BaseException, using: str = DEFAULT_DB_ALIAS) -> str:
    reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return (
        f"cannot connect to the database at {describe_database(using)} (DATABASE_URL): {reason}. "
        "Check that the server is running and reachable and that DATABASE_URL is right."
    )


def ensure_connection(using: str = DEFAULT_DB_ALIAS) -> str | None:
    """Return an error message if the database cannot be reached, else ``None``."""
    try:
        connections[using].ensure_connection()
    except OperationalError as exc:
        return cannot_connect_message(exc, using)
    return None
