"""How releases attach to publishing: each extension point publishing defines, used once.

Called from :meth:`releases.apps.ReleasesConfig.ready`. With the app not installed none of
this happens, and publishing knows nothing of releases.
"""

from django.db.models.signals import pre_delete


def attach() -> None:
    """Register releases with publishing's extension points."""
    from publishing import calendar, due_work, go_live, hooks, site_at
    from publishing.admin import sections as admin_sections
    from releases import apply, reviewing, section, stopping
    from releases import calendar as release_calendar
    from releases import site_at as release_site_at
    from releases.admin import add_to_release_action
    from releases.list_column import RELEASE_COLUMN
    from releases.models import Release
    from reviews import actions as reviews
    from reviews.models import Review

    due_work.add_due_work(apply.DUE_WORK)
    go_live.add_go_live_check(reviewing.go_live_check)
    reviews.add_subject(Review.Target.RELEASE, reviewing.SUBJECT)
    hooks.on_post_changed(stopping.stop_on_change)
    hooks.on_posts_deleting(stopping.stop_releases_losing)
    hooks.add_new_draft_check(stopping.new_draft_problem)
    admin_sections.add_post_section(section.release_section)
    admin_sections.add_post_notice(section.release_notice)
    admin_sections.add_post_list_action(add_to_release_action)
    admin_sections.add_post_list_column(RELEASE_COLUMN)
    calendar.add_entry_kind(release_calendar.ENTRY_KIND)
    site_at.add_change_source(release_site_at.changes_by)
    pre_delete.connect(reviewing.delete_reviews_of, sender=Release, dispatch_uid="releases")
