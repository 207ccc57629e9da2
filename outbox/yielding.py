"""The outbox steps aside while posts are going out (``coordination.priorities``).

Its jobs drain backlogs of deliveries; while the publishing group's runs are due or going,
a batch is not started: a subscriber's run ends with its deliveries untouched and looks
again ``YIELD_FOR`` later, a webhook lane waits holding its endpoint. A batch under way looks
again every ``LOOK_EVERY`` seconds (:class:`Lookout`) and ends early when posts fall due, so
a post does not wait for the end of a batch of a thousand deliveries. Nothing is lost (the
deliveries stay open) and the drain goes on at full speed once publishing is done.
"""

import threading
import time
from collections.abc import Callable

from coordination.priorities import PUBLISHING_GROUP, YIELD_FOR, Priority, yields
from coordination.selectors import group_busy

#: How often (seconds) a batch under way looks whether posts are going out: one query each
#: time, and about how long a post that falls due waits for a batch to step aside.
LOOK_EVERY = 0.05


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


class Lookout:
    """Whether a batch of tier ``mine`` under way steps aside now.

    Called between deliveries; it asks the database (:func:`steps_aside`) at most every
    ``every`` seconds of ``clock`` and answers False in between. Once it has said True it
    says True from then on: the batch ends, and the next run waits as any run does.
    """

    def __init__(
        self,
        mine: Priority,
        *,
        every: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.mine = mine
        self.every = LOOK_EVERY if every is None else every
        self.clock = clock
        self._next = clock() + self.every
        self.stepped_aside = False

    def __call__(self) -> bool:
        if self.stepped_aside or self.mine >= Priority.PUBLISHING:
            return self.stepped_aside
        now = self.clock()
        if now < self._next:
            return False
        self._next = now + self.every
        self.stepped_aside = steps_aside(self.mine)
        return self.stepped_aside
