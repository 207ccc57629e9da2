"""The Prometheus registry and the process counters the scheduler feeds as it works.

Every Instatic metric family lives in one dedicated :class:`~prometheus_client.CollectorRegistry`
(never prometheus_client's global one, so tests can build as many sets as they like):

- *process* counters and histograms: job runs by job and status, run durations, missed slots
  by job and reason, publish lateness, leader changes. Each process counts its own; ``sum``
  over the processes gives the cluster's (a slot is run or recorded missed by one leader only);
- *cluster* gauges read from the database at scrape time (``coordination.cluster_metrics``).

No ``*_created`` series: they would double the series of every counter and histogram for a
start time that Prometheus does not need for rates.

The engine imports this module for its counters only; serving them is elsewhere, so the engine
does not pull in Django's HTTP layer: the web's ``/metrics`` is ``coordination.views``, the
scheduler's own server ``coordination.metrics_server``, who may read them
``coordination.access`` (see docs/ha.md).
"""

from django.db import transaction
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.exposition import choose_encoder

from coordination.cluster_metrics import DatabaseCollector

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
LATENESS_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)

disable_created_metrics()


class InstaticMetrics:
    """Every Instatic metric family, registered in ``registry``.

    ``cluster=False`` leaves out the database-backed gauges (for tests of the process metrics
    that run without a database).
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, cluster: bool = True):
        self.registry = registry if registry is not None else CollectorRegistry()
        self.job_runs = Counter(
            "instatic_job_runs",
            "Finished job runs seen by this scheduler process, by job, group and outcome.",
            ["job", "group", "status"],
            registry=self.registry,
        )
        self.job_duration = Histogram(
            "instatic_job_run_duration_seconds",
            "How long job runs took on this scheduler process.",
            ["job", "group"],
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.publish_lateness = Histogram(
            "instatic_publish_lateness_seconds",
            "Seconds between a post's publish_at and the moment it went live (database clock).",
            buckets=LATENESS_BUCKETS,
            registry=self.registry,
        )
        self.leader_changes = Counter(
            "instatic_leader_changes",
            "Times this scheduler process became the leader of a group.",
            ["group", "node"],
            registry=self.registry,
        )
        self.missed_slots = Counter(
            "instatic_job_missed_slots",
            "Slots this scheduler process recorded as missed, by job, group and reason.",
            ["job", "group", "reason"],
            registry=self.registry,
        )
        self.cluster = DatabaseCollector() if cluster else None
        if self.cluster is not None:
            self.registry.register(self.cluster)

    def render(self, accept_header: str = "") -> tuple[bytes, str]:
        """Return (body, content type) in the format the scraper asked for."""
        encoder, content_type = choose_encoder(accept_header or "")
        return encoder(self.registry), content_type


METRICS = InstaticMetrics()


def count_missed_slots(job, reason: str, count: int, *, metrics: InstaticMetrics = METRICS) -> None:
    """Count ``count`` slots of ``job`` recorded missed for ``reason``, once the caller commits.

    A rolled-back transaction recorded nothing, so it counts nothing.
    """
    counter = metrics.missed_slots.labels(job=job.name, group=job.group, reason=reason)
    transaction.on_commit(lambda: counter.inc(count))


def observe_publish_lateness(seconds: float, *, metrics: InstaticMetrics = METRICS) -> None:
    """Record how late one scheduled post went live (called by the publishing app)."""
    metrics.publish_lateness.observe(max(0.0, float(seconds)))


def count_job_run(
    job, status: str, duration: float | None, *, metrics: InstaticMetrics = METRICS
) -> None:
    """Count one run outcome of ``job`` (a ``Job`` or a name); time it when known."""
    name = getattr(job, "name", str(job))
    group = getattr(job, "group", "")
    metrics.job_runs.labels(job=name, group=group, status=str(status)).inc()
    if duration is not None:
        metrics.job_duration.labels(job=name, group=group).observe(duration)


def count_leader_change(
    group_name: str, node_name: str, *, metrics: InstaticMetrics = METRICS
) -> None:
    """Count that ``node_name`` (this process) became the leader of ``group_name``."""
    metrics.leader_changes.labels(group=group_name, node=node_name).inc()
