"""Django's ``migrate``, with a clear message when the database cannot be reached."""

from django.core.management.base import CommandError
from django.core.management.commands.migrate import Command as DjangoMigrate

from coordination.dberrors import ensure_connection


class Command(DjangoMigrate):
    def handle(self, *args, **options):
        problem = ensure_connection(options["database"])
        if problem:
            raise CommandError(problem)
        return super().handle(*args, **options)
