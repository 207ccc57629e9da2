"""Task rows of Instatic's queue as the ledger's retention sees them: deleted with their runs.

Every run on workers leaves a django-tasks-db row (about 8,600 a day on an idle site with
plugin jobs on workers); nothing else deletes them. Here only the task rows are touched,
found by the run id their arguments carry, so the run ledger's retention can call this
without knowing the tasks backend.
"""

from coordination.workers.meeting import BACKEND_ALIAS, QUEUE_NAME


def delete_tasks_of_runs(run_ids: list[int]) -> int:
    """Delete the task rows of Instatic's queue that carry any of ``run_ids``; return how
    many (0 without the database backend installed)."""
    if not run_ids:
        return 0
    try:
        from django_tasks_db.models import DBTaskResult
    except ImportError:  # another tasks backend: its rows are not in this database
        return 0
    return (
        DBTaskResult.objects.filter(queue_name=QUEUE_NAME, backend_name=BACKEND_ALIAS)
        .filter(args_kwargs__args__0__in=list(run_ids))
        .delete()[0]
    )
