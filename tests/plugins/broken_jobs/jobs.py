"""A bad schedule outside the plugin SDK: the import itself fails (one coordination.E001)."""

from coordination.registry import job
from coordination.schedules import cron


@job(name="broken_jobs.nightly", schedule=cron("0 0 * * *", tz="Atlantis/Capital"))
def nightly(ctx) -> None:
    """Never scheduled."""
