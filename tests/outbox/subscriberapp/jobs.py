"""``subscriberapp.record``: one ``Effect`` per published event, in the delivery's transaction.

Each delivery logs ``delivering event N`` and then works ``SUBSCRIBER_WORK_SECONDS`` (or
``HATEST_SLOW_SECONDS``), so a test can kill the node while a delivery's transaction is open.
"""

import os
import time

from django.conf import settings

from plugins.sdk import on_post_event
from tests.jobsapp.models import Effect


@on_post_event("published", transactional=True, retry_backoff=1)
def record(event, ctx):
    ctx.logger.info("delivering event %s", event.id)
    Effect.objects.create(job=f"event-{event.id}", slot=event.at, node=ctx.node)
    time.sleep(float(os.environ.get("SUBSCRIBER_WORK_SECONDS", settings.HATEST_SLOW_SECONDS)))
