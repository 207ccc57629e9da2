"""Emails to a post's author and watchers: it went live, its publish failed, it is late.

A built-in subscriber of the outbox (``outbox.notify_authors``, claim-first like any
subscriber that talks to the world): each event is one delivery, sent across all replicas
once, retried with back-off when the mail server refuses it. Everyone it tells is recorded
(:class:`outbox.models.Told`) as soon as their email is sent, so a retry tells only those
not told yet: each person is emailed once per event, twice only when a node dies between an
email and its record. Deciding is :func:`compose`, pure over values: whether a person is
told and the words, with times in their own zone (:func:`email_zone`); doing is
:func:`notify_people`, which reads the post and its people and sends through Django's mail
(so the console and file backends work in development).

Each kind can be turned off on each editor's "My notifications" page
(``EditorProfile.EMAIL_SWITCHES``); nobody is told about what they did themselves. Whether
someone may still see the post is asked as their email is sent, not when they began
watching (:func:`outbox.watching.may_see`): an author or a watcher who left or lost access
is not told. Each person is tried on their own: one person's failure is logged and tells
nobody less, and the delivery fails afterwards, so its retry tells those not told yet.
"""

import logging
import zoneinfo
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings as django_settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.mail import send_mail
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _

from coordination.registry import JobContext
from coordination.wording import duration_text, local_time
from editors.models import EditorProfile
from outbox.delivering import DeliveryRefused
from outbox.events import PostEvent
from outbox.models import Told, Watch
from outbox.watching import may_see
from publishing.models import Post

logger = logging.getLogger(__name__)

#: The publish events an author is emailed about.
NOTIFIED_KINDS = tuple(EditorProfile.EMAIL_SWITCHES)


@dataclass(frozen=True)
class Recipient:
    """Who a post's email goes to: their address, name, zone, the kinds they want, and
    whether they watch the post (``False``: they wrote it)."""

    username: str
    email: str
    zone: str
    wants: frozenset[str]
    watching: bool = False


@dataclass(frozen=True)
class PostFacts:
    """What an email says about the post: its title, when it was due, and its links."""

    title: str
    publish_at: datetime | None
    edit_url: str
    public_url: str = ""
    watch_url: str = ""


@dataclass(frozen=True)
class Email:
    subject: str
    body: str
    to: str


def posts_with_people(post_ids: set[int]) -> list[int]:
    """Return the posts of ``post_ids`` with an author or a watcher who can be emailed (the
    dispatcher asks; whether they may see the post is asked when it is sent)."""
    authored = (
        Post.objects.filter(pk__in=post_ids, author__is_active=True, author__is_staff=True)
        .exclude(author__email="")
        .values_list("pk", flat=True)
    )
    watched = (
        Watch.objects.filter(post_id__in=post_ids, user__is_active=True, user__is_staff=True)
        .exclude(user__email="")
        .values_list("post_id", flat=True)
    )
    return sorted({*authored, *watched})


def email_zone(chosen: str, *, site: str) -> str:
    """Return the zone an email's times are in: the one its person ``chose`` if this host
    knows it, else the ``site``'s (none chosen, or a name from newer time zone data)."""
    if not chosen:
        return site
    try:
        zoneinfo.ZoneInfo(chosen)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return site
    return chosen


def recipient(user, *, watching: bool = False) -> Recipient | None:
    """Return the :class:`Recipient` ``user`` is, or ``None`` when they have no address
    (whether they may be told at all is :func:`outbox.watching.may_see`)."""
    if user is None or not user.email:
        return None
    profile = EditorProfile.objects.filter(user=user).first() or EditorProfile(user=user)
    wants = {
        kind for kind, field in EditorProfile.EMAIL_SWITCHES.items() if getattr(profile, field)
    }
    site = django_settings.TIME_ZONE
    zone = email_zone(profile.time_zone, site=site)
    if profile.time_zone and zone != profile.time_zone:
        logger.warning(
            "%s's time zone %r is not one this host knows; their emails are in the site's, %s",
            user.get_username(),
            profile.time_zone,
            site,
        )
    return Recipient(
        username=user.get_username(),
        email=user.email,
        zone=zone,
        wants=frozenset(wants),
        watching=watching,
    )


def people(post: Post) -> list[tuple[AbstractBaseUser, bool]]:
    """Return who may be told about ``post``, each with whether they watch it: its author,
    then its watchers in the order they began watching (an author who also watches is told
    as the author). Who can be emailed, and may still see it, is asked for each in turn."""
    found = {}
    if post.author is not None:
        found[post.author_id] = (post.author, False)
    watches = Watch.objects.filter(post=post).select_related("user").order_by("created_at", "id")
    for watch in watches:
        found.setdefault(watch.user_id, (watch.user, True))
    return list(found.values())


def compose(event: PostEvent, post: PostFacts, person: Recipient | None) -> Email | None:
    """Return the email that tells ``person`` about ``event``, or ``None`` if they are not told.

    Nobody is told who cannot be emailed, who turned the kind off, or who made the change
    themselves (publishing by hand).
    """
    if person is None or event.kind not in person.wants or event.by == person.username:
        return None
    with timezone.override(person.zone):
        words = _words(event, post, yours=not person.watching)
    if words is None:
        return None
    subject, lines = words
    choose = _("Choose which emails you get: %(url)s") % {"url": _settings_url()}
    if person.watching:
        why = [
            _("You get this email because you watch this post. Stop watching it: %(url)s")
            % {"url": post.watch_url},
            choose,
        ]
    else:
        why = [_("You get this email because you wrote this post. %(choose)s") % {"choose": choose}]
    body = "\n\n".join([*lines, _("Edit it: %(url)s") % {"url": post.edit_url}, *why])
    return Email(subject=subject, body=body + "\n", to=person.email)


def _words(event: PostEvent, post: PostFacts, *, yours: bool) -> tuple[str, list[str]] | None:
    """Return the subject and paragraphs for ``event``, in the active zone, to its author
    (``yours``) or a watcher."""
    title = post.title
    if event.kind == "published":
        went_live = (
            _("Your post “%(title)s” went live at %(when)s.")
            if yours
            else _("The post “%(title)s” went live at %(when)s.")
        )
        lines = [went_live % {"title": title, "when": local_time(event.at)}]
        if post.public_url:
            lines.append(_("Read it: %(url)s") % {"url": post.public_url})
        return _("“%(title)s” is live") % {"title": title}, lines
    due = _time(event.data.get("was_due_at")) or post.publish_at
    due_text = local_time(due) if due is not None else _("its time")
    if event.kind == "failed":
        could_not = (
            _("Your post “%(title)s” was due at %(when)s and could not be published:")
            if yours
            else _("The post “%(title)s” was due at %(when)s and could not be published:")
        )
        return _("“%(title)s” could not be published") % {"title": title}, [
            could_not % {"title": title, "when": due_text},
            str(event.data.get("error", "")),
            _("It stays scheduled, and is not tried again until it is changed."),
        ]
    if event.kind == "late":
        still_not = (
            _("Your post “%(title)s” was due at %(when)s and is still not live %(after)s later.")
            if yours
            else _(
                "The post “%(title)s” was due at %(when)s and is still not live %(after)s later."
            )
        )
        return _("“%(title)s” is late") % {"title": title}, [
            still_not
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
        watch_url=_absolute(reverse("watch_post", args=[post.pk])),
        public_url=_absolute(post.get_absolute_url()) if public else "",
    )


def notify_people(event: PostEvent, ctx: JobContext) -> None:
    """Email the author and the watchers of ``event``'s post about it, each recorded as told
    once their email is sent; those told already (by an earlier attempt) are skipped.

    Runs outside a transaction (the subscription is not atomic), so each record commits at
    once. Each person is tried whatever happened to the others before; if any failed (their
    email refused, or anything else), the delivery fails once the others are told, and is
    tried again after its back-off, for those not told.
    """
    post = Post.objects.select_related("author").filter(pk=event.post_id).first()
    if post is None:
        return
    told = set(Told.objects.filter(event_id=event.id).values_list("user_id", flat=True))
    about = facts(post)
    failed = []
    for user, watching in people(post):
        if user.pk in told:
            continue
        try:
            tell(event, post, about, user, watching=watching, ctx=ctx)
        except Exception as exc:
            # Logged here with its traceback; the delivery's error names each person's.
            logger.exception(
                "could not tell %s about post %s (%s event %s)",
                user.get_username(),
                post.pk,
                event.kind,
                event.id,
            )
            failed.append(f"{user.email or user.get_username()}: {type(exc).__name__}: {exc}")
    if failed:
        raise DeliveryRefused("could not email " + "; ".join(failed))


def tell(
    event: PostEvent,
    post: Post,
    about: PostFacts,
    user: AbstractBaseUser,
    *,
    watching: bool,
    ctx: JobContext,
) -> None:
    """Email ``user`` about ``event`` and record them told, if :func:`compose` says so and
    they may still see ``post`` (active, staff, let see it by the posts' admin)."""
    email = compose(event, about, recipient(user, watching=watching))
    if email is None:
        return
    if not may_see(user, post):
        logger.info(
            "not telling %s about post %s (%s): they may no longer see it",
            user.get_username(),
            post.pk,
            event.kind,
        )
        return
    send_mail(email.subject, email.body, None, [email.to], fail_silently=False)
    Told.objects.create(event_id=event.id, user_id=user.pk)
    ctx.logger.info("emailed %s about post %s (%s)", email.to, post.pk, event.kind)
