"""Models that leave publishing for an app of their own keep their content types.

A model moved by state only (its table and rows stay) gets a new app label; its content type
row is relabelled rather than replaced, so the permissions granted on it and the admin's
history of its objects follow. Used by the moving app's first migration (and its reverse).
"""

from collections.abc import Iterable


def relabel_content_types(apps, models: Iterable[str], source: str, target: str) -> None:
    """Give ``models``' content types of app ``source`` the label ``target``; one made for
    ``target`` already (unused: nothing could refer to it before the move) is deleted first."""
    content_types = apps.get_model("contenttypes", "ContentType")
    for model in models:
        old = content_types.objects.filter(app_label=source, model=model).first()
        if old is None:
            continue
        content_types.objects.filter(app_label=target, model=model).delete()
        old.app_label = target
        old.save(update_fields=["app_label"])
