"""Prometheus metrics: what this process did, and what the cluster looks like right now.

Two kinds of numbers live in one dedicated :class:`~prometheus_client.CollectorRegistry`
(never prometheus_client's global one, so tests can build as many sets as they like):

- *process* counters and histograms that the scheduler feeds as it works: job runs by job and
  status, run durations, missed slots by job and reason, publish lateness, leader changes.
  Each process counts its own; ``sum`` over the processes gives the cluster's (a slot is run or
  recorded missed by one leader only);
- *cluster* gauges read from the database at scrape time by :class:`DatabaseCollector`: live
  nodes, the current leader of each group, each job's last success and the scheduled-post
  backlog. They are the same whoever reads them, so exactly **one** process reports them: the
  scheduler that leads the first group (by name) that has a live leader. Every other scheduler
  and every web process leaves them out, so a sum over targets never counts them twice, and
  ``absent(instatic_live_nodes)`` says that no scheduler leads anything.

No ``*_created`` series: they would double the series of every counter and histogram for a
start time that Prometheus does not need for rates.

The web process serves them at ``/metrics`` (:func:`metrics_view`); ``runscheduler
--metrics-port`` serves them from a small HTTP server in a daemon thread
(:meth:`SchedulerMetrics.serve`), which also answers ``/healthz`` with this node's own
heartbeat freshness, so a container health check works when only the scheduler runs.

Who may read them: the web's ``/metrics`` needs a staff login or
``Authorization: Bearer <INSTATIC_METRICS_TOKEN>`` (node names and backlog sizes are not for
the public). The scheduler's server is kept internal by its bind address, and needs the same
token when one is set; its ``/healthz`` answers 200/503 to anyone but shows the reason only
with ``Authorization: Bearer <INSTATIC_HEALTH_TOKEN>``. See docs/ha.md.

``coordination`` does not import ``publishing``: the backlog is counted through
``apps.get_model`` when the publishing app is installed.
"""

import hmac
import json
import logging
import os
import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.apps import apps
from django.conf import settings as django_settings
from django.core.management.base import CommandError
from django.db import connections, transaction
from django.db.models import Count, Max, Q
from django.db.models.functions import Now
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder, make_wsgi_app

from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import JobRun, Leadership, Node
from coordination.selectors import live_nodes_q

logger = logging.getLogger(__name__)

DURATION_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)
LATENESS_BUCKETS = (0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 900, 3600)

disable_created_metrics()


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
        live = Node.objects.filter(live_nodes_q())
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
REGISTRY = METRICS.registry


def count_missed_slots(job, reason: str, count: int, *, metrics: InstaticMetrics = METRICS) -> None:
    """Count ``count`` slots of ``job`` recorded missed for ``reason``, once the caller commits.

    A rolled-back transaction recorded nothing, so it counts nothing.
    """
    counter = metrics.missed_slots.labels(job=job.name, group=job.group, reason=reason)
    transaction.on_commit(lambda: counter.inc(count))


def observe_publish_lateness(seconds: float, *, metrics: InstaticMetrics = METRICS) -> None:
    """Record how late one scheduled post went live (called by the publishing app)."""
    metrics.publish_lateness.observe(max(0.0, float(seconds)))


# --- who may read -------------------------------------------------------------------------------
def health_token() -> str:
    """Return ``INSTATIC_HEALTH_TOKEN``: the bearer token that shows health details."""
    return getattr(django_settings, "INSTATIC_HEALTH_TOKEN", "") or ""


def metrics_token() -> str:
    """Return ``INSTATIC_METRICS_TOKEN``: the bearer token that reads the metrics."""
    return getattr(django_settings, "INSTATIC_METRICS_TOKEN", "") or ""


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Return True when ``authorization`` is ``Bearer <token>`` and a token is configured.

    An unset token matches nothing, not even an empty bearer value; the comparison takes the
    same time however much of the value is right, so the token cannot be guessed piecewise.
    """
    if not token or not authorization:
        return False
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.strip().encode(), token.encode())


def staff_or_bearer(request, token: str) -> bool:
    """Return True for an active staff user's request or one carrying the bearer ``token``.

    The token is looked at first: a load balancer's probe has no session, so it costs no query.
    """
    if bearer_matches(request.headers.get("Authorization"), token):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_active and user.is_staff)


def unauthorized(what: str, variable: str) -> HttpResponse:
    """Return the 401 for a request that may not read ``what``."""
    response = HttpResponse(
        f"{what} need a staff login or Authorization: Bearer <{variable}>.\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="instatic"'
    return response


@never_cache
def metrics_view(request):
    """Serve the metrics to Prometheus from the web process (``/metrics``): staff or token."""
    if not staff_or_bearer(request, metrics_token()):
        return unauthorized("metrics", "INSTATIC_METRICS_TOKEN")
    body, content_type = METRICS.render(request.headers.get("Accept", ""))
    return HttpResponse(body, content_type=content_type)


def node_health(*, node_name: str | None = None, problems=()) -> tuple[bool, dict]:
    """Return (healthy, details) for this process's own node row.

    Healthy means the node is registered, not stopped, and heartbeated within the lease, by
    the database clock, and the process reports no ``problems`` of its own (a crashed group
    loop heartbeats happily but leads nothing). Without ``node_name`` the row is found by
    this host name and pid, the identity every scheduler process registers with.
    """
    if problems:
        return False, {"status": "unavailable", "reason": "; ".join(problems)}
    rows = Node.objects.filter(stopped_at__isnull=True)
    if node_name:
        rows = rows.filter(name=node_name)
    else:
        rows = rows.filter(host=socket.gethostname(), pid=os.getpid())
    try:
        node = rows.annotate(db_now=Now()).order_by("-last_heartbeat").first()
    except DATABASE_ERRORS as exc:
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return False, {"status": "unavailable", "reason": f"database: {text}"}
    if node is None:
        return False, {
            "status": "unavailable",
            "reason": "this scheduler node is not registered (starting up, or stopped)",
        }
    lease = float(settings.LEASE)
    age = (node.db_now - node.last_heartbeat).total_seconds()
    if age > lease:
        return False, {
            "status": "unavailable",
            "reason": f"node {node.name} last heartbeated {age:.1f}s ago (lease {lease:g}s)",
            "node": node.name,
            "heartbeat_age": round(age, 3),
        }
    return True, {"status": "ok", "node": node.name, "heartbeat_age": round(age, 3)}


class _QuietHandler(WSGIRequestHandler):
    """Log nothing per request: Prometheus scrapes every few seconds."""

    def log_message(self, format, *args):
        pass


class SchedulerMetrics:
    """What ``runscheduler`` feeds (``job_run``, ``leader_changed``) and its HTTP server."""

    def __init__(self, metrics: InstaticMetrics = METRICS, *, node_name: str | None = None):
        self.metrics = metrics
        self.node_name = node_name
        self.server = None
        self.thread: threading.Thread | None = None
        self._prometheus_app = make_wsgi_app(metrics.registry)
        self._scheduler = None

    def attach(self, scheduler) -> None:
        """Let ``/healthz`` report the scheduler's own problems (a crashed group loop), and
        the cluster gauges be reported while this node is the cluster's reporter."""
        self._scheduler = scheduler
        if self.metrics.cluster is not None:
            self.metrics.cluster.node_name = scheduler.node.name

    # --- called by coordination.scheduler.Scheduler ---------------------------------------
    def job_run(self, job, status: str, duration: float | None) -> None:
        """Count one run outcome of ``job`` (a ``Job`` or a name); time it when known."""
        name = getattr(job, "name", str(job))
        group = getattr(job, "group", "")
        self.metrics.job_runs.labels(job=name, group=group, status=str(status)).inc()
        if duration is not None:
            self.metrics.job_duration.labels(job=name, group=group).observe(duration)

    def leader_changed(self, group_name: str, node_name: str) -> None:
        """Count that ``node_name`` (this process) became the leader of ``group_name``."""
        self.metrics.leader_changes.labels(group=group_name, node=node_name).inc()

    # --- the HTTP server ------------------------------------------------------------------
    @property
    def port(self) -> int | None:
        return self.server.server_port if self.server is not None else None

    def wsgi_app(self, environ, start_response):
        """``/healthz``: this node's heartbeat (details with the health token); anything else:
        the metrics (with the metrics token, when one is set)."""
        authorization = environ.get("HTTP_AUTHORIZATION")
        try:
            if environ.get("PATH_INFO", "").rstrip("/") == "/healthz":
                problems = self._scheduler.problems() if self._scheduler is not None else ()
                healthy, details = node_health(node_name=self.node_name, problems=problems)
                if not bearer_matches(authorization, health_token()):
                    details = {"status": details["status"]}
                status = "200 OK" if healthy else "503 Service Unavailable"
                return self._respond(start_response, status, "application/json", details)
            token = metrics_token()
            if token and not bearer_matches(authorization, token):
                message = "metrics need Authorization: Bearer <INSTATIC_METRICS_TOKEN>.\n"
                return self._respond(
                    start_response, "401 Unauthorized", "text/plain; charset=utf-8", message
                )
            return self._prometheus_app(environ, start_response)
        finally:
            # Each request runs in its own short-lived thread: close that thread's connections.
            connections.close_all()

    @staticmethod
    def _respond(start_response, status: str, content_type: str, body) -> list[bytes]:
        data = (json.dumps(body) if isinstance(body, dict) else body).encode()
        headers = [("Content-Type", content_type), ("Cache-Control", "no-store")]
        if status.startswith("401"):
            headers.append(("WWW-Authenticate", 'Bearer realm="instatic"'))
        start_response(status, headers)
        return [data]

    @classmethod
    def serve(
        cls,
        address: str,
        port: int,
        *,
        metrics: InstaticMetrics = METRICS,
        node_name: str | None = None,
    ) -> "SchedulerMetrics":
        """Start the metrics HTTP server on ``address:port`` in a daemon thread (0: any port)."""
        instance = cls(metrics, node_name=node_name)

        class Server(ThreadingWSGIServer):
            pass

        try:
            infos = socket.getaddrinfo(
                address, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
            Server.address_family = infos[0][0]
            instance.server = make_server(
                infos[0][4][0], port, instance.wsgi_app, Server, handler_class=_QuietHandler
            )
        except OSError as exc:
            raise CommandError(
                f"cannot serve metrics on {address}:{port} ({exc.strerror or exc}). "
                "Choose another --metrics-port (INSTATIC_METRICS_PORT) or --metrics-address."
            ) from None
        instance.thread = threading.Thread(
            target=instance.server.serve_forever, name="metrics-http", daemon=True
        )
        instance.thread.start()
        logger.info("serving metrics and /healthz on %s:%s", address, instance.port)
        return instance

    def shutdown(self) -> None:
        """Stop the HTTP server (tests; the process exit ends the daemon thread anyway)."""
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
