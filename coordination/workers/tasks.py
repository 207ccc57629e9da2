"""The task a queued run travels as, through Django's tasks interface.

Its arguments are the run's ledger id and attempt; whichever worker receives it (Instatic's
own worker processes, or the worker of another django-tasks backend) executes it through
``execution.execute``, where the ledger decides whether it starts.
"""

from django_tasks import task

#: The queue Instatic's runs go to, so Instatic's workers take only its own tasks.
QUEUE_NAME = "instatic-runs"


@task(queue_name=QUEUE_NAME)
def run_queued(run_id: int, attempt: int) -> str:
    """Execute attempt ``attempt`` of the queued run ``run_id``; return what became of it."""
    from coordination.workers.process import current_process

    return current_process().execute(run_id, attempt).outcome
