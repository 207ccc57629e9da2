"""The publishing jobs' names: the jobs (:mod:`publishing.jobs`) are registered under them, and
editor actions wake the publish job by its name when they schedule something sooner."""

PUBLISH_JOB = "publishing.publish_due"
BACKLOG_JOB = "publishing.publish_backlog"
LATE_JOB = "publishing.tell_late_posts"
