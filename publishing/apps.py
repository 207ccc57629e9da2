from django.apps import AppConfig


class PublishingConfig(AppConfig):
    name = "publishing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from publishing.admin_reviews import review_section
        from publishing.admin_sections import add_post_notice, add_post_section
        from publishing.go_live import add_go_live_check
        from publishing.hooks import on_post_changed
        from publishing.release_checks import stop_on_change
        from publishing.release_section import release_notice, release_section
        from publishing.reviews import go_live_check

        add_post_section(review_section)
        add_post_section(release_section)
        add_post_notice(release_notice)
        on_post_changed(stop_on_change)
        add_go_live_check(go_live_check)
