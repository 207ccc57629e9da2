"""JSON log lines for log shippers: ``INSTATIC_LOG_FORMAT=json`` selects :class:`JSONFormatter`.

One JSON object per line with ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``,
plus the scheduler's context when there is any:

- ``group``: from the ``[publish-scheduler]`` / ``[plugin-scheduler]`` / ``[<name>-scheduler]``
  prefix the scheduler puts on its lines (the documented text form stays in ``message``);
- ``node``, ``group``, ``job``, ``slot``, ``event``: from record attributes, when code passes
  them with ``logger.info(..., extra={"job": ..., "slot": ...})``; these win over the prefix.

Exceptions go in ``exception`` as one string, so a traceback never breaks the one-line rule.
"""

import json
import logging
import re
from datetime import UTC, datetime

CONTEXT_FIELDS = ("node", "group", "job", "slot", "event")
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
        for name in CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is not None and value != "":
                entry[name] = _plain(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=str)
