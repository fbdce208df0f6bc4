"""The real local Slurm cluster for the ``slurm`` tests: ``deploy/slurm/devcluster.sh`` brings one up
for the session under ``var/slurm-test`` on ports of its own (so a developer's cluster under
``var/slurm`` can keep running) and stops exactly it at the end. Without Slurm's packages the tests
skip, unless ``REQUIRE_SLURM=1`` (as in CI), where that is a failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduling.backends.slurm_api import SlurmClient

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "slurm" / "devcluster.sh"
# Ports apart from the development cluster's defaults.
TEST_ENV = {
    "FLEETLINE_SLURM_DIR": str(ROOT / "var" / "slurm-test"),
    "FLEETLINE_SLURM_CTLD_PORT": "6837",
    "FLEETLINE_SLURM_DBD_PORT": "6839",
    "FLEETLINE_SLURM_REST_PORT": "6840",
    "FLEETLINE_SLURM_SLURMD_PORT_BASE": "6921",
    "FLEETLINE_SLURM_MYSQL_PORT": "3327",
    "FLEETLINE_SLURM_USERS": "fl-lead fl-member",
}


@dataclass
class Cluster:
    url: str
    jwt_key: str
    conf: str
    shared_dir: str
    users: tuple[str, ...]
    client: SlurmClient

    def kill_node(self, node: str) -> None:
        """The machine is lost: its slurmd and every process of its jobs, killed."""
        _script("kill-node", node)

    def restart_node(self, node: str) -> None:
        _script("restart-node", node)


def _script(*args: str) -> str:
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], env={**os.environ, **TEST_ENV}, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"devcluster.sh {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    if shutil.which("slurmctld") is None or shutil.which("slurmrestd") is None:
        if os.environ.get("REQUIRE_SLURM") == "1":
            pytest.fail("Slurm is not installed (deploy/slurm/devcluster.sh install) but REQUIRE_SLURM=1")
        pytest.skip("Slurm is not installed: deploy/slurm/devcluster.sh install")
    _script("up")
    try:
        env = dict(
            line.removeprefix("export ").split("=", 1)
            for line in _script("env").splitlines()
            if line.startswith("export ")
        )
        client = SlurmClient(env["FLEETLINE_SLURM_URL"], env["FLEETLINE_SLURM_JWT_KEY"], slurm_conf=env["SLURM_CONF"])
        yield Cluster(
            url=env["FLEETLINE_SLURM_URL"],
            jwt_key=env["FLEETLINE_SLURM_JWT_KEY"],
            conf=env["SLURM_CONF"],
            shared_dir=env["FLEETLINE_SLURM_SHARED_DIR"],
            users=tuple(TEST_ENV["FLEETLINE_SLURM_USERS"].split()),
            client=client,
        )
        client.close()
    finally:
        _script("down")
