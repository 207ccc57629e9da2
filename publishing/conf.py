"""The publishing app's settings, read lazily from Django settings with ``INSTATIC_`` names.

Like :mod:`coordination.conf`: defaults and meanings live here, and tests override any of them
with ``override_settings(INSTATIC_PUBLISH_BATCH_SIZE=...)``.
"""

from coordination.conf import AppSettings

_DEFAULTS = {
    # Posts published (or unpublished) per transaction of the publish job. A full batch makes
    # the job run again at once, so a backlog drains batch after batch.
    "PUBLISH_BATCH_SIZE": 2000,
    # Posts per transaction of the backlog job. Bigger: a backlog is overdue already, and each
    # batch costs a run of the engine (its ledger row, the claim, the commit) besides the
    # posts; at 10,000 a 100,000-post backlog is ten runs. The posts due now are the publish
    # job's and never wait for these batches (their rows are not the backlog's).
    "PUBLISH_BACKLOG_BATCH_SIZE": 10_000,
    # Seconds: a post due longer ago than this is the backlog job's, not the publish job's
    # (publishing.jobs), so a backlog drains beside posts that are due now, never before them.
    "PUBLISH_ON_TIME_WINDOW": 10,
    # How many upcoming scheduled posts the admin lineup shows.
    "PUBLISH_LINEUP_SIZE": 10,
    # The admin calendar: how many weeks it shows, and items per day before "+N more" (a
    # busy day links to the post list instead, so the page stays small with 10,000 items).
    "PUBLISH_CALENDAR_WEEKS": 4,
    "PUBLISH_CALENDAR_DAY_LIMIT": 8,
    # Posts per page on the public index, and entries in the Atom feed.
    "POSTS_PER_PAGE": 10,
    "FEED_SIZE": 20,
    # The longest body (characters) a post may have to be published.
    "POST_BODY_MAX_CHARS": 200_000,
    # Images in bodies may only come from the site itself unless this is on: an image on
    # another host is a tracking pixel, telling that host who read the post.
    "ALLOW_EXTERNAL_IMAGES": False,
    # Seconds past its time after which a scheduled post that is still not live is "late":
    # one ``late`` event each (publishing.late), which emails its author and goes to the
    # webhooks and subscribers that asked for it.
    "LATE_ALERT_AFTER": 300,
    # Nothing goes live unreviewed: posts, revisions and releases are submitted for review,
    # and only an approved content can be scheduled or published (reviews.actions).
    "REQUIRE_REVIEW": False,
}


settings = AppSettings(_DEFAULTS)
