"""The outbox steps aside while posts are going out (``coordination.priorities``).

Its jobs drain backlogs of deliveries; while the publishing group's runs are due or going,
a batch is not started: a subscriber's run ends with its deliveries untouched and looks
again ``YIELD_FOR`` later, a webhook lane waits holding its endpoint. Nothing is lost (the
deliveries stay open) and the drain goes on at full speed once publishing is done.
"""

import threading
from collections.abc import Callable

from coordination.priorities import PUBLISHING_GROUP, YIELD_FOR, Priority, yields
from coordination.selectors import group_busy


def steps_aside(mine: Priority) -> bool:
    """Return whether work of tier ``mine`` waits now (one query, none for publishing's own)."""
    return mine < Priority.PUBLISHING and yields(mine, publishing_busy=group_busy(PUBLISHING_GROUP))


def wait_while_publishing(
    mine: Priority, *, stop: Callable[[], bool], keep: Callable[[], None] = lambda: None
) -> bool:
    """Wait while work of tier ``mine`` steps aside, calling ``keep`` between looks (a lane
    renews its hold); return whether it waited. ``stop`` ends the wait."""
    waited = False
    pause = threading.Event()
    while not stop() and steps_aside(mine):
        waited = True
        keep()
        pause.wait(YIELD_FOR)
    return waited
