"""Reviews move to an app of their own (``reviews``): the model leaves publishing's state.

Only the state moves: the table keeps its name and rows (``reviews``' first migration takes
the model over).
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("publishing", "0015_releases_move_out"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="Review")],
        ),
    ]
