"""The post page's "Images" section: upload (file picker or drag and drop, onto the section
or the body), insert at the cursor with alt text, reuse from the library, featured image."""

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from media import access, rules
from media.views import featured_of


def images_section(request, post) -> SafeString | None:
    """Return the section's HTML for editors who may change posts (None for others)."""
    if not access.may_upload(request.user):
        return None
    featured = featured_of(post.pk)
    context = {
        "post": post,
        "featured": featured,
        "featured_thumbnail": (
            rules.public_path(featured.key, featured.name, width=featured.widths[0])
            if featured and featured.widths
            else (featured.url if featured else "")
        ),
        "upload_url": reverse("admin:media_image_upload"),
        "picker_url": reverse("admin:media_image_picker"),
        "featured_url": reverse("admin:media_image_featured", args=[post.pk]),
        "library_url": reverse("admin:media_image_changelist"),
    }
    # Safe: rendered from our template, which escapes every value.
    return mark_safe(render_to_string("media/post_section.html", context, request=request))
