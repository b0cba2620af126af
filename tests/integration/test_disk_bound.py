"""Disk bound: an 8-trial tiny sweep under a retention policy, storage sampled while it runs
(and two of its trials, given the same values, must train the same model).

Policy: save_total_limit 1, keep the top-1 trial, other trials keep only their best. Without
deleting as the sweep goes, storage would grow to 8 x 3 checkpoints before the end-of-sweep
gc; with it, every trial that has started costs one checkpoint (its best) once it has finished,
the leading trial one more (its latest), and each running trial at most its best and latest,
plus one upload whose report the driver has not handled yet, plus one the callback is deleting.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.sweep import run_sweep

pytestmark = pytest.mark.integration

NUM_TRIALS, EPOCHS, CONCURRENT = 8, 3, 2
RUNNING_TRIAL_BOUND = 2 + 2  # best + latest, + an unhandled upload, + one being deleted


def count_checkpoints(sweep_dir: Path) -> tuple[int, int, int]:
    """(checkpoint folders, train runs started, most checkpoints in one run)."""
    per_run = [sum(1 for c in run.glob("checkpoint-*") if c.is_dir()) for run in sweep_dir.glob("train-*")]
    return sum(per_run), len(per_run), max(per_run, default=0)


class StorageSampler(threading.Thread):
    def __init__(self, sweep_dir: Path, period_s: float = 0.2):
        super().__init__(daemon=True)
        self.sweep_dir, self.period_s = sweep_dir, period_s
        self.samples: list[tuple[int, int, int]] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            try:
                self.samples.append(count_checkpoints(self.sweep_dir))
            except FileNotFoundError:  # a folder deleted while it was listed
                pass
            time.sleep(self.period_s)


def test_storage_stays_within_the_policy_bound(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path):
    storage = tmp_path / "storage"
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}",
        f"storage.storage_path={storage}", "storage.sweep_name=bounded",
        "data.max_length=32", "data.train_size=256", "data.eval_size=64",
        f"training.num_train_epochs={EPOCHS}.0", "training.save_total_limit=1",
        "retention.keep_top_k_trials=1", "retention.keep_trial_latest=false",
        f"resources.max_concurrent_trials={CONCURRENT}", "tracking.enabled=false",
        f"search.num_samples={NUM_TRIALS}", "search.seed=3",
        "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-4, high: 3.0e-2}}",
        # The same values twice: trials must be reproducible (model init seeded too).
        "search.points_to_evaluate=[{training.learning_rate: 2.0e-3}, {training.learning_rate: 2.0e-3}]",
    ])
    sampler = StorageSampler(storage / "bounded")
    sampler.start()
    try:
        summary = run_sweep(job, space).to_dict()
    finally:
        sampler.stop.set()
        sampler.join()

    assert summary["status_counts"] == {"TERMINATED": NUM_TRIALS}
    assert len(sampler.samples) > 50, "the sweep ended before storage could be sampled"
    over = [(total, runs, most) for total, runs, most in sampler.samples
            if total > runs + 1 + CONCURRENT * (RUNNING_TRIAL_BOUND - 1) or most > RUNNING_TRIAL_BOUND]
    assert not over, f"storage above the policy bound at {len(over)} samples, e.g. {over[:5]}"
    # (Without deletions during the sweep the last samples would hold 8 x 3 = 24 checkpoints
    # against a bound of 8 + 1 + 6.)

    first, second = summary["trials"][:2]
    assert first["hyperparameters"] == second["hyperparameters"] == {"training.learning_rate": 2.0e-3}
    for a, b in zip(first["history"], second["history"], strict=True):
        assert a["eval_accuracy"] == b["eval_accuracy"] and a["eval_loss"] == pytest.approx(b["eval_loss"], rel=1e-5)

    total, runs, _ = count_checkpoints(storage / "bounded")
    winner = next(t for t in summary["trials"] if t["trial_id"] == summary["winner"]["trial_id"])
    winner_latest = winner["history"][-1]["checkpoint_name"]
    extra = 0 if winner_latest == Path(winner["best_checkpoint"]["path"]).name else 1
    assert (total, runs) == (NUM_TRIALS + extra, NUM_TRIALS)
    assert all(t["best_checkpoint"]["exists"] for t in summary["trials"])
