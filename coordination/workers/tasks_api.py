"""Django's tasks interface, wherever this Django has it: built in from Django 6.0
(``django.tasks``), the ``django-tasks`` package before. django-tasks-db decides the same way
(its ``compat``), so a task declared here meets the backend that runs it."""

from importlib.util import find_spec

if find_spec("django.tasks"):
    from django.tasks import task
    from django.tasks.exceptions import InvalidTask as InvalidTaskError
else:
    from django_tasks import task
    from django_tasks.exceptions import InvalidTaskError

__all__ = ["InvalidTaskError", "task"]
