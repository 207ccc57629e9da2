from datetime import timedelta

from plugins.sdk import JobContext, every, plugin_job


@plugin_job(schedule=every(timedelta(seconds=1)))
def ping(ctx: JobContext) -> None:
    """Every second, do nothing (its runs in the ledger are what the test looks at)."""
