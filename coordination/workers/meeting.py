"""The names a leader, its worker pools and their processes meet by: the task queue runs
travel on, the tasks backend it belongs to, the PostgreSQL channel idle workers listen on,
and a worker process's node name.

Below the leader's side (``queueing``, ``sweep``), the task (``tasks``) and the worker
process (``process``), so each of them takes the names from here and none imports another
for them.
"""

#: The queue Instatic's runs go to, so Instatic's workers take only its own tasks.
QUEUE_NAME = "instatic-runs"

#: The ``TASKS`` backend alias the runs' task is declared on (django-tasks' default).
BACKEND_ALIAS = "default"

#: The import path of the one task a worker process executes (``tasks.run_queued``): a task
#: row with another ``task_path`` is refused without importing it.
RUN_TASK_PATH = "coordination.workers.tasks.run_queued"

#: The PostgreSQL channel idle worker processes listen on: a ``NOTIFY`` on it says that runs
#: were queued.
WORKERS_CHANNEL = "instatic_workers"


def worker_node_name(node_name: str, index: int) -> str:
    """Return the node name of worker process ``index`` of node ``node_name``."""
    return f"{node_name}/worker-{index}"[:200]
