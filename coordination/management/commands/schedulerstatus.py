"""``schedulerstatus``: who is alive, who leads each group, and how every job is doing.

Every job this process declares is listed, those no scheduler has started yet included (as in
``jobs list``); the table gives times in the site's zone with its name, durations and lateness
in words and a paused job's reason; ``--json`` gives the raw values (ISO times in UTC,
seconds), each job with its ``state`` in words besides.

It works while a release's ``jobs.py`` has bad declarations: they are printed first, on stderr
(``--json`` output stays valid JSON on stdout).
"""

import json
from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from django.conf import settings as django_settings
from django.core.management.base import BaseCommand, CommandError

from coordination.checks import OperatorCommand
from coordination.dberrors import ensure_connection
from coordination.joblist import listed_jobs, zoned
from coordination.registry import registry
from coordination.selectors import status_snapshot
from coordination.wording import duration_text, lateness_text


class Command(OperatorCommand, BaseCommand):
    help = "Show scheduler nodes, group leaders and job states (add --json for machines)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON: nodes, leaders, jobs.")

    def handle(self, *args, **options):
        self.print_declaration_errors()  # also with --skip-checks
        problem = ensure_connection()
        if problem:
            raise CommandError(problem)
        snapshot = status_snapshot()
        now = datetime.fromisoformat(snapshot["now"])
        snapshot["jobs"] = listed_jobs(snapshot["jobs"], registry.all(), now=now)
        if options["json"]:
            self.stdout.write(json.dumps(snapshot, indent=2, sort_keys=True))
            return
        zone = ZoneInfo(django_settings.TIME_ZONE)
        self._table(
            "Nodes",
            ["node", "host", "pid", "alive", "heartbeat", "groups", "jobs"],
            [
                [
                    n["name"],
                    n["host"],
                    str(n["pid"]),
                    node_state(n),
                    heartbeat_text(n, zone),
                    ",".join(n["groups"]),
                    f"{n['declared_jobs']}" + (" (differs)" if n["jobs_differ"] else ""),
                ]
                for n in snapshot["nodes"]
            ],
        )
        self._table(
            "Leaders",
            ["group", "node", "alive", "since", "key"],
            [
                [
                    row["group"],
                    row["node"],
                    "yes" if row["alive"] else "NO",
                    zoned(row["since"], zone),
                    f"0x{row['key'] & 0xFFFFFFFFFFFFFFFF:x}",
                ]
                for row in snapshot["leaders"]
            ],
        )
        self._table(
            "Jobs",
            [
                "job",
                "group",
                "schedule",
                "next slot",
                "last",
                "took",
                "late",
                "fails",
                "missed (in the ledger, by reason)",
                "state",
            ],
            [
                [
                    j["name"],
                    j["group"],
                    j["schedule"],
                    zoned(j["next_due"], zone),
                    j["last_status"] or "-",
                    duration_text(j["last_duration"]) if j["last_duration"] is not None else "-",
                    lateness_text(j["last_lateness"]) if j["last_lateness"] is not None else "-",
                    str(j["consecutive_failures"]),
                    ", ".join(f"{n} {why}" for why, n in sorted(j["missed"].items())) or "-",
                    j["state"],
                ]
                for j in snapshot["jobs"]
            ],
        )

    def _table(self, title: str, header: list[str], rows: list[list[str]]) -> None:
        self.stdout.write(self.style.MIGRATE_HEADING(f"{title} ({len(rows)})"))
        if not rows:
            self.stdout.write("  (none)\n")
            return
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=False)]
        for row in [header, *rows]:
            self.stdout.write(
                "  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False))
            )
        self.stdout.write("")


def heartbeat_text(node: dict, zone: tzinfo = UTC) -> str:
    """Return the "heartbeat" column of a node row: its age in words, but for an idle worker
    (which writes no heartbeat while idle: its last one is when it went idle) ``idle since``
    that instant in ``zone`` and for how long, not a heartbeat that looks stale."""
    age = duration_text(node["heartbeat_age"])
    if node_state(node) == "idle":
        return f"idle since {zoned(node['last_heartbeat'], zone)} ({age})"
    return f"{age} ago"


def node_state(node: dict) -> str:
    """Return the "alive" column of a node row: a worker process heartbeats only while it
    executes a run, so one that is not live and not stopped is ``idle``, not dead."""
    if node["alive"]:
        return "working" if node["role"] == "worker" else "yes"
    if node["stopped_at"]:
        return "stopped"
    return "idle" if node["role"] == "worker" else "NO"
