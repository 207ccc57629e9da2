"""Row locks the scheduler's selections take without waiting on anyone."""

from django.db import connection
from django.db.models import QuerySet


def skip_locked(queryset: QuerySet) -> QuerySet:
    """Lock the selected rows and skip rows other transactions hold, where the database can.

    PostgreSQL and MySQL support ``FOR UPDATE SKIP LOCKED``, so two replicas (or a replica and
    an editor) never wait on each other's rows. SQLite has no row locks: a write transaction
    holds the whole database, so the selection and the update cannot interleave with another
    writer there anyway.
    """
    if connection.features.has_select_for_update_skip_locked:
        return queryset.select_for_update(skip_locked=True)
    return queryset
