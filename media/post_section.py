"""The post page's "Images" section: upload (file picker or drag and drop, onto the section
or the body), insert at the cursor with alt text, reuse from the library, featured image.

It is shown on a new post's page too, so an editor adds images before the first save. An
image uploaded there is nobody's but the editors' (no post uses it); the post's first save
records its use (media.usage), and it is public only once that post is live. The featured
image chosen before the post exists travels with the post form as ``FEATURED_FIELD`` and is
kept by :func:`keep_featured` when the page creates the post.
"""

import logging

from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from media import access, rules, services
from media.models import Image
from media.views import featured_of

logger = logging.getLogger(__name__)

#: The post form's field holding the key of the featured image chosen for a new post.
FEATURED_FIELD = "media_featured_key"


def images_section(request, post) -> SafeString | None:
    """Return the section's HTML for editors who may change posts (None for others);
    ``post`` None is a new post's page."""
    if not access.may_upload(request.user):
        return None
    # A new post's form shown again (a field to correct) keeps the featured image chosen.
    featured = chosen_featured(request) if post is None else featured_of(post.pk)
    context = {
        "post": post,
        "featured": featured,
        "featured_field": FEATURED_FIELD,
        "upload_url": reverse("admin:media_image_upload"),
        "picker_url": reverse("admin:media_image_picker"),
        "featured_url": reverse("admin:media_image_featured", args=[post.pk]) if post else "",
        "library_url": reverse("admin:media_image_changelist"),
    }
    # Safe: rendered from our template, which escapes every value.
    return mark_safe(render_to_string("media/post_section.html", context, request=request))


def chosen_featured(request) -> Image | None:
    """Return the image the new post's form names as its featured image (None: none, or
    a key that names no image)."""
    key = request.POST.get(FEATURED_FIELD, "") if request.method == "POST" else ""
    if not rules.KEY.match(key):
        return None
    return Image.objects.filter(key=key).first()


def keep_featured(request, post) -> None:
    """Make the featured image chosen on the new post's page the post's own (a receiver of
    ``publishing.admin.sections.on_post_added``)."""
    if not access.may_upload(request.user):
        return
    image = chosen_featured(request)
    if image is not None:
        services.set_featured(post=post, image=image)
        logger.info("post %s created with featured image %s", post.pk, image.key)
