# Rates are per accelerator type of the fleet app (the same table as before).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("finance", "0001_initial"),
        ("fleet", "0001_initial"),
    ]

    # The tables stay where they are: only Django's record of which app holds the models moves.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="rate",
                    name="accelerator_type",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="rates", to="fleet.acceleratortype"
                    ),
                ),
            ],
        ),
    ]
