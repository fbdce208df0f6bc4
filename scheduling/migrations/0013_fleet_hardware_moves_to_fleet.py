# The fleet's hardware now belongs to the fleet app (fleet/migrations/0001_initial.py): jobs,
# allocations, events, incidents and the usage ledger point at it there, and this app forgets it.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("finance", "0002_rates_count_fleet_accelerator_types"),
        ("fleet", "0001_initial"),
        ("scheduling", "0012_usage_lost_split"),
        ("tenants", "0032_quotas_count_fleet_accelerator_types"),
    ]

    # The tables stay where they are: only Django's record of which app holds the models moves.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name="node",
                    name="accelerator_type",
                ),
                migrations.AlterField(
                    model_name="jobusage",
                    name="accelerator_type",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to="fleet.acceleratortype"),
                ),
                migrations.AlterField(
                    model_name="servingdeployment",
                    name="accelerator_type",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to="fleet.acceleratortype"),
                ),
                migrations.AlterField(
                    model_name="job",
                    name="accelerator_type",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to="fleet.acceleratortype"),
                ),
                migrations.AlterField(
                    model_name="usagesample",
                    name="accelerator_type",
                    field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, to="fleet.acceleratortype"),
                ),
                migrations.RemoveField(
                    model_name="node",
                    name="rack",
                ),
                migrations.AlterField(
                    model_name="allocation",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT, related_name="allocations", to="fleet.node"
                    ),
                ),
                migrations.AlterField(
                    model_name="schedulerevent",
                    name="node",
                    field=models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="job_events",
                        to="fleet.node",
                    ),
                ),
                migrations.AlterField(
                    model_name="incident",
                    name="node",
                    field=models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="incidents", to="fleet.node"
                    ),
                ),
                migrations.RemoveField(
                    model_name="rack",
                    name="pod",
                ),
                migrations.DeleteModel(
                    name="AcceleratorType",
                ),
                migrations.DeleteModel(
                    name="Node",
                ),
                migrations.DeleteModel(
                    name="Pod",
                ),
                migrations.DeleteModel(
                    name="Rack",
                ),
            ],
        ),
    ]
