"""Where uploaded images are kept: the ``STORAGES["default"]`` entry the settings make.

Plain data from two settings, so the settings and the tests that run the media app against a
bucket make the same storage from the same function.
"""


def image_storage(bucket: str, endpoint: str | None) -> dict | None:
    """Return the ``STORAGES["default"]`` entry for an S3-compatible ``bucket`` (at ``endpoint``,
    or AWS's own when ``None``), or ``None`` without a bucket (Django's filesystem default).

    Objects are private and never overwritten: the site serves them itself, deciding at each
    request who may see them (the embargo), so the bucket must never answer anyone directly.
    """
    if not bucket:
        return None
    return {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": endpoint or None,
            "location": "instatic",
            "default_acl": "private",
            "file_overwrite": False,
        },
    }
