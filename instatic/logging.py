"""JSON log lines for log shippers: ``INSTATIC_LOG_FORMAT=json`` selects :class:`JSONFormatter`.

One JSON object per line with ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``,
plus the scheduler's context when there is any:

- ``group``: from the ``[publish-scheduler]`` / ``[plugin-scheduler]`` / ``[<name>-scheduler]``
  prefix the scheduler puts on its lines (the documented text form stays in ``message``);
- ``node``, ``group``, ``job``, ``slot``, ``run_id``: of the job run the line was written in,
  from the context the worker sets around the job call (:mod:`coordination.logcontext`), so
  job code and the libraries it calls get them without doing anything;
- ``node``, ``group``, ``job``, ``slot``, ``run_id``, ``event``: from record attributes, when
  code passes them with ``logger.info(..., extra={"job": ..., "slot": ...})``; these win over
  the run's context and the prefix.

Exceptions go in ``exception`` as one string, so a traceback never breaks the one-line rule.

gunicorn (``deploy/gunicorn.conf.py``) logs through the same formatter when the format is
``json`` (:func:`gunicorn_logconfig`); its access lines add ``remote``, ``method``, ``path``,
``query``, ``protocol``, ``status``, ``bytes``, ``duration`` (seconds), ``referer`` and
``user_agent``, so every line of the web container is one JSON object too.
"""

import json
import logging
import re
from datetime import UTC, datetime

from coordination.logcontext import current as current_job

CONTEXT_FIELDS = ("node", "group", "job", "slot", "run_id", "event")
#: gunicorn's access-log atoms (``%(h)s`` ...) and the JSON fields they become.
ACCESS_FIELDS = {
    "h": "remote",
    "m": "method",
    "U": "path",
    "q": "query",
    "H": "protocol",
    "s": "status",
    "B": "bytes",
    "f": "referer",
    "a": "user_agent",
}


def gunicorn_logconfig(log_format: str) -> dict:
    """Return gunicorn's ``logconfig_dict`` for ``log_format`` (``{}``: gunicorn's own text).

    Every key gunicorn's defaults have is given, since gunicorn merges only the top level:
    access lines go to stdout and everything else to stderr, as with its text logs.
    """
    if log_format != "json":
        return {}
    formatter = {"()": "instatic.logging.JSONFormatter"}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": formatter, "generic": formatter},
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stdout",
            },
            "error_console": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "stream": "ext://sys.stderr",
            },
        },
        "root": {"level": "WARNING", "handlers": ["error_console"]},
        "loggers": {
            "gunicorn.error": {"level": "INFO", "handlers": ["error_console"], "propagate": False},
            "gunicorn.access": {"level": "INFO", "handlers": ["console"], "propagate": False},
        },
    }


def _access_fields(record: logging.LogRecord) -> dict:
    """Return the request fields of a gunicorn access-log record (its args are the atoms)."""
    atoms = record.args
    if record.name != "gunicorn.access" or not hasattr(atoms, "get"):
        return {}
    fields = {}
    for atom, name in ACCESS_FIELDS.items():
        value = atoms.get(atom)
        if value not in (None, "", "-"):
            fields[name] = value
    for name in ("status", "bytes"):
        if str(fields.get(name, "")).isdigit():
            fields[name] = int(fields[name])
    microseconds = atoms.get("D")
    if isinstance(microseconds, int):
        fields["duration"] = microseconds / 1_000_000
    return fields


PREFIX_RE = re.compile(r"^\[(?P<prefix>[A-Za-z0-9_.\-]+)-scheduler\]")
# The built-in groups' prefixes do not spell their group's name.
PREFIX_GROUPS = {"publish": "publishing", "plugin": "plugins"}


def group_from_message(message: str) -> str | None:
    """Return the scheduler group named by a ``[<prefix>-scheduler]`` message prefix."""
    match = PREFIX_RE.match(message)
    if match is None:
        return None
    prefix = match.group("prefix")
    return PREFIX_GROUPS.get(prefix, prefix)


def _plain(value):
    """Return ``value`` as something JSON can hold (datetimes as ISO 8601)."""
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return str(value)


class JSONFormatter(logging.Formatter):
    """Format each record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        message = record.getMessage()
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": message,
        }
        group = group_from_message(message)
        if group:
            entry["group"] = group
        entry.update(_access_fields(record))
        job = current_job()
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None or value == "":
                value = job.get(name)
            if value is not None and value != "":
                entry[name] = _plain(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
