"""Plugin jobs at several cadences for the chaos soak: each writes an ``Effect`` per slot.

Whether a slot fails or hangs is decided from the slot itself, so a rerun of the same slot
behaves the same and the soak stays reproducible.
"""

import hashlib
import threading
from datetime import timedelta

from plugins.sdk import Missed, every, plugin_job
from tests.jobsapp.models import Effect


def _chance(slot, salt: str) -> float:
    digest = hashlib.sha256(f"{salt}:{slot.isoformat()}".encode()).digest()
    return int.from_bytes(digest[:4], "big") / 2**32


def _effect(ctx) -> None:
    Effect.objects.create(job=ctx.job.name, slot=ctx.slot, node=ctx.node)


@plugin_job(schedule=every(timedelta(seconds=1)), transactional=True)
def tx_tick(ctx):
    """Every second, in one transaction with its ledger row."""
    _effect(ctx)


@plugin_job(schedule=every(timedelta(seconds=2)), missed=Missed.LATEST)
def claim_tick(ctx):
    """Every 2 s, claim first (its row is committed before it runs)."""
    _effect(ctx)
    threading.Event().wait(0.3)


@plugin_job(schedule=every(timedelta(seconds=3)), transactional=True)
def flaky(ctx):
    """Every 3 s; about a third of slots raise (and roll back their effect)."""
    _effect(ctx)
    if _chance(ctx.slot, "flaky") < 0.33:
        raise RuntimeError(f"flaky slot {ctx.slot.isoformat()}")


@plugin_job(schedule=every(timedelta(seconds=5)), max_duration=timedelta(seconds=2))
def hang(ctx):
    """Every 5 s; a fifth of slots hang past their max duration until asked to stop."""
    _effect(ctx)
    if _chance(ctx.slot, "hang") < 0.2:
        waited = 0.0
        while not ctx.should_stop() and waited < 8:
            threading.Event().wait(0.1)
            waited += 0.1
        threading.Event().wait(1.0)
