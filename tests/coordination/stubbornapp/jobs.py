"""One job of its own group, run on request on workers, that ignores ``should_stop()``: its
run outlives its ``max_duration`` until its worker pool kills the process."""

import threading
from datetime import timedelta

from coordination.registry import job
from tests.support.schedules import ON_REQUEST_ONLY

GROUP = "hatest_stubborn"


@job(
    name="stubborn.ignores_stop",
    group=GROUP,
    schedule=ON_REQUEST_ONLY,
    run_on="workers",
    max_duration=timedelta(seconds=1),
)
def ignores_stop(ctx):
    """Log that it is in flight, then wait for ever, never asking ``should_stop()``."""
    ctx.logger.info("stubborn run in flight")
    threading.Event().wait()
