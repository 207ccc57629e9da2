from django.apps import AppConfig


class BenchSubscriberConfig(AppConfig):
    """Bench-only plugin app: one transactional subscriber to ``published`` (bench/outbox.py).

    Added to ``INSTALLED_APPS`` by ``bench._settings`` when ``BENCH_SUBSCRIBER=1``.
    """

    name = "bench._subscriberapp"
    label = "benchsubscriber"
