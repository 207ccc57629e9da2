import threading
from datetime import timedelta

from plugins.sdk import JobContext, every, plugin_job


@plugin_job(schedule=every(timedelta(seconds=1)), max_duration=timedelta(seconds=1))
def hang(ctx: JobContext) -> None:
    """Hang for ten minutes and never look at ctx.should_stop()."""
    ctx.logger.info("hanging in slot %s", ctx.slot.isoformat())
    threading.Event().wait(600)
