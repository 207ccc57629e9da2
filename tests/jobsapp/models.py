from django.db import models


class Effect(models.Model):
    """A side effect written by a test job; no unique constraint, so duplicates would show."""

    job = models.CharField(max_length=200)
    slot = models.DateTimeField()
    node = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.job} @ {self.slot}"
