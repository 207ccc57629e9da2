"""``manage.py jobs``: list, pause, resume and run scheduled jobs from the command line.

Each action calls the same service as the admin's (``plugins.services``), so it is checked the
same way and recorded in the audit trail, under the operating-system user who ran it.
``jobs run NAME --wait`` follows the manual run to its outcome and exits non-zero unless it
succeeded, for deploy scripts and cron wrappers.

It works while a release's ``jobs.py`` has bad declarations (printed first, on stderr), so an
operator can pause jobs while that release is out; ``jobs list`` shows every job this process
declares, those no scheduler has started yet included.
"""

import json
import time
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError

from coordination.checks import OperatorCommand
from coordination.clock import database_now
from coordination.dberrors import ensure_connection
from coordination.joblist import listed_jobs, zoned
from coordination.models import JobRun, JobState, Leadership, Node
from coordination.registry import registry
from coordination.selectors import job_summaries, live_nodes_q
from coordination.wording import duration_text
from plugins import services
from plugins.exceptions import ControlError

#: How often ``--wait`` looks at the ledger.
POLL_SECONDS = 0.25
FINISHED = {
    JobRun.Status.SUCCEEDED,
    JobRun.Status.FAILED,
    JobRun.Status.TIMED_OUT,
    JobRun.Status.ABANDONED,
}


class Command(OperatorCommand, BaseCommand):
    help = "List, pause, resume or run scheduled jobs (the admin's controls, audited)."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = actions.add_parser("list", help="Every job with its state and last outcome.")
        listing.add_argument("--json", action="store_true", help="Print JSON for machines.")
        pause = actions.add_parser("pause", help="Pause a job: its slots pass as missed.")
        pause.add_argument("name", help="The job's full name, e.g. example.digest")
        pause.add_argument("--reason", default="", help="Why (shown in the admin and audit).")
        resume = actions.add_parser("resume", help="Resume a paused job at its next slot.")
        resume.add_argument("name")
        run = actions.add_parser("run", help="Ask the leader to run a job now, even if paused.")
        run.add_argument("name")
        run.add_argument(
            "--wait",
            action="store_true",
            help="Follow the run to its outcome; exit 1 unless it succeeded.",
        )
        run.add_argument(
            "--timeout",
            type=float,
            default=600.0,
            help="With --wait: give up waiting after this many seconds (exit 2; default 600).",
        )

    def handle(self, *args, **options):
        self.print_declaration_errors()  # also with --skip-checks
        problem = ensure_connection()
        if problem:
            raise CommandError(problem)
        action = options["action"]
        if action == "list":
            self._list(as_json=options["json"])
            return
        actor = services.os_actor()
        name = options["name"]
        try:
            if action == "pause":
                services.pause_job(job_name=name, user=None, reason=options["reason"], actor=actor)
                self.stdout.write(f"paused {name}")
            elif action == "resume":
                services.resume_job(job_name=name, user=None, actor=actor)
                self.stdout.write(f"resumed {name}")
            else:
                self._run(name, actor, wait=options["wait"], timeout=options["timeout"])
        except ControlError as exc:
            raise CommandError(str(exc)) from None

    def _list(self, *, as_json: bool) -> None:
        jobs = listed_jobs(job_summaries(), registry.all(), now=database_now())
        if as_json:
            self.stdout.write(json.dumps(jobs, indent=2, sort_keys=True))
            return
        header = ["job", "group", "schedule", "state", "next slot", "last", "fails"]
        rows = [
            [
                job["name"],
                job["group"],
                job["schedule"] or "-",
                job["state"],
                zoned(job["next_due"], ZoneInfo(django_settings.TIME_ZONE)),
                job["last_status"] or "-",
                str(job["consecutive_failures"]),
            ]
            for job in jobs
        ]
        widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=False)]
        for row in [header, *rows]:
            self.stdout.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)))

    def _run(self, name: str, actor: str, *, wait: bool, timeout: float) -> None:
        asked_at = database_now()
        services.run_job_now(job_name=name, user=None, actor=actor)
        self.stdout.write(f"asked the scheduler to run {name} now")
        leader = _live_leader(name)
        if leader is None:
            self.stderr.write(
                f"no live scheduler leads {name}'s group: the run waits until one does "
                "(start `manage.py runscheduler`)"
            )
        if not wait:
            return
        deadline = time.monotonic() + timeout
        seen_running = False
        while time.monotonic() < deadline:
            run = (
                JobRun.objects.filter(
                    job=name,
                    trigger=JobRun.Trigger.MANUAL,
                    requested_by=actor[:150],
                    started_at__gte=asked_at,
                )
                .order_by("-started_at")
                .first()
            )
            if run is not None and run.status in FINISHED:
                self._outcome(run)
                return
            if run is not None and not seen_running:
                seen_running = True
                self.stdout.write(f"running on {run.node} (slot {run.slot.isoformat()})")
            time.sleep(POLL_SECONDS)
        self.stderr.write(f"{name}: no outcome within {timeout:g}s; it may still run")
        raise SystemExit(2)

    def _outcome(self, run: JobRun) -> None:
        took = f" in {duration_text(run.duration)}" if run.duration is not None else ""
        if run.status == JobRun.Status.SUCCEEDED:
            self.stdout.write(f"{run.job} succeeded on {run.node}{took}")
            return
        error = run.error.strip().splitlines()[-1] if run.error.strip() else ""
        raise CommandError(
            f"{run.job} {run.status.replace('_', ' ')} on {run.node}{took}"
            + (f": {error}" if error else "")
        )


def _live_leader(job_name: str) -> str | None:
    group = JobState.objects.filter(name=job_name).values_list("group", flat=True).first()
    live = Node.objects.filter(live_nodes_q()).values_list("name", flat=True)
    row = Leadership.objects.filter(group=group, node__in=live).first()
    return row.node if row else None
