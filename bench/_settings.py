"""Settings of the benchmarked site plus the bench-only job app (bench/_jobsapp), and with
``BENCH_SUBSCRIBER=1`` the bench-only subscriber app (bench/_subscriberapp)."""

import os

from instatic.settings import *  # noqa: F403
from instatic.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench._jobsapp"]
BENCH_JOBS = int(os.environ.get("BENCH_JOBS", "1000"))
BENCH_TRANSACTIONAL = os.environ.get("BENCH_TRANSACTIONAL", "") == "1"
BENCH_EFFECTS_DIR = os.environ.get("BENCH_EFFECTS_DIR", "/tmp/instatic-bench-effects")
#: Where the bench jobs run: ``leader`` or ``workers`` (bench/workers.py measures both).
BENCH_RUN_ON = os.environ.get("BENCH_RUN_ON", "leader")
#: The period of the ``BENCH_JOBS`` jobs, in seconds (all due at each multiple of it).
BENCH_PERIOD_SECONDS = int(os.environ.get("BENCH_PERIOD_SECONDS", "60"))
#: CPU-bound jobs run only on request, each ``BENCH_CPU_LOOPS`` turns of ``bench._cpu.burn``.
BENCH_CPU_JOBS = int(os.environ.get("BENCH_CPU_JOBS", "0"))
BENCH_CPU_LOOPS = int(os.environ.get("BENCH_CPU_LOOPS", "0"))
#: ``1``: declare the ``ping`` job too (run only on request; bench/workers.py).
BENCH_PING = os.environ.get("BENCH_PING", "") == "1"
#: ``1``: add the bench-only subscriber app, one transactional ``published`` subscriber
#: (bench/outbox.py).
BENCH_SUBSCRIBER = os.environ.get("BENCH_SUBSCRIBER", "") == "1"
if BENCH_SUBSCRIBER:
    INSTALLED_APPS = [*INSTALLED_APPS, "bench._subscriberapp"]
#: ``1``: the site without the outbox app (bench/steady_publishing.py's baseline).
if os.environ.get("BENCH_WITHOUT_OUTBOX", "") == "1":
    INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "outbox"]
