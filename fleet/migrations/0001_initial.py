# The fleet's hardware (accelerator types, pods, racks, nodes) moves here from the scheduling app,
# keeping its tables: their rows and every foreign key into them stay as they are. The tables were
# made by scheduling's migrations, which therefore come first.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("scheduling", "0012_usage_lost_split"),
    ]

    # The tables stay where they are: only Django's record of which app holds the models moves.
    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='AcceleratorType',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=50, unique=True)),
                        ('memory_gb', models.PositiveIntegerField(default=80)),
                    ],
                    options={
                        'db_table': 'scheduling_acceleratortype',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='Pod',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=50, unique=True)),
                    ],
                    options={
                        'db_table': 'scheduling_pod',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='Rack',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=50, unique=True)),
                        ('pod', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='racks', to='fleet.pod')),
                    ],
                    options={
                        'db_table': 'scheduling_rack',
                        'ordering': ['name'],
                    },
                ),
                migrations.CreateModel(
                    name='Node',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('name', models.CharField(max_length=50, unique=True)),
                        ('gpus', models.PositiveSmallIntegerField(default=8)),
                        ('healthy_gpus', models.PositiveSmallIntegerField(default=8)),
                        ('state', models.CharField(choices=[('up', 'Up'), ('cordoned', 'Cordoned'), ('down', 'Down')], default='up', max_length=10)),
                        ('allocated_gpus', models.PositiveSmallIntegerField(default=0)),
                        ('last_heartbeat', models.DateTimeField(blank=True, null=True)),
                        ('accelerator_type', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='nodes', to='fleet.acceleratortype')),
                        ('rack', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='nodes', to='fleet.rack')),
                    ],
                    options={
                        'db_table': 'scheduling_node',
                        'ordering': ['name'],
                        'constraints': [models.CheckConstraint(condition=models.Q(('healthy_gpus__lte', models.F('gpus'))), name='node_healthy_gpus_within_gpus'), models.CheckConstraint(condition=models.Q(('allocated_gpus__lte', models.F('gpus'))), name='node_allocated_gpus_within_gpus')],
                    },
                ),
            ],
        ),
    ]
