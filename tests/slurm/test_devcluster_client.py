"""The Slurm REST client against the development cluster (``deploy/slurm/devcluster.sh up``).

Against the cluster in the environment (``eval "$(deploy/slurm/devcluster.sh env)"``), else the
one the ``cluster`` fixture of tests/slurm/conftest.py brings up when there is that fixture;
with neither they skip, and with ``REQUIRE_SLURM=1`` they fail instead.
"""

from __future__ import annotations

import os
import pwd
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scheduling.backends.slurm_api import (
    LIVE_STATES,
    SlurmClient,
    SlurmError,
    SlurmJob,
    gres_gpus,
    hostlist_expand,
    jwt_sign,
    topology_parse,
)

pytestmark = pytest.mark.slurm


@dataclass(frozen=True)
class Target:
    url: str
    jwt_key: str
    conf: str | None
    shared_dir: str
    users: tuple[str, ...]


@pytest.fixture(scope="module")
def target(request: pytest.FixtureRequest) -> Target:
    """The cluster in the environment (``devcluster.sh env``), else the one the ``cluster`` fixture
    of tests/slurm/conftest.py brings up, if there is that fixture."""
    if os.environ.get("FLEETLINE_SLURM_URL"):
        return Target(
            url=os.environ["FLEETLINE_SLURM_URL"],
            jwt_key=os.environ["FLEETLINE_SLURM_JWT_KEY"],
            conf=os.environ.get("SLURM_CONF"),
            shared_dir=os.environ["FLEETLINE_SLURM_SHARED_DIR"],
            users=tuple(os.environ.get("FLEETLINE_SLURM_USERS", "fl-lead fl-member").split()),
        )
    try:
        cluster = request.getfixturevalue("cluster")
    except pytest.FixtureLookupError:
        if os.environ.get("REQUIRE_SLURM") == "1":
            pytest.fail("REQUIRE_SLURM=1 but FLEETLINE_SLURM_URL is not set (deploy/slurm/devcluster.sh env)")
        pytest.skip("no Slurm cluster: FLEETLINE_SLURM_URL is not set (deploy/slurm/devcluster.sh up, then env)")
    return Target(cluster.url, cluster.jwt_key, cluster.conf, cluster.shared_dir, tuple(cluster.users))


@pytest.fixture(scope="module")
def client(target: Target) -> Iterator[SlurmClient]:
    with SlurmClient(target.url, target.jwt_key, slurm_conf=target.conf) as slurm:
        yield slurm


@pytest.fixture(scope="module")
def users(target: Target) -> tuple[str, ...]:
    return target.users


@pytest.fixture()
def shared(target: Target) -> Iterator[Path]:
    """A folder every cluster user can write into, removed afterwards."""
    folder = Path(target.shared_dir) / f"test-{uuid.uuid4().hex[:10]}"
    folder.mkdir()
    folder.chmod(0o1777)
    yield folder
    for path in sorted(folder.rglob("*"), reverse=True):
        path.unlink() if not path.is_dir() else path.rmdir()
    folder.rmdir()


def _name() -> str:
    return f"fltest-{uuid.uuid4().hex[:8]}"


def wait(client: SlurmClient, job_id: int, until: Callable[[SlurmJob], bool], bound_s: float = 20.0) -> SlurmJob:
    deadline = time.monotonic() + bound_s
    while True:
        job = client.job(job_id)
        assert job is not None, f"job {job_id} vanished"
        if until(job):
            return job
        assert time.monotonic() < deadline, f"job {job_id} still {job.state} ({job.reason}) after {bound_s} s"
        time.sleep(0.1)


def ended(job: SlurmJob) -> bool:
    return job.state not in LIVE_STATES


# Pure parts (no cluster needed, but kept beside the rest) -------------------------------------------
def test_hostlists_gres_and_topology_text_parse() -> None:
    assert hostlist_expand("node[01-03,07],gpu5") == ["node01", "node02", "node03", "node07", "gpu5"]
    assert gres_gpus("gpu:h100:8(S:0-1),shard:4") == (8, "h100")
    assert gres_gpus("gpu:8") == (8, "")
    text = (
        "SwitchName=rack1 Level=0 LinkSpeed=1 Nodes=node[01-02]\n"
        "SwitchName=rack2 Level=0 LinkSpeed=1 Nodes=node03\n"
        "SwitchName=spine Level=1 LinkSpeed=1 Nodes=node[01-03] Switches=rack[1-2]\n"
    )
    assert topology_parse(text) == {
        "node01": ("rack1", "spine"),
        "node02": ("rack1", "spine"),
        "node03": ("rack2", "spine"),
    }
    token = jwt_sign(b"k", "alice", lifespan_s=60, now=1000)
    assert token.count(".") == 2


# Against the cluster --------------------------------------------------------------------------------
def test_eight_nodes_with_eight_gpus(client: SlurmClient) -> None:
    nodes = client.nodes()
    assert sorted(n.name for n in nodes) == [f"node0{i}" for i in range(1, 9)]
    assert all(n.gpus == 8 for n in nodes)
    assert all(n.states & {"IDLE", "MIXED", "ALLOCATED"} for n in nodes)


def test_topology_maps_two_racks_under_one_spine(client: SlurmClient) -> None:
    topology = client.topology()
    assert {node: rack for node, (rack, _) in topology.items()} == {
        **{f"node0{i}": "rack1" for i in range(1, 5)},
        **{f"node0{i}": "rack2" for i in range(5, 9)},
    }
    assert {pod for _, pod in topology.values()} == {"spine"}


def test_a_foreign_token_is_refused(client: SlurmClient) -> None:
    forged = SlurmClient(client.base_url, os.devnull)
    forged._key = b"not the cluster key"
    with pytest.raises(SlurmError) as error:
        forged.nodes()
    # slurmrestd passes the token through; slurmctld refuses it, which slurmrestd answers as a 500
    # "Unspecified error" (a request with no token at all is a 401).
    assert error.value.status in (401, 500)
    forged.close()


def test_a_gang_on_named_nodes_sees_all_eight_gpus_on_each(
    client: SlurmClient, shared: Path, users: tuple[str, ...]
) -> None:
    script = '#!/bin/bash\nsrun bash -c \'echo "$SLURMD_NODENAME $CUDA_VISIBLE_DEVICES" > "$OUT/$SLURM_PROCID"\'\n'
    job_id = client.submit(
        user=users[0],
        name=_name(),
        script=script,
        cwd=str(shared),
        nodelist=["node03", "node05"],
        gpus_per_node=8,
        exclusive=True,
        time_limit_min=2,
        env={"OUT": str(shared)},
        stdout=str(shared / "gang.out"),
    )
    job = wait(client, job_id, ended)
    assert (job.state, job.exit_code) == ("COMPLETED", 0), (shared / "gang.out").read_text()
    assert job.nodes == ("node03", "node05")
    ranks = sorted((shared / str(rank)).read_text().split() for rank in (0, 1))
    assert ranks == [["node03", "0,1,2,3,4,5,6,7"], ["node05", "0,1,2,3,4,5,6,7"]]


def test_two_four_gpu_jobs_share_a_node(client: SlurmClient, shared: Path, users: tuple[str, ...]) -> None:
    script = '#!/bin/bash\necho "$CUDA_VISIBLE_DEVICES" > "$OUT/$SLURM_JOB_ID"; sleep 2\n'
    ids = [
        client.submit(
            user=users[-1],
            name=_name(),
            script=script,
            cwd=str(shared),
            nodelist=["node07"],
            gpus_per_node=4,
            env={"OUT": str(shared)},
            stdout=str(shared / "share-%j.out"),
        )
        for _ in range(2)
    ]
    jobs = [wait(client, job_id, lambda j: j.state == "RUNNING") for job_id in ids]
    assert all(j.nodes == ("node07",) for j in jobs)
    done = [wait(client, job_id, ended) for job_id in ids]
    assert all(j.state == "COMPLETED" for j in done)
    assert sorted((shared / str(job_id)).read_text().strip() for job_id in ids) == ["0,1,2,3", "4,5,6,7"]


@pytest.mark.parametrize("which", [0, -1])
def test_a_job_runs_as_the_user_whose_token_submitted_it(
    client: SlurmClient, shared: Path, users: tuple[str, ...], which: int
) -> None:
    user = users[which]
    out = shared / f"{user}.out"
    job_id = client.submit(
        user=user, name=_name(), script="#!/bin/bash\nid -u\n", cwd=str(shared), nodes=1, stdout=str(out)
    )
    job = wait(client, job_id, ended)
    assert job.user == user and job.state == "COMPLETED"
    assert out.read_text().strip() == str(pwd.getpwnam(user).pw_uid)


def test_an_exit_code_is_reported_and_accounted(client: SlurmClient, shared: Path, users: tuple[str, ...]) -> None:
    started = time.time()
    name = _name()
    job_id = client.submit(
        user=users[0],
        name=name,
        script="#!/bin/bash\nexit 3\n",
        cwd=str(shared),
        gpus_per_node=2,
        stdout=str(shared / "exit.out"),
    )
    job = wait(client, job_id, ended)
    assert (job.state, job.exit_code, job.signal) == ("FAILED", 3, 0)
    assert job.end_unix is not None and job.start_unix is not None

    deadline = time.monotonic() + 20
    while True:
        records = [r for r in client.accounting_jobs(started - 60, time.time() + 60) if r.job_id == job_id]
        if records and records[-1].end_unix is not None:
            break
        assert time.monotonic() < deadline, "the job never reached the accounting database"
        time.sleep(0.5)
    record = records[-1]
    assert (record.name, record.user, record.state, record.exit_code, record.gpus) == (name, users[0], "FAILED", 3, 2)
    assert record.end_unix is not None and record.start_unix is not None
    assert record.elapsed_s == record.end_unix - record.start_unix


def test_held_release_and_cancel(client: SlurmClient, shared: Path, users: tuple[str, ...]) -> None:
    held = client.submit(
        user=users[0],
        name=_name(),
        script="#!/bin/bash\nsleep 60\n",
        cwd=str(shared),
        nodes=1,
        gpus_per_node=1,
        stdout=str(shared / "held.out"),
        hold=True,
        requeue=False,
    )
    job = client.job(held)
    assert job is not None and job.held and job.state == "PENDING" and not job.requeue
    client.release(held)
    running = wait(client, held, lambda j: j.state == "RUNNING")
    assert not running.held and len(running.nodes) == 1
    with pytest.raises(SlurmError, match="denied"):
        client.cancel(held, user=users[-1]) if users[-1] != users[0] else client.cancel(held, user="nobody")
    client.cancel(held, user=users[0])
    assert wait(client, held, ended).state == "CANCELLED"
    assert client.job(10**9) is None


def test_usr1_reaches_each_task_once_through_the_batch_shell(
    client: SlurmClient, shared: Path, users: tuple[str, ...]
) -> None:
    # The backend's layout: the batch shell is `exec srun ...`, srun forwards the signal to tasks.
    task = (
        'trap "echo got >> $OUT/$SLURM_PROCID" USR1; touch $OUT/started$SLURM_PROCID; '
        "for i in $(seq 100); do sleep 0.1; done"
    )
    job_id = client.submit(
        user=users[0],
        name=_name(),
        script=f"#!/bin/bash\nexec srun bash -c '{task}'\n",
        cwd=str(shared),
        nodes=2,
        gpus_per_node=1,
        env={"OUT": str(shared)},
        stdout=str(shared / "sig.out"),
    )
    wait(client, job_id, lambda j: j.state == "RUNNING")
    deadline = time.monotonic() + 10
    while not all((shared / f"started{rank}").exists() for rank in (0, 1)):
        assert time.monotonic() < deadline, "the tasks never started"
        time.sleep(0.1)
    client.signal(job_id, "USR1")
    time.sleep(1.0)
    client.cancel(job_id)
    wait(client, job_id, ended)
    assert [(shared / str(rank)).read_text().split() for rank in (0, 1)] == [["got"], ["got"]]


def test_drain_and_resume(client: SlurmClient) -> None:
    reason = f"fleetline test {uuid.uuid4().hex[:6]}"
    try:
        client.drain("node08", reason)
        node = next(n for n in client.nodes() if n.name == "node08")
        assert "DRAIN" in node.states and node.reason == reason
    finally:
        client.resume("node08")
    node = next(n for n in client.nodes() if n.name == "node08")
    assert "DRAIN" not in node.states
