from django.apps import AppConfig


class SubscriberAppConfig(AppConfig):
    name = "tests.outbox.subscriberapp"
    label = "subscriberapp"
