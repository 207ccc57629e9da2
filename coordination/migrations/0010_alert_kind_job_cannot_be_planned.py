"""Alerts of a new kind: a job paused because the scheduler could not plan it (a choice only)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('coordination', '0009_jobrun_filter_indexes'),
    ]

    operations = [
        migrations.AlterField(
            model_name='alert',
            name='kind',
            field=models.CharField(choices=[('job paused itself', 'Job Paused'), ('job failing', 'Job Failing'), ('job cannot be planned', 'Job Unplannable'), ('no leader', 'No Leader')], max_length=40),
        ),
    ]
