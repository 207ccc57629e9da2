"""Admin columns and fields that show the scheduler's values in words (:mod:`coordination.wording`).

The engine's admin and the plugins' admin declare their time, duration, lateness and
scheduler columns with these, so every page says them the same way: times in the viewer's
zone (the editors app activates each editor's) with the zone's name, ``4 min 10 s``,
``on time``, and ``Scheduler (node web-1)`` with the raw node name kept in the title
attribute for operators.
"""

from collections.abc import Callable
from datetime import datetime

from django.contrib import admin
from django.utils.html import format_html

from coordination.models import JobRun
from coordination.wording import NONE, duration_text, lateness_text, local_time, scheduler_text


def scheduler_html(node: str | None):
    """Return the scheduler named ``node`` in words, its raw node name in the title."""
    if not node:
        return NONE
    return format_html(
        '<span class="scheduler" title="{}" style="white-space:nowrap">{}</span>',
        node,
        scheduler_text(node),
    )


def time_html(instant: datetime | None):
    """Return ``instant`` in the viewer's zone with the zone's name, on one line (a
    ``<time>`` element whose ``datetime`` keeps the exact instant)."""
    if instant is None:
        return NONE
    return format_html(
        '<time datetime="{}" style="white-space:nowrap">{}</time>',
        instant.isoformat(),
        local_time(instant),
    )


def _one_line(words: Callable[[float | None], str]) -> Callable:
    """Return ``words`` as HTML that does not wrap (``4 min 10 s`` stays on one line)."""

    def html(value):
        return format_html('<span style="white-space:nowrap">{}</span>', words(value))

    return html


def _display(field: str, description: str, words: Callable, ordering: str | None) -> Callable:
    @admin.display(description=description, ordering=ordering)
    def display(model_admin, obj):
        return words(getattr(obj, field))

    return display


def time_column(field: str, description: str, *, sortable: bool = True) -> Callable:
    """Return a column showing the datetime ``field`` in the viewer's zone, with its name."""
    return _display(field, description, time_html, field if sortable else None)


def duration_column(field: str, description: str, *, sortable: bool = True) -> Callable:
    """Return a column showing the seconds in ``field`` as ``6 ms``, ``4 min 10 s``."""
    return _display(field, description, _one_line(duration_text), field if sortable else None)


def lateness_column(field: str, description: str) -> Callable:
    """Return a column showing the seconds late in ``field`` as ``on time`` or ``3.2 s late``."""
    return _display(field, description, _one_line(lateness_text), None)


def scheduler_column(field: str, description: str = "scheduler") -> Callable:
    """Return a column showing the node named in ``field`` as ``Scheduler (node …)``."""
    return _display(field, description, scheduler_html, field)


def error_line(error: str, limit: int = 150) -> str:
    """Return the last non-blank line of a run's error (a traceback's exception), cut."""
    lines = [line for line in error.strip().splitlines() if line.strip()]
    return lines[-1][:limit] if lines else ""


def outcome_notes(run: JobRun) -> list[str]:
    """Return what a run list says after a run's status: why a slot was missed, a trigger
    other than the schedule, an attempt after the first, the last line of the error."""
    notes = []
    if run.reason:
        notes.append(run.get_reason_display())
    if run.trigger != JobRun.Trigger.SCHEDULE:
        notes.append(f"{run.get_trigger_display().lower()} run")
    if run.attempt > 1:
        notes.append(f"attempt {run.attempt}")
    if run.error.strip():
        notes.append(error_line(run.error))
    return notes
