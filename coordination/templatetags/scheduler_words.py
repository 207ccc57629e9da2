"""Template filters for the scheduler's values in words (see :mod:`coordination.wording`)."""

from django import template

from coordination import wording
from coordination.admin_words import scheduler_html

register = template.Library()


@register.filter
def scheduler(node: str | None):
    """``{{ run.node|scheduler }}``: ``Scheduler (node web-1)``, the raw name in the title."""
    return scheduler_html(node)


@register.filter
def duration(seconds: float | None) -> str:
    """``{{ run.duration|duration }}``: ``6 ms``, ``3.2 s``, ``4 min 10 s``."""
    return wording.duration_text(seconds)


@register.filter
def lateness(seconds: float | None) -> str:
    """``{{ run.lateness|lateness }}``: ``on time`` or ``3.2 s late``."""
    return wording.lateness_text(seconds)


@register.filter
def local_time(instant):
    """``{{ term.started_at|local_time }}``: in the current zone, with the zone's name."""
    return wording.local_time(instant)
