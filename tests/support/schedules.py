"""Schedules for the test apps' jobs."""

from datetime import timedelta

from coordination.schedules import every

#: For a job a test runs only on request: its slots are a century apart from the Unix epoch
#: (the next on 2070-01-01), so none falls due while a test runs, wherever the wall clock is.
#: An hourly schedule would make a slot due at the top of an hour, and a scheduled run would
#: then sit beside (or queue ahead of) the run the test asked for.
ON_REQUEST_ONLY = every(timedelta(days=36525))
