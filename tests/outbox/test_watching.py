"""Watchers: an editor who did not write a post gets its author's emails, once each, in
their own zone, while they may still see it; one person's failure holds back no other, and a
retry tells only those not told yet. Watching starts and stops on a page of its own, linked
from the post's page."""

import logging
import smtplib
from datetime import timedelta

import pytest
from django.contrib.auth.backends import BaseBackend
from django.contrib.auth.models import Group, Permission, User
from django.core import mail
from django.core.mail.backends.locmem import EmailBackend
from django.test import override_settings
from django.urls import reverse

from coordination.clock import database_now
from coordination.registry import registry
from editors.models import EditorProfile
from outbox.job_names import NOTIFY_JOB
from outbox.models import Delivery, Told, Watch
from outbox.notifications import compose
from plugins.testing import deliver_events
from publishing.job_names import LATE_JOB
from tests.outbox.test_notifications import POST, event
from tests.publishing.conftest import due_post, editor, make_post, run_job, run_publish_job  # noqa: F401

pytestmark = pytest.mark.django_db


def person(username: str, *, zone: str = "UTC", email: str | None = None) -> User:
    """A staff user who may view posts (and so watch them), with their zone."""
    user = User.objects.create_user(
        username, email=f"{username}@example.com" if email is None else email, is_staff=True
    )
    user.user_permissions.add(post_permission("view_post"))
    EditorProfile.objects.create(user=user, time_zone=zone)
    return user


def post_permission(codename: str) -> Permission:
    return Permission.objects.get(content_type__app_label="publishing", codename=codename)


def notify() -> int:
    return deliver_events(registry.get(NOTIFY_JOB))


def sent_to() -> list[str]:
    return sorted(address for email in mail.outbox for address in email.to)


def test_a_watcher_is_told_in_words_for_a_watcher():
    from outbox.notifications import Recipient

    bo = Recipient("bo", "bo@example.com", "Asia/Tokyo", frozenset({"published"}), watching=True)
    email = compose(event("published"), POST, bo)
    assert email.subject == "“Launch day” is live"
    assert "The post “Launch day” went live at 2026-12-01 23:00:05 JST." in email.body
    assert "Your post" not in email.body
    assert "because you watch this post" in email.body
    assert f"Stop watching it: {POST.watch_url}\n" in email.body
    assert "because you wrote this post" not in email.body


def test_the_author_and_each_watcher_are_emailed_once_each_in_their_own_zone():
    ann = person("ann", zone="Europe/Paris")
    bo = person("bo", zone="Asia/Tokyo")
    cy = person("cy")
    post = due_post(author=ann, title="Launch day")
    Watch.objects.create(post=post, user=bo)
    Watch.objects.create(post=post, user=ann)  # the author watching too: told once, as author
    Watch.objects.create(post=post, user=person("gone", email=""))  # no address: not told
    Watch.objects.create(post=post, user=cy)
    User.objects.filter(pk=cy.pk).update(is_active=False)  # left: not told
    run_publish_job(node="node-a")
    assert notify() == 1, "one delivery for the event, whoever is told"
    assert notify() == 0
    assert sent_to() == ["ann@example.com", "bo@example.com"]
    by_address = {email.to[0]: email.body for email in mail.outbox}
    assert "Your post" in by_address["ann@example.com"] and " CET." in by_address["ann@example.com"]
    assert "The post" in by_address["bo@example.com"] and " JST." in by_address["bo@example.com"]
    assert set(Told.objects.values_list("user__username", flat=True)) == {"ann", "bo"}


def test_a_post_whose_only_reader_is_a_watcher_gets_its_delivery():
    post = due_post(title="Nobody's")
    Watch.objects.create(post=post, user=person("bo"))
    run_publish_job()
    assert notify() == 1
    assert sent_to() == ["bo@example.com"]


class RefusesBo(EmailBackend):
    """The mail server refuses one address and takes the others."""

    def send_messages(self, messages):
        for message in messages:
            if "bo@example.com" in message.to:
                raise smtplib.SMTPRecipientsRefused({"bo@example.com": (550, b"mailbox full")})
        return super().send_messages(messages)


def test_a_refused_email_is_tried_again_for_its_person_only():
    ann, bo = person("ann"), person("bo")
    post = due_post(author=ann, seconds_ago=600, title="Late one")
    Watch.objects.create(post=post, user=bo)
    run_job(LATE_JOB)
    with override_settings(EMAIL_BACKEND=f"{__name__}.RefusesBo"):
        assert notify() == 0
    assert sent_to() == ["ann@example.com"]
    delivery = Delivery.objects.get(subscriber=NOTIFY_JOB)
    assert delivery.status == Delivery.Status.PENDING and delivery.attempts == 1
    assert "bo@example.com" in delivery.last_error and "mailbox full" in delivery.last_error
    Delivery.objects.filter(pk=delivery.pk).update(due_at=database_now() - timedelta(seconds=1))
    assert notify() == 1
    assert sent_to() == ["ann@example.com", "bo@example.com"], "ann is not told twice"
    assert mail.outbox[1].subject == "“Late one” is late"


# --- who is told: whoever may see the post when the email is sent --------------------------


def outbox_records(caplog, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "outbox.notifications" and r.levelno == level]


def take_permissions(user: User) -> None:
    user.user_permissions.clear()


def take_staff_flag(user: User) -> None:
    User.objects.filter(pk=user.pk).update(is_staff=False)


def take_both(user: User) -> None:
    take_permissions(user)
    take_staff_flag(user)


@pytest.mark.parametrize("take_access", [take_permissions, take_staff_flag, take_both])
def test_an_author_or_watcher_who_lost_access_since_is_not_emailed(take_access, caplog):
    ann, bo = person("ann"), person("bo")
    cy = User.objects.create_user("cy", email="cy@example.com", is_staff=True)
    changers = Group.objects.create(name="changers")  # the admin lets a changer see posts too
    changers.permissions.add(post_permission("change_post"))
    cy.groups.add(changers)
    post = due_post(author=ann, seconds_ago=600, title="Embargoed")
    Watch.objects.create(post=post, user=bo)
    Watch.objects.create(post=post, user=cy)
    take_access(ann)
    take_access(bo)
    run_job(LATE_JOB)
    with caplog.at_level(logging.INFO, logger="outbox.notifications"):
        assert notify() == 1, "delivered: nobody else is left to tell"
    assert sent_to() == ["cy@example.com"]
    assert list(Told.objects.values_list("user__username", flat=True)) == ["cy"]
    skipped = outbox_records(caplog, logging.INFO)
    assert {record.args[0] for record in skipped} == {"ann", "bo"}
    assert all("%s" in record.msg for record in skipped), "%-style arguments"


class DirectoryDownForBo(BaseBackend):
    """An authentication backend whose directory fails when asked about one user."""

    def has_perm(self, user_obj, perm, obj=None):
        if user_obj.get_username() == "bo":
            raise ConnectionError("the directory did not answer")
        return False


def test_one_persons_failure_is_logged_the_others_are_told_and_the_retry_tells_them(caplog):
    ann, bo, cy = person("ann"), person("bo"), person("cy")
    post = due_post(author=ann, seconds_ago=600, title="Late one")
    Watch.objects.create(post=post, user=bo)
    Watch.objects.create(post=post, user=cy)
    run_job(LATE_JOB)
    backends = [f"{__name__}.DirectoryDownForBo", "django.contrib.auth.backends.ModelBackend"]
    with override_settings(AUTHENTICATION_BACKENDS=backends), caplog.at_level(logging.INFO):
        assert notify() == 0
    assert sent_to() == ["ann@example.com", "cy@example.com"], "cy, after bo, is told"
    [failure] = outbox_records(caplog, logging.ERROR)
    assert failure.exc_info is not None and failure.args[0] == "bo"
    delivery = Delivery.objects.get(subscriber=NOTIFY_JOB)
    assert delivery.status == Delivery.Status.PENDING and delivery.attempts == 1
    assert "bo@example.com" in delivery.last_error
    assert "the directory did not answer" in delivery.last_error
    Delivery.objects.filter(pk=delivery.pk).update(due_at=database_now() - timedelta(seconds=1))
    assert notify() == 1
    assert sent_to() == ["ann@example.com", "bo@example.com", "cy@example.com"]
    assert len(mail.outbox) == 3, "nobody is told twice"


@override_settings(TIME_ZONE="Europe/Berlin")
def test_a_zone_the_host_does_not_know_is_the_sites_and_everyone_after_is_told(caplog):
    ann = person("ann", zone="Asia/Tokyo")
    bo = person("bo", zone="Mars/Olympus_Mons")  # chosen on a host with newer time zone data
    cy = person("cy", zone="America/New_York")
    post = due_post(author=ann, title="Launch day")
    Watch.objects.create(post=post, user=bo)
    Watch.objects.create(post=post, user=cy)
    run_publish_job()
    with caplog.at_level(logging.INFO, logger="outbox.notifications"):
        assert notify() == 1
    by_address = {email.to[0]: email.body for email in mail.outbox}
    assert sorted(by_address) == ["ann@example.com", "bo@example.com", "cy@example.com"]
    assert " JST." in by_address["ann@example.com"] and " EST." in by_address["cy@example.com"]
    assert " CET." in by_address["bo@example.com"], "in the site's zone"
    [warning] = outbox_records(caplog, logging.WARNING)
    assert warning.args[:2] == ("bo", "Mars/Olympus_Mons")


# --- the watch page -----------------------------------------------------------------------


def test_an_editor_watches_a_post_and_stops(client, editor):  # noqa: F811
    post = make_post(title="Opening hours")
    client.force_login(editor)
    change = reverse("admin:publishing_post_change", args=[post.pk])
    url = reverse("watch_post", args=[post.pk])
    assert f'href="{url}">Watch<'.encode() in client.get(change).content
    page = client.get(url)
    assert b"Watch this post" in page.content and b"editor@example.com" in page.content
    response = client.post(url, {"watch": "1"})
    assert response.status_code == 302 and response.url == change
    assert Watch.objects.filter(post=post, user=editor).exists()
    shown = client.get(change).content
    assert f'href="{url}">Watching<'.encode() in shown
    assert "You are watching “Opening hours”".encode() in shown
    assert b"Stop watching" in client.get(url).content
    client.post(url, {"watch": "0"})
    assert not Watch.objects.filter(post=post, user=editor).exists()


def test_the_author_has_no_watch_link_and_is_told_they_get_the_emails(client, editor):  # noqa: F811
    post = make_post(author=editor)
    client.force_login(editor)
    url = reverse("watch_post", args=[post.pk])
    change = client.get(reverse("admin:publishing_post_change", args=[post.pk])).content
    assert url.encode() not in change
    page = client.get(url)
    assert b"You wrote this post" in page.content and b"Watch this post" not in page.content


def test_who_may_not_see_posts_may_not_watch_them(client):
    post = make_post()
    outsider = User.objects.create_user("outsider", "o@example.com", "pw", is_staff=True)
    client.force_login(outsider)
    url = reverse("watch_post", args=[post.pk])
    assert client.get(url).status_code == 403
    assert client.post(url, {"watch": "1"}).status_code == 403
    assert not Watch.objects.exists()


def test_an_editor_who_may_change_posts_but_not_only_view_them_may_watch(client):
    post = make_post()
    changer = User.objects.create_user("changer", "c@example.com", "pw", is_staff=True)
    changer.user_permissions.add(Permission.objects.get(codename="change_post"))
    client.force_login(changer)
    assert client.post(reverse("watch_post", args=[post.pk]), {"watch": "1"}).status_code == 302
    assert Watch.objects.filter(post=post, user=changer).exists()


@override_settings(TIME_ZONE="Europe/Berlin")
def test_my_notifications_lists_the_posts_i_watch(client, editor):  # noqa: F811
    mine = reverse("my_notifications")
    client.force_login(editor)
    assert "You watch no posts." in client.get(mine).content.decode()
    watched = make_post(title="Opening hours", status="published")
    make_post(title="Not watched")
    Watch.objects.create(post=watched, user=editor)
    Watch.objects.create(post=make_post(title="Someone else's"), user=person("carol"))
    page = client.get(mine).content.decode()
    listed = page[page.index('id="watched-posts"') :]
    change = reverse("admin:publishing_post_change", args=[watched.pk])
    assert f'<a href="{change}">Opening hours</a>' in listed and "Published" in listed
    assert f'href="{reverse("watch_post", args=[watched.pk])}"' in listed
    assert "Not watched" not in listed and "Someone else" not in listed
    assert " CET</td>" in listed, "since when, in the editor's zone"
