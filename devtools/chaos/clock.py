"""Times on the soak's timeline: database times as epoch seconds, and stamped log lines."""

import time
from datetime import UTC, datetime


def db_epoch(value: datetime) -> float:
    """Epoch seconds of a database time (MariaDB's are naive, in UTC like Django stores them)."""
    return utc(value).timestamp()


def clock_text(epoch: float) -> str:
    """``HH:MM:SS.s`` of an epoch time, as the soak's log lines show it."""
    return time.strftime("%H:%M:%S", time.localtime(epoch)) + f".{int(epoch % 1 * 10)}"


def log(message: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", flush=True)


def utc(value: datetime) -> datetime:
    """A database time as an aware UTC datetime (MariaDB's are naive, in UTC), to compare."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)
