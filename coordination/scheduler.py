"""The scheduler process: one node identity, a heartbeat thread and a loop per group."""

import logging
import os
import socket
import threading
import time
import uuid

from django.db import connection, connections

from coordination.clock import DatabaseClock
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.liveness import (
    DatabaseHealth,
    Heartbeat,
    NodeIdentity,
    NodeNameInUse,
    mark_stopped,
    register_node,
)
from coordination.loop import GroupLoop
from coordination.node_setup import jobs_fingerprint, label_database_sessions
from coordination.registry import JobRegistry, group, registry

logger = logging.getLogger(__name__)


class Scheduler:
    """Run the given groups' loops until stopped; see ``runscheduler``."""

    def __init__(
        self,
        *,
        groups: list[str],
        node_name: str | None = None,
        once: bool = False,
        registry: JobRegistry = registry,
        metrics=None,
    ):
        self.registry = registry
        self.node = NodeIdentity(
            name=node_name or settings.default_node_name(),
            instance=uuid.uuid4().hex,
            host=socket.gethostname(),
            pid=os.getpid(),
        )
        self.once = once
        #: Callables returning more problems for :meth:`problems` (a worker pool's).
        self.problem_sources: list = []
        self.group_names = list(groups)
        self.clock = DatabaseClock()
        self.db_health = DatabaseHealth()
        self.stop_event = threading.Event()
        self.metrics = metrics
        self._grace_deadline: float | None = None
        #: What was cut off before it could finish (``--once`` exits non-zero if any).
        self.cut_offs: list[str] = []
        self.loops = [GroupLoop(self, group(name), once=once) for name in self.group_names]
        self.heartbeat = Heartbeat(self)

    # --- used by loops and the heartbeat --------------------------------------------------
    def jobs_for(self, group_name: str):
        return self.registry.for_group(group_name)

    def loop_for(self, group_name: str) -> GroupLoop | None:
        return next((loop for loop in self.loops if loop.group.name == group_name), None)

    def heartbeat_fresh(self) -> bool:
        return self.heartbeat.fresh()

    def cut_off(self, what: str) -> None:
        """Note that some work of this process was cut off (rolled back, taken over, crashed)."""
        self.cut_offs.append(what)

    def problems(self) -> list[str]:
        """Return what keeps this process from doing its share (for its health check): a
        crashed loop, and what ``problem_sources`` report (its worker pool's)."""
        found = [problem for source in self.problem_sources for problem in source()]
        for loop in self.loops:
            if loop.down_since is not None:
                found.append(
                    f"the {loop.group.name} scheduler loop crashed"
                    f" {time.monotonic() - loop.down_since:.0f}s ago and is being restarted"
                )
            elif not loop.is_alive() and loop.ident is not None and not self.stop_event.is_set():
                found.append(f"the {loop.group.name} scheduler loop has stopped")
        return found

    def grace_deadline(self) -> float:
        if self._grace_deadline is None:
            return time.monotonic() + float(settings.SHUTDOWN_GRACE)
        return self._grace_deadline

    def metrics_run(self, job, status: str, duration: float | None) -> None:
        if self.metrics is not None:
            self.metrics.job_run(job, status, duration)

    def metrics_leader_changed(self, group_name: str) -> None:
        if self.metrics is not None:
            self.metrics.leader_changed(group_name, self.node.name)

    # --- lifecycle ------------------------------------------------------------------------
    def register(self) -> None:
        names = [job.name for job in self.registry.all()]
        register_node(
            self.node,
            groups=self.group_names,
            declared_jobs=names,
            fingerprint=jobs_fingerprint(names, self.registry),
        )

    def _register_waiting_for_name(self) -> None:
        """Register, waiting up to one lease for a predecessor's row to go stale.

        A restarted container keeps its host name (and pid 1), so its new scheduler can find
        its own previous incarnation's heartbeat still fresh. A name that stays in use for a
        whole lease belongs to a live process: refuse it.
        """
        deadline = time.monotonic() + float(settings.LEASE) + float(settings.HEARTBEAT_INTERVAL)
        while True:
            try:
                self.register()
                return
            except NodeNameInUse as exc:
                if time.monotonic() >= deadline or self.stop_event.is_set():
                    raise
                logger.warning("%s Waiting for it to go stale.", exc)
                self.stop_event.wait(float(settings.HEARTBEAT_INTERVAL))

    def start(self) -> None:
        label_database_sessions(self.node.name)
        self._register_waiting_for_name()
        logger.info(
            "node %s (pid %s on %s) running groups %s",
            self.node.name,
            self.node.pid,
            self.node.host,
            ", ".join(self.group_names),
        )
        # Also with --once: a run that outlives the lease must not look like a frozen leader.
        self.heartbeat.start()
        for loop in self.loops:
            loop.start()

    def stop(self) -> None:
        """Stop taking work; running jobs get ``INSTATIC_SHUTDOWN_GRACE`` seconds to finish."""
        if self.stop_event.is_set():
            return
        self._grace_deadline = time.monotonic() + float(settings.SHUTDOWN_GRACE)
        self.stop_event.set()
        for loop in self.loops:
            loop.interrupt()

    def wait(self, poll: float = 0.2) -> None:
        """Block until every loop has finished (returns promptly so signals are handled)."""
        while any(loop.is_alive() for loop in self.loops):
            for loop in self.loops:
                loop.join(timeout=poll)

    def finish(self) -> None:
        """Stop the heartbeat and mark the node stopped (after the loops are done)."""
        self.heartbeat.stop()
        if self.heartbeat.is_alive():
            self.heartbeat.join(timeout=5)
        try:
            self._mark_stopped()
        except Exception as exc:
            logger.warning("could not mark node %s stopped: %s", self.node.name, exc)
        finally:
            connections.close_all()
        logger.info("node %s stopped", self.node.name)

    def _mark_stopped(self) -> None:
        """Mark the node stopped, once more on a new connection if the old one is dead.

        The main thread's connection sits idle from registration to shutdown, so a database or
        PgBouncer restart, or a fencer's session kill, ends it unseen; without a second try the
        node would look alive to the others for a lease. An error on a connection that still
        works is not a lost connection and is not retried. Only one retry, because a database
        that is really gone must not hold up the shutdown: the new connection's connect gives
        up after ``connect_timeout`` (half the lease, ``label_database_sessions``), so with the
        first attempt's ``tcp_user_timeout`` (PostgreSQL, half the lease) marking takes at most
        about a lease, never longer than the others would wait for the heartbeat to go stale.
        """
        try:
            mark_stopped(self.node)
        except DATABASE_ERRORS as exc:
            # No connection at all: the database cannot be reached, and would not be now.
            if connection.connection is None or connection.is_usable():
                raise
            logger.info(
                "node %s lost its database connection (%s); marking it stopped on a new one",
                self.node.name,
                exc,
            )
            connection.close()
            mark_stopped(self.node)

    def run(self) -> None:
        self.start()
        try:
            self.wait()
        finally:
            self.stop()
            self.wait()
            self.finish()
