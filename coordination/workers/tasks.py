"""The task a queued run travels as, through Django's tasks interface.

Its arguments are the run's ledger id and attempt; whichever worker receives it (Instatic's
own worker processes, or the worker of another django-tasks backend) executes it through
``execution.execute``, where the ledger decides whether it starts.
"""

from django.core.exceptions import ImproperlyConfigured

from coordination.workers.meeting import BACKEND_ALIAS, QUEUE_NAME
from coordination.workers.tasks_api import InvalidTaskError, task


def run_queued(run_id: int, attempt: int) -> str:
    """Execute attempt ``attempt`` of the queued run ``run_id``; return what became of it."""
    from coordination.workers.process import current_process

    return current_process().execute(run_id, attempt).outcome


try:
    run_queued = task(queue_name=QUEUE_NAME, backend=BACKEND_ALIAS)(run_queued)
except InvalidTaskError as exc:
    raise ImproperlyConfigured(
        f"Instatic queues the runs of jobs on workers on the task queue {QUEUE_NAME!r}, which "
        f"the TASKS['default'] backend refuses ({exc}). Add {QUEUE_NAME!r} to "
        "TASKS['default']['QUEUES'] (instatic/settings.py has the default)."
    ) from exc
