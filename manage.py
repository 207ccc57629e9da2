#!/usr/bin/env python
"""Django's command-line utility for Instatic."""

import os
import sys


def main() -> None:
    # `manage.py test` runs the pytest suite, which has its own settings module.
    default = "tests.settings" if sys.argv[1:2] == ["test"] else "instatic.settings"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", default)
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
