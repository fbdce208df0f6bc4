"""`manage.py simulate` and `python -m scheduling.sim` write the metrics JSON and an HTML report."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from scheduling.sim.cli import main
from scheduling.sim.metrics import CONTRACT_KEYS

SAMPLE = Path(__file__).resolve().parents[2] / "scheduling" / "sim" / "data" / "itp-sample"
TRACES = [str(path) for path in sorted(SAMPLE.glob("*.csv"))]


def test_the_management_command_writes_one_result_per_policy_and_a_report(tmp_path: Path) -> None:
    out, html = tmp_path / "out.json", tmp_path / "report.html"
    args = ["--format", "itp", "--fleet", "1x2x4x8", "--policy", "fifo", "--policy", "fleetline"]
    for trace in TRACES:
        args += ["--trace", trace]
    call_command("simulate", *args, "--json", str(out), "--html", str(html), stdout=io.StringIO(), stderr=io.StringIO())
    data = json.loads(out.read_text())
    assert [result["policy"] for result in data["results"]] == ["fifo", "fleetline"]
    assert all(set(CONTRACT_KEYS) <= set(result) for result in data["results"])
    assert data["meta"]["quotas"].startswith("none")
    text = html.read_text()
    assert '<script src="http' not in text and "Plotly.newPlot" in text  # plotly.js inlined, no CDN


def test_the_management_command_reports_a_trace_error_with_its_place(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("job_id,submit_time,duration,gpus,team\na,0,10,zero,x\n")
    stderr = io.StringIO()
    with pytest.raises(CommandError):
        call_command("simulate", "--trace", str(bad), "--fleet", "1x1x1x8", stdout=io.StringIO(), stderr=stderr)
    assert f"{bad}:2: column 'gpus': 'zero' is not a number" in stderr.getvalue()


def test_the_module_cli_prints_json_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--format", "itp", "--trace", TRACES[0], "--fleet", "1x2x4x8", "--limit", "20", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["results"][0]["jobs"] == 20
