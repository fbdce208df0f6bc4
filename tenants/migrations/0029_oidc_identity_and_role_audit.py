import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0028_quota_self_approval_login_lockout"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="auditevent",
            name="source",
            field=models.CharField(blank=True, default="", max_length=40),
        ),
        migrations.AlterField(
            model_name="auditevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("quota_request.submitted", "Quota request submitted"),
                    ("quota_request.withdrawn", "Quota request withdrawn"),
                    ("quota_request.approved", "Quota request approved"),
                    (
                        "quota_request.self_approved",
                        "Quota request self-approved (by its requester, no other fleet admin)",
                    ),
                    ("quota_request.rejected", "Quota request rejected"),
                    ("quota.set", "Quota set by a fleet admin"),
                    ("priority_class.saved", "Priority class saved"),
                    ("fleet_policy.updated", "Fleet policy updated"),
                    ("node.cordon", "Node cordoned"),
                    ("node.uncordon", "Node uncordoned"),
                    ("node.drain", "Node drained"),
                    ("finance.rate_set", "Rate set"),
                    ("finance.budget_set", "Budget set"),
                    ("finance.month_closed", "Month closed"),
                    ("finance.month_reopened", "Month reopened"),
                    ("membership.added", "Member added"),
                    ("membership.removed", "Member removed"),
                    ("membership.role", "Member role changed"),
                    ("account.locked_out", "Login locked out after repeated wrong passwords"),
                    ("account.role_granted", "Role granted"),
                    ("account.role_revoked", "Role revoked"),
                    ("account.sso_created", "Account created at its first single sign-on"),
                    ("account.sso_linked", "Account linked to single sign-on"),
                ],
                max_length=40,
            ),
        ),
        migrations.CreateModel(
            name="OidcIdentity",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("issuer", models.CharField(max_length=255)),
                ("subject", models.CharField(max_length=255)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="oidc_identity",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("issuer", "subject"), name="oidc_identity_unique_subject")
                ],
            },
        ),
    ]
