"""Reads of scheduler state, for the loops, the status command and the admin."""

from datetime import datetime, timedelta

from django.db.models import BooleanField, Count, ExpressionWrapper, Min, Q
from django.db.models.functions import Now

from coordination.clock import database_now
from coordination.conf import settings
from coordination.models import JobRun, JobState, Leadership, LeadershipTerm, Node

#: The job state columns a tick reads (planning, maintenance checks, pause reasons); the
#: others (last outcome, error text...) are written by runs and read by people.
TICK_FIELDS = (
    "name",
    "group",
    "fingerprint",
    "next_due",
    "wake_at",
    "run_requested_at",
    "run_requested_by",
    "paused",
    "paused_reason",
    "retired_at",
    "last_finished_at",
)


def group_states(group: str, *, exclude_instance: str = "") -> tuple[datetime, list]:
    """Return (database now, the group's job states) in one round trip when there are states.

    Each state carries ``busy_elsewhere``: a live node other than ``exclude_instance`` still
    has a run of the job going (an ex-leader that lost only its lock, a worker process), or a
    run of it is queued for a worker, so starting the job now would overlap it. That is one
    ``IN`` over the runs in progress (found through the ``(status, -slot)`` index and hashed
    once), not a probe of the ledger per job; and the states are read-only rows of the
    columns a tick reads (named tuples with ``JobState``'s attribute names), not model
    instances: a tick of a thousand jobs stays cheap.
    """
    running_elsewhere = JobRun.objects.filter(
        Q(status=JobRun.Status.QUEUED)
        | (
            JobRun.in_progress()
            & ~Q(node_instance=exclude_instance)
            & Q(node_instance__in=live_instances())
        )
    ).values("job")
    states = list(
        JobState.objects.filter(group=group)
        .annotate(
            db_now=Now(),
            busy_elsewhere=ExpressionWrapper(
                Q(name__in=running_elsewhere), output_field=BooleanField()
            ),
        )
        .values_list(*TICK_FIELDS, "db_now", "busy_elsewhere", named=True)
    )
    now = states[0].db_now if states else database_now()
    return now, states


def live_nodes_q(now: datetime | None = None) -> Q:
    """Return the filter for nodes that heartbeated within the lease and did not stop."""
    cutoff = (now or Now()) - timedelta(seconds=float(settings.LEASE))
    return Q(stopped_at__isnull=True, last_heartbeat__gte=cutoff)


def live_schedulers_q(now: datetime | None = None) -> Q:
    """Return the filter for live scheduler nodes (not the worker processes beside them)."""
    return live_nodes_q(now) & Q(role=Node.Role.SCHEDULER)


def live_instances(now: datetime | None = None):
    """Return a subquery of the instance ids of live nodes."""
    return Node.objects.filter(live_nodes_q(now)).values("instance")


def first_lease_end_with_runs(job_names: list[str], *, besides: str) -> datetime | None:
    """Return when the first live scheduler node other than ``besides`` with a run of
    ``job_names`` in progress passes its lease (its last heartbeat plus the lease, the
    database's clock), or ``None``: a leader that could not prove such a node gone looks
    again then, not a fixed while after it took over."""
    oldest = (
        Node.objects.filter(live_schedulers_q())
        .exclude(instance=besides)
        .filter(
            instance__in=JobRun.objects.filter(JobRun.in_progress(), job__in=job_names).values(
                "node_instance"
            )
        )
        .aggregate(oldest=Min("last_heartbeat"))["oldest"]
    )
    return None if oldest is None else oldest + timedelta(seconds=float(settings.LEASE))


def any_live_node() -> bool:
    """Return True if a scheduler node is alive (editors are warned when none is)."""
    return Node.objects.filter(live_schedulers_q()).exists()


def declared_by_live_nodes(now: datetime | None = None) -> set[str]:
    """Return every job name that some live node declares."""
    names: set[str] = set()
    for declared in Node.objects.filter(live_nodes_q(now)).values_list("declared_jobs", flat=True):
        names.update(declared or [])
    return names


def runs_awaiting_retry(*, abandoned: list[str], failed: list[str]) -> list[JobRun]:
    """Return the runs another attempt may take, oldest slot first: abandoned runs of the jobs
    in ``abandoned`` (``retry_abandoned``) and failed runs with a retry time of the jobs in
    ``failed`` (``retries``)."""
    wanted = Q(job__in=abandoned, status=JobRun.Status.ABANDONED) | Q(
        job__in=failed, status=JobRun.Status.FAILED, retry_at__isnull=False
    )
    if not abandoned and not failed:
        return []
    return list(JobRun.objects.filter(wanted).order_by("slot")[:100])


def status_snapshot() -> dict:
    """Return what ``schedulerstatus`` shows: nodes, leaders and jobs, with the database time."""
    now = database_now()
    lease = timedelta(seconds=float(settings.LEASE))
    nodes = list(Node.objects.all())
    fingerprints = {
        n.jobs_fingerprint
        for n in nodes
        if n.stopped_at is None and n.last_heartbeat >= now - lease
    }
    node_rows = []
    alive_names = set()
    for node in nodes:
        alive = node.stopped_at is None and node.last_heartbeat >= now - lease
        if alive:
            alive_names.add(node.name)
        node_rows.append(
            {
                "name": node.name,
                "role": node.role,
                "host": node.host,
                "pid": node.pid,
                "alive": alive,
                "groups": node.groups,
                "started_at": node.started_at.isoformat(),
                "last_heartbeat": node.last_heartbeat.isoformat(),
                "heartbeat_age": round((now - node.last_heartbeat).total_seconds(), 3),
                "stopped_at": node.stopped_at.isoformat() if node.stopped_at else None,
                "declared_jobs": len(node.declared_jobs or []),
                "jobs_fingerprint": node.jobs_fingerprint,
                "jobs_differ": alive and len(fingerprints) > 1,
            }
        )
    leaders = [
        {
            "group": row.group,
            "node": row.node,
            "alive": row.node in alive_names,
            "since": row.since.isoformat(),
            "key": row.key,
        }
        for row in Leadership.objects.all()
    ]
    jobs = job_summaries()
    return {"now": now.isoformat(), "nodes": node_rows, "leaders": leaders, "jobs": jobs}


def job_summaries() -> list[dict]:
    """Every job's state as plain data: ``schedulerstatus`` and ``jobs list`` print these."""
    missed: dict[str, dict[str, int]] = {}
    for row in (
        JobRun.objects.filter(status=JobRun.Status.MISSED)
        .values("job", "reason")
        .annotate(count=Count("id"))
    ):
        missed.setdefault(row["job"], {})[row["reason"] or "unknown"] = row["count"]
    current = current_runs()
    return [
        {
            "name": state.name,
            "group": state.group,
            "schedule": state.schedule,
            "next_due": state.next_due.isoformat() if state.next_due else None,
            "last_status": state.last_status or None,
            "last_finished_at": (
                state.last_finished_at.isoformat() if state.last_finished_at else None
            ),
            "last_duration": state.last_duration,
            "last_lateness": state.last_lateness,
            "last_node": state.last_node or None,
            "consecutive_failures": state.consecutive_failures,
            "paused": state.paused,
            "paused_reason": state.paused_reason or None,
            "run_requested": state.run_requested_at is not None,
            "retired": state.retired_at is not None,
            "missed": missed.get(state.name, {}),
            "current_run": current.get(state.name),
        }
        for state in JobState.objects.all()
    ]


def current_runs() -> dict[str, dict]:
    """Return each job's run now queued for a worker or in progress (the newest, if more):
    its status, the node running it (or that queued it) and since when."""
    runs: dict[str, dict] = {}
    for job, status, node, queued_at, started_at in (
        JobRun.objects.filter(JobRun.outstanding())
        .order_by("slot")
        .values_list("job", "status", "node", "queued_at", "started_at")
    ):
        since = started_at if status != JobRun.Status.QUEUED else queued_at
        runs[job] = {
            "status": status,
            "node": node,
            "since": since.isoformat() if since else None,
        }
    return runs


def timeline_rows(
    *, jobs: list[str], groups: list[str], start: datetime, end: datetime, limit: int
) -> tuple[list[JobRun], list[LeadershipTerm], bool]:
    """Return the runs and leadership terms to draw between ``start`` and ``end``.

    Runs are found by slot through the ``(job, -slot)`` index: those whose slot is in the
    window, plus earlier ones still going in it (looked for one window back, and any run still
    marked running). At most ``limit`` runs, the newest; the flag says whether more were left out.
    """
    lookback = start - (end - start)
    candidates = (
        JobRun.objects.filter(job__in=jobs)
        .filter(
            Q(slot__gte=start, slot__lt=end)
            | Q(slot__gte=lookback, slot__lt=start, finished_at__gte=start)
            | Q(status=JobRun.Status.RUNNING, slot__lt=end)
        )
        .defer("requested_by")
        .order_by("-slot")
    )
    runs = list(candidates[: limit + 1])
    terms = list(
        LeadershipTerm.objects.filter(group__in=groups, started_at__lt=end)
        .filter(Q(ended_at__isnull=True) | Q(ended_at__gte=start))
        .order_by("started_at")
    )
    return runs[:limit], terms, len(runs) > limit


#: How long past due a job still counts as about to run (``group_busy``): longer, and no
#: leader is running it (a group no scheduler leads must not hold other work back for ever).
DUE_NOW_WINDOW = timedelta(seconds=30)


def group_busy(group: str) -> bool:
    """Return whether ``group``'s work is going on: a run of one of its jobs queued or in
    progress, or a job of it (not paused) due within the last ``DUE_NOW_WINDOW``. One query."""
    states = JobState.objects.filter(group=group, paused=False, retired_at__isnull=True)
    recently = Now() - DUE_NOW_WINDOW
    due = Q(next_due__lte=Now(), next_due__gte=recently) | Q(
        wake_at__lte=Now(), wake_at__gte=recently
    )
    return states.filter(
        due | Q(name__in=JobRun.objects.filter(JobRun.outstanding()).values("job"))
    ).exists()
