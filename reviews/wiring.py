"""How reviews attach to publishing: each extension point publishing defines, used once.

Called from :meth:`reviews.apps.ReviewsConfig.ready`. With the app not installed none of this
happens: nothing waits for a reviewer, and publishing knows nothing of reviews.
"""


def attach() -> None:
    """Register reviews with publishing's extension points."""
    from publishing import go_live, hooks
    from publishing.admin import sections as admin_sections
    from reviews import actions, gates
    from reviews.admin import review_section
    from reviews.list_column import REVIEW_COLUMN

    go_live.add_go_live_check(actions.go_live_check)
    go_live.add_editor_check(gates.editor_check)
    go_live.add_editor_notice(gates.editor_notice)
    hooks.add_save_rule(gates.save_rule)
    admin_sections.add_post_section(review_section)
    admin_sections.add_post_list_column(REVIEW_COLUMN)
