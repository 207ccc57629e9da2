"""The soak's invariant of its when-due job on workers (``config.CHAIN_JOB``): it runs again
when its last run said, so no wake-up between a worker, the ledger and the leader is lost.
``invariants.INVARIANTS`` lists it."""

from devtools.chaos.clock import clock_text
from devtools.chaos.config import (
    CHAIN_ANSWER,
    CHAIN_BOUND,
    CHAIN_FAULT_BOUND,
    CHAIN_GROUP,
    CHAIN_JOB,
)
from devtools.chaos.evidence import waited_behind, worker_disturbances
from devtools.chaos.soak import Soak


def chain_runs_again_when_due(soak: Soak, end_db) -> tuple[bool, str]:
    """Each succeeded or abandoned run of CHAIN_JOB is followed by a queued run within
    CHAIN_BOUND of when the job was next due (CHAIN_ANSWER after a succeeded run, its answer;
    at once after one abandoned with its worker), or within CHAIN_FAULT_BOUND when the wait
    overlaps a fault window (WORKER_DISRUPTIONS). A failed run (its worker's sessions ended
    mid-run) gave no answer and has no retries: its job waits for its fallback, as the policy
    says, and is not checked; nor is a due time less than the bound before the end."""
    if CHAIN_GROUP not in soak.session_groups:
        return True, f"not run on {soak.db.vendor}: its leaders poll every second"
    runs = soak.query(
        "SELECT status, queued_at, finished_at, id, node FROM coordination_jobrun WHERE job = %s"
        " AND queued_at IS NOT NULL ORDER BY queued_at",
        (CHAIN_JOB,),
    )
    spans = worker_disturbances(soak)
    end = soak.local_time(end_db)
    checked, near_fault, failed, over = 0, 0, 0, []
    worst = {False: 0.0, True: 0.0}  # with no fault near, with one
    for (status, _, finished, run_id, node), following in zip(runs, [*runs[1:], None], strict=True):
        if finished is None or status not in ("succeeded", "abandoned"):
            failed += finished is not None
            continue
        due = soak.local_time(finished) + (CHAIN_ANSWER if status == "succeeded" else 0.0)
        queued = soak.local_time(following[1]) if following is not None else end
        behind = waited_behind(spans, due, queued)
        bound = CHAIN_FAULT_BOUND if behind else CHAIN_BOUND
        if following is None and due + bound > end:
            continue
        checked += 1
        near_fault += behind
        wait = queued - due
        worst[behind] = max(worst[behind], wait)
        if wait > bound:
            over.append((wait, due, behind, f"run {run_id} {status} on {node or '-'}"))
    if not checked:
        return False, f"no run of {CHAIN_JOB} to check"
    if over:
        wait, due, behind, which = max(over)
        return False, (
            f"{len(over)} of {checked} runs followed late; worst {wait:.1f} s after"
            f" {clock_text(due)} ({which}; {'a fault near' if behind else 'no fault near'})"
        )
    return True, (
        f"{checked} runs, the next at most {worst[False]:.2f} s after it was due;"
        f" {near_fault} with a fault near, at most {worst[True]:.2f} s; {failed} failed"
    )
