"""The image addresses (anyone, through the embargo) and the editors' upload and picker.

``serve`` answers a made-up address, an embargoed image and a wrong file name with the same
404 after one indexed lookup and at most one more query, so a visitor learns nothing and
cannot make the site work hard. The editors' views are JSON for the post page's script.
"""

import logging

from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import FileResponse, Http404, JsonResponse
from django.shortcuts import get_object_or_404
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_POST, require_safe

from coordination.clock import database_now
from media import access, rules, services
from media.conf import settings
from media.models import FeaturedImage, Image
from publishing.models import Post

logger = logging.getLogger(__name__)

#: Images the picker lists at once (newest first, or those matching the search).
PICKER_SIZE = 24


@require_safe
def serve(request, key: str, name: str, width: int | None = None):
    """Send one file of an image to whoever may see it now; 404 to anyone else."""
    if not rules.KEY.match(key):
        raise Http404("No such image.")
    image = Image.objects.filter(key=key).only("key", "name", "format", "widths").first()
    if image is None or name != image.name or (width is not None and width not in image.widths):
        raise Http404("No such image.")
    decision = rules.decide_access(
        public=access.is_public(image),
        editor=access.is_editor(request.user),
        preview=access.preview_allows(request.GET.get("preview", ""), key, now=database_now()),
        max_age=int(settings.MEDIA_PUBLIC_MAX_AGE),
    )
    if not decision.allowed:
        raise Http404("No such image.")
    webp = rules.wants_webp(request.headers.get("Accept", "")) and image.format != "WEBP"
    path = rules.storage_path(key, image.name, width=width, webp=webp)
    try:
        stream = services.image_storage().open(path, "rb")
    except FileNotFoundError:
        logger.error("image %s has no file %s", key, path)
        raise Http404("No such image.")
    content_type = "image/webp" if webp else rules.CONTENT_TYPES[image.format]
    response = FileResponse(stream, content_type=content_type)
    response["Cache-Control"] = decision.cache_control
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    patch_vary_headers(response, ["Accept", "Cookie"])
    return response


def _editor_only(request) -> None:
    if not access.may_upload(request.user):
        raise PermissionDenied


def image_json(image: Image) -> dict:
    """Return what the post page's script needs of an image."""
    return {
        "key": image.key,
        "url": image.url,
        "thumbnail": image.thumbnail_url,
        "alt": image.alt,
        "name": image.original_name,
        "width": image.width,
        "height": image.height,
        "markdown": image.markdown(),
    }


@require_POST
def upload(request):
    """Store the uploaded ``file`` with its ``alt`` text; answer the image or why not."""
    _editor_only(request)
    length = int(request.META.get("CONTENT_LENGTH") or 0)
    limit = int(settings.MEDIA_MAX_BYTES)
    if length > limit + 64 * 1024:
        problem = rules.size_refusal(length, max_bytes=limit)
        return JsonResponse({"error": problem}, status=400)
    upload_file = request.FILES.get("file")
    if upload_file is None:
        return JsonResponse({"error": "Choose an image file to upload."}, status=400)
    try:
        image = services.store_image(
            upload=upload_file, alt=request.POST.get("alt", ""), user=request.user
        )
    except rules.Refused as refused:
        return JsonResponse({"error": str(refused)}, status=400)
    return JsonResponse({"image": image_json(image)}, status=201)


@require_safe
def picker(request):
    """List the newest images, or those whose alt text or name holds ``q``."""
    _editor_only(request)
    images = Image.objects.all()
    query = request.GET.get("q", "").strip()[:100]
    if query:
        images = images.filter(Q(alt__icontains=query) | Q(original_name__icontains=query))
    return JsonResponse({"images": [image_json(i) for i in images[:PICKER_SIZE]]})


@require_POST
def featured(request, post_id: int):
    """Make the posted ``key``'s image ``post_id``'s featured image (no key: none)."""
    _editor_only(request)
    post = get_object_or_404(Post, pk=post_id)
    key = request.POST.get("key", "")
    image = get_object_or_404(Image, key=key) if key else None
    services.set_featured(post=post, image=image)
    return JsonResponse({"image": image_json(image) if image else None})


def featured_of(post_id: int) -> Image | None:
    """Return the featured image of a post, or None."""
    row = FeaturedImage.objects.select_related("image").filter(post_id=post_id).first()
    return row.image if row else None
