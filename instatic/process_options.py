"""Check a container process's settings before it starts: ``process_options web``.

The entry scripts (``deploy/web.sh``, ``deploy/scheduler.sh``) run this first, so a bad value
stops the container with the same one line as ``manage.py`` gives and status 1, before gunicorn
starts (which would print a traceback for a bad ``WEB_CONCURRENCY`` and one per worker for a
bad Django setting) or ``runscheduler`` parses its options. It checks the variables the script
itself reads, with the parsers of :mod:`instatic.environment`, then imports the Django settings,
which check every other one.
"""

import os
import sys

from instatic.environment import parse_bind_address, parse_int, parse_port

#: The variables each entry script reads itself, checked as the script's defaults say.
PROCESS_OPTIONS = {
    "web": [
        (parse_port, "PORT", 8000),
        (parse_bind_address, "INSTATIC_WEB_ADDRESS", "0.0.0.0"),
        (parse_int, "WEB_CONCURRENCY", 2, {"minimum": 1}),
        (parse_int, "GUNICORN_TIMEOUT", 30),
        (parse_int, "GUNICORN_GRACEFUL_TIMEOUT", 20),
    ],
    "scheduler": [
        (parse_port, "INSTATIC_METRICS_PORT", 9100),
        (parse_bind_address, "INSTATIC_METRICS_ADDRESS", "0.0.0.0"),
    ],
}


def check(kind: str, environ) -> None:
    """Raise :class:`~instatic.environment.ConfigurationError` for a bad option of ``kind``."""
    for parse, name, default, *kwargs in PROCESS_OPTIONS[kind]:
        parse(name, environ.get(name), default, **(kwargs[0] if kwargs else {}))


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in PROCESS_OPTIONS:
        sys.stderr.write(f"usage: python -m instatic.process_options {'|'.join(PROCESS_OPTIONS)}\n")
        return 2
    check(argv[0], os.environ)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "instatic.settings")
    __import__(os.environ["DJANGO_SETTINGS_MODULE"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
