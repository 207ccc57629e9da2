"""The soak's invariant of images: no image of a post that is not live yet is ever served to
the public.

The editors' stream (``editors.editor_stream``) gives every third post it schedules an image
of its own, stored through the media app (:func:`image_body`), so the image's only post goes
live at the post's time, through the publish job, whatever the faults do meanwhile.
:func:`image_probe`, a stream of its own, asks the soak's web server for those images as an
anonymous visitor, over and over, and records each answer with the database clock's time it
came back. An image answered 200 must then have a post showing it that was live by that time
(its ``published_at`` at or before the answer): :func:`no_unreleased_image_served`.
``invariants.INVARIANTS`` lists it.
"""

import random
import time
import urllib.error
import urllib.request

from devtools.chaos.soak import Soak

#: Every how many scheduled posts one has an image.
IMAGE_EVERY = 3
#: Most recent images the probe picks from (a post's time is at most 12 s ahead).
PROBED = 40


def image_body(soak: Soak, counter: int) -> str:
    """Store an image for the ``counter``-th post and return the post's body showing it."""
    import io

    from django.core.files.uploadedfile import SimpleUploadedFile
    from PIL import Image as PILImage

    from media.services import store_image

    out = io.BytesIO()
    PILImage.new("RGB", (64, 48), (counter % 256, 90, 160)).save(out, format="PNG")
    upload = SimpleUploadedFile(f"chaos-{counter}.png", out.getvalue())
    image = store_image(upload=upload, alt=f"Chaos picture {counter}", user=None)
    soak.image_urls.append(image.url)
    return f"Body.\n\n{image.markdown()}"


def image_probe(soak: Soak, seed: int) -> None:
    """Ask for the newest images anonymously until the streams stop; record every answer."""
    rng = random.Random(seed + 1)
    opener = urllib.request.build_opener()  # no cookies: the public
    while not soak.stop_stream.is_set():
        urls = soak.image_urls[-PROBED:]
        if urls and soak.web_port:
            url = rng.choice(urls)
            try:
                with opener.open(f"http://127.0.0.1:{soak.web_port}{url}", timeout=5) as answer:
                    status = answer.status
                    answer.read()
            except urllib.error.HTTPError as exc:
                status = exc.code
            except OSError:
                status = 0  # the web process is restarting or busy: no answer
            soak.image_probes.append((url, status, time.time() + soak.clock_offset))
        soak.stop_stream.wait(rng.uniform(0.02, 0.1))


def no_unreleased_image_served(soak: Soak, end_db) -> tuple[bool, str]:
    """Every image answered 200 to the public had a post showing it live by then."""
    from datetime import UTC, datetime

    live_at: dict[str, list[datetime]] = {}
    for body, published_at in soak.query(
        "SELECT body, published_at FROM publishing_post WHERE body LIKE %s"
        " AND published_at IS NOT NULL",
        ("%](/media/%",),
    ):
        for url in set(soak.image_urls):
            if f"]({url})" in body:
                live_at.setdefault(url, []).append(_aware(published_at))
    served = [(url, at) for url, status, at in soak.image_probes if status == 200]
    refused = sum(1 for _url, status, _at in soak.image_probes if status == 404)
    early = [
        (url, at)
        for url, at in served
        if not any(live <= datetime.fromtimestamp(at, UTC) for live in live_at.get(url, ()))
    ]
    detail = (
        f"{len(soak.image_urls)} images, {len(soak.image_probes)} anonymous requests: "
        f"{len(served)} served, {refused} not found while embargoed; {len(early)} served early"
    )
    if early:
        url, at = early[0]
        detail += f" (first: {url} at {datetime.fromtimestamp(at, UTC):%H:%M:%S.%f})"
    return not early and bool(soak.image_probes), detail


def _aware(value):
    from datetime import UTC

    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
