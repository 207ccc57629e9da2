"""A job whose planning raises once it is due, next to a good job of the same group."""

from datetime import timedelta

from coordination.schedules import Every, Schedule
from plugins.sdk import JobContext, every, plugin_job


class BrokenWhenDue(Schedule):
    """Every second; but asking for the slots that are due (the tick's catch-up) raises.

    Its next slots compute, so the declaration accepts it: the failure only shows when the
    scheduler plans a due slot, like a bug in a plugin's own schedule class.
    """

    def __init__(self):
        self._grid = Every(timedelta(seconds=1))

    def next_after(self, instant):
        return self._grid.next_after(instant)

    def slots_between(self, start, end, *, limit=None):
        raise RuntimeError("the schedule's arithmetic broke")

    def describe(self):
        return "every 1s (broken when due)"

    def fingerprint(self):
        return "broken-when-due"


@plugin_job(schedule=BrokenWhenDue())
def broken(ctx: JobContext) -> None:
    """Never runs: planning its first due slot raises."""


@plugin_job(schedule=every(timedelta(seconds=1)))
def steady(ctx: JobContext) -> None:
    """Runs every second, whatever happens to ``broken``."""
