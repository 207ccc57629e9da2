"""The running job's identity for log lines: node, group, job, slot and run id.

The worker (``runner.py``) sets these in a context variable around the job call only, so every
log line written while the job runs — through ``ctx.logger`` or any library logger, with no
``extra=`` — can say which run wrote it, and no line outside a run claims to belong to one.
``instatic.logging.JSONFormatter`` reads them; record attributes (``extra=``) still win.

A context variable rather than a thread-local: each job thread sets its own, and a job that
uses ``contextvars.copy_context()`` (or asyncio) carries it into what it starts.
"""

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

FIELDS = ("node", "group", "job", "slot", "run_id")

_current: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "instatic_job_log_context", default=None
)


@contextmanager
def job_log_context(
    *, node: str, group: str, job: str, slot: datetime | None, run_id: int | None
) -> Iterator[None]:
    """Name the run that the code inside the ``with`` block logs for."""
    token = _current.set({"node": node, "group": group, "job": job, "slot": slot, "run_id": run_id})
    try:
        yield
    finally:
        _current.reset(token)


def current() -> dict:
    """Return the running job's fields (empty outside a job call)."""
    return _current.get() or {}
