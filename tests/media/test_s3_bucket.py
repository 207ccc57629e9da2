"""Images in an S3-compatible bucket: moto's S3 server on loopback, reached over HTTP through
boto3 and django-storages exactly as a real bucket is, with the storage the settings make
(``instatic.media_storage``).

What the filesystem tests check of the storage holds here too: every file of an upload is
stored (private, under the site's prefix), nothing is left of an upload that fails half-way,
the site serves an image itself under the embargo, and deleting an image deletes its files.
"""

import uuid
from dataclasses import dataclass

import boto3
import pytest
from django.conf import settings
from django.test import Client, override_settings
from moto.server import ThreadedMotoServer

from instatic.media_storage import image_storage
from media import services
from publishing import posts
from publishing.models import Post
from tests.media.conftest import make_image

pytestmark = pytest.mark.django_db

PREFIX = "instatic/"


@pytest.fixture
def bucket(monkeypatch):
    """Start an S3 server on loopback with an empty bucket; make it the images' storage.
    Yield a boto3 client of the server, to look at the bucket as its owner, and the bucket's
    name (a new one each test: moto keeps its buckets for the life of the process)."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "instatic-test",
        "AWS_SECRET_ACCESS_KEY": "instatic-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        client = boto3.client("s3", endpoint_url=endpoint)
        name = f"instatic-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=name)
        stored = {**settings.STORAGES, "default": image_storage(name, endpoint)}
        from django.core.files.storage import storages

        with override_settings(STORAGES=stored):
            storages._storages.pop("default", None)
            try:
                yield Bucket(client, name)
            finally:
                storages._storages.pop("default", None)
    finally:
        server.stop()


@dataclass
class Bucket:
    client: object
    name: str

    def keys(self) -> list[str]:
        listed = self.client.list_objects_v2(Bucket=self.name).get("Contents", [])
        return sorted(item["Key"] for item in listed)

    def read(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()


def test_an_upload_is_stored_in_the_bucket_privately_under_the_sites_prefix(editor, bucket):
    assert type(services.image_storage()).__name__ == "S3Storage"
    image = make_image(editor)
    stored = bucket.keys()
    assert stored == sorted(PREFIX + path for path in image.files())
    assert len(stored) == 2 * (len(image.widths) + 1), "each width and the full size, and WebP"
    for key in stored:
        grants = bucket.client.get_object_acl(Bucket=bucket.name, Key=key)["Grants"]
        assert [grant["Permission"] for grant in grants] == ["FULL_CONTROL"], key
        assert all(grant["Grantee"]["Type"] == "CanonicalUser" for grant in grants), key


def test_the_site_serves_an_image_from_the_bucket_under_the_embargo(editor, bucket):
    image = make_image(editor)
    body = bucket.client.get_object(Bucket=bucket.name, Key=PREFIX + image.files()[0])[
        "Body"
    ].read()
    anonymous, staff = Client(), Client()
    staff.force_login(editor)
    answer = staff.get(image.url)
    assert answer.status_code == 200 and b"".join(answer.streaming_content) == body
    assert anonymous.get(image.url).status_code == 404, "used by no live post: embargoed"
    post = Post(title="Launch", slug="launch", body=f"Hello\n\n{image.markdown()}\n")
    post = posts.save_post(post=post, user=editor)
    posts.publish_now(post=post, user=editor)
    answer = anonymous.get(image.url)
    assert answer.status_code == 200 and b"".join(answer.streaming_content) == body


def test_an_upload_that_fails_half_way_leaves_nothing_in_the_bucket(editor, bucket, monkeypatch):
    storage = services.image_storage()
    real_save = storage.save
    saved = []

    def failing_save(name, content, *args, **kwargs):
        if len(saved) == 3:
            raise OSError("the bucket went away")
        saved.append(name)
        return real_save(name, content, *args, **kwargs)

    monkeypatch.setattr(storage, "save", failing_save)
    with pytest.raises(OSError, match="went away"):
        make_image(editor)
    assert len(saved) == 3 and bucket.keys() == []


def test_deleting_an_image_deletes_its_files_from_the_bucket(editor, bucket):
    kept, deleted = make_image(editor), make_image(editor)
    services.delete_image(deleted)
    assert bucket.keys() == sorted(PREFIX + path for path in kept.files())
