from django.db import migrations, models
from django.db.models import F


def mark_history_dispatched(apps, schema_editor):
    """Events written before the outbox existed are history, not news: nobody is told."""
    PublishEvent = apps.get_model("publishing", "PublishEvent")
    PublishEvent.objects.filter(dispatched_at__isnull=True).update(dispatched_at=F("at"))


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0008_post_text_validators"),
    ]

    operations = [
        migrations.AddField(
            model_name="publishevent",
            name="dispatched_at",
            field=models.DateTimeField(
                blank=True, editable=False, null=True, verbose_name="dispatched at"
            ),
        ),
        migrations.RunPython(mark_history_dispatched, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name="publishevent",
            index=models.Index(fields=["dispatched_at", "id"], name="publishing_event_outbox"),
        ),
    ]
