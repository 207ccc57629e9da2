"""Every job an operator can act on, as rows: ``jobs list`` and ``schedulerstatus`` show these.

The rows are the jobs with a state (:func:`~coordination.selectors.job_summaries`) and each job
this process declares that no scheduler has started yet (a fresh database, a new release), so
an operator sees, and can pause, a job before its first tick. Deciding the rows is a pure
function of the states, the declared jobs and the database time.
"""

from datetime import datetime, tzinfo

from coordination import ledger
from coordination.registry import Job
from coordination.wording import local_time

NOT_STARTED = "not started yet"


def listed_jobs(summaries: list[dict], declared: list[Job], *, now: datetime) -> list[dict]:
    """Return every job with a state, then each job declared here that no scheduler has
    started yet, sorted by group and name.

    Each row is a :func:`~coordination.selectors.job_summaries` row plus ``state`` (words:
    active, paused with its reason, ...); a job not started yet shows the slot its first
    scheduler will start it at.
    """
    rows = [{**summary, "state": state_text(summary)} for summary in summaries]
    known = {summary["name"] for summary in summaries}
    for job in declared:
        if job.name not in known:
            rows.append(_not_started(job, now))
    return sorted(rows, key=lambda row: (row["group"], row["name"]))


def _not_started(job: Job, now: datetime) -> dict:
    state = NOT_STARTED
    try:
        next_due = ledger.first_due(job, now)
    except Exception as exc:
        next_due, state = None, f"{NOT_STARTED} ({ledger.unplannable(exc)})"
    return {
        "name": job.name,
        "group": job.group,
        "schedule": job.schedule.describe(),
        "next_due": next_due.isoformat() if next_due else None,
        "last_status": None,
        "last_finished_at": None,
        "last_duration": None,
        "last_lateness": None,
        "last_node": None,
        "consecutive_failures": 0,
        "paused": False,
        "paused_reason": None,
        "run_requested": False,
        "retired": False,
        "missed": {},
        "current_run": None,
        "state": state,
    }


def state_text(job: dict) -> str:
    """Return a job row's state in words: ``retired``, ``paused (why)``, ``queued for a
    worker``, ``running on <node>``, ``run requested``, ``active``."""
    if job["retired"]:
        return "retired"
    if job["paused"]:
        return f"paused ({job['paused_reason']})" if job["paused_reason"] else "paused"
    run = job.get("current_run")
    if run is not None:
        if run["status"] == "queued":
            return "queued for a worker"
        return f"running on {run['node']}"
    return "run requested" if job["run_requested"] else "active"


def zoned(instant: str | None, zone: tzinfo) -> str:
    """Return an ISO instant of a row as ``2026-12-01 23:00:00 CET`` in ``zone`` (``none``:
    no slot)."""
    if instant is None:
        return "none"
    return local_time(datetime.fromisoformat(instant), zone)
