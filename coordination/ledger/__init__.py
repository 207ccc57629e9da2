"""Writes to the run ledger and job state: claiming slots, recording outcomes.

This package is the one writer of ``JobRun`` and ``JobState`` rows: the loop, the runner, the
journal, the services other apps call and the retention plugin record through its functions,
one for each thing recorded, and read elsewhere (``coordination.selectors``).

The unique constraint on (job, slot) is what makes a slot run once: a claim is an INSERT that
a second claimant cannot make, whoever thinks it leads.

Its modules by what they record: ``states`` (job states), ``claims`` (the rows that make a
slot run once, retries, runs queued for workers), ``outcomes`` (how runs end), ``missed``
(slots that will not run) and ``abandonment`` (runs of dead nodes, retention).
"""

from coordination.ledger.abandonment import (
    VANISHED_REASON as VANISHED_REASON,
)
from coordination.ledger.abandonment import (
    abandon_gone as abandon_gone,
)
from coordination.ledger.abandonment import (
    abandon_orphans as abandon_orphans,
)
from coordination.ledger.abandonment import (
    abandon_own as abandon_own,
)
from coordination.ledger.abandonment import (
    abandon_vanished as abandon_vanished,
)
from coordination.ledger.abandonment import (
    delete_runs as delete_runs,
)
from coordination.ledger.claims import (
    claim as claim,
)
from coordination.ledger.claims import (
    claim_retry as claim_retry,
)
from coordination.ledger.claims import (
    claim_scheduled as claim_scheduled,
)
from coordination.ledger.claims import (
    restore_lost_run as restore_lost_run,
)
from coordination.ledger.claims import (
    skip_queued as skip_queued,
)
from coordination.ledger.claims import (
    startable_sql as startable_sql,
)
from coordination.ledger.claims import (
    take_queued as take_queued,
)
from coordination.ledger.claims import (
    take_queued_batch as take_queued_batch,
)
from coordination.ledger.claims import (
    take_retry as take_retry,
)
from coordination.ledger.missed import (
    MISSED_BATCH as MISSED_BATCH,
)
from coordination.ledger.missed import (
    record_missed as record_missed,
)
from coordination.ledger.missed import (
    skip_slots as skip_slots,
)
from coordination.ledger.outcomes import (
    MAX_ERROR_LENGTH as MAX_ERROR_LENGTH,
)
from coordination.ledger.outcomes import (
    RunOutcome as RunOutcome,
)
from coordination.ledger.outcomes import (
    fail_overrun as fail_overrun,
)
from coordination.ledger.outcomes import (
    finish_many as finish_many,
)
from coordination.ledger.outcomes import (
    finish_with_state as finish_with_state,
)
from coordination.ledger.outcomes import (
    record_failed as record_failed,
)
from coordination.ledger.outcomes import (
    record_outcome_in_state as record_outcome_in_state,
)
from coordination.ledger.outcomes import (
    record_succeeded as record_succeeded,
)
from coordination.ledger.outcomes import (
    record_timed_out as record_timed_out,
)
from coordination.ledger.states import (
    advance as advance,
)
from coordination.ledger.states import (
    ensure_states as ensure_states,
)
from coordination.ledger.states import (
    first_due as first_due,
)
from coordination.ledger.states import (
    lock_state_nowait as lock_state_nowait,
)
from coordination.ledger.states import (
    pause_jobs as pause_jobs,
)
from coordination.ledger.states import (
    pause_unplannable as pause_unplannable,
)
from coordination.ledger.states import (
    record_paused as record_paused,
)
from coordination.ledger.states import (
    record_run_request as record_run_request,
)
from coordination.ledger.states import (
    record_wakeup_request as record_wakeup_request,
)
from coordination.ledger.states import (
    retire_undeclared as retire_undeclared,
)
from coordination.ledger.states import (
    slot_dealt_with as slot_dealt_with,
)
from coordination.ledger.states import (
    unplannable as unplannable,
)
from coordination.reasons import UNPLANNABLE as UNPLANNABLE
