"""The test suite's ``flush``: it empties every table but the content types and permissions.

Every ``transaction=True`` test ends with a flush (Django's ``TransactionTestCase``). Django's
own empties every table, then sends ``post_migrate`` so that the content types and
permissions are written back: two thirds of a flush on PostgreSQL (160 of 240 ms) and nine
tenths on MariaDB (60 of 66 ms), for rows that the migrations wrote and no test changes. This
one leaves those two tables as they are and sends nothing. Only the test settings install it;
an interactive ``flush`` is Django's, whatever the settings.
"""

from django.core.management.color import no_style
from django.core.management.commands import flush
from django.db import connections

#: The tables the migrations fill and every test leaves as they are.
KEPT = frozenset({"django_content_type", "auth_permission"})


class Command(flush.Command):
    def handle(self, **options):
        if options["interactive"]:
            super().handle(**options)
            return
        connection = connections[options["database"]]
        tables = [
            table
            for table in connection.introspection.django_table_names(
                only_existing=True, include_views=False
            )
            if table not in KEPT
        ]
        connection.ops.execute_sql_flush(
            connection.ops.sql_flush(
                no_style(),
                tables,
                reset_sequences=options.get("reset_sequences", True),
                allow_cascade=options.get("allow_cascade", False),
            )
        )
