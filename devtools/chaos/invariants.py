"""The soak's invariants: each a function of the soak and the database's end time.

Each returns ``(held, detail)`` from the database, the logs and the faults' records, and its
docstring says what it guarantees. ``INVARIANTS`` is the table the report prints, in order;
progress comes first, as the settle phase timed it.
"""

import bisect
import time
from collections import Counter
from collections.abc import Callable
from datetime import datetime, timedelta

from devtools.chaos.chain_checks import chain_runs_again_when_due
from devtools.chaos.clock import clock_text, utc
from devtools.chaos.config import (
    CHAIN_BOUND,
    CHAIN_FAULT_BOUND,
    CLAIMED_ELSEWHERE_PER_FAULT,
    DELIVERY_WAIT_BOUND,
    DOUBLE_FAULT_BOUND,
    FAILOVER_LEASE_BOUND,
    FENCED_RUN_LOG,
    JOBS,
    KILLED_RUN_BOUNDS,
    LATE_BOUND,
    LEASE_JOB,
    LEASE_TAKEOVER_BOUND,
    LEASE_TERM_MAX,
    LOG_STAMP,
    MISSED_REASONS,
    PGBOUNCER_RESTART_BOUND,
    PUBLISH_MAX_PER_MINUTE,
    QUEUE_WAIT_BOUND,
    RELEASE_SLUG,
    RETRIED_JOBS,
    SPIN_SLACK,
    TRANSACTIONAL_JOBS,
)
from devtools.chaos.evidence import (
    bounded_kind,
    busiest_minutes,
    claimed_elsewhere_lines,
    disturbances,
    kind_problems,
    lone_commits_near_probe_start,
    slot_gaps,
)
from devtools.chaos.faults.workers import SETTLE_BOUND
from devtools.chaos.image_checks import no_unreleased_image_served as image_not_early
from devtools.chaos.outbox_checks import (
    deliveries_without_fallback,
    events_reach_every_subscriber,
    transactional_subscriber_once,
    webhook_ids_received,
)
from devtools.chaos.queries import (
    CHAOS_OR_PUBLISH,
    dead_running_sql,
    placeholders,
    stuck_running_sql,
)
from devtools.chaos.release_checks import (
    releases_all_or_nothing,
    releases_go_out,
    releases_never_early,
    releases_once_per_post,
)
from devtools.chaos.review_checks import live_content_was_approved
from devtools.chaos.soak import Soak
from devtools.chaos.worker_checks import (
    abandoned_runs_retried,
    no_task_left_running,
    queue_wait_bounded,
    worker_attempts_once,
    worker_faults_settled,
    worker_pools_running,
    worker_slots_settled,
    worker_tx_effects_once,
)


def no_slot_twice(soak: Soak, end_db) -> tuple[bool, str]:
    """No (job, slot) has two effects: whatever failed, no slot ran twice.

    A job that retries abandoned runs has one effect per attempt; worker_attempts_once checks
    those.
    """
    twice = soak.query(
        "SELECT job, slot, count(*) FROM jobsapp_effect WHERE job LIKE 'chaosapp.%%'"
        f" AND job NOT IN ({placeholders(RETRIED_JOBS)}) GROUP BY job, slot HAVING count(*) > 1",
        RETRIED_JOBS,
    )
    return not twice, f"{len(twice)} doubled"


def effects_match_runs(soak: Soak, end_db) -> tuple[bool, str]:
    """Every effect of a transactional job has its succeeded ledger row (they commit together)."""
    orphans = soak.scalar(
        f"SELECT count(*) FROM jobsapp_effect e WHERE e.job IN ({placeholders(TRANSACTIONAL_JOBS)})"
        " AND NOT EXISTS (SELECT 1 FROM coordination_jobrun r WHERE r.job = e.job"
        " AND r.slot = e.slot AND r.status = 'succeeded')",
        TRANSACTIONAL_JOBS,
    )
    return orphans == 0, f"{orphans} without a run"


def ledger_complete(soak: Soak, end_db) -> tuple[bool, str]:
    """Every slot between a job's first and last scheduled row is there once; missed has why."""
    gaps = slot_gaps(soak)
    unexplained = soak.query(
        f"SELECT job, reason, count(*) FROM coordination_jobrun WHERE {CHAOS_OR_PUBLISH}"
        f" AND status = 'missed' AND reason NOT IN ({placeholders(MISSED_REASONS, 'r')})"
        " GROUP BY job, reason",
        {"publish": soak.publish_job, **{f"r{i}": r for i, r in enumerate(MISSED_REASONS)}},
    )
    missed = soak.scalar(
        "SELECT count(*) FROM coordination_jobrun WHERE job LIKE 'chaosapp.%%'"
        " AND status = 'missed'"
    )
    detail = f"{len(gaps)} gaps" + (f": {gaps[:3]}" if gaps else "") + f"; {missed} missed"
    if unexplained:
        detail += ", without a valid reason: " + ", ".join(
            f"{job} {n} ({reason or 'empty'!r})" for job, reason, n in unexplained[:3]
        )
    return not gaps and not unexplained, detail


def no_run_left_running(soak: Soak, end_db) -> tuple[bool, str]:
    """No run is left ``running`` on a dead node, nor running longer than any chaos job can."""
    dead, stuck = soak.scalar(dead_running_sql(soak.db)), soak.scalar(stuck_running_sql(soak.db))
    return dead == 0 and stuck == 0, f"{dead} of dead nodes, {stuck} running > 30 s"


def wakeups_served(soak: Soak, end_db) -> tuple[bool, str]:
    """Every wake-up a job was given is served by a run and cleared: none older than
    QUEUE_WAIT_BOUND before the settle phase ended is left on a job that can run (not
    paused, not retired). A wake-up left standing is a job planned at every tick, a spin."""
    before = soak.settled_db - timedelta(seconds=QUEUE_WAIT_BOUND)
    standing = soak.query(
        "SELECT name, wake_at FROM coordination_jobstate WHERE wake_at < %s"
        " AND NOT paused AND retired_at IS NULL ORDER BY name",
        (before,),
    )
    detail = ", ".join(f"{name} since {utc(at):%H:%M:%S}" for name, at in standing[:4])
    return not standing, detail or "none left standing"


def posts_published_once(soak: Soak, end_db) -> tuple[bool, str]:
    """Every post due before the end is published, once, with its ``published`` event."""
    q = soak.scalar
    unpublished = q(
        "SELECT count(*) FROM publishing_post WHERE status = 'scheduled'"
        " AND publish_at < %s AND last_error = ''",
        (end_db,),
    )
    doubles = q(
        "SELECT count(*) FROM (SELECT post_id FROM publishing_publishevent WHERE kind ="
        " 'published' GROUP BY post_id HAVING count(*) > 1) d"
    )
    without_event = q(
        "SELECT count(*) FROM publishing_post p WHERE status = 'published' AND NOT EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )
    total = q("SELECT count(*) FROM publishing_post WHERE status = 'published'")
    return (
        unpublished == 0 and doubles == 0 and without_event == 0,
        f"{total} published; {unpublished} overdue, {doubles} twice",
    )


def no_cancelled_published(soak: Soak, end_db) -> tuple[bool, str]:
    """No post whose schedule was cancelled (back to draft) was ever published; nor was a
    draft of a release that has not gone out (it is a draft too)."""
    out = soak.scalar(
        "SELECT count(*) FROM publishing_post p WHERE status = 'draft' AND EXISTS"
        " (SELECT 1 FROM publishing_publishevent e WHERE e.post_id = p.id"
        " AND e.kind = 'published')"
    )
    cancelled = soak.scalar(
        "SELECT count(*) FROM publishing_post WHERE status = 'draft' AND slug NOT LIKE %s",
        (f"%{RELEASE_SLUG}%",),
    )
    return out == 0, f"{cancelled} cancelled, {out} out"


def none_early(soak: Soak, end_db) -> tuple[bool, str]:
    """No post went live before its time (neither by its row nor by its event)."""
    early = soak.scalar(
        "SELECT count(*) FROM publishing_post WHERE published_at < publish_at"
    ) + soak.scalar(
        "SELECT count(*) FROM publishing_publishevent WHERE kind = 'published' AND lateness < 0"
    )
    return early == 0, f"{early} early"


def posts_on_time(soak: Soak, end_db) -> tuple[bool, str]:
    """Every post the scheduler published went live within LATE_BOUND of its time, unless a
    fault explains it (see Disturbance.explains); the detail names the worst that none does.

    The lone posts of the editors' quiet spells are the ones only a wake-up gets out on time.
    The release stream's posts were never scheduled on their own: their release's lateness
    is in the report (releases_go_out checks that each went out).
    """
    rows = soak.query(
        "SELECT p.id, p.slug, p.publish_at, e.lateness FROM publishing_publishevent e"
        " JOIN publishing_post p ON p.id = e.post_id"
        " WHERE e.kind = 'published' AND e.lateness IS NOT NULL AND p.slug NOT LIKE %s",
        (f"%{RELEASE_SLUG}%",),
    )
    spans = disturbances(soak)
    late = [
        (lateness, post_id, soak.local_time(publish_at))
        for post_id, _, publish_at, lateness in rows
        if lateness > LATE_BOUND
    ]
    unexplained = sorted(
        (item for item in late if not any(s.explains(item[1], item[2], item[0]) for s in spans)),
        reverse=True,
    )
    lone = [lateness for _, slug, _, lateness in rows if "-lone-" in slug]
    lone_ids = {post_id for post_id, slug, _, _ in rows if "-lone-" in slug}
    near = lone_commits_near_probe_start(soak)
    if unexplained:
        lateness, post_id, due = unexplained[0]
        lone_post = " (a lone post)" if post_id in lone_ids else ""
        return False, (
            f"{len(unexplained)} over {LATE_BOUND:.0f} s with no fault near; worst: post"
            f" {post_id}{lone_post} due {clock_text(due)}, {lateness:.1f} s late"
        )
    return True, (
        f"{len(rows)} published, max {max((r[3] for r in rows), default=0):.2f} s late"
        f" ({len(late)} over {LATE_BOUND:.0f} s, each in a fault); {len(lone)} lone posts"
        f" ({near} committed within 15 ms of the probe's start), max {max(lone, default=0):.2f} s"
    )


def progress(soak: Soak, end_db) -> tuple[bool, str]:
    """Every unpaused chaos job's next slot is within a period of now (settle waited enough).

    A job counts as stuck only if it lags in three samples 0.3 s apart, so a tick that is just
    under way is not mistaken for one that never comes.
    """
    lagging = soak.lagging_jobs()
    for _ in range(2):
        if not lagging:
            break
        time.sleep(0.3)
        lagging = {job: why for job, why in soak.lagging_jobs().items() if job in lagging}
    detail = "; ".join(f"{job}: {why}" for job, why in lagging.items())
    return not lagging, detail or f"all {len(JOBS)} jobs on schedule"


def ledger_rates(soak: Soak, end_db) -> tuple[bool, str]:
    """Runs per minute (any 60 s window) are bounded; manual runs match run-now requests; the
    publish job does not spin on a locked post."""
    busiest = busiest_minutes(soak)
    problems = []
    for job, count in busiest:
        if job == soak.publish_job:
            limit = PUBLISH_MAX_PER_MINUTE
        else:
            limit = 60 / JOBS[job].period * 1.2 + SPIN_SLACK
        if count > limit:
            problems.append(f"{job} {count}/min (limit {limit:.0f})")
    for job, count in soak.query(
        "SELECT job, count(*) FROM coordination_jobrun WHERE job LIKE 'chaosapp.%%'"
        f" AND {soak.db.q('trigger')} = 'manual' GROUP BY job"
    ):
        if count > soak.run_requests[job]:
            problems.append(f"{job} {count} manual runs for {soak.run_requests[job]} requests")
    rates = [f.rate for f in soak.faults if f.rate is not None]
    problems += [f.problem for f in soak.faults if f.kind == "rowlock" and "runs/s" in f.problem]
    publish = dict(busiest).get(soak.publish_job, 0)
    detail = f"publish max {publish}/min" + (
        f", {max(rates):.1f}/s while a post was locked" if rates else ""
    )
    return not problems, "; ".join(problems[:3]) or detail


def few_claimed_elsewhere(soak: Soak, end_db) -> tuple[bool, str]:
    """Each line is charged to the latest fault before it (or to the start-up).

    A spin goes on through later faults, so the detail names the first fault over the bound,
    the likely cause, rather than the one that happened to precede most of the lines.
    """
    stamps = claimed_elsewhere_lines(soak)
    walls = [fault.wall for fault in soak.faults]
    per_fault = Counter(bisect.bisect_right(walls, stamp) - 1 for stamp in stamps)
    over = sorted(i for i, n in per_fault.items() if n > CLAIMED_ELSEWHERE_PER_FAULT)
    if not over:
        return True, f"{len(stamps)} lines; at most {max(per_fault.values(), default=0)}/fault"
    first = over[0]
    culprit = "start-up" if first < 0 else f"{soak.faults[first].kind} #{first + 1}"
    if first >= 0:
        culprit += f" ({soak.faults[first].target})"
    return False, (
        f"{len(stamps)} lines; over {CLAIMED_ELSEWHERE_PER_FAULT} after {len(over)} fault(s),"
        f" first {per_fault[first]} after {culprit}"
    )


def no_self_overlap(soak: Soak, end_db) -> tuple[bool, str]:
    """No run starts before an earlier-started run of the same job has finished.

    A run ends at its ``finished_at``, or sooner at its start plus the duration its runner
    measured: ``finished_at`` is when the outcome was written, which a worker cut off by a
    partition writes only once it is back, seconds after its run ended. Abandoned rows are
    left out: their finish time is when another node noticed, not when the run ended.
    """
    overlaps = []
    prev_end: dict[str, datetime] = {}
    for job, slot, started_at, finished_at, duration in soak.query(
        "SELECT job, slot, started_at, finished_at, duration FROM coordination_jobrun WHERE"
        f" {CHAOS_OR_PUBLISH} AND started_at IS NOT NULL AND finished_at IS NOT NULL"
        " AND status NOT IN ('missed', 'abandoned') ORDER BY job, started_at, id",
        {"publish": soak.publish_job},
    ):
        if job in prev_end and started_at < prev_end[job]:
            overlaps.append((job, slot, prev_end[job] - started_at))
        ended = finished_at
        if duration is not None:
            ended = min(finished_at, started_at + timedelta(seconds=duration))
        prev_end[job] = max(ended, prev_end.get(job, ended))
    detail = f"{len(overlaps)} overlapping runs" + "".join(
        f"; {job} {slot:%H:%M:%S} by {gap.total_seconds():.1f} s" for job, slot, gap in overlaps[:3]
    )
    return not overlaps, detail


def processes_running(soak: Soak, end_db) -> tuple[bool, str]:
    """Every replica not deliberately stopped and the web process are still running."""
    dead = [r.name for r in soak.replicas.values() if not r.alive()]
    web_ok = soak.web is not None and soak.web.poll() is None
    return (
        not dead and web_ok,
        f"dead: {dead or 'none'}; web {'up' if web_ok else 'DOWN'}",
    )


def term_exits(soak: Soak, end_db) -> tuple[bool, str]:
    """Every SIGTERMed replica exited 0 (a clean shutdown, its runs finished or handed over)."""
    return kind_problems(soak, "term")


def once_exits(soak: Soak, end_db) -> tuple[bool, str]:
    """Every ``runscheduler --once`` exited 0, unless a fault cut its work off (said in its log)."""
    return kind_problems(soak, "once", "runs")


def lease_term_exits(soak: Soak, end_db) -> tuple[bool, str]:
    """A lease-mode replica stops within LEASE_TERM_MAX of SIGTERM and exits 0."""
    held, detail = kind_problems(soak, "leaseterm")
    times = [f.exit_seconds for f in soak.faults if f.kind == "leaseterm" and f.exit_seconds]
    return held, detail + (f"; slowest {max(times):.2f} s" if times else "")


def double_faults_lead_again(soak: Soak, end_db) -> tuple[bool, str]:
    """A group whose leader died while its first waiter was frozen leads again within
    DOUBLE_FAULT_BOUND of the kill."""
    return bounded_kind(soak, "doublefault")


def killed_runs_resume(soak: Soak, end_db) -> tuple[bool, str]:
    """A killed node's claim-first run is abandoned, and its job runs again, within the
    vendor's KILLED_RUN_BOUNDS of the kill."""
    held, detail = bounded_kind(soak, "killrun")
    return held, f"{detail}; bound {KILLED_RUN_BOUNDS[soak.db.vendor]:g} s"


def frozen_at_commit(soak: Soak) -> list:
    """The freeze-at-commit faults that froze a holder mid-commit (not skipped)."""
    return [f for f in soak.faults if f.kind == "freeze-at-commit" and f.slot is not None]


def frozen_slot_run_elsewhere(soak: Soak, end_db) -> tuple[bool, str]:
    """The slot a lease holder was frozen in mid-commit succeeded on another node, which wrote
    its one effect: the frozen node's commit never landed (no_slot_twice counts the effects of
    every slot; this names the frozen one)."""
    problems = []
    for fault in frozen_at_commit(soak):
        runs = soak.query(
            "SELECT node, status FROM coordination_jobrun WHERE job = %s AND slot = %s",
            (LEASE_JOB, fault.slot),
        )
        effects = [
            node
            for (node,) in soak.query(
                "SELECT node FROM jobsapp_effect WHERE job = %s AND slot = %s",
                (LEASE_JOB, fault.slot),
            )
        ]
        if [status for _, status in runs] != ["succeeded"] or runs[0][0] == fault.target:
            problems.append(f"{fault.target} slot {fault.slot:%H:%M:%S}: runs {runs}")
        elif effects != [runs[0][0]]:
            problems.append(f"{fault.target} slot {fault.slot:%H:%M:%S}: effects by {effects}")
    faults = frozen_at_commit(soak)
    return not problems, "; ".join(problems[:2]) or f"{len(faults)} slots, each run elsewhere"


def frozen_runs_rolled_back(soak: Soak, end_db) -> tuple[bool, str]:
    """A lease holder resumed after its lease passed mid-commit logs that its run rolled back
    or failed after the lock was lost (its ``COMMIT`` failed in the database)."""
    missing = []
    for fault in frozen_at_commit(soak):
        log_path = soak.workdir / f"{fault.target}.log"
        lines = log_path.read_text(errors="replace").splitlines() if log_path.exists() else []
        if not any(
            FENCED_RUN_LOG.search(line)
            and (stamp := LOG_STAMP.match(line))
            and datetime.strptime(stamp[1], "%Y-%m-%d %H:%M:%S,%f").timestamp() >= fault.wall
            for line in lines
        ):
            missing.append(fault.target)
    faults = frozen_at_commit(soak)
    return not missing, (
        f"no rollback logged by {', '.join(missing[:3])}"
        if missing
        else f"{len(faults)} frozen runs rolled back"
    )


def lease_takeovers_bounded(soak: Soak, end_db) -> tuple[bool, str]:
    """Another node took the lease of a holder frozen mid-commit within LEASE_TAKEOVER_BOUND
    of the freeze (lease + heartbeat + margin, by the database clock)."""
    held, detail = kind_problems(soak, "freeze-at-commit", "faults")
    gaps = [f.lead_gap for f in frozen_at_commit(soak) if f.lead_gap is not None]
    return held, detail + (f"; takeover {min(gaps):.2f}-{max(gaps):.2f} s" if gaps else "")


def pgbouncer_restarts_recover(soak: Soak, end_db) -> tuple[bool, str]:
    """After a PgBouncer restart the lease-mode group runs again within
    PGBOUNCER_RESTART_BOUND (by the database clock)."""
    held, detail = kind_problems(soak, "pgbouncer-restart", "restarts")
    gaps = [f.lead_gap for f in soak.faults if f.kind == "pgbouncer-restart" and f.lead_gap]
    return held, detail + (f"; worst {max(gaps):.2f} s" if gaps else "")


def failovers_resume_lease_group(soak: Soak, end_db) -> tuple[bool, str]:
    """After a failover the lease group runs again through PgBouncer, pointed at the new
    primary, within FAILOVER_LEASE_BOUND of the promotion (by the database clock)."""
    return kind_problems(soak, "failover", "failovers")


INVARIANTS: list[tuple[str, Callable[[Soak, object], tuple[bool, str]]]] = [
    ("progress: every job's next slot near now", progress),
    ("no (job, slot) ran twice", no_slot_twice),
    ("transactional effects match succeeded runs", effects_match_runs),
    ("ledger: each slot once; missed with a reason", ledger_complete),
    ("no run left 'running' (dead node or stuck)", no_run_left_running),
    ("every wake-up served by a run, none left standing", wakeups_served),
    ("every due post published exactly once", posts_published_once),
    ("no cancelled post published", no_cancelled_published),
    ("no post live before its time", none_early),
    (f"every post live within {LATE_BOUND:.0f} s, or a fault explains it", posts_on_time),
    ("no spin: ledger rows per minute bounded", ledger_rates),
    (
        f"no spin: <= {CLAIMED_ELSEWHERE_PER_FAULT} 'claimed elsewhere' per fault",
        few_claimed_elsewhere,
    ),
    ("no job overlaps itself", no_self_overlap),
    ("workers: every queued slot settled, none left queued/running", worker_slots_settled),
    ("workers: no transactional slot's effect twice", worker_tx_effects_once),
    ("workers: no attempt of a slot started twice", worker_attempts_once),
    ("workers: abandoned runs of retry_abandoned jobs retried", abandoned_runs_retried),
    ("workers: no task row left RUNNING", no_task_left_running),
    (f"workers: queue wait <= {QUEUE_WAIT_BOUND:.0f} s unless behind a fault", queue_wait_bounded),
    ("workers: every pool has its worker processes running", worker_pools_running),
    (
        f"workers: a faulted worker's run settled <= {SETTLE_BOUND:.0f} s, its process back",
        worker_faults_settled,
    ),
    (
        f"workers: a when-due job runs again <= {CHAIN_BOUND:.0f} s after its run said"
        f" ({CHAIN_FAULT_BOUND:.0f} s near a fault)",
        chain_runs_again_when_due,
    ),
    ("releases: every one due before the settle ended went out", releases_go_out),
    ("releases: all or nothing, every event at the release's time", releases_all_or_nothing),
    ("releases: none went out before its time", releases_never_early),
    ("releases: no post has two events from one release", releases_once_per_post),
    ("review: what went live is what a reviewer approved", live_content_was_approved),
    ("images: none served to the public before a post with it went live", image_not_early),
    ("outbox: every published event reached every subscriber", events_reach_every_subscriber),
    ("outbox: transactional subscriber exactly once per event", transactional_subscriber_once),
    (
        f"outbox: delivered <= {DELIVERY_WAIT_BOUND:.0f} s unless a fault was near",
        deliveries_without_fallback,
    ),
    ("outbox: every webhook id received, none succeeded twice", webhook_ids_received),
    ("every process not deliberately killed is running", processes_running),
    ("SIGTERM exits 0", term_exits),
    ("--once exits 0 unless cut off", once_exits),
    (f"lease-mode SIGTERM: stops within {LEASE_TERM_MAX:.0f} s, exits 0", lease_term_exits),
    (
        f"frozen waiter + killed leader: leads again <= {DOUBLE_FAULT_BOUND:.0f} s",
        double_faults_lead_again,
    ),
    (
        "killed node's claim-first job resumes <= its bound",
        killed_runs_resume,
    ),
    ("freeze-at-commit: frozen slot ran once, elsewhere", frozen_slot_run_elsewhere),
    ("freeze-at-commit: the frozen node's run rolled back", frozen_runs_rolled_back),
    (
        f"freeze-at-commit: lease taken over <= {LEASE_TAKEOVER_BOUND:.1f} s",
        lease_takeovers_bounded,
    ),
    (
        f"PgBouncer restart: lease group runs again <= {PGBOUNCER_RESTART_BOUND:.1f} s",
        pgbouncer_restarts_recover,
    ),
    (
        f"failover: lease group runs again <= {FAILOVER_LEASE_BOUND:.0f} s",
        failovers_resume_lease_group,
    ),
]


def check_invariants(soak: Soak, end_db) -> list[tuple[str, bool, str]]:
    """Run every check; progress first, as the settle phase timed it."""
    return [(name, *check(soak, end_db)) for name, check in INVARIANTS]
