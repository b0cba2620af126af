"""An ASHA sweep run to its end on the tiny BERT: 7 steps evaluated every 2 (transformers also
evaluates at the last step, so 4 evaluations), grace_period 1, reduction_factor 2, one trial at
a time. The second trial's learning rate is far too high, so ASHA stops it at its first rung;
the first runs to full length and must end on its own."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from mlflow import MlflowClient
from ray.util import placement_group_table

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.spaces import build_max_evaluations
from ftplat.tune.sweep import run_sweep
from sweep_overrides import build_tiny_overrides

pytestmark = pytest.mark.integration

FULL_STEPS = [2, 4, 6, 7]


@pytest.fixture(scope="module")
def asha_sweep(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("asha")
    tracking_uri = f"sqlite:///{root}/mlflow.db"
    point = "{{training.learning_rate: {lr}, training.warmup_steps: 0.0, training.weight_decay: 0.0}}"
    job, space = load_sweep_configs(None, None, build_tiny_overrides(
        tiny_model_dir, sentiment_data_dir, root / "storage", "asha",
        "data.train_size=256", "data.eval_size=128",
        "training.max_steps=7", "training.eval_strategy=steps", "training.save_strategy=steps",
        "training.eval_steps=2", "training.logging_steps=1",
        "resources.max_concurrent_trials=1", "search.num_samples=3",
        "search.objective.metric=eval_loss", "search.objective.mode=min",
        "search.scheduler={type: asha, grace_period: 1, reduction_factor: 2}",
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 0.5}",
        f"search.points_to_evaluate=[{point.format(lr=1.0e-3)}, {point.format(lr=0.5)}]",
        f"tracking.tracking_uri={tracking_uri}", "tracking.experiment_name=ftplat-asha",
    ))
    groups_before = set(placement_group_table())
    summary = run_sweep(job, space).to_dict()
    groups = {pg_id: row["state"] for pg_id, row in placement_group_table().items() if pg_id not in groups_before}
    return job, summary, root / "storage" / "asha", MlflowClient(tracking_uri), groups


def test_full_length_trials_make_every_evaluation_and_end_on_their_own(asha_sweep):
    job, summary, sweep_dir, _, _ = asha_sweep
    assert build_max_evaluations(job) == len(FULL_STEPS)
    full = [t for t in summary["trials"] if t["num_evaluations"] == len(FULL_STEPS)]
    assert full, [t["num_evaluations"] for t in summary["trials"]]
    assert summary["trials"][0] in full  # the first trial has nothing to be compared with
    for trial in full:
        assert [r["step"] for r in trial["history"]] == FULL_STEPS
        result_file = sweep_dir / f"train-{trial['trial_id']}" / "trial_result.json"
        assert result_file.is_file(), "a full-length trial was stopped before its driver finished"
        assert json.loads(result_file.read_text())["global_step"] == FULL_STEPS[-1]


def test_asha_stops_the_weak_trial_early(asha_sweep):
    _, summary, sweep_dir, _, _ = asha_sweep
    assert summary["trials"][1]["num_evaluations"] == 1  # lr 0.5, worse than the first at rung 1
    stopped = [t for t in summary["trials"] if t["num_evaluations"] < len(FULL_STEPS)]
    assert all(t["status"] == "TERMINATED" and t["error"] is None for t in stopped)
    assert summary["num_trials"] == 3 and all(t["num_evaluations"] <= len(FULL_STEPS) for t in summary["trials"])


def test_no_trial_leaves_its_scratch_folder(asha_sweep):
    _, summary, _, _, _ = asha_sweep
    scratch = Path(tempfile.gettempdir()) / "ftplat-scratch"
    left = [t["trial_id"] for t in summary["trials"] if (scratch / f"train-{t['trial_id']}").exists()]
    assert not left, f"scratch folders left in {scratch}: {left}"


def test_every_child_run_ends_with_a_terminal_status(asha_sweep):
    _, summary, _, client, _ = asha_sweep
    experiment = client.get_experiment_by_name("ftplat-asha")
    children = {r.data.tags["ftplat.trial_id"]: r for r in client.search_runs([experiment.experiment_id])
                if "mlflow.parentRunId" in r.data.tags}
    assert set(children) == {t["trial_id"] for t in summary["trials"]}
    for trial in summary["trials"]:
        expected = "FINISHED" if trial["num_evaluations"] == len(FULL_STEPS) else "KILLED"
        assert children[trial["trial_id"]].info.status == expected, trial["trial_id"]


def test_no_trial_leaves_its_placement_groups_behind(asha_sweep):
    """The stopped trial's Train controller is killed with its driver before it can remove its
    workers' placement group, which Ray would keep until the job ends: the sweep removes it."""
    _, summary, _, _, groups = asha_sweep
    # each trial's resources in Tune and its Train run's workers
    assert len(groups) >= 2 * summary["num_trials"], groups
    assert set(groups.values()) == {"REMOVED"}, groups
