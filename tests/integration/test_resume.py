"""Driver fault: kill the sweep driver (and its local Ray) mid-sweep, run it again with --resume.

The sweep completes, no finished trial runs again, the Optuna searcher continues (still 3
trials in all) and MLflow keeps its runs: 1 parent and 1 child per trial, none added."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def build_command(model_dir, data_dir, storage, *extra):
    return [
        sys.executable, "jobs/imdb_sweep.py", "--model", str(model_dir), "--dataset", str(data_dir),
        "--storage", str(storage), "--name", "resumable", "--search-space", "search_spaces/smoke.yaml",
        "search.num_samples=3", "data.max_length=48", "data.train_size=1536", "data.eval_size=128",
        "training.num_train_epochs=3.0", "training.per_device_train_batch_size=8",
        "resources.local_num_cpus=3", *extra,
    ]


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_killed_driver_resumes(tiny_model_dir, sentiment_data_dir, tmp_path):
    storage, db = tmp_path / "storage", tmp_path / "mlflow.db"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{db}"
    sweep = storage / "resumable"
    log = open(tmp_path / "first.log", "w")
    # Its own session: killing the group kills the driver and the local Ray it started.
    first = subprocess.Popen(build_command(tiny_model_dir, sentiment_data_dir, storage), cwd=REPO, env=env,
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # Trials run one at a time; a tiny trial trains in seconds, so the moment between the
        # second trial's first checkpoint and its end is short: the data is sized to stretch it,
        # and the poll is quick.
        def first_done_second_started():
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            done = list(sweep.glob("train-*/trial_result.json"))
            started = [d for d in sweep.glob("train-*") if list(d.glob("checkpoint-*"))]
            return len(done) == 1 and len(started) >= 2
        wait_for(first_done_second_started, 600, "trial 1 finished and trial 2 checkpointed")
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    finished = next(sweep.glob("train-*/trial_result.json")).parent
    # The weights: a run again would write them anew. (A folder's own time changes when retention
    # strips the optimizer state of a completed trial, which it does once Tune has saved the
    # trial as ended, here possibly only in the resumed driver.)
    finished_state = {p.parent.name: p.stat().st_mtime for p in finished.glob("checkpoint-*/model.safetensors")}
    finished_result = (finished / "trial_result.json").stat().st_mtime
    assert not (sweep / "summary.json").exists()

    second = subprocess.run(build_command(tiny_model_dir, sentiment_data_dir, storage, "--resume"), cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=900)
    (tmp_path / "second.log").write_text(second.stdout + second.stderr)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "Winner (scope=last)" in second.stdout
    # a warning Ray's own Train config raises in every trial driver is not shown
    assert "exclude_resources" not in second.stdout + second.stderr

    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["num_trials"] == 3 and summary["status_counts"] == {"TERMINATED": 3}
    for trial in summary["trials"]:
        assert trial["num_evaluations"] == 3
        assert [r["epoch"] for r in trial["history"]] == [1.0, 2.0, 3.0], "no duplicated or missing epochs"
    # the trial that had finished was not run again (retention may have removed a checkpoint)
    assert (finished / "trial_result.json").stat().st_mtime == finished_result
    after = {p.parent.name: p.stat().st_mtime for p in finished.glob("checkpoint-*/model.safetensors")}
    assert after and all(finished_state[name] == mtime for name, mtime in after.items())

    client = MlflowClient(f"sqlite:///{db}")
    runs = client.search_runs([client.get_experiment_by_name("ftplat").experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 3
    assert {r.info.status for r in runs} == {"FINISHED"}
