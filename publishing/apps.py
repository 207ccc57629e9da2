from django.apps import AppConfig


class PublishingConfig(AppConfig):
    """Posts, revisions, previews, the publish job and the public site.

    Optional workflows (reviews, releases, the outbox) attach through the extension points
    publishing defines (:mod:`publishing.go_live`, :mod:`publishing.hooks`,
    :mod:`publishing.due_work`, :mod:`publishing.admin.sections`, the calendar's entry kinds,
    :mod:`publishing.page_bodies`); publishing registers nothing of theirs.
    """

    name = "publishing"
    default_auto_field = "django.db.models.BigAutoField"
