"""Indexes for the run-ledger admin's filters at a million rows.

``?trigger=manual`` scanned the ``(-slot, -id)`` index until it had a page of manual runs
(one in a thousand): ``(trigger, -slot, -id)`` is one range in the list's order instead.
``(status, -slot, -id)`` replaces the plain status index (the runs in progress the tick and
maintenance look for are its prefix) and also serves ``?status=`` newest first. The new one is built before the old one
is dropped, so status lookups always have an index.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("coordination", "0008_jobrun_newest_index"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="jobrun",
            index=models.Index(fields=["status", "-slot", "-id"], name="coordination_jobrun_state"),
        ),
        migrations.RemoveIndex(
            model_name="jobrun",
            name="coordination_jobrun_status",
        ),
        migrations.AddIndex(
            model_name="jobrun",
            index=models.Index(fields=["trigger", "-slot", "-id"], name="coordination_jobrun_trig"),
        ),
    ]
