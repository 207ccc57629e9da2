"""Releases move to an app of their own (``releases``): their models leave publishing's state.

Only the state moves: the tables keep their names and rows (``releases``' first migration
takes the models over). A review keeps its release by id only (``release_id``, no foreign
key: publishing works without the releases app), so the database drops that foreign key's
constraint; the column, its index and its values stay.
"""

from django.conf import settings
import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0014_release_events"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.AlterField(
                    model_name="review",
                    name="release",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        db_constraint=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="reviews",
                        to="publishing.release",
                        verbose_name="release",
                    ),
                ),
            ],
            state_operations=[
                migrations.RemoveField(
                    model_name="release",
                    name="owner",
                ),
                migrations.RemoveField(
                    model_name="releaseevent",
                    name="release",
                ),
                migrations.RemoveField(
                    model_name="releaseitem",
                    name="release",
                ),
                migrations.RemoveField(
                    model_name="review",
                    name="release",
                ),
                migrations.RemoveField(
                    model_name="releaseitem",
                    name="added_by",
                ),
                migrations.RemoveField(
                    model_name="releaseitem",
                    name="post",
                ),
                migrations.RemoveField(
                    model_name="releaseitem",
                    name="revision",
                ),
                migrations.RemoveConstraint(
                    model_name="review",
                    name="publishing_review_has_its_target",
                ),
                migrations.AddField(
                    model_name="review",
                    name="release_id",
                    field=models.BigIntegerField(
                        blank=True, db_index=True, null=True, verbose_name="release"
                    ),
                ),
                migrations.AddConstraint(
                    model_name="review",
                    constraint=models.CheckConstraint(
                        condition=models.Q(
                            models.Q(("target", "post"), ("post__isnull", False)),
                            models.Q(
                                ("target", "revision"),
                                ("revision__isnull", False),
                                ("post__isnull", False),
                            ),
                            models.Q(("target", "release"), ("release_id__isnull", False)),
                            _connector="OR",
                        ),
                        name="publishing_review_has_its_target",
                    ),
                ),
                migrations.DeleteModel(
                    name="ReleaseEvent",
                ),
                migrations.DeleteModel(
                    name="Release",
                ),
                migrations.DeleteModel(
                    name="ReleaseItem",
                ),
            ],
        ),
    ]
