"""The example plugin's jobs: one of each kind (see ``docs/plugins.md``).

``example.beat`` is transactional: its row and the run's ledger row commit together, so each
slot's beat exists exactly once. ``example.digest`` is claim-first: its run is recorded before
it starts, it cooperates with shutdown and its time limit through ``ctx.should_stop()``, and
its write is idempotent (keyed by the slot), so retrying an abandoned run is safe.
"""

from datetime import timedelta

from plugins.contrib.example.models import Beat, Digest
from plugins.sdk import JobContext, daily, every, plugin_job
from publishing.selectors import live_posts


@plugin_job(schedule=every(timedelta(seconds=1)), transactional=True)
def beat(ctx: JobContext) -> None:
    """Every second, record that the slot ran (and on which node)."""
    Beat.objects.create(slot=ctx.slot, node=ctx.node)


@plugin_job(
    schedule=daily(at="06:00", tz="Europe/Berlin"),
    missed="latest",
    retry_abandoned=True,
    max_duration=timedelta(minutes=5),
)
def digest(ctx: JobContext) -> None:
    """Every morning, count the live posts and their words."""
    posts = words = 0
    complete = True
    for body in live_posts().values_list("body", flat=True).iterator():
        if ctx.should_stop():
            ctx.logger.warning("stopping early after %d posts", posts)
            complete = False
            break
        posts += 1
        words += len(body.split())
    Digest.objects.update_or_create(
        slot=ctx.slot,
        defaults={"live_posts": posts, "words": words, "complete": complete, "node": ctx.node},
    )
    ctx.logger.info("%d live posts, %d words", posts, words)
