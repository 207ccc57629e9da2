"""Emails to a post's author: it went live, its publish failed, it is late.

A built-in subscriber of the outbox (``outbox.notify_authors``, claim-first like any
subscriber that talks to the world): each (event, author) pair is one delivery, sent once
across all replicas, retried with back-off when the mail server refuses it. Deciding is
:func:`compose`, pure over values: whether the author is told and the words, with times in
the author's own zone; doing is :func:`notify_author`, which reads the post and sends the
email through Django's mail (so the console and file backends work in development).

Each kind can be turned off on the author's "My notifications" page
(``EditorProfile.EMAIL_SWITCHES``); nobody is told about what they did themselves.
"""

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings as django_settings
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from coordination.registry import JobContext
from coordination.wording import duration_text, local_time
from editors.models import EditorProfile
from outbox.events import PostEvent
from publishing.models import Post

#: The publish events an author is emailed about.
NOTIFIED_KINDS = tuple(EditorProfile.EMAIL_SWITCHES)


@dataclass(frozen=True)
class Author:
    """Who a post's email goes to: their address, name, zone, and the kinds they want."""

    username: str
    email: str
    zone: str
    wants: frozenset[str]


@dataclass(frozen=True)
class PostFacts:
    """What an email says about the post: its title, when it was due, and its links."""

    title: str
    publish_at: datetime | None
    edit_url: str
    public_url: str = ""


@dataclass(frozen=True)
class Email:
    subject: str
    body: str
    to: str


def posts_with_authors(post_ids: set[int]) -> list[int]:
    """Return the posts of ``post_ids`` whose author can be emailed (the dispatcher asks)."""
    return list(
        Post.objects.filter(pk__in=post_ids, author__is_active=True)
        .exclude(author__email="")
        .values_list("pk", flat=True)
    )


def author_of(user) -> Author | None:
    """Return the :class:`Author` a post's ``user`` is, or ``None`` when they cannot be told."""
    if user is None or not user.is_active or not user.email:
        return None
    profile = EditorProfile.objects.filter(user=user).first() or EditorProfile(user=user)
    wants = {
        kind for kind, field in EditorProfile.EMAIL_SWITCHES.items() if getattr(profile, field)
    }
    return Author(
        username=user.get_username(),
        email=user.email,
        zone=profile.time_zone or django_settings.TIME_ZONE,
        wants=frozenset(wants),
    )


def compose(event: PostEvent, post: PostFacts, author: Author | None) -> Email | None:
    """Return the email that tells ``author`` about ``event``, or ``None`` if nobody is told.

    Nobody is told when the post has no author who can be emailed, when they turned the kind
    off, or when they made the change themselves (publishing by hand).
    """
    if author is None or event.kind not in author.wants or event.by == author.username:
        return None
    with timezone.override(author.zone):
        words = _words(event, post)
    if words is None:
        return None
    subject, lines = words
    footer = _(
        "You get this email because you wrote this post. Choose which emails you get: %(url)s"
    )
    body = "\n\n".join(
        [*lines, _("Edit it: %(url)s") % {"url": post.edit_url}, footer % {"url": _settings_url()}]
    )
    return Email(subject=subject, body=body + "\n", to=author.email)


def _words(event: PostEvent, post: PostFacts) -> tuple[str, list[str]] | None:
    """Return the subject and paragraphs for ``event``, in the active zone."""
    title = post.title
    if event.kind == "published":
        lines = [
            _("Your post “%(title)s” went live at %(when)s.")
            % {"title": title, "when": local_time(event.at)}
        ]
        if post.public_url:
            lines.append(_("Read it: %(url)s") % {"url": post.public_url})
        return _("“%(title)s” is live") % {"title": title}, lines
    due = _time(event.data.get("was_due_at")) or post.publish_at
    due_text = local_time(due) if due is not None else _("its time")
    if event.kind == "failed":
        return _("“%(title)s” could not be published") % {"title": title}, [
            _("Your post “%(title)s” was due at %(when)s and could not be published:")
            % {"title": title, "when": due_text},
            str(event.data.get("error", "")),
            _("It stays scheduled, and is not tried again until it is changed."),
        ]
    if event.kind == "late":
        return _("“%(title)s” is late") % {"title": title}, [
            _("Your post “%(title)s” was due at %(when)s and is still not live %(after)s later.")
            % {
                "title": title,
                "when": due_text,
                "after": duration_text(event.data.get("late_after")),
            },
            _(
                "It goes live as soon as the scheduler can publish it. If it stays late, "
                "tell the people who run the site."
            ),
        ]
    return None


def _time(value) -> datetime | None:
    return parse_datetime(value) if isinstance(value, str) else None


def _absolute(path: str) -> str:
    """Return ``path`` on the site's address (``INSTATIC_SITE_URL``) when it is set."""
    base = getattr(django_settings, "INSTATIC_SITE_URL", "")
    return base.rstrip("/") + path if base else path


def _settings_url() -> str:
    return _absolute(reverse("my_notifications"))


def facts(post: Post) -> PostFacts:
    """Return what an email says about ``post``."""
    public = post.status == Post.Status.PUBLISHED
    return PostFacts(
        title=post.title,
        publish_at=post.publish_at,
        edit_url=_absolute(reverse("admin:publishing_post_change", args=[post.pk])),
        public_url=_absolute(post.get_absolute_url()) if public else "",
    )


def notify_author(event: PostEvent, ctx: JobContext) -> None:
    """Email the author of ``event``'s post about it, unless nobody is to be told.

    A refused email raises, so the delivery is tried again after its back-off.
    """
    post = Post.objects.select_related("author").filter(pk=event.post_id).first()
    if post is None:
        return
    email = compose(event, facts(post), author_of(post.author))
    if email is None:
        return
    send_mail(email.subject, email.body, None, [email.to], fail_silently=False)
    ctx.logger.info("emailed %s about post %s (%s)", email.to, post.pk, event.kind)
