"""Worker fault: SIGKILL the training worker after its first evaluation was reported; with
resources.max_failures=1 Ray Train restarts the worker group from the latest checkpoint and the
trial finishes with the same final step and no duplicated epochs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def find_train_workers(root_pid: int) -> list[psutil.Process]:
    """RayTrainWorker processes started by the local Ray of the sweep process ``root_pid``."""
    procs = psutil.Process(root_pid).children(recursive=True)
    return [p for p in procs if "RayTrainWorker" in " ".join(p.cmdline())]


def test_killed_worker_resumes_from_its_latest_checkpoint(tiny_model_dir, sentiment_data_dir, tmp_path):
    storage = tmp_path / "storage"
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["MLFLOW_TRACKING_URI"] = f"sqlite:///{tmp_path}/mlflow.db"
    cmd = [sys.executable, "jobs/imdb_sweep.py", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
           "--storage", str(storage), "--name", "fault", "--search-space", "search_spaces/smoke.yaml",
           "search.num_samples=1", "data.max_length=48", "data.eval_size=128",
           "training.num_train_epochs=3.0", "training.per_device_train_batch_size=8",
           "resources.max_failures=1", "resources.local_num_cpus=3"]
    log = open(tmp_path / "sweep.log", "w")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        # The deterministic point: Tune has recorded the first evaluation (its checkpoint is in
        # storage and registered), and training goes on.
        deadline = time.time() + 600
        progress = None
        while time.time() < deadline and proc.poll() is None:
            found = list((storage / "fault").glob("train_driver_fn_*/progress.csv"))
            if found and len(found[0].read_text().strip().splitlines()) >= 2:
                progress = found[0]
                break
            time.sleep(0.5)
        assert progress is not None, (tmp_path / "sweep.log").read_text()[-3000:]
        workers = find_train_workers(proc.pid)
        assert len(workers) == 1, workers
        os.kill(workers[0].pid, signal.SIGKILL)
        assert proc.wait(timeout=900) == 0, (tmp_path / "sweep.log").read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)

    summary = json.loads((storage / "fault" / "summary.json").read_text())
    (trial,) = summary["trials"]
    assert trial["status"] == "TERMINATED"
    assert [r["epoch"] for r in trial["history"]] == [1.0, 2.0, 3.0], "no duplicated or missing epochs"
    steps_per_epoch = 2048 // 8
    assert [r["step"] for r in trial["history"]] == [steps_per_epoch * e for e in (1, 2, 3)]
    assert trial["train_result"]["global_step"] == 3 * steps_per_epoch
    log_text = (tmp_path / "sweep.log").read_text()
    assert "[FailurePolicy] RETRY" in log_text and "Source: worker group" in log_text  # Ray restarted it
