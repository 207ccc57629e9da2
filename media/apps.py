from django.apps import AppConfig


class MediaConfig(AppConfig):
    name = "media"
    verbose_name = "Media library"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from django.core import checks

        from media.checks import check_storage
        from media.pages import add_images
        from media.post_section import images_section, keep_featured
        from media.usage import record_uses
        from publishing.admin.sections import add_post_section, on_post_added
        from publishing.hooks import on_post_changed
        from publishing.page_bodies import add_body_filter

        checks.register(check_storage)
        on_post_changed(record_uses)
        add_body_filter(add_images)
        add_post_section(images_section, new_posts=True)
        on_post_added(keep_featured)
