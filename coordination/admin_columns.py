"""The time, duration and scheduler columns of job states and runs, for every admin showing them.

The engine's admin (:mod:`coordination.admin`) and the plugins' admin (:mod:`plugins.admin`)
list the same ``JobState`` and ``JobRun`` rows; mixing these classes in gives both pages the
same column names, headings and words (:mod:`coordination.admin_words`). An admin shows the
columns its ``fields`` or ``list_display`` name; the others stay unused.
"""

from django.utils.translation import gettext_lazy as _

from coordination.admin_words import (
    duration_column,
    lateness_column,
    scheduler_column,
    time_column,
)


class JobStateColumns:
    """Columns of a job's state (``JobState`` and its proxies)."""

    next_slot = time_column("next_due", _("next slot"))
    wake = time_column("wake_at", _("wake-up asked for"))
    run_requested = time_column("run_requested_at", _("run asked for"))
    retired = time_column("retired_at", _("retired"))
    last_slot_local = time_column("last_slot", _("last slot"))
    last_started = time_column("last_started_at", _("last started"))
    last_finished = time_column("last_finished_at", _("last finished"))
    last_took = duration_column("last_duration", _("last took"))
    last_late = lateness_column("last_lateness", _("last lateness"))
    last_scheduler = scheduler_column("last_node", _("last ran on"))


#: A run's row in a list of runs (each admin defines its own ``outcome`` column).
RUN_LIST_DISPLAY = ("job", "slot_local", "outcome", "scheduler", "took", "late")
#: What a run's page shows, in order, before the fields an admin adds after them.
RUN_FIELDS = (
    "job",
    "slot_local",
    "status",
    "reason",
    "trigger",
    "requested_by",
    "scheduler",
    "node",
    "attempt",
    "started",
    "finished",
    "took",
    "late",
)


class JobRunColumns:
    """Columns of a run in the ledger (``JobRun`` and its proxies): see :data:`RUN_FIELDS`."""

    slot_local = time_column("slot", _("slot"))
    scheduler = scheduler_column("node", _("ran on"))
    started = time_column("started_at", _("started"))
    finished = time_column("finished_at", _("finished"))
    retry = time_column("retry_at", _("next attempt"))
    took = duration_column("duration", _("took"))
    late = lateness_column("lateness", _("lateness"))
