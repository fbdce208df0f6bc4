"""The per-job ledger's rows are updated every tick: on PostgreSQL its pages keep half their
space free so those updates stay heap-only (no index entry per update)."""

from __future__ import annotations

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def _fillfactor(value: int):  # type: ignore[no-untyped-def]
    def apply(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        if schema_editor.connection.vendor == "postgresql":
            schema_editor.execute(f"ALTER TABLE scheduling_jobusage SET (fillfactor = {value})")

    return apply


class Migration(migrations.Migration):
    dependencies = [("scheduling", "0007_job_usage_and_fleet_epoch")]

    operations = [migrations.RunPython(_fillfactor(50), _fillfactor(100))]
