"""The reasons the engine stores: why a job is paused, why a paused job's slots were missed.

Plain values and a pure function, so the planner (which reads no database) and the ledger
(which writes them) share one definition.
"""

from coordination.models import JobRun

#: How the pause reason of a job the scheduler could not plan begins
#: (see :func:`coordination.ledger.unplannable`).
UNPLANNABLE = "the scheduler could not plan it"


def paused_reason(state) -> str:
    """Return the missed-slot reason for slots that pass while ``state`` is paused."""
    if state.paused_reason == JobRun.MissedReason.PLUGIN_DISABLED:
        return JobRun.MissedReason.PLUGIN_DISABLED
    return JobRun.MissedReason.PAUSED
