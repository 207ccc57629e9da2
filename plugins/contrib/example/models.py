from django.db import models
from django.db.models.functions import Now


class Beat(models.Model):
    """One row per run of ``example.beat``; no unique constraint, so a double run would show."""

    slot = models.DateTimeField()
    node = models.CharField(max_length=200)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["slot"]

    def __str__(self) -> str:
        return f"beat @ {self.slot:%Y-%m-%d %H:%M:%S} on {self.node}"


class Digest(models.Model):
    """What ``example.digest`` found for one day's slot; rerunning the slot overwrites it."""

    slot = models.DateTimeField(unique=True)
    live_posts = models.PositiveIntegerField()
    words = models.PositiveIntegerField()
    complete = models.BooleanField(default=True)
    node = models.CharField(max_length=200)

    class Meta:
        ordering = ["-slot"]

    def __str__(self) -> str:
        return f"digest @ {self.slot:%Y-%m-%d}: {self.live_posts} posts, {self.words} words"
