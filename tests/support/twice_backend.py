"""A django-tasks backend that delivers every task twice, at once (an at-least-once queue).

Stands in for a broker-backed backend (RQ, a Celery bridge) that may deliver a task again
after a worker took it: the ledger must still start each run once. Each delivery's return
value is kept in ``DELIVERIES``.
"""

from django_tasks.backends.immediate import ImmediateBackend

DELIVERIES: list = []


class TwiceBackend(ImmediateBackend):
    def enqueue(self, task, args, kwargs):
        first = super().enqueue(task, args, kwargs)
        second = super().enqueue(task, args, kwargs)
        DELIVERIES.extend([first.return_value, second.return_value])
        return first
