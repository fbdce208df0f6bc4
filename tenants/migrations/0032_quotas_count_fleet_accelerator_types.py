# Quotas and quota requests count the fleet app's accelerator types (the same table as before).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("fleet", "0001_initial"),
        ("tenants", "0031_job_failed_notice_words"),
    ]

    # The tables stay where they are: only Django's record of which app holds the models moves.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name="quota",
                    name="accelerator_type",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="quotas", to="fleet.acceleratortype"
                    ),
                ),
                migrations.AlterField(
                    model_name="quotarequest",
                    name="accelerator_type",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="quota_requests",
                        to="fleet.acceleratortype",
                    ),
                ),
            ],
        ),
    ]
