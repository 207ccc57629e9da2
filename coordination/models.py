"""Durable scheduler state: nodes, leaders, per-job state and the run ledger.

The lock decides who does a group's work; these tables make the work exactly-once: a
``JobRun`` row per (job, slot) under a unique constraint, and per-job state so "every hour"
means once an hour across the whole cluster.
"""

from django.db import models
from django.db.models import Q

from coordination.wording import scheduler_text


class Node(models.Model):
    """One ``runscheduler`` process, or one worker process (the latest process to use this
    node name)."""

    class Role(models.TextChoices):
        SCHEDULER = "scheduler"
        # A worker process heartbeats while it executes a run (so a run of a dead worker is
        # found); an idle one writes nothing.
        WORKER = "worker"

    name = models.CharField(max_length=200, unique=True)
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.SCHEDULER)
    instance = models.CharField(max_length=32, help_text="Random id of the current process.")
    host = models.CharField(max_length=255)
    pid = models.IntegerField()
    groups = models.JSONField(default=list, help_text="Groups this node runs.")
    declared_jobs = models.JSONField(default=list, help_text="Job names this node declares.")
    jobs_fingerprint = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField(db_index=True)
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return scheduler_text(self.name)


class Leadership(models.Model):
    """Who leads each group, written by a node when it takes the group's lock."""

    group = models.CharField(max_length=100, primary_key=True)
    node = models.CharField(max_length=200)
    instance = models.CharField(max_length=32)
    key = models.BigIntegerField()
    session_id = models.BigIntegerField(
        null=True, blank=True, help_text="Database session (or pid) holding the lock."
    )
    since = models.DateTimeField()

    class Meta:
        ordering = ["group"]

    def __str__(self) -> str:
        return f"{self.group}: {scheduler_text(self.node)}"


class NodeSession(models.Model):
    """A database connection a scheduler process opened (MySQL/MariaDB only).

    PostgreSQL names each session after its node (``application_name``), so a follower finds
    a frozen leader's sessions in ``pg_stat_activity``. MySQL has no such label, so each
    connection records its own ``CONNECTION_ID()`` here when it opens; fencing ``KILL``s them
    all. ``client`` (the server's ``host:port`` of the connection) tells a recorded id apart
    from the same number handed to another client after a server restart.
    """

    class Role(models.TextChoices):
        LOCK = "lock"
        WORK = "work"

    node = models.CharField(max_length=200)
    instance = models.CharField(max_length=32, db_index=True)
    role = models.CharField(max_length=10, choices=Role.choices)
    connection_id = models.BigIntegerField()
    client = models.CharField(max_length=255, blank=True)
    opened_at = models.DateTimeField()

    class Meta:
        ordering = ["node", "opened_at"]

    def __str__(self) -> str:
        return f"{self.node}/{self.role} connection {self.connection_id}"


class WakeUp(models.Model):
    """A counter per group, bumped when work becomes due sooner (MySQL/MariaDB only).

    PostgreSQL wakes a group's leader with ``NOTIFY``. Elsewhere there is no such signal, so
    ``coordination.services.notify_group`` bumps this row after commit and every node's
    heartbeat, which reads the leaders anyway, reads the counters in the same statement: a
    leader whose group's counter moved ticks at once, without polling on its own.
    """

    group = models.CharField(max_length=100, primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["group"]

    def __str__(self) -> str:
        return f"{self.group}: {self.seq}"


class LeadershipTerm(models.Model):
    """One node's time at the head of one group: the leadership history.

    ``Leadership`` holds only the current leader; a term row is opened at every takeover and
    closed with the reason it ended, so an operator can see who led when and why it changed.
    Pruned with the run ledger (``INSTATIC_RUN_RETENTION`` terms per group).
    """

    class EndReason(models.TextChoices):
        SHUTDOWN = "shutdown", "shut down (SIGTERM)"
        FENCED = "fenced", "fenced: no heartbeat within the lease"
        CRASHED = "crashed", "crashed: its process went away"
        LOCK_LOST = "lock lost", "lock lost: its lock session ended"
        LEASE_EXPIRED = "lease expired", "lease expired"
        LOOP_CRASHED = "loop crashed", "its scheduler loop crashed"

    group = models.CharField(max_length=100)
    node = models.CharField(max_length=200)
    instance = models.CharField(max_length=32)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=20, blank=True, choices=EndReason.choices)
    detail = models.CharField(max_length=255, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        indexes = [
            models.Index(fields=["group", "-started_at"], name="coordination_term_recent"),
        ]

    def __str__(self) -> str:
        since = f"{self.started_at:%Y-%m-%d %H:%M:%S} UTC"
        return f"{self.group}: {scheduler_text(self.node)} from {since}"


class Alert(models.Model):
    """When an alert of one kind about one job or group last went out (the cluster's rate limit)."""

    class Kind(models.TextChoices):
        JOB_PAUSED = "job paused itself"
        JOB_FAILING = "job failing"
        JOB_UNPLANNABLE = "job cannot be planned"
        NO_LEADER = "no leader"

    kind = models.CharField(max_length=40, choices=Kind.choices)
    subject = models.CharField(max_length=200, help_text="The job or group it is about.")
    last_sent_at = models.DateTimeField()
    sent = models.PositiveIntegerField(default=1)
    suppressed = models.PositiveIntegerField(
        default=0, help_text="Alerts not sent because one had gone out within the interval."
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "subject"], name="coordination_alert_once"),
        ]
        ordering = ["-last_sent_at"]

    def __str__(self) -> str:
        return f"{self.kind}: {self.subject}"


class LockLease(models.Model):
    """A leader lease, used instead of session locks behind PgBouncer (transaction pooling)."""

    key = models.BigIntegerField(primary_key=True)
    holder = models.CharField(max_length=200)
    token = models.CharField(max_length=32)
    acquired_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.key} held by {self.holder}"


class JobState(models.Model):
    """Durable schedule state of one job, shared by every replica."""

    name = models.CharField(max_length=200, primary_key=True)
    group = models.CharField(max_length=100, db_index=True)
    schedule = models.CharField(max_length=255, blank=True)
    fingerprint = models.CharField(max_length=255, blank=True)
    next_due = models.DateTimeField(null=True, blank=True)
    wake_at = models.DateTimeField(
        null=True, blank=True, help_text="Earlier due instant requested by other code."
    )
    run_requested_at = models.DateTimeField(null=True, blank=True)
    run_requested_by = models.CharField(max_length=150, blank=True)
    paused = models.BooleanField(default=False)
    paused_reason = models.CharField(max_length=255, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)
    last_slot = models.DateTimeField(null=True, blank=True)
    last_started_at = models.DateTimeField(null=True, blank=True)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    last_status = models.CharField(max_length=20, blank=True)
    last_error = models.TextField(blank=True)
    last_duration = models.FloatField(null=True, blank=True)
    last_lateness = models.FloatField(null=True, blank=True)
    last_node = models.CharField(max_length=200, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    missed_count = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["group", "name"]

    def __str__(self) -> str:
        return self.name


class JobRun(models.Model):
    """The run ledger: one row per (job, slot), claimed before (or with) the work."""

    class Status(models.TextChoices):
        # Claimed by the leader for a worker process, its task enqueued with it; a worker
        # moves it to running (``ledger.take_queued``).
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        TIMED_OUT = "timed_out", "timed out"
        ABANDONED = "abandoned"
        MISSED = "missed"

    class Trigger(models.TextChoices):
        SCHEDULE = "schedule"
        MANUAL = "manual"
        RETRY = "retry"

    class MissedReason(models.TextChoices):
        """Why a slot was recorded as ``missed`` instead of run."""

        DOWNTIME = "downtime", "downtime"
        PAUSED = "paused", "paused"
        OVERLAP = "overlap", "overlap"
        PLUGIN_DISABLED = "plugin disabled", "plugin disabled"
        CATCH_UP_WINDOW = "catch-up window", "catch-up window"

    job = models.CharField(max_length=200)
    slot = models.DateTimeField(help_text="The scheduled instant (UTC) this run is for.")
    status = models.CharField(max_length=20, choices=Status.choices)
    trigger = models.CharField(max_length=20, choices=Trigger.choices, default=Trigger.SCHEDULE)
    node = models.CharField(max_length=200, blank=True)
    node_instance = models.CharField(max_length=32, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    queued_at = models.DateTimeField(
        null=True, blank=True, help_text="When the leader queued the run for a worker process."
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    requested_by = models.CharField(max_length=150, blank=True)
    reason = models.CharField(
        max_length=40,
        blank=True,
        choices=MissedReason.choices,
        help_text="Why a missed slot was not run.",
    )
    retry_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="A failed run with attempts left is tried again at this time (job retries).",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["job", "slot"], name="coordination_jobrun_job_slot"),
        ]
        indexes = [
            models.Index(fields=["job", "-slot"], name="coordination_jobrun_recent"),
            # Runs in progress or failed (the tick, maintenance), and the admin's status
            # filter newest first: one range of this index, not a scan of the ledger.
            models.Index(fields=["status", "-slot", "-id"], name="coordination_jobrun_state"),
            # The admin's run list, newest first (its order, with the id as tie-break).
            models.Index(fields=["-slot", "-id"], name="coordination_jobrun_newest"),
            # The admin's trigger filter (manual runs are one in a thousand), newest first.
            models.Index(fields=["trigger", "-slot", "-id"], name="coordination_jobrun_trig"),
        ]
        ordering = ["-slot"]

    def __str__(self) -> str:
        return f"{self.job} @ {self.slot:%Y-%m-%d %H:%M:%S} UTC ({self.status})"

    @staticmethod
    def in_progress() -> Q:
        """Runs whose work may still be going: running, or timed out and not yet returned.

        A timed-out run's worker goes on until the job returns; until then a job must not be
        started beside it, and if its node dies it is as abandoned as a running one.
        """
        return Q(status=JobRun.Status.RUNNING) | Q(
            status=JobRun.Status.TIMED_OUT, finished_at__isnull=True
        )

    @staticmethod
    def outstanding() -> Q:
        """Runs that keep their job busy: in progress, or queued for a worker process."""
        return JobRun.in_progress() | Q(status=JobRun.Status.QUEUED)

    @property
    def queue_wait(self) -> float | None:
        """Seconds from the leader's queueing to a worker's start (runs on workers)."""
        if self.queued_at is None or self.started_at is None:
            return None
        return (self.started_at - self.queued_at).total_seconds()

    @property
    def lateness(self) -> float | None:
        if self.started_at is None:
            return None
        return (self.started_at - self.slot).total_seconds()
