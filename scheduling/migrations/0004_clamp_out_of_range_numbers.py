# Rows stored before the bounds of scheduling.limits existed are brought within them here, in a
# migration of its own: PostgreSQL refuses to add the check constraints (next migration) in the
# same transaction as these updates.

from django.db import migrations

YEAR_S = 31536000.0
YEAR_H = 8760.0


def clamp_out_of_range_numbers(apps, schema_editor):
    """Bring rows stored before the bounds within them, so the next migration can add its check
    constraints: an infinite duration becomes a year (such a job otherwise holds its GPUs forever and
    breaks every page that lists it). On PostgreSQL NaN sorts above every number, so ``__gt``
    catches it too."""
    Job = apps.get_model("scheduling", "Job")
    ServingDeployment = apps.get_model("scheduling", "ServingDeployment")
    Job.objects.filter(duration_s__gt=YEAR_S).update(duration_s=YEAR_S)
    Job.objects.filter(time_limit_s__gt=YEAR_S).update(time_limit_s=YEAR_S)
    Job.objects.filter(checkpoint_interval_s__gt=YEAR_S).update(checkpoint_interval_s=YEAR_S)
    Job.objects.filter(checkpoint_interval_s__lt=1.0).update(checkpoint_interval_s=1.0)
    Job.objects.filter(checkpoint_gb__gt=1000000.0).update(checkpoint_gb=1000000.0)
    Job.objects.filter(max_gpus__gt=65536).update(max_gpus=65536)
    for deployment in ServingDeployment.objects.all():
        period_h = deployment.period_h if 0 < deployment.period_h <= YEAR_H else 24.0
        peak_hour = deployment.peak_hour if 0 <= deployment.peak_hour <= YEAR_H else 14.0 % period_h
        if (period_h, peak_hour) != (deployment.period_h, deployment.peak_hour):
            ServingDeployment.objects.filter(pk=deployment.pk).update(period_h=period_h, peak_hour=peak_hour)


class Migration(migrations.Migration):

    dependencies = [
        ('scheduling', '0003_incidents'),
    ]

    operations = [
        migrations.RunPython(clamp_out_of_range_numbers, migrations.RunPython.noop),
    ]
