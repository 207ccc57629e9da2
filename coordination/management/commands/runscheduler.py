"""``runscheduler``: the long-running scheduler that runs on every replica."""

import logging
import threading
import time

from django.core.management.base import BaseCommand, CommandError

from coordination.checks import scheduler_checks
from coordination.conf import settings
from coordination.dberrors import wait_for_database
from coordination.liveness import NodeNameInUse
from coordination.registry import registry
from coordination.scheduler import Scheduler
from coordination.shutdown import graceful_signals
from coordination.workers.pool import WorkerPool

logger = logging.getLogger("coordination.runscheduler")


def refuse_bad_declarations(command: str = "runscheduler") -> None:
    """Raise a one-line :class:`CommandError` when a ``jobs.py`` declaration was invalid.

    A scheduler (or worker) that ran only the good jobs would quietly skip the bad ones on
    every replica; the web process serves on (it only logs them), but ``command`` does not start.
    """
    errors = registry.errors
    if errors:
        plural = "s" if len(errors) != 1 else ""
        raise CommandError(
            f"{command} refuses to start: {len(errors)} invalid job declaration{plural} "
            f"(coordination.E001): {'; '.join(errors)}. Fix them (python manage.py check "
            "lists them) and start again."
        )


def node_name_option(value: str) -> str:
    """Return the node name a ``--node-name`` value gives (default: ``host:pid``), or refuse it."""
    node_name = value.strip() or settings.default_node_name()
    if len(node_name) > 200:
        raise CommandError("--node-name is longer than 200 characters.")
    return node_name


def workers_option(value: int | None) -> int:
    """Return the worker processes a ``--workers`` value gives (default ``INSTATIC_WORKERS``)."""
    workers = settings.WORKERS if value is None else value
    if workers < 0:
        raise CommandError(
            f"--workers must be 0 or more, not {workers} (0 runs no worker processes)."
        )
    return workers


class Command(BaseCommand):
    help = (
        "Run the scheduler: elect a leader per group through the database and run scheduled "
        "work exactly once across all replicas. Run it on every replica."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--once",
            action="store_true",
            help=(
                "Run what is due in each group this node can lead (every slot due when it "
                "starts, one per job per tick), wait for it, exit; non-zero if cut off."
            ),
        )
        parser.add_argument(
            "--group",
            action="append",
            dest="groups",
            metavar="GROUP",
            help="Run only this group (repeatable). Default: every group.",
        )
        parser.add_argument(
            "--node-name",
            default="",
            help="Name of this node in logs, status and pg_stat_activity (default: host:pid).",
        )
        parser.add_argument(
            "--metrics-port",
            type=int,
            default=None,
            help="Serve Prometheus metrics on this port (127.0.0.1 unless --metrics-address).",
        )
        parser.add_argument("--metrics-address", default="127.0.0.1")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            metavar="N",
            help=(
                "Run N worker processes beside the scheduler for jobs declared "
                'run_on="workers" (default: INSTATIC_WORKERS; 0: a scheduler-only node). '
                "--once starts none: the runs it queues wait for a worker."
            ),
        )

    def check(self, *args, **kwargs):
        """Refuse bad job declarations in one line before Django's multi-line check report;
        run the scheduler's own checks with Django's."""
        refuse_bad_declarations()
        with scheduler_checks():
            return super().check(*args, **kwargs)

    def handle(self, *args, **options):
        refuse_bad_declarations()  # also with --skip-checks
        known = registry.groups()
        groups = options["groups"] or known
        unknown = sorted(set(groups) - set(known))
        if unknown:
            raise CommandError(
                f"unknown group(s): {', '.join(unknown)}. Known groups: {', '.join(known)}."
            )
        node_name = node_name_option(options["node_name"])
        workers = workers_option(options["workers"])
        stopped = threading.Event()
        with graceful_signals(stopped.set):
            if not database_reachable(stopped):
                return
        metrics = None
        if options["metrics_port"] is not None:
            from coordination.metrics_server import SchedulerMetrics

            metrics = SchedulerMetrics.serve(
                options["metrics_address"], options["metrics_port"], node_name=node_name
            )
        scheduler = Scheduler(
            groups=list(dict.fromkeys(groups)),
            node_name=node_name,
            once=options["once"],
            metrics=metrics,
        )
        if metrics is not None:
            metrics.attach(scheduler)
        try:
            run_with_workers(scheduler, workers=0 if options["once"] else workers)
        except NodeNameInUse as exc:
            raise CommandError(str(exc)) from None
        if options["once"] and scheduler.cut_offs:
            raise CommandError(
                "--once: work was cut off before it finished ("
                + "; ".join(dict.fromkeys(scheduler.cut_offs))
                + "); the next leader picks it up."
            )


def run_with_workers(scheduler: Scheduler, *, workers: int) -> None:
    """Run ``scheduler`` until it stops, with ``workers`` worker processes beside it.

    A signal stops both at once, so the workers' running jobs and the scheduler's share the
    one grace period (``INSTATIC_SHUTDOWN_GRACE``); workers still running when the scheduler
    has finished get what is left of it.
    """
    pool = WorkerPool(count=workers, node_name=scheduler.node.name) if workers else None
    if pool is not None:
        scheduler.problem_sources.append(pool.problems)  # its /healthz

    def stop() -> None:
        scheduler.stop()
        if pool is not None:
            pool.begin_stop(scheduler.grace_deadline() - time.monotonic())

    with graceful_signals(stop):
        if pool is not None:
            pool.start()
        try:
            scheduler.run()
        finally:
            if pool is not None:
                pool.stop(scheduler.grace_deadline() - time.monotonic())


def database_reachable(stop: threading.Event) -> bool:
    """Wait for the database (``INSTATIC_STARTUP_DB_WAIT``), logging each try; return False
    if ``stop`` was set meanwhile (nothing has started), raise :class:`CommandError` saying
    what is wrong if it stays unreachable."""
    problem = wait_for_database(
        float(settings.STARTUP_DB_WAIT), log=log_waiting_for_database, stop=stop
    )
    if stop.is_set():
        logger.info("stopped while waiting for the database; nothing had started")
        return False
    if problem:
        raise CommandError(problem)
    return True


def log_waiting_for_database(problem: str, delay: float) -> None:
    logger.warning("%s Trying again in %.1fs (INSTATIC_STARTUP_DB_WAIT).", problem, delay)
