"""--resume of a sweep that has finished is refused: Tune would run nothing and the sweep's end
(test score, registered model) would run a second time. One with failed trials may resume."""

from __future__ import annotations

import json

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.errors import UserError
from ftplat.tune.preflight import check_sweep_storage


def write_ended_sweep(root, name, statuses):
    sweep = root / name
    sweep.mkdir(parents=True)
    (sweep / "sweep_config.json").write_text("{}")
    (sweep / "tuner.pkl").write_bytes(b"x")  # what Tuner.can_restore looks for
    (sweep / "experiment_state-2026-01-01_00-00-00.json").write_text("{}")
    trials = [{"trial_id": f"t{i}", "status": s, "hyperparameters": {}, "scores": {}, "history": []}
              for i, s in enumerate(statuses)]
    (sweep / "summary.json").write_text(json.dumps({
        "sweep_name": name, "sweep_path": str(sweep), "objective": {"metric": "eval_accuracy", "mode": "max"},
        "scope": "last", "metric_for_best_model": "eval_accuracy", "trials": trials, "winner": None}))
    return sweep


def test_a_finished_sweep_is_not_resumed_but_one_with_failed_trials_is(tmp_path):
    job, _ = load_sweep_configs(None, None, [f"storage.storage_path={tmp_path}"])
    write_ended_sweep(tmp_path, "done", ["TERMINATED", "TERMINATED"])
    with pytest.raises(UserError, match="--resume: sweep 'done' .* has finished .* nothing to resume"):
        check_sweep_storage(job, "done", resume=True)
    failed = write_ended_sweep(tmp_path, "some-failed", ["TERMINATED", "ERROR"])
    assert check_sweep_storage(job, "some-failed", resume=True) == str(failed)
