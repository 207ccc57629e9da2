"""Names of a model's table and columns as this database quotes them, for the few statements
written as SQL (arrays and ``RETURNING`` that Django's ORM does not write)."""

from django.db import connection


def table(model) -> str:
    """Return ``model``'s table, quoted."""
    return connection.ops.quote_name(model._meta.db_table)


def column(model, field: str) -> str:
    """Return the column of ``model``'s ``field``, quoted."""
    return connection.ops.quote_name(model._meta.get_field(field).column)
