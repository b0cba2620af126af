"""`ray job submit` against a real local head started by cluster/local/start.sh.

The head listens on random free ports, keeps its state (pids, logs, Ray temp dir) in a private
directory, and runs with token auth on, using a token file made for this test
(RAY_AUTH_TOKEN_PATH), so neither ~/.ray/auth_token nor any other Ray on the machine is touched.
cluster/local/stop.sh then stops exactly that cluster.

Two jobs run: a trivial ``python -c`` that checks how a submitted job finds ``ftplat`` (the
uploaded working dir's ``platform/`` on PYTHONPATH, ahead of any installed copy), and the real
``python jobs/imdb_sweep.py`` on a tiny model and data set, followed until SUCCEEDED through
``JobSubmissionClient``, with the winner line in its logs and the job listed by the dashboard's
HTTP API.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from tiny_assets import write_sentiment_dataset

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
LOCAL = REPO / "cluster" / "local"
RUNTIME_ENV_JSON = json.dumps({"env_vars": {"PYTHONPATH": "platform"}})
JOB_TIMEOUT_S = 300


@dataclass
class LocalCluster:
    state_dir: Path
    env: dict[str, str]
    dashboard_url: str
    gcs_address: str
    token: str
    head_pid: int
    #: What start.sh printed: the addresses and the commands to run.
    printed: str = ""

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def submit(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["ray", "job", "submit", "--address", self.dashboard_url, *args],
            cwd=REPO, env=self.env, capture_output=True, text=True, timeout=timeout,
        )


def read_cluster_env(path: Path) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {key: value for key, value in pairs}


def build_cluster_env(state_dir: Path, token_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in {"RAY_ADDRESS", "RAY_API_SERVER_ADDRESS", "RAY_AUTH_TOKEN"}}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token_path),
               FTPLAT_RAY_STATE_DIR=str(state_dir))
    return env


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def local_cluster():
    if shutil.which("ray") is None:
        pytest.skip("the ray CLI is not on PATH")
    # Short path on purpose: Ray's unix socket paths live under the temp dir (107-byte limit).
    state_dir = Path(tempfile.mkdtemp(prefix="ftj-", dir="/tmp")).resolve()
    token_path = state_dir / "auth_token"
    token = secrets.token_hex(32)
    token_path.write_text(token)
    token_path.chmod(0o600)
    env = build_cluster_env(state_dir, token_path)
    started = subprocess.run(
        [str(LOCAL / "start.sh"), "--state-dir", str(state_dir), "--random-ports",
         "--num-cpus", "2", "--object-store-memory", str(400 * 1024 * 1024), "--timeout", "150"],
        env=env, capture_output=True, text=True, timeout=240,
    )
    head_pid = None
    try:
        assert started.returncode == 0, f"start.sh failed:\n{started.stdout}\n{started.stderr}"
        # A second node on this box, so trials can be placed on two nodes.
        added = subprocess.run(
            [str(LOCAL / "add_worker.sh"), "--state-dir", str(state_dir), "--num-cpus", "2",
             "--object-store-memory", str(300 * 1024 * 1024), "--timeout", "150"],
            env=env, capture_output=True, text=True, timeout=240,
        )
        assert added.returncode == 0, f"add_worker.sh failed:\n{added.stdout}\n{added.stderr}"
        info = read_cluster_env(state_dir / "cluster.env")
        head_pid = int(info["HEAD_PID"])
        assert (info["TOKEN_PATH"], info["TOKEN_FROM_ENV"]) == (str(token_path), "0")
        yield LocalCluster(state_dir=state_dir, env=env, dashboard_url=info["DASHBOARD_URL"],
                           gcs_address=info["GCS_ADDRESS"], token=token, head_pid=head_pid, printed=started.stdout)
    finally:
        if head_pid is None and (state_dir / "head.pid").exists():
            head_pid = int((state_dir / "head.pid").read_text())
        stopped = subprocess.run([str(LOCAL / "stop.sh"), "--state-dir", str(state_dir), "--grace", "20"],
                                 env=env, capture_output=True, text=True, timeout=120)
        if head_pid is not None:
            # Only this cluster's process group; a no-op when stop.sh did its job.
            kill_group(head_pid)
        shutil.rmtree(state_dir, ignore_errors=True)
        assert stopped.returncode == 0, f"stop.sh failed:\n{stopped.stdout}\n{stopped.stderr}"


def test_start_script_prints_how_to_submit(local_cluster):
    assert local_cluster.dashboard_url.startswith("http://127.0.0.1:")
    info = read_cluster_env(local_cluster.state_dir / "cluster.env")
    assert info["TEMP_DIR"] == str(local_cluster.state_dir / "ray")
    # The dashboard and the job API refuse requests without the token.
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(f"{local_cluster.dashboard_url}/api/jobs/", timeout=10)
    assert err.value.code == 401


def test_the_printed_first_job_is_a_sweep_that_runs_here(local_cluster, tmp_path):
    """The job start.sh prints (the CPU recipe, with absolute model, data, storage and MLflow
    paths outside the job's upload) passes its dry run as printed: the default job it printed
    before needed the hub and a GPU-sized budget."""
    lines = local_cluster.printed.splitlines()
    start = next(i for i, line in enumerate(lines) if "ray job submit" in line)
    end = next(i for i in range(start, len(lines)) if not lines[i].rstrip().endswith("\\"))
    command = " ".join(line.rstrip().rstrip("\\").strip() for line in lines[start:end + 1])
    entrypoint = command.split(" -- ", 1)[1]
    assert entrypoint.startswith("env FTPLAT_GIT_COMMIT=$(git rev-parse HEAD) python jobs/imdb_sweep.py --config "
                                 "jobs/configs/imdb_cpu.yaml")
    for flag in ("--model", "--dataset", "--storage"):
        value = entrypoint.split(f"{flag} ", 1)[1].split()[0]
        assert value.startswith("/") or "/" in value and not value.startswith("."), (flag, value)
    env = {k: v for k, v in local_cluster.env.items() if k != "RAY_ADDRESS"}
    env.update(HOME=str(tmp_path), HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1")
    if "/shared/models/" not in entrypoint:
        pytest.skip("the offline model and data are not beside this checkout: the printed job reads the hub")
    checked = subprocess.run(["bash", "-c", f"{entrypoint} --dry-run"], cwd=REPO, env=env, capture_output=True,
                             text=True, timeout=600)
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert "trials: 4 (optuna" in checked.stdout


def test_submitted_job_imports_the_uploaded_ftplat(local_cluster):
    code = (
        "import os, ray, ftplat; "
        "print('DRIVER', ftplat.__file__, os.environ.get('RAY_AUTH_MODE'), flush=True); "
        "ray.init(); "
        "where = ray.remote(num_cpus=0.1)(lambda: __import__('ftplat').__file__); "
        "print('TASK', ray.get(where.remote()), flush=True)"
    )
    result = local_cluster.submit("--working-dir", str(REPO), "--runtime-env-json", RUNTIME_ENV_JSON,
                                  "--", "python", "-c", code)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    lines = {line.split()[0]: line.split()[1:] for line in output.splitlines()
             if line.startswith(("DRIVER ", "TASK "))}
    for who in ("DRIVER", "TASK"):
        path = Path(lines[who][0])
        # The copy unpacked from the uploaded working dir, not the checkout or an install.
        assert "_ray_pkg_" in str(path) and path.parts[-3:] == ("platform", "ftplat", "__init__.py"), path
        assert str(local_cluster.state_dir) in str(path)
    assert lines["DRIVER"][1] == "token"


def wait_for_job(client, submission_id: str, timeout: float):
    from ray.job_submission import JobStatus

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.get_job_status(submission_id)
        if status.is_terminal():
            return status
        time.sleep(2)
    client.stop_job(submission_id)
    return JobStatus.RUNNING


def test_sweep_job_on_two_nodes_succeeds_and_shows_in_the_dashboard(local_cluster, tiny_model_dir, tmp_path):
    from ray.job_submission import JobStatus, JobSubmissionClient

    data_dir = write_sentiment_dataset(tmp_path / "data", n_train=128, n_eval=64)
    storage = tmp_path / "storage"
    submission_id = f"ftplat-sweep-{secrets.token_hex(4)}"
    result = local_cluster.submit(
        "--no-wait", "--submission-id", submission_id,
        "--working-dir", str(REPO), "--runtime-env", "cluster/local/runtime_env.yaml",
        "--", "python", "jobs/imdb_sweep.py",
        "--model", str(tiny_model_dir), "--dataset", str(data_dir),
        "--storage", str(storage), "--name", "tiny",
        "training.num_train_epochs=1", "data.max_length=32", "search.num_samples=2",
        # 0.25 + 1.5 CPUs a trial, 2 CPUs a node: two concurrent trials need both nodes.
        "resources.cpus_per_worker=1.5", "resources.max_concurrent_trials=2",
    )
    assert result.returncode == 0, result.stdout + result.stderr

    client = JobSubmissionClient(local_cluster.dashboard_url, headers=local_cluster.auth_headers())
    status = wait_for_job(client, submission_id, JOB_TIMEOUT_S)
    logs = client.get_job_logs(submission_id)
    assert status == JobStatus.SUCCEEDED, f"job ended {status}:\n{logs[-6000:]}"

    winner = [line for line in logs.splitlines() if line.startswith("Winner (scope=")]
    assert winner and "none" not in winner[0], logs[-4000:]
    summary = json.loads((storage / "tiny" / "summary.json").read_text())
    assert summary["winner"]["trial_id"] in winner[0]
    # the trials trained on both nodes, and every checkpoint landed in the one shared storage
    assert len({t["train_result"]["node_id"] for t in summary["trials"]}) == 2
    for trial in summary["trials"]:
        assert Path(trial["best_checkpoint"]["path"]).is_dir()
        assert (Path(trial["best_checkpoint"]["path"]) / "model.safetensors").is_file()

    request = urllib.request.Request(f"{local_cluster.dashboard_url}/api/jobs/",
                                     headers=local_cluster.auth_headers())
    with urllib.request.urlopen(request, timeout=10) as response:
        jobs = json.loads(response.read())
    listed = {job["submission_id"]: job for job in jobs}
    assert listed[submission_id]["status"] == "SUCCEEDED"
    assert listed[submission_id]["entrypoint"].startswith("python jobs/imdb_sweep.py")
