"""Execution of runs on worker processes: jobs declared ``run_on="workers"``.

The leader plans and claims a slot as ``queued`` and enqueues its task through Django's
tasks interface in the same transaction; a worker process on any replica executes it. The
ledger row, not the queue, decides that the run starts once (docs/architecture.md, "Workers").
"""
