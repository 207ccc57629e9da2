"""Authors' emails: their post went live, could not be published, is late; once each, in
their own zone, each kind switched on their "My notifications" page."""

import socket
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.core import mail
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from coordination.registry import registry
from editors.models import EditorProfile
from outbox.events import PostEvent
from outbox.job_names import NOTIFY_JOB
from outbox.models import Delivery
from outbox.notifications import PostFacts, Recipient, compose
from plugins.testing import deliver_events
from publishing.job_names import LATE_JOB
from publishing.posts import publish_now
from tests.publishing.conftest import due_post, run_job, run_publish_job

AT = datetime(2026, 12, 1, 14, 0, 5, tzinfo=UTC)
ANN = Recipient(
    username="ann",
    email="ann@example.com",
    zone="America/New_York",
    wants=frozenset({"published", "failed", "late"}),
)
POST = PostFacts(
    title="Launch day",
    publish_at=datetime(2026, 12, 1, 14, 0, tzinfo=UTC),
    edit_url="https://news.example.com/admin/publishing/post/7/change/",
    public_url="https://news.example.com/posts/launch-day/",
    watch_url="https://news.example.com/admin/watch/7/",
)


def event(kind: str, *, by: str = "node-a", **data) -> PostEvent:
    return PostEvent(id=1, kind=kind, post_id=7, at=AT, version=2, by=by, data=data)


@pytest.mark.parametrize(
    ("the_event", "author", "subject", "says"),
    [
        (
            event("published"),
            ANN,
            "“Launch day” is live",
            [
                "Your post “Launch day” went live at 2026-12-01 09:00:05 EST.",
                "Read it: https://news.example.com/posts/launch-day/",
                "Edit it: https://news.example.com/admin/publishing/post/7/change/",
            ],
        ),
        (
            event("failed", error="The body has a script in it."),
            ANN,
            "“Launch day” could not be published",
            [
                "was due at 2026-12-01 09:00:00 EST and could not be published:",
                "The body has a script in it.",
                "not tried again until it is changed",
            ],
        ),
        (
            event("late", was_due_at="2026-12-01T14:00:00+00:00", late_after=300.0),
            ANN,
            "“Launch day” is late",
            ["was due at 2026-12-01 09:00:00 EST and is still not live 5 min later."],
        ),
        (
            event("published"),
            Recipient("bo", "bo@example.com", "Asia/Tokyo", frozenset({"published"})),
            "“Launch day” is live",
            ["went live at 2026-12-01 23:00:05 JST."],
        ),
    ],
)
def test_an_email_says_what_happened_in_the_authors_zone(the_event, author, subject, says):
    email = compose(the_event, POST, author)
    assert email.subject == subject and email.to == author.email
    for words in says:
        assert words in email.body
    assert "Choose which emails you get: /admin/my-notifications/" in email.body


@pytest.mark.parametrize(
    ("the_event", "author"),
    [
        (event("published"), None),  # no author who can be emailed
        (event("published"), Recipient("ann", "a@example.com", "UTC", frozenset({"late"}))),
        (event("published", by="ann"), ANN),  # she published it herself
        (event("unpublished"), ANN),  # not a kind authors are emailed about
    ],
)
def test_nobody_is_told_what_they_turned_off_or_did_themselves(the_event, author):
    assert compose(the_event, POST, author) is None


@pytest.mark.parametrize(
    ("chosen", "zone"),
    [
        ("Asia/Tokyo", "Asia/Tokyo"),
        ("UTC", "UTC"),
        ("", "Europe/Berlin"),  # none chosen
        ("Mars/Olympus_Mons", "Europe/Berlin"),  # not in this host's time zone data
        ("../etc/passwd", "Europe/Berlin"),  # not a zone's name at all
    ],
)
def test_an_email_is_in_the_zone_its_person_chose_if_the_host_knows_it(chosen, zone):
    from outbox.notifications import email_zone

    assert email_zone(chosen, site="Europe/Berlin") == zone


def test_the_notifications_are_a_built_in_claim_first_subscriber():
    job = registry.get(NOTIFY_JOB)
    assert job.group == "plugins" and not job.transactional and job.retries == 8
    assert job.func.kinds == {"published", "failed", "late"}


@pytest.fixture
def author(db):
    """An editor who may view posts, as the authors of the posts she is told about are."""
    user = User.objects.create_user("ann", email="ann@example.com", is_staff=True)
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="publishing", codename="view_post")
    )
    return user


def notify() -> int:
    return deliver_events(registry.get(NOTIFY_JOB))


@pytest.mark.django_db
def test_the_author_of_a_post_the_scheduler_published_is_emailed_once(author):
    EditorProfile.objects.create(user=author, time_zone="Europe/Paris")
    post = due_post(author=author, title="Launch day")
    run_publish_job(node="node-a")
    assert notify() == 1
    assert notify() == 0
    [email] = mail.outbox
    assert email.to == ["ann@example.com"] and email.subject == "“Launch day” is live"
    assert " CET." in email.body, "in her zone"
    assert reverse("admin:publishing_post_change", args=[post.pk]) in email.body


@pytest.mark.django_db
def test_posts_whose_author_cannot_be_emailed_get_no_delivery_at_all(author):
    User.objects.filter(pk=author.pk).update(email="")
    due_post(author=author)
    due_post()  # no author
    due_post(author=User.objects.create_user("out", email="out@example.com"))  # not staff
    run_publish_job()
    assert notify() == 0
    assert not Delivery.objects.filter(subscriber=NOTIFY_JOB).exists()
    assert not mail.outbox


@pytest.mark.django_db
def test_a_kind_turned_off_is_not_sent_and_publishing_by_hand_tells_nobody(author):
    EditorProfile.objects.create(user=author, email_late=False)
    due_post(author=author, seconds_ago=600)
    run_job(LATE_JOB)
    editor = User.objects.create_superuser("ed", email="ed@example.com")
    mine = due_post(author=editor, seconds_ago=5)
    publish_now(post=mine, user=editor)
    assert notify() == 2, "both delivered"
    assert not mail.outbox, "to nobody: a switch off, and ed published his own post"


@pytest.mark.django_db
def test_the_author_is_told_a_post_is_late(author):
    due_post(author=author, seconds_ago=600, title="Late one")
    run_job(LATE_JOB)
    assert notify() == 1
    assert mail.outbox[0].subject == "“Late one” is late"


@pytest.mark.django_db
def test_a_mail_server_that_refuses_leaves_the_email_to_be_tried_again(author):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    due_post(author=author)
    run_publish_job()
    smtp = "django.core.mail.backends.smtp.EmailBackend"
    with override_settings(EMAIL_BACKEND=smtp, EMAIL_HOST="127.0.0.1", EMAIL_PORT=port):
        assert notify() == 0
    delivery = Delivery.objects.get(subscriber=NOTIFY_JOB)
    assert delivery.status == Delivery.Status.PENDING and delivery.attempts == 1
    assert "Connection refused" in delivery.last_error
    assert delivery.due_at > database_now()
    Delivery.objects.filter(pk=delivery.pk).update(due_at=database_now() - timedelta(seconds=1))
    assert notify() == 1
    assert len(mail.outbox) == 1


@pytest.mark.django_db
def test_an_editor_turns_emails_off_on_their_own_page(client, author):
    client.force_login(author)
    url = reverse("my_notifications")
    page = client.get(url)
    assert b"ann@example.com" in page.content
    assert b"When my post goes live" in page.content
    response = client.post(url, {"email_published": "on", "email_failed": "on"})
    assert response.status_code == 302
    profile = EditorProfile.objects.get(user=author)
    assert (profile.email_published, profile.email_failed, profile.email_late) == (
        True,
        True,
        False,
    )
    assert b"Your email settings are saved." in client.get(url).content
    assert b'href="/admin/my-notifications/"' in client.get(reverse("admin:index")).content
