"""The cluster gauges: what the cluster looks like right now, read from the database at scrape
time.

Live nodes, the current leader of each group, each job's last success, the queue of runs on
workers and the scheduled-post backlog are the same whoever reads them, so exactly **one**
process reports them: the scheduler that leads the first group (by name) that has a live
leader. Every other scheduler
and every web process leaves them out, so a sum over targets never counts them twice, and
``absent(instatic_live_nodes)`` says that no scheduler leads anything.

``coordination`` does not import ``publishing``: the backlog is counted through
``apps.get_model`` when the publishing app is installed.
"""

import logging

from django.apps import apps
from django.db.models import Count, Max, Min, Q
from django.db.models.functions import Now
from prometheus_client.core import GaugeMetricFamily

from coordination.dberrors import DATABASE_ERRORS
from coordination.models import JobRun, Leadership, Node
from coordination.selectors import live_schedulers_q

logger = logging.getLogger(__name__)


class DatabaseCollector:
    """Cluster gauges read from the database each time Prometheus scrapes.

    ``node_name`` is this process's scheduler node (``None`` in a web process); the gauges are
    reported only while that node is the cluster's reporter (see the module docstring).
    """

    def __init__(self, node_name: str | None = None):
        self.node_name = node_name

    def describe(self):
        """Name the families without querying (the registry calls this when registering)."""
        return [
            GaugeMetricFamily("instatic_metrics_database_up", ""),
            GaugeMetricFamily("instatic_live_nodes", ""),
            GaugeMetricFamily("instatic_group_leader", "", labels=["group", "node"]),
            GaugeMetricFamily("instatic_job_last_success_timestamp_seconds", "", labels=["job"]),
            GaugeMetricFamily("instatic_scheduled_posts", "", labels=["state"]),
            GaugeMetricFamily("instatic_runs_queued", "", labels=["job"]),
            GaugeMetricFamily("instatic_run_queue_oldest_wait_seconds", ""),
        ]

    def collect(self):
        up = GaugeMetricFamily(
            "instatic_metrics_database_up",
            "1 if the scrape could read the scheduler tables, else 0.",
        )
        try:
            families = list(self._families())
        except DATABASE_ERRORS as exc:
            logger.warning("metrics: cannot read the database: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self):
        live = Node.objects.filter(live_schedulers_q())
        leading = dict(
            Leadership.objects.filter(node__in=live.values("name")).values_list("group", "node")
        )
        if self.node_name is None or not leading or leading[min(leading)] != self.node_name:
            return
        nodes = GaugeMetricFamily(
            "instatic_live_nodes",
            "Scheduler nodes that heartbeated within the lease (INSTATIC_LEASE).",
        )
        nodes.add_metric([], live.count())
        yield nodes

        leaders = GaugeMetricFamily(
            "instatic_group_leader",
            "1 for the live node that leads each group.",
            labels=["group", "node"],
        )
        for group, node in sorted(leading.items()):
            leaders.add_metric([group, node], 1)
        yield leaders

        last_success = GaugeMetricFamily(
            "instatic_job_last_success_timestamp_seconds",
            "When each job's newest succeeded run in the run ledger finished (Unix time).",
            labels=["job"],
        )
        for job, finished in (
            JobRun.objects.filter(status=JobRun.Status.SUCCEEDED, finished_at__isnull=False)
            .values("job")
            .annotate(last=Max("finished_at"))
            .values_list("job", "last")
            .order_by("job")
        ):
            last_success.add_metric([job], finished.timestamp())
        yield last_success

        yield from queue_families()

        backlog = scheduled_post_backlog()
        if backlog is not None:
            posts = GaugeMetricFamily(
                "instatic_scheduled_posts",
                "Scheduled posts by state: waiting (not due yet), due (due, not yet "
                "published) and failed (due, but the last publish attempt failed).",
                labels=["state"],
            )
            for state, count in backlog.items():
                posts.add_metric([state], count)
            yield posts


def queue_families():
    """The queue of runs on workers: runs queued by job, and how long the oldest has waited
    (0 when none waits), by the database clock."""
    queued = GaugeMetricFamily(
        "instatic_runs_queued",
        "Runs queued for a worker process and not yet started, by job.",
        labels=["job"],
    )
    rows = (
        JobRun.objects.filter(status=JobRun.Status.QUEUED)
        .values("job")
        .annotate(count=Count("id"), oldest=Min("queued_at"), now=Now())
        .values_list("job", "count", "oldest", "now")
        .order_by("job")
    )
    oldest_wait = 0.0
    for job, count, oldest, now in rows:
        queued.add_metric([job], count)
        if oldest is not None:
            oldest_wait = max(oldest_wait, (now - oldest).total_seconds())
    yield queued
    wait = GaugeMetricFamily(
        "instatic_run_queue_oldest_wait_seconds",
        "Seconds the oldest run queued for a worker process has waited to start.",
    )
    wait.add_metric([], oldest_wait)
    yield wait


def scheduled_post_backlog() -> dict[str, int] | None:
    """Return scheduled posts counted as waiting / due / failed, or ``None`` without publishing.

    "Due" compares with the database clock (``Now()``), like the publish job does.
    """
    if not apps.is_installed("publishing"):
        return None
    post_model = apps.get_model("publishing", "Post")
    not_failed = Q(last_error="")
    due = Q(publish_at__lte=Now())
    return post_model.objects.filter(status="scheduled").aggregate(
        waiting=Count("pk", filter=not_failed & ~due),
        due=Count("pk", filter=not_failed & due),
        failed=Count("pk", filter=~not_failed),
    )
