"""A gate that stops a transactional run between its pre-commit fence and its ``COMMIT``.

A trigger makes a run's "succeeded" update of one job (the statement right after the fence)
take a shared advisory lock; while the caller holds that lock exclusively the update waits,
so the caller sees the run's session waiting (``WAITING_SQL``), can stop the process, and then
release the lock: the update finishes on the server and the session sits idle in the open run
transaction, exactly between fence and commit. When the caller does not hold the lock the
gate costs nothing. For the lease fence test and ``bench/lease_takeover.py`` (PostgreSQL).
"""

#: The ungranted advisory lock of a session waiting at the gate ``%s`` (a key under 2**32).
WAITING_SQL = (
    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    " AND classid = 0 AND objid = %s AND objsubid = 1"
)


def install_sql(*, job: str, key: int, name: str = "instatic_commit_gate") -> list[str]:
    """Return the statements that install gate ``name`` (lock ``key``) on ``job``'s runs."""
    if not 0 < key < 2**32 or not job.replace(".", "").replace("_", "").isalnum():
        raise ValueError(f"gate key {key} must be under 2**32, job {job!r} a job name")
    return [
        f"CREATE FUNCTION {name}() RETURNS trigger LANGUAGE plpgsql AS"
        f" $$ BEGIN PERFORM pg_advisory_xact_lock_shared({key}); RETURN NEW; END $$",
        f"CREATE TRIGGER {name} BEFORE UPDATE ON coordination_jobrun FOR EACH ROW"
        f" WHEN (NEW.job = '{job}' AND NEW.status = 'succeeded') EXECUTE FUNCTION {name}()",
    ]


def drop_sql(name: str = "instatic_commit_gate") -> list[str]:
    """Return the statements that remove gate ``name``."""
    return [
        f"DROP TRIGGER IF EXISTS {name} ON coordination_jobrun",
        f"DROP FUNCTION IF EXISTS {name}()",
    ]
