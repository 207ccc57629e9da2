"""The soak's invariants of runs on worker processes: every queued slot settled, no effect or
attempt twice, abandoned runs retried, no task left running, the queue's wait bounded, every
pool at strength, every faulted worker's run settled in time. ``invariants.INVARIANTS`` lists
them."""

from collections import Counter

from devtools.chaos.config import QUEUE_WAIT_BOUND, RETRIED_JOBS, TRANSACTIONAL_JOBS, WORKER_JOBS
from devtools.chaos.evidence import kind_problems, waited_behind, worker_disturbances
from devtools.chaos.queries import placeholders
from devtools.chaos.soak import Soak


def worker_slots_settled(soak: Soak, end_db) -> tuple[bool, str]:
    """Every slot of a workers job queued before the end has ended succeeded, failed,
    abandoned or missed once the soak settled: no run is left queued or running (a lost task
    is queued again, a dead worker's run abandoned or rolled back and run again)."""
    left = soak.query(
        "SELECT job, slot, status, attempt, node FROM coordination_jobrun"
        " WHERE status NOT IN ('succeeded', 'failed', 'abandoned', 'missed')"
        f" AND queued_at < %s AND job IN ({placeholders(WORKER_JOBS)}) ORDER BY slot",
        (end_db, *WORKER_JOBS),
    )
    counts = dict(
        soak.query(
            "SELECT status, count(*) FROM coordination_jobrun WHERE queued_at < %s"
            f" AND job IN ({placeholders(WORKER_JOBS)}) GROUP BY status",
            (end_db, *WORKER_JOBS),
        )
    )
    detail = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    if left:
        detail = f"{len(left)} left: " + "; ".join(
            f"{job} {slot:%H:%M:%S} {status} (attempt {attempt}, {node or '-'})"
            for job, slot, status, attempt, node in left[:3]
        )
    return not left, detail or "no runs queued"


def worker_tx_effects_once(soak: Soak, end_db) -> tuple[bool, str]:
    """No slot of a transactional workers job has two effects: a worker that died, froze past
    the lease or lost its session mid-run rolled its effect back with its run."""
    jobs = [job for job in WORKER_JOBS if job in TRANSACTIONAL_JOBS]
    twice = soak.query(
        f"SELECT job, slot, count(*) FROM jobsapp_effect WHERE job IN ({placeholders(jobs)})"
        " GROUP BY job, slot HAVING count(*) > 1",
        jobs,
    )
    total = soak.scalar(
        f"SELECT count(*) FROM jobsapp_effect WHERE job IN ({placeholders(jobs)})", jobs
    )
    detail = f"{total} effects, {len(twice)} doubled" + "".join(
        f"; {job} {slot:%H:%M:%S} x{n}" for job, slot, n in twice[:3]
    )
    return not twice, detail


def worker_attempts_once(soak: Soak, end_db) -> tuple[bool, str]:
    """No attempt of a slot started twice (the ledger's attempt semantics): a claim-first job
    that retries abandoned runs writes one effect per start, naming the attempt its ledger row
    had (``node#attempt``). Two effects of one attempt, or an effect of an attempt the ledger
    never reached, is a second start; a succeeded run's last attempt started on its node."""
    effects = Counter()
    for job, slot, node in soak.query(
        f"SELECT job, slot, node FROM jobsapp_effect WHERE job IN ({placeholders(RETRIED_JOBS)})",
        RETRIED_JOBS,
    ):
        name, _, attempt = node.rpartition("#")
        effects[(job, slot, int(attempt), name)] += 1
    started = Counter()
    for (job, slot, attempt, _), n in effects.items():
        started[(job, slot, attempt)] += n
    ledger = {
        (job, slot): (status, attempt, node)
        for job, slot, status, attempt, node in soak.query(
            "SELECT job, slot, status, attempt, node FROM coordination_jobrun"
            f" WHERE job IN ({placeholders(RETRIED_JOBS)})",
            RETRIED_JOBS,
        )
    }
    problems = [
        f"{job} {slot:%H:%M:%S} attempt {attempt} started {n} times"
        for (job, slot, attempt), n in started.items()
        if n > 1
    ]
    problems += [
        f"{job} {slot:%H:%M:%S} attempt {attempt} started, ledger at"
        f" {ledger.get((job, slot), ('-', 0))[1]}"
        for (job, slot, attempt) in started
        if attempt > ledger.get((job, slot), ("", 0, ""))[1]
    ]
    problems += [
        f"{job} {slot:%H:%M:%S} succeeded on {node} (attempt {attempt}) without its start"
        for (job, slot), (status, attempt, node) in ledger.items()
        if status == "succeeded" and effects[(job, slot, attempt, node)] != 1
    ]
    retried = sum(1 for status, attempt, _ in ledger.values() if attempt > 1)
    return not problems, "; ".join(problems[:3]) or (
        f"{sum(started.values())} starts of {len(ledger)} slots, {retried} retried"
    )


def abandoned_runs_retried(soak: Soak, end_db) -> tuple[bool, str]:
    """Every run of a ``retry_abandoned`` workers job abandoned before the end (its worker
    died, froze or was cut off mid-run) was tried again by the time the soak settled: an
    abandoned row becomes the retry's (``attempt`` + 1), so none is left abandoned."""
    left = soak.query(
        "SELECT job, slot, error FROM coordination_jobrun WHERE status = 'abandoned'"
        f" AND finished_at < %s AND job IN ({placeholders(RETRIED_JOBS)}) ORDER BY slot",
        (end_db, *RETRIED_JOBS),
    )
    retried = soak.scalar(
        "SELECT count(*) FROM coordination_jobrun WHERE attempt > 1"
        f" AND job IN ({placeholders(RETRIED_JOBS)})",
        RETRIED_JOBS,
    )
    detail = f"{retried} retried, {len(left)} left abandoned" + "".join(
        f"; {job} {slot:%H:%M:%S} ({error[:60]})" for job, slot, error in left[:2]
    )
    return not left, detail


def no_task_left_running(soak: Soak, end_db) -> tuple[bool, str]:
    """No task row of Instatic's queue (django-tasks-db, ``instatic-runs``) enqueued before the
    end is still RUNNING once the soak settled: the leader's sweep fails the tasks of dead
    workers."""
    from django_tasks_db.models import DBTaskResult

    from coordination.workers.tasks import QUEUE_NAME

    table = DBTaskResult._meta.db_table
    counts = dict(
        soak.query(
            f"SELECT status, count(*) FROM {table} WHERE queue_name = %s AND enqueued_at < %s"
            " GROUP BY status",
            (QUEUE_NAME, end_db),
        )
    )
    running = counts.get("RUNNING", 0)
    detail = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return running == 0, detail or "no tasks"


def queue_wait_bounded(soak: Soak, end_db) -> tuple[bool, str]:
    """A queued run starts within QUEUE_WAIT_BOUND of being queued (``started_at -
    queued_at``), unless it waited behind a fault that holds up the queue (the soak's fault
    windows, WORKER_DISRUPTIONS) or for the worker processes to start."""
    spans = worker_disturbances(soak)
    checked, excluded, worst, over = 0, 0, (0.0, "", None), []
    for job, slot, queued_at, started_at in soak.query(
        "SELECT job, slot, queued_at, started_at FROM coordination_jobrun WHERE queued_at < %s"
        f" AND started_at IS NOT NULL AND job IN ({placeholders(WORKER_JOBS)})",
        (end_db, *WORKER_JOBS),
    ):
        wait = (started_at - queued_at).total_seconds()
        if waited_behind(spans, soak.local_time(queued_at), soak.local_time(started_at)):
            excluded += 1
            continue
        checked += 1
        worst = max(worst, (wait, job, slot))
        if wait > QUEUE_WAIT_BOUND:
            over.append((wait, job, slot))
    if over:
        wait, job, slot = max(over)
        return False, (
            f"{len(over)} of {checked} waited over {QUEUE_WAIT_BOUND:.0f} s with no fault near;"
            f" worst {job} {slot:%H:%M:%S} {wait:.1f} s"
        )
    wait, job, slot = worst
    return True, f"{checked} runs, max {wait:.2f} s" + (
        f" ({job} {slot:%H:%M:%S})" if slot else ""
    ) + f"; {excluded} behind a fault or the start-up left out"


def worker_pools_running(soak: Soak, end_db) -> tuple[bool, str]:
    """Every live replica and the worker-only node have all their worker processes running:
    a pool starts a killed or fenced worker again."""
    targets = Counter(t.parent.name for t in soak.worker_targets())
    short = [
        f"{r.name} {targets[r.name]}/{r.workers}"
        for r in soak.replicas.values()
        if r.workers and r.alive() and targets[r.name] < r.workers
    ]
    return not short, "short: " + ", ".join(short) if short else f"{sum(targets.values())} live"


#: The faults aimed at a worker process (``faults.workers``).
WORKER_FAULTS = ("workerkill", "workerfreeze", "workersession")


def worker_faults_settled(soak: Soak, end_db) -> tuple[bool, str]:
    """Each fault aimed at a worker process saw the run it held leave ``running`` within
    ``SETTLE_BOUND`` (abandoned and retried, rolled back and run again, or finished), and its
    pool start it again: the account each fault gave of itself (``faults.workers``). A killed
    worker holding runs of several groups has each released by its own group's leader."""
    results = [(kind, *kind_problems(soak, kind, "faults")) for kind in WORKER_FAULTS]
    return all(held for _, held, _ in results), "; ".join(
        f"{kind} {detail}" for kind, _, detail in results
    )
