"""Reviews as an app of their own: the model publishing had, over the same table.

State only: the table (``publishing_review``) and its rows stay as they are. The model's
content type moves with it, so editors' permissions on reviews and the admin's history of them
follow.
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

from publishing.app_moves import relabel_content_types


MODELS = ("review",)


def move_content_types(apps, schema_editor):
    relabel_content_types(apps, MODELS, "publishing", "reviews")


def move_content_types_back(apps, schema_editor):
    relabel_content_types(apps, MODELS, "reviews", "publishing")


class Migration(migrations.Migration):
    # Publishing's model leaves its state after this takes it over; publishing does not
    # depend on this app, which may not be installed.
    run_before = [("publishing", "0016_reviews_move_out")]

    initial = True

    dependencies = [
        ('publishing', '0015_releases_move_out'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ('contenttypes', '0002_remove_content_type_name'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='Review',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('target', models.CharField(choices=[('post', 'Post'), ('revision', 'Revision'), ('release', 'Release')], max_length=20, verbose_name='what')),
                        ('release_id', models.BigIntegerField(blank=True, db_index=True, null=True, verbose_name='release')),
                        ('title', models.CharField(max_length=200, verbose_name='title')),
                        ('fingerprint', models.CharField(editable=False, max_length=64, verbose_name='content fingerprint')),
                        ('snapshot', models.JSONField(default=dict, editable=False, verbose_name='content submitted')),
                        ('status', models.CharField(choices=[('pending', 'Waiting for review'), ('approved', 'Approved'), ('rejected', 'Rejected'), ('withdrawn', 'Replaced by a newer submission')], default='pending', max_length=20, verbose_name='status')),
                        ('note', models.TextField(blank=True, verbose_name='note to the reviewer')),
                        ('reason', models.CharField(blank=True, max_length=300, verbose_name='submitted again because')),
                        ('submitted_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now(), verbose_name='submitted at')),
                        ('decided_at', models.DateTimeField(blank=True, null=True, verbose_name='decided at')),
                        ('comment', models.TextField(blank=True, verbose_name="reviewer's comment")),
                        ('decided_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='decided by')),
                        ('post', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='publishing.post', verbose_name='post')),
                        ('revision', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='publishing.postrevision', verbose_name='revision')),
                        ('submitted_by', models.ForeignKey(null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL, verbose_name='submitted by')),
                    ],
                    options={
                        'verbose_name': 'review',
                        'verbose_name_plural': 'reviews',
                        'db_table': 'publishing_review',
                        'ordering': ['-submitted_at', '-id'],
                        'indexes': [models.Index(fields=['status', '-submitted_at'], name='reviews_review_queue')],
                        'constraints': [models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'approved', 'rejected', 'withdrawn'])), name='reviews_review_status_valid'), models.CheckConstraint(condition=models.Q(models.Q(('target', 'post'), ('post__isnull', False)), models.Q(('target', 'revision'), ('revision__isnull', False), ('post__isnull', False)), models.Q(('target', 'release'), ('release_id__isnull', False)), _connector='OR'), name='reviews_review_has_its_target')],
                    },
                ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back, elidable=True),
    ]
