"""Releases as an app of their own: the models publishing had, over the same tables.

State only: the tables (``publishing_release``, ``publishing_releaseitem``,
``publishing_releaseevent``) and their rows stay as they are. The models' content types move
with them, so editors' permissions on releases and the admin's history of them follow.
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models

from publishing.app_moves import relabel_content_types


MODELS = ("release", "releaseitem", "releaseevent")


def move_content_types(apps, schema_editor):
    relabel_content_types(apps, MODELS, "publishing", "releases")


def move_content_types_back(apps, schema_editor):
    relabel_content_types(apps, MODELS, "releases", "publishing")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("publishing", "0014_release_events"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Release",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        ("name", models.CharField(max_length=200, verbose_name="name")),
                        (
                            "release_at",
                            models.DateTimeField(
                                blank=True,
                                help_text="When every item of the release goes live together.",
                                null=True,
                                verbose_name="release at",
                            ),
                        ),
                        (
                            "status",
                            models.CharField(
                                choices=[
                                    ("draft", "Draft"),
                                    ("scheduled", "Scheduled"),
                                    ("released", "Released"),
                                    ("cancelled", "Cancelled"),
                                ],
                                default="draft",
                                editable=False,
                                max_length=20,
                                verbose_name="status",
                            ),
                        ),
                        (
                            "problem",
                            models.TextField(
                                blank=True,
                                default="",
                                editable=False,
                                help_text="Why the release is stopped; cleared when its items are resolved.",
                                verbose_name="problem",
                            ),
                        ),
                        (
                            "released_at",
                            models.DateTimeField(
                                blank=True,
                                editable=False,
                                help_text="When the release actually went live (database clock).",
                                null=True,
                                verbose_name="went live at",
                            ),
                        ),
                        (
                            "created_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(),
                                editable=False,
                                verbose_name="created at",
                            ),
                        ),
                        (
                            "updated_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(),
                                editable=False,
                                verbose_name="updated at",
                            ),
                        ),
                        (
                            "updated_by",
                            models.CharField(
                                blank=True,
                                editable=False,
                                max_length=200,
                                verbose_name="updated by",
                            ),
                        ),
                        (
                            "version",
                            models.PositiveIntegerField(
                                default=1, editable=False, verbose_name="version"
                            ),
                        ),
                        (
                            "owner",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="releases",
                                to=settings.AUTH_USER_MODEL,
                                verbose_name="owner",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "release",
                        "verbose_name_plural": "releases",
                        "db_table": "publishing_release",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="ReleaseEvent",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "kind",
                            models.CharField(
                                choices=[
                                    ("created", "Created"),
                                    ("renamed", "Renamed"),
                                    ("time_planned", "Time planned"),
                                    ("item_added", "Post added"),
                                    ("item_removed", "Post removed"),
                                    ("item_refreshed", "Post refreshed"),
                                    ("scheduled", "Scheduled"),
                                    ("unscheduled", "Unscheduled"),
                                    ("sent_to_review", "Back to review"),
                                    ("stopped", "Stopped"),
                                    ("ready", "Ready again"),
                                    ("released", "Released"),
                                    ("cancelled", "Cancelled"),
                                ],
                                max_length=30,
                                verbose_name="what happened",
                            ),
                        ),
                        (
                            "at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(),
                                verbose_name="at",
                            ),
                        ),
                        ("by", models.CharField(blank=True, max_length=200, verbose_name="by")),
                        ("data", models.JSONField(blank=True, default=dict, verbose_name="data")),
                        (
                            "release",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="events",
                                to="releases.release",
                                verbose_name="release",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "release event",
                        "verbose_name_plural": "release history",
                        "db_table": "publishing_releaseevent",
                        "ordering": ["-at", "-id"],
                    },
                ),
                migrations.CreateModel(
                    name="ReleaseItem",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True,
                                primary_key=True,
                                serialize=False,
                                verbose_name="ID",
                            ),
                        ),
                        (
                            "post_title",
                            models.CharField(blank=True, max_length=200, verbose_name="post title"),
                        ),
                        (
                            "action",
                            models.CharField(
                                choices=[
                                    ("publish", "Publish the post"),
                                    ("revision", "Put its new revision live"),
                                    ("unpublish", "Take the post down"),
                                ],
                                max_length=20,
                                verbose_name="change",
                            ),
                        ),
                        (
                            "pinned_version",
                            models.PositiveIntegerField(verbose_name="pinned version"),
                        ),
                        (
                            "added_at",
                            models.DateTimeField(
                                db_default=django.db.models.functions.datetime.Now(),
                                editable=False,
                                verbose_name="added at",
                            ),
                        ),
                        (
                            "added_by",
                            models.ForeignKey(
                                blank=True,
                                editable=False,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                                verbose_name="added by",
                            ),
                        ),
                        (
                            "post",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="release_items",
                                to="publishing.post",
                                verbose_name="post",
                            ),
                        ),
                        (
                            "release",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="items",
                                to="releases.release",
                                verbose_name="release",
                            ),
                        ),
                        (
                            "revision",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to="publishing.postrevision",
                                verbose_name="revision",
                            ),
                        ),
                    ],
                    options={
                        "verbose_name": "release item",
                        "verbose_name_plural": "release items",
                        "db_table": "publishing_releaseitem",
                        "ordering": ["id"],
                    },
                ),
                migrations.AddIndex(
                    model_name="release",
                    index=models.Index(
                        fields=["status", "release_at"], name="publishing_release_due"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="release",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            ("status__in", ["draft", "scheduled", "released", "cancelled"])
                        ),
                        name="publishing_release_status_valid",
                        violation_error_message="Unknown release status.",
                    ),
                ),
                migrations.AddConstraint(
                    model_name="release",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("status", "scheduled"), _negated=True),
                            ("release_at__isnull", False),
                            _connector="OR",
                        ),
                        name="publishing_release_scheduled_has_time",
                        violation_error_message="A scheduled release needs a time.",
                    ),
                ),
                migrations.AddIndex(
                    model_name="releaseevent",
                    index=models.Index(
                        fields=["release", "-at"], name="publishing_release_event_at"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="releaseitem",
                    constraint=models.UniqueConstraint(
                        fields=("release", "post"), name="publishing_release_post"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="releaseitem",
                    constraint=models.CheckConstraint(
                        condition=models.Q(("action__in", ["publish", "revision", "unpublish"])),
                        name="publishing_release_item_action_valid",
                        violation_error_message="Unknown release item change.",
                    ),
                ),
            ],
        ),
        migrations.RunPython(move_content_types, move_content_types_back, elidable=True),
    ]
