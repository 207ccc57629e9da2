"""Alerts: tell people when scheduled work needs them, once, whichever replica notices.

Four things raise an alert: a job paused itself after failing, a job failed
``INSTATIC_ALERT_AFTER_FAILURES`` times in a row, a job was paused because the scheduler could
not plan it (its schedule raised), and no node has led a group for longer than the lease. Each
alert sends the :data:`alert_raised` signal (connect a receiver to page someone, post to
chat...) and calls ``mail_admins`` (Django's ``ADMINS``, from
``DJANGO_ADMINS``). An alert of one kind about one subject goes out at most once per
``INSTATIC_ALERT_INTERVAL`` seconds across the whole cluster: the ``Alert`` row is claimed
with a conditional update, so when every replica notices the same thing, one of them tells.
Receivers and mail run on a short-lived thread: a slow mail server never delays a tick.
"""

import logging
import threading
from datetime import timedelta

from django.core.mail import mail_admins
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.db.models.functions import Now
from django.dispatch import Signal

from coordination.clock import database_now
from coordination.conf import settings
from coordination.dberrors import DATABASE_ERRORS
from coordination.models import Alert

logger = logging.getLogger(__name__)

#: Sent with ``kind`` (an :class:`Alert.Kind` value), ``subject`` (a job or group name) and
#: ``message`` (one paragraph for people) when an alert goes out.
alert_raised = Signal()

Kind = Alert.Kind


def raise_alert(kind: str, subject: str, message: str) -> bool:
    """Send the alert unless one like it went out within the interval; return True if sent.

    Never raises: an alert that cannot be recorded (the database is away) is logged instead.
    """
    try:
        if not _claim(kind, subject):
            logger.debug("alert %s about %s suppressed (rate limit)", kind, subject)
            return False
    except DATABASE_ERRORS as exc:
        logger.error("alert %s about %s not sent (%s): %s", kind, subject, exc, message)
        return False
    logger.warning("alert: %s: %s", kind, message)
    thread = threading.Thread(
        target=_deliver, args=(kind, subject, message), name=f"alert:{kind}", daemon=True
    )
    thread.start()
    return True


def _claim(kind: str, subject: str) -> bool:
    """Take the right to send this alert now (one replica, once per interval)."""
    interval = timedelta(seconds=float(settings.ALERT_INTERVAL))
    rows = Alert.objects.filter(kind=kind, subject=subject[:200])
    try:
        with transaction.atomic():
            Alert.objects.create(kind=kind, subject=subject[:200], last_sent_at=Now())
        return True
    except IntegrityError:
        pass
    if rows.filter(last_sent_at__lte=database_now() - interval).update(
        last_sent_at=Now(), sent=F("sent") + 1
    ):
        return True
    rows.update(suppressed=F("suppressed") + 1)
    return False


def _deliver(kind: str, subject: str, message: str) -> None:
    try:
        alert_raised.send_robust(sender=Alert, kind=kind, subject=subject, message=message)
        mail_admins(f"{kind}: {subject}", message, fail_silently=False)
    except Exception:
        logger.exception("alert %s about %s: delivery failed", kind, subject)
    finally:
        connection.close()  # a receiver may have used the database


def job_paused_itself(job_name: str, failures: int, error: str) -> None:
    raise_alert(
        Kind.JOB_PAUSED,
        job_name,
        f"Job {job_name} paused itself after {failures} failures in a row; none of its slots "
        f"run until someone resumes it (admin, or `manage.py jobs resume {job_name}`).\n\n"
        f"Last error:\n{error}",
    )


def job_cannot_be_planned(job_name: str, error: str) -> None:
    raise_alert(
        Kind.JOB_UNPLANNABLE,
        job_name,
        f"Job {job_name} is paused: the scheduler could not plan its next run ({error}). The "
        "other jobs of its group go on. Fix its schedule, deploy, then resume it (admin, or "
        f"`manage.py jobs resume {job_name}`); the scheduler's log has the traceback.",
    )


def job_failing(job_name: str, failures: int, error: str) -> None:
    raise_alert(
        Kind.JOB_FAILING,
        job_name,
        f"Job {job_name} failed {failures} times in a row.\n\nLast error:\n{error}",
    )


def no_leader(group: str, seconds: float) -> None:
    raise_alert(
        Kind.NO_LEADER,
        group,
        f"No scheduler node has led the {group} group for {seconds:.0f}s (longer than the "
        "lease): its jobs are not running. Check `manage.py schedulerstatus` and the "
        "schedulers' logs.",
    )
