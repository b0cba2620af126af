"""Worker fault: SIGKILL the training worker after its first evaluation was reported; with
resources.max_failures=1 Ray Train restarts the worker group from the latest checkpoint and the
trial finishes with the same final step and no duplicated epochs."""

from __future__ import annotations

import json
import os

import pytest
from worker_fault import build_checkpoint_registered, run_sweep_killing_one_worker

pytestmark = pytest.mark.integration

STEPS_PER_EPOCH = 2048 // 8


def test_killed_worker_resumes_from_its_latest_checkpoint(tiny_model_dir, sentiment_data_dir, tmp_path):
    storage = tmp_path / "storage"

    env = {**os.environ, "MLFLOW_TRACKING_URI": f"sqlite:///{tmp_path}/mlflow.db"}
    log = run_sweep_killing_one_worker(
        ["--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir), "--storage", str(storage),
         "--name", "fault", "--search-space", "search_spaces/smoke.yaml",
         "search.num_samples=1", "data.max_length=48", "data.eval_split=test", "data.eval_size=128",
         "training.num_train_epochs=3.0", "training.per_device_train_batch_size=8",
         "resources.max_failures=1", "resources.local_num_cpus=3"],
        tmp_path / "sweep.log", build_checkpoint_registered(storage / "fault", f"checkpoint-{STEPS_PER_EPOCH}"),
        num_workers=1, env=env)

    summary = json.loads((storage / "fault" / "summary.json").read_text())
    (trial,) = summary["trials"]
    assert trial["status"] == "TERMINATED"
    assert [r["epoch"] for r in trial["history"]] == [1.0, 2.0, 3.0], "no duplicated or missing epochs"
    assert [r["step"] for r in trial["history"]] == [STEPS_PER_EPOCH * e for e in (1, 2, 3)]
    assert trial["train_result"]["global_step"] == 3 * STEPS_PER_EPOCH
    assert "[FailurePolicy] RETRY" in log and "Source: worker group" in log  # Ray restarted it
    # Each Trainer log line reaches the driver once (Train V2's print patch used to tee it).
    printed = [line for line in log.splitlines() if " step " in line and " | eval_loss " in line]
    assert printed and all(a != b for a, b in zip(printed, printed[1:])), printed
