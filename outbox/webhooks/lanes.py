"""Lanes: each webhook endpoint's deliveries are sent on a lane of their own.

The ``outbox.webhooks`` job does not send: it finds the endpoints with deliveries due and
starts a lane for each on this process's pool (``INSTATIC_WEBHOOK_LANES`` side by side),
then returns. A lane holds its endpoint in the database (``WebhookEndpoint.lane_token`` and
``lane_until``, on the database clock) so one lane per endpoint runs across the cluster;
it sends the endpoint's batches while some are due, renewing its hold as outcomes come,
then lets go and wakes the job if deliveries are waiting. So a slow or hostile endpoint
holds only its own lane: every attempt ends by its deadline, and the other endpoints'
lanes, and the job's next runs, go on beside it.

A lane lost with its process leaves its hold to run out (``INSTATIC_WEBHOOK_LANE_LEASE``):
the next lane finds the deliveries it had claimed still running, counts those attempts as
failed and tries them again (at least once, as any claim-first attempt lost with its node).
A lane that finds its hold taken over (it was frozen past its lease) stops recording.
"""

import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from django.db import connection
from django.db.models import Min, Q

from coordination.clock import database_now
from coordination.priorities import Priority
from outbox import delivering, wakeups, yielding
from outbox.conf import settings
from outbox.job_names import WEBHOOKS_JOB
from outbox.models import Delivery, WebhookEndpoint, webhook_ledger_name

logger = logging.getLogger(__name__)


class LaneLost(Exception):
    """The lane's hold on its endpoint was taken over: it must not record anything more."""


def _lease() -> timedelta:
    return timedelta(seconds=float(settings.WEBHOOK_LANE_LEASE))


class Lane:
    """One endpoint held by this process: its token, and the renewal of its hold."""

    def __init__(self, endpoint_id: int, token: uuid.UUID):
        self.endpoint_id = endpoint_id
        self.token = token
        self._renewed = time.monotonic()

    def renew(self) -> None:
        """Renew the hold when a third of the lease has passed; raise ``LaneLost`` if the
        endpoint is held by another lane now."""
        lease = _lease()
        if time.monotonic() - self._renewed < lease.total_seconds() / 3:
            return
        held = WebhookEndpoint.objects.filter(pk=self.endpoint_id, lane_token=self.token).update(
            lane_until=database_now() + lease
        )
        if not held:
            raise LaneLost(f"webhook endpoint {self.endpoint_id}: its lane was taken over")
        self._renewed = time.monotonic()


def take(endpoint_id: int, *, now: datetime) -> Lane | None:
    """Hold ``endpoint_id`` for a new lane if no live lane holds it; return the lane."""
    token = uuid.uuid4()
    free = Q(lane_until__isnull=True) | Q(lane_until__lt=now)
    taken = WebhookEndpoint.objects.filter(free, pk=endpoint_id, active=True).update(
        lane_token=token, lane_until=now + _lease()
    )
    return Lane(endpoint_id, token) if taken else None


def let_go(lane: Lane) -> None:
    WebhookEndpoint.objects.filter(pk=lane.endpoint_id, lane_token=lane.token).update(
        lane_token=None, lane_until=None
    )


def due_endpoints(*, now: datetime) -> tuple[list[int], datetime | None]:
    """Return the active endpoints that have deliveries due now and no live lane, and when
    to look again: the earliest later delivery of a free endpoint, or the end of the hold
    of a held endpoint with deliveries open (its lane may have been lost with its process;
    a live one will have renewed it)."""
    held_until = dict(WebhookEndpoint.objects.filter(active=True).values_list("pk", "lane_until"))
    if not held_until:
        return [], None
    names = {webhook_ledger_name(pk): pk for pk in held_until}
    firsts = (
        Delivery.objects.filter(subscriber__in=list(names), finished_at__isnull=True)
        .values("subscriber")
        .annotate(first=Min("due_at"))
        .values_list("subscriber", "first")
    )
    due, later = [], None
    for name, first in firsts:
        pk = names[name]
        until = held_until[pk]
        if until is not None and until >= now:
            look = until
        elif first <= now:
            due.append(pk)
            continue
        else:
            look = first
        later = look if later is None else min(later, look)
    return sorted(due), later


def send_lane(endpoint_id: int) -> None:
    """Send ``endpoint_id``'s due deliveries, batch after batch, holding it (on a lane's
    thread: the database connection is this thread's own, and closed at the end)."""
    from outbox.webhooks.sending import subscriber_for

    lane = None
    again = None
    try:
        lane = take(endpoint_id, now=database_now())
        if lane is None:
            return
        ctx = LaneContext(endpoint_id)
        while True:
            endpoint = WebhookEndpoint.objects.filter(pk=endpoint_id, active=True).first()
            if endpoint is None:
                break
            # Side effects wait while posts are going out, the endpoint held meanwhile.
            yielding.wait_while_publishing(
                Priority.SIDE_EFFECTS, stop=ctx.should_stop, keep=lane.renew
            )
            if ctx.should_stop():
                break
            again = delivering.deliver_batch(subscriber_for(endpoint, lane=lane), ctx)
            if again is None or again > database_now():
                break
    except LaneLost as exc:
        logger.warning("%s; this lane stops", exc)
        lane = None
    except Exception:
        logger.exception("webhook endpoint %s: its lane failed", endpoint_id)
    finally:
        try:
            if lane is not None:
                let_go(lane)
                _wake_for_waiting(endpoint_id)
        except Exception:
            logger.exception("webhook endpoint %s: could not let its lane go", endpoint_id)
        finally:
            connection.close()
            _pool.finished(endpoint_id)


def _wake_for_waiting(endpoint_id: int) -> None:
    """Wake the job for the endpoint's open deliveries (dispatched while its lane ran, or
    waiting for a back-off): at once, or when the first is due."""
    first = Delivery.objects.filter(
        subscriber=webhook_ledger_name(endpoint_id), finished_at__isnull=True
    ).aggregate(first=Min("due_at"))["first"]
    if first is not None:
        wait = max(first - database_now(), timedelta(0))
        wakeups.wake([WEBHOOKS_JOB], skip_locked=False, after=wait or None)


class LaneContext:
    """What ``deliver_batch`` needs of a job's context, for a lane (it outlives the run
    that started it)."""

    def __init__(self, endpoint_id: int):
        self.logger = logging.getLogger(f"instatic.jobs.{WEBHOOKS_JOB}")
        self.endpoint_id = endpoint_id

    def should_stop(self) -> bool:
        return _pool.stopping.is_set()


class _Pool:
    """This process's lanes: at most ``INSTATIC_WEBHOOK_LANES`` sending at once, one per
    endpoint."""

    def __init__(self):
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._size = 0
        self._busy: set[int] = set()
        self._idle = threading.Condition(self._lock)
        self.stopping = threading.Event()

    def start(self, endpoint_ids: list[int]) -> list[int]:
        """Start a lane for each endpoint not already on one here; return those started."""
        started = []
        with self._lock:
            size = int(settings.WEBHOOK_LANES)
            if self._executor is None or self._size != size:
                self._executor = ThreadPoolExecutor(max_workers=size, thread_name_prefix="lane")
                self._size = size
            for endpoint_id in endpoint_ids:
                if endpoint_id in self._busy:
                    continue
                self._busy.add(endpoint_id)
                self._executor.submit(send_lane, endpoint_id)
                started.append(endpoint_id)
        return started

    def finished(self, endpoint_id: int) -> None:
        with self._lock:
            self._busy.discard(endpoint_id)
            self._idle.notify_all()

    def busy(self) -> set[int]:
        with self._lock:
            return set(self._busy)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no lane of this process runs; return False if one still does."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._busy:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True


_pool = _Pool()

# At interpreter exit the pool's threads are joined (concurrent.futures): lanes stop taking
# new attempts first, so a process exits within an attempt's deadline, not after a backlog.
# Registered after concurrent.futures' own hook, so it runs before it.
if hasattr(threading, "_register_atexit"):
    threading._register_atexit(_pool.stopping.set)


def start_due_lanes() -> datetime | None:
    """Start a lane for each endpoint with deliveries due; return when to look again for
    the others (None: a wake-up or the job's fallback will)."""
    now = database_now()
    due, later = due_endpoints(now=now)
    started = _pool.start(due) if due else []
    if started:
        logger.debug("started lanes for webhook endpoints %s", started)
    if due:
        # Those lanes may not hold their endpoints yet, or may be lost with this process:
        # look again when a hold taken now would end.
        ends = now + _lease()
        later = ends if later is None else min(later, ends)
    return later


def wait_idle(timeout: float) -> bool:
    """Wait until this process's lanes are done (tests, and a process about to exit)."""
    return _pool.wait_idle(timeout)


def busy() -> set[int]:
    """Return the endpoints with a lane running in this process."""
    return _pool.busy()
