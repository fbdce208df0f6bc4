from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("scheduling", "0014_job_indexes_the_hot_queries_use"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="requeued_by_failure",
            field=models.BooleanField(default=False, editable=False),
        ),
    ]
