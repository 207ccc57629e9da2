from django.apps import AppConfig


class PublishingConfig(AppConfig):
    name = "publishing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from publishing.admin_reviews import review_section
        from publishing.admin_sections import add_post_section
        from publishing.go_live import add_go_live_check
        from publishing.reviews import go_live_check

        add_post_section(review_section)
        add_go_live_check(go_live_check)
