"""Settings of the benchmarked site plus the bench-only job app (bench/_jobsapp)."""

import os

from instatic.settings import *  # noqa: F403
from instatic.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "bench._jobsapp"]
BENCH_JOBS = int(os.environ.get("BENCH_JOBS", "1000"))
BENCH_TRANSACTIONAL = os.environ.get("BENCH_TRANSACTIONAL", "") == "1"
BENCH_EFFECTS_DIR = os.environ.get("BENCH_EFFECTS_DIR", "/tmp/instatic-bench-effects")
