"""Four bad declarations (each must become one coordination.E001 line) and a good one."""

from datetime import timedelta

from plugins.sdk import JobContext, cron, daily, every, hourly, plugin_job


@plugin_job(schedule=cron("61 * * * *"))
def minute_out_of_range(ctx: JobContext) -> None:
    """Never scheduled: minute 61 does not exist."""


@plugin_job(schedule=daily(at="03:00", tz="Mars/Olympus_Mons"))
def unknown_zone(ctx: JobContext) -> None:
    """Never scheduled: no such time zone."""


@plugin_job(schedule=daily(at="25:99"))
def no_such_time(ctx: JobContext) -> None:
    """Never scheduled: 25:99 is not a time of day."""


@plugin_job(schedule=every(timedelta(days=3_000_000)))
def beyond_the_calendar(ctx: JobContext) -> None:
    """Never scheduled: its first slot after now would fall after the year 9999."""


@plugin_job(schedule=hourly(minute=5))
def fine(ctx: JobContext) -> None:
    """Scheduled: the bad declarations above must not hide it."""
