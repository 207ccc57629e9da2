from django.apps import AppConfig


class BenchJobsConfig(AppConfig):
    """Bench-only plugin app: ``BENCH_JOBS`` jobs every minute (bench/jobs_per_minute.py)."""

    name = "bench._jobsapp"
    label = "benchjobs"
