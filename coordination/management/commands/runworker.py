"""``runworker``: a worker-only node, or (with ``--process``) one of its worker processes."""

import logging
import os
import threading

from django.core.management.base import BaseCommand, CommandError

from coordination.conf import settings
from coordination.management.commands.runscheduler import (
    database_reachable,
    node_name_option,
    refuse_bad_declarations,
)
from coordination.shutdown import graceful_signals
from coordination.workers import process
from coordination.workers.pool import WorkerPool

logger = logging.getLogger("coordination.runworker")


class Command(BaseCommand):
    help = (
        'Run worker processes that execute the queued runs of jobs declared run_on="workers", '
        "without a scheduler (a worker-only node). runscheduler --workers N runs them beside "
        "the scheduler instead."
    )

    def add_arguments(self, parser):
        which = parser.add_mutually_exclusive_group()
        which.add_argument(
            "--processes",
            type=int,
            default=None,
            metavar="N",
            help="Number of worker processes (default: INSTATIC_WORKERS; at least 1).",
        )
        which.add_argument(
            "--process",
            type=int,
            default=None,
            metavar="I",
            help="Be worker process I (from 1) of the node; the pool starts these itself.",
        )
        parser.add_argument(
            "--node-name",
            default="",
            help="Name of this node in logs and the run ledger (default: host:pid).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help=(
                "Serve /healthz (the worker pool's health) and metrics on this port "
                "(127.0.0.1 unless --metrics-address)."
            ),
        )
        parser.add_argument("--metrics-address", default="127.0.0.1")

    def check(self, *args, **kwargs):
        """Refuse bad job declarations in one line before Django's multi-line check report."""
        refuse_bad_declarations("runworker")
        return super().check(*args, **kwargs)

    def handle(self, *args, **options):
        refuse_bad_declarations("runworker")  # also with --skip-checks
        node_name = node_name_option(options["node_name"])
        if options["process"] is not None:
            self.serve_one(node_name=node_name, index=options["process"])
            return
        count = settings.WORKERS if options["processes"] is None else options["processes"]
        if count < 1:
            raise CommandError(
                f"runworker needs at least 1 worker process, not {count} (--processes, default "
                "INSTATIC_WORKERS). Give --processes N with N >= 1; for a node without "
                "workers run runscheduler --workers 0 instead."
            )
        self.run_pool(
            node_name=node_name,
            count=count,
            metrics=(options["metrics_address"], options["metrics_port"]),
        )

    def run_pool(self, *, node_name: str, count: int, metrics=(None, None)) -> None:
        """Run ``count`` worker processes until SIGTERM/SIGINT, then stop them within the grace;
        with a metrics port, ``/healthz`` answers whether the pool keeps its processes up."""
        pool = WorkerPool(count=count, node_name=node_name)
        address, port = metrics
        if port is not None:
            from coordination.metrics_server import SchedulerMetrics

            SchedulerMetrics.serve(address, port, health=lambda: pool_health(pool))
        stopped = threading.Event()
        with graceful_signals(stopped.set):
            pool.start()
            try:
                while pool.running() and not stopped.wait(0.5):
                    pass
            finally:
                pool.stop(float(settings.SHUTDOWN_GRACE))

    def serve_one(self, *, node_name: str, index: int) -> None:
        """Be worker process ``index``: wait for the database, then serve until a signal."""
        if index < 1:
            raise CommandError(f"--process must be 1 or more, not {index}.")
        stop = threading.Event()
        lower_priority(int(settings.WORKER_NICE))
        with graceful_signals(stop.set):
            if not database_reachable(stop):
                return
            logger.info(
                "worker process %d of node %s serving (nice %d)",
                index,
                node_name,
                os.getpriority(os.PRIO_PROCESS, 0),
            )
            process.serve(node_name=node_name, index=index, stop=stop)
        logger.info("worker process %d of node %s stopped", index, node_name)


def pool_health(pool: WorkerPool) -> tuple[bool, dict]:
    """Return (healthy, details) of a worker-only node: its pool keeps its processes up."""
    problems = pool.problems() if pool.running() else ["the worker pool has stopped"]
    if problems:
        return False, {"status": "unavailable", "reason": "; ".join(problems)}
    return True, {"status": "ok", "workers": len(pool.pids())}


def lower_priority(nice: int) -> None:
    """Run this process at nice value ``nice`` at least (never raised back: that needs root).

    The scheduler's loops then get the CPU first when the workers beside them are busy: a
    flood of deliveries slows itself, not the next post's publish.
    """
    if nice > os.getpriority(os.PRIO_PROCESS, 0):
        os.setpriority(os.PRIO_PROCESS, 0, nice)
