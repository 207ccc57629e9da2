"""Fixtures for the publishing tests: users with and without the publish permission, posts,
and actors that race each other on their own connections."""

import itertools
import threading
from datetime import timedelta
from html.parser import HTMLParser

import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection, transaction
from django.db.models.functions import Now
from django.test import override_settings

from coordination.clock import database_now
from coordination.models import JobState, Node
from publishing.job_names import PUBLISH_JOB
from publishing.models import Post
from publishing.rendering import render

_slugs = itertools.count(1)

EDITOR_PERMISSIONS = ["add_post", "change_post", "view_post", "delete_post"]


def _staff(username: str, codenames: list[str]) -> User:
    user = User.objects.create_user(username, f"{username}@example.com", "pw", is_staff=True)
    user.user_permissions.set(
        Permission.objects.filter(content_type__app_label="publishing", codename__in=codenames)
    )
    return User.objects.get(pk=user.pk)  # fresh instance: no stale permission cache


@pytest.fixture
def editor(db) -> User:
    """A staff user who may draft, schedule, publish and unpublish."""
    return _staff("editor", [*EDITOR_PERMISSIONS, "publish_post"])


@pytest.fixture
def drafter(db) -> User:
    """A staff user who may write drafts but not schedule or publish."""
    return _staff("drafter", EDITOR_PERMISSIONS)


@pytest.fixture
def reviewer(db) -> User:
    """A staff user who may publish and decide reviews."""
    return _staff("reviewer", [*EDITOR_PERMISSIONS, "publish_post", "review_post"])


@pytest.fixture
def reviews_on():
    """Require a review before anything goes live, for the test."""
    with override_settings(INSTATIC_REQUIRE_REVIEW=True):
        yield


@pytest.fixture
def as_editor(client, editor):
    """The test client signed in as an editor who may schedule and publish."""
    client.force_login(editor)
    return client


@pytest.fixture
def as_drafter(client, drafter):
    """The test client signed in as an editor who may write but not publish."""
    client.force_login(drafter)
    return client


def make_post(**values) -> Post:
    """Insert a post directly (bypassing the services), e.g. one already due."""
    n = next(_slugs)
    values.setdefault("title", f"Post {n}")
    values.setdefault("slug", f"post-{n}")
    values.setdefault("body", f"The body of *post {n}*.")
    rendered = render(values["body"])
    values.setdefault("body_html", rendered.html)
    values.setdefault("excerpt", rendered.excerpt)
    if values.get("status") == Post.Status.PUBLISHED:
        values.setdefault("published_at", database_now())
    return Post.objects.create(**values)


def due_post(seconds_ago: float = 5, **values) -> Post:
    """Insert a scheduled post whose publish time passed ``seconds_ago`` (database clock)."""
    publish_at = database_now() - timedelta(seconds=seconds_ago)
    return make_post(status=Post.Status.SCHEDULED, publish_at=publish_at, **values)


def future_post(seconds_ahead: float = 3600, **values) -> Post:
    """Insert a scheduled post due ``seconds_ahead`` from now (database clock)."""
    publish_at = database_now() + timedelta(seconds=seconds_ahead)
    return make_post(status=Post.Status.SCHEDULED, publish_at=publish_at, **values)


def live_node(name: str = "node-a") -> Node:
    """Insert a scheduler node that heartbeated just now (database clock)."""
    return Node.objects.create(
        name=name,
        instance="0" * 32,
        host="testhost",
        pid=1,
        started_at=Now(),
        last_heartbeat=Now(),
    )


class _FormParser(HTMLParser):
    """Collect the successful controls of the first form with a given id, like a browser."""

    def __init__(self, form_id: str):
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.data: dict[str, str] = {}
        self._select: str | None = None
        self._select_first: str | None = None
        self._textarea: str | None = None
        self._textarea_started = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "form" and a.get("id") == self.form_id:
            self.inside = True
        if not self.inside:
            return
        name = a.get("name")
        if tag == "input" and name and "disabled" not in a:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio"):
                if "checked" in a:
                    self.data[name] = a.get("value", "on")
            elif kind not in ("submit", "button", "image", "file"):
                self.data[name] = a.get("value", "")
        elif tag == "select" and name and "disabled" not in a:
            self._select, self._select_first = name, None
        elif tag == "option" and self._select:
            value = a.get("value", "")
            if self._select_first is None:
                self._select_first = value
                self.data.setdefault(self._select, value)
            if "selected" in a:
                self.data[self._select] = value
        elif tag == "textarea" and name and "disabled" not in a:
            self._textarea = name
            self._textarea_started = False
            self.data[name] = ""

    def handle_endtag(self, tag):
        if tag == "form" and self.inside:
            self.inside = False
        elif tag == "select":
            self._select = None
        elif tag == "textarea":
            self._textarea = None

    def handle_data(self, data):
        if self._textarea:
            if not self._textarea_started and data.startswith("\n"):
                # Django renders a newline right after <textarea>; browsers drop it.
                data = data[1:]
            self._textarea_started = True
            self.data[self._textarea] += data


def form_data(response, form_id: str = "post_form") -> dict[str, str]:
    """Return what a browser would submit from the form ``form_id`` on ``response``."""
    parser = _FormParser(form_id)
    parser.feed(response.content.decode())
    assert parser.data, f"no form #{form_id} on the page"
    return parser.data


def live_post(**values) -> Post:
    """Insert a published post (bypassing the services)."""
    return make_post(status=Post.Status.PUBLISHED, **values)


def make_due(revision, seconds_ago: float = 5):
    """Move a revision's publish time ``seconds_ago`` into the past (database clock), bypassing
    the services' "must be in the future", as if its time had come."""
    type(revision).objects.filter(pk=revision.pk).update(
        publish_at=database_now() - timedelta(seconds=seconds_ago)
    )
    revision.refresh_from_db()
    return revision


def kinds(post: Post) -> list[str]:
    """Return the kinds of ``post``'s events, oldest first."""
    return list(post.events.order_by("at", "id").values_list("kind", flat=True))


def publish_job_state(**values) -> JobState:
    """Insert the publish job's state row, due in an hour unless ``values`` say otherwise."""
    values.setdefault("next_due", database_now() + timedelta(hours=1))
    return JobState.objects.create(name=PUBLISH_JOB, group="publishing", **values)


def run_publish_job(node: str = "test-node"):
    """Run the publish job's function once, as a leader's tick would; return its next due."""
    return run_job(PUBLISH_JOB, node=node)


def run_job(name: str, node: str = "test-node", slot=None):
    """Run the job ``name``'s function once, as a leader's tick would; return its answer.

    The slot is the database time unless given (a test counting statements passes one).
    """
    import logging

    from coordination.registry import JobContext, registry

    job = registry.get(name)
    ctx = JobContext(
        job=job,
        slot=database_now() if slot is None else slot,
        node=node,
        logger=logging.getLogger("tests.publishing"),
        deadline=None,
    )
    if not job.transactional:
        return job.func(ctx)
    # As the engine runs it: its locks (FOR UPDATE) need the transaction around the run.
    with transaction.atomic():
        return job.func(ctx)


class Actor(threading.Thread):
    """Run ``func`` in a thread on its own connection; keep its result or exception.

    An editor, a leader's tick or a replica's batch in a race test: each has its own database
    connection (closed when it is done), and events order the steps between them.
    """

    def __init__(self, func):
        super().__init__(daemon=True)
        self.func = func
        self.result = None
        self.error: BaseException | None = None

    def run(self):
        try:
            self.result = self.func()
        except BaseException as exc:
            self.error = exc
        finally:
            connection.close()

    def outcome(self, timeout: float = 30):
        """Wait for ``func`` to return; return its result or raise its exception."""
        self.join(timeout)
        assert not self.is_alive(), "the actor is still blocked"
        if self.error is not None:
            raise self.error
        return self.result
