"""Names of a model's table and columns as this database quotes them, for the few statements
written as SQL (arrays and ``RETURNING`` that Django's ORM does not write), and a batch's
values as one PostgreSQL array (:func:`among`)."""

from django.db import connection
from django.db.models.expressions import RawSQL
from django.db.models.sql import UpdateQuery


def table(model) -> str:
    """Return ``model``'s table, quoted."""
    return connection.ops.quote_name(model._meta.db_table)


def column(model, field: str) -> str:
    """Return the column of ``model``'s ``field``, quoted."""
    return connection.ops.quote_name(model._meta.get_field(field).column)


def update_sql(queryset, values: dict) -> tuple[str, tuple]:
    """Return the SQL and parameters of ``queryset.update(**values)`` without running it, for
    a statement that goes on from it (``RETURNING``, a ``WITH``)."""
    query = queryset.query.chain(UpdateQuery)
    query.add_update_values(values)
    query.annotations = {}
    return query.get_compiler(queryset.db).as_sql()


def among(values: list, sql_type: str):
    """Return the right-hand side of an ``__in`` filter on ``values`` (of PostgreSQL type
    ``sql_type``): on PostgreSQL one array parameter, elsewhere the list itself.

    A batch's hundreds of values as one placeholder each cost Django and psycopg milliseconds
    per statement (a worker's next batch, a leader's burst waits for it); one array nothing.
    """
    if connection.vendor == "postgresql":
        return RawSQL(f"SELECT unnest(%s::{sql_type}[])", (list(values),))
    return list(values)
