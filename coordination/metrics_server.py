"""``runscheduler --metrics-port``: the metrics and ``/healthz`` from a small HTTP server.

The server runs in a daemon thread beside the scheduler. ``/healthz`` answers with this node's
own heartbeat freshness (``coordination.nodehealth``), 200/503 to anyone, the reason only with
the health token; everything else is the registry's metrics, with the metrics token when one
is set (``coordination.access``).
"""

import json
import logging
import socket
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

from django.core.management.base import CommandError
from django.db import connections
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from coordination.access import bearer_matches, health_token, metrics_token
from coordination.metrics import METRICS, InstaticMetrics, count_job_run, count_leader_change
from coordination.nodehealth import node_health

logger = logging.getLogger(__name__)


class _QuietHandler(WSGIRequestHandler):
    """Log nothing per request: Prometheus scrapes every few seconds."""

    def log_message(self, format, *args):
        pass


class SchedulerMetrics:
    """What ``runscheduler`` feeds (``job_run``, ``leader_changed``) and its HTTP server."""

    def __init__(
        self,
        metrics: InstaticMetrics = METRICS,
        *,
        node_name: str | None = None,
        health=None,
    ):
        self.metrics = metrics
        self.node_name = node_name
        #: ``() -> (healthy, details)`` in place of this node's heartbeat (a worker-only
        #: node has no node row of its own: its pool answers).
        self.health = health
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
        count_job_run(job, status, duration, metrics=self.metrics)

    def leader_changed(self, group_name: str, node_name: str) -> None:
        """Count that ``node_name`` (this process) became the leader of ``group_name``."""
        count_leader_change(group_name, node_name, metrics=self.metrics)

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
                if self.health is not None:
                    healthy, details = self.health()
                else:
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
        health=None,
    ) -> "SchedulerMetrics":
        """Start the metrics HTTP server on ``address:port`` in a daemon thread (0: any port)."""
        instance = cls(metrics, node_name=node_name, health=health)

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
