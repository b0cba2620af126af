"""What a sweep cost: reserved compute-seconds per trial and per sweep, storage after retention."""

from __future__ import annotations

import pytest

from ftplat.config.schema import JobConfig
from ftplat.records import SweepSummary
from ftplat.tune.accounting import (build_sweep_cost, build_trial_cost, build_trial_reservation,
                                    format_sweep_cost_line, read_folder_bytes, select_trial_wall)


def test_a_trial_reserves_its_driver_and_its_workers():
    assert build_trial_reservation(JobConfig.model_validate({}), {}) == (1.25, 0.0)
    gpu = JobConfig.model_validate({"resources": {"use_gpu": True, "num_workers": 2, "cpus_per_worker": 4,
                                                  "gpus_per_worker": 0.5, "trial_driver_cpus": 1}})
    assert build_trial_reservation(gpu, {"training.learning_rate": 1e-4}) == (9.0, 1.0)
    # A searched resource counts at the trial's own value.
    assert build_trial_reservation(gpu, {"resources.num_workers": 4}) == (17.0, 2.0)


def test_trial_wall_and_compute_seconds():
    assert select_trial_wall({"driver_wall_s": 80.5}, 70.0) == 80.5  # the driver's own clock when it finished
    assert select_trial_wall(None, 42.0) == 42.0  # stopped or failed: Tune's time to its last result
    assert select_trial_wall({}, None) is None
    assert build_trial_cost(wall_s=80.02, cpus=1.25, gpus=0.0) == {
        "wall_s": 80.0, "cpus": 1.25, "gpus": 0.0, "cpu_seconds": 100.0, "gpu_seconds": 0.0}
    assert build_trial_cost(wall_s=None, cpus=1.25, gpus=1.0)["cpu_seconds"] is None


def test_storage_per_trial_and_for_the_sweep(tmp_path):
    sweep = tmp_path / "sweep"
    for rel, size in {"train-a/checkpoint-4/model.safetensors": 1000, "train-a/trial_result.json": 24,
                      "train-b/checkpoint-8/model.safetensors": 500, "summary.json": 10,
                      "train_driver_fn_a_0/result.json": 7}.items():
        (sweep / rel).parent.mkdir(parents=True, exist_ok=True)
        (sweep / rel).write_bytes(b"x" * size)
    by_folder, total, files = read_folder_bytes(str(sweep))
    assert by_folder == {"train-a": 1024, "train-b": 500, "train_driver_fn_a_0": 7}
    assert (total, files) == (1541, 5)

    def trial(tid, wall):
        return {"trial_id": tid, "status": "TERMINATED", "train_run_path": str(sweep / f"train-{tid}"),
                "cost": build_trial_cost(wall_s=wall, cpus=1.25, gpus=0.0)}

    summary = SweepSummary.from_dict({
        "sweep_name": "s", "sweep_path": str(sweep), "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy",
        "trials": [trial("a", 80.0), trial("b", 40.0), {**trial("c", None), "cost": None}]})
    costed = build_sweep_cost(summary, by_folder, total, files)
    assert [t.cost["storage_bytes"] for t in costed.trials] == [1024, 500, 0]
    assert costed.cost == {"cpu_seconds": 150.0, "gpu_seconds": 0.0, "trial_wall_s": 120.0,
                           "storage_bytes": 1541, "storage_files": 5}
    again = SweepSummary.from_dict(costed.to_dict())  # summary.json keeps it
    assert again.cost == costed.cost and again.trials[0].cost == costed.trials[0].cost
    assert format_sweep_cost_line(costed) == ("  cost: 150 CPU-s reserved by 3 trial(s) (120 s of trials); "
                                              "1.5 KiB in 5 files kept in storage")
    assert format_sweep_cost_line(summary) is None


def test_an_absent_sweep_folder_holds_nothing(tmp_path):
    assert read_folder_bytes(str(tmp_path / "gone")) == ({}, 0, 0)


@pytest.mark.parametrize("gpu_seconds", [0.0, 360.0])
def test_the_cost_line_names_gpu_seconds_only_when_there_are_some(tmp_path, gpu_seconds):
    summary = SweepSummary.from_dict({
        "sweep_name": "s", "sweep_path": str(tmp_path), "objective": {"metric": "eval_loss", "mode": "min"},
        "scope": "last", "metric_for_best_model": "eval_loss", "trials": [],
        "cost": {"cpu_seconds": 720.0, "gpu_seconds": gpu_seconds, "trial_wall_s": 360.0,
                 "storage_bytes": 3 * 2**30, "storage_files": 12}})
    line = format_sweep_cost_line(summary)
    assert ("360 GPU-s" in line) == bool(gpu_seconds) and "3.0 GiB in 12 files" in line


def test_storage_is_compared_with_the_model_of_completed_trials(tmp_path):
    def trial(tid, status, model_bytes):
        return {"trial_id": tid, "status": status, "train_run_path": str(tmp_path / f"train-{tid}"),
                "train_result": {"checkpoint_bytes": {"total": 3 * model_bytes, "model": model_bytes}},
                "cost": build_trial_cost(wall_s=10.0, cpus=1.0, gpus=0.0)}

    summary = SweepSummary.from_dict({
        "sweep_name": "s", "sweep_path": str(tmp_path), "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy",
        "trials": [trial("a", "TERMINATED", 1000), trial("b", "TERMINATED", 1000), trial("c", "ERROR", 1000)]})
    costed = build_sweep_cost(summary, {"train-a": 1050, "train-b": 2100, "train-c": 3100}, 6250, 9)
    assert [t.cost["storage_vs_model"] for t in costed.trials] == [1.05, 2.1, 3.1]
    # A failed trial keeps what a resume needs; the bound is over completed trials.
    assert costed.cost["completed_storage_vs_model_max"] == 2.1
    assert format_sweep_cost_line(costed).endswith("kept in storage (a completed trial at most 2.1x its model)")
