"""The summary lists trials in creation order, whatever order Tune's experiment state holds."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from ray.tune.experiment import Trial

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.summary import read_sweep_summary


def _trial(trial_id: str, tag: str) -> Trial:
    trial = Trial("fn", trial_id=trial_id, experiment_tag=tag, stub=True,
                  config={"training.learning_rate": 2.0e-3})
    trial.set_status(Trial.TERMINATED)
    return trial


def _history() -> pd.DataFrame:
    return pd.DataFrame([{"training_iteration": i, "step": 10 * i, "eval_accuracy": 0.5,
                          "checkpoint_name": f"checkpoint-{10 * i}"} for i in (1, 2, 3)])


def test_ties_go_to_the_trial_created_first_not_the_one_stored_first(tmp_path):
    # Tune stores trial_data in the iteration order of a set, so two trials created together
    # (two points_to_evaluate started at once) can come back from ExperimentAnalysis swapped.
    stored = [_trial("second", "2_lr=0.002"), _trial("first", "1_lr=0.002")]
    analysis = SimpleNamespace(trials=stored, trial_dataframes={t.trial_id: _history() for t in stored})
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}"])
    summary = read_sweep_summary(analysis, sweep_name="s", sweep_path=str(tmp_path), job=job, space=space).to_dict()
    assert [t["trial_id"] for t in summary["trials"]] == ["first", "second"]
    assert summary["winner"]["trial_id"] == "first"
    assert set(summary["winners_by_scope"].values()) == {"first"}


def test_a_trial_that_failed_midway_loses_a_tie_to_one_that_completed(tmp_path):
    """It had won (created first), and the sweep tested and registered a half-trained model."""
    failed, completed = _trial("first", "1_lr=0.002"), _trial("second", "2_lr=0.002")
    failed.set_status(Trial.ERROR)
    analysis = SimpleNamespace(trials=[failed, completed],
                               trial_dataframes={"first": _history().iloc[:1], "second": _history()})
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}"])
    summary = read_sweep_summary(analysis, sweep_name="s", sweep_path=str(tmp_path), job=job, space=space).to_dict()
    assert [t["trial_id"] for t in summary["trials"]] == ["first", "second"]  # still listed in creation order
    assert summary["winner"]["trial_id"] == "second"


def _frame(values) -> pd.DataFrame:
    return pd.DataFrame([{"training_iteration": i, "step": 10 * i, "eval_accuracy": v,
                          "checkpoint_name": f"checkpoint-{10 * i}"} for i, v in enumerate(values, start=1)])


@pytest.mark.parametrize("scope", ["all", "avg", "last"])
def test_infinite_values_score_as_ray_scores_them(tmp_path, scope):
    """The summary once made inf None (NaN) before scoring; Ray keeps inf, and NaN and inf
    fold differently (max(0.5, nan) is 0.5, max(0.5, inf) is inf), so the winner could differ
    from Ray's and from what live retention (which sees raw values) protected."""
    import math

    from test_scope import rays

    histories = [[math.inf, 0.5], [0.45, 0.45], [0.4, -math.inf]]
    stored = [_trial(f"t{i}", f"{i + 1}_lr=0.002") for i in range(len(histories))]
    analysis = SimpleNamespace(trials=stored, trial_dataframes={t.trial_id: _frame(h) for t, h in zip(stored, histories)})
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}",
        f"search.scope={scope}"])
    summary = read_sweep_summary(analysis, sweep_name="s", sweep_path=str(tmp_path), job=job, space=space)
    expected = rays(histories, scope, "max")
    assert (summary.winner.trial_id if summary.winner else None) == expected
    assert json.loads(json.dumps(summary.to_dict(), allow_nan=False))  # the stored file stays plain JSON


def test_a_step_reported_again_after_a_resume_counts_its_later_report(tmp_path):
    """Resumed from checkpoint-20, the trial evaluates step 30 again; Tune's iterations start
    again at 1, so an order by iteration put the report lost with the crash after the new one."""
    rows = [{"training_iteration": i, "step": s, "eval_accuracy": v, "checkpoint_name": f"checkpoint-{s}"}
            for i, s, v in [(1, 10, 0.5), (2, 20, 0.6), (3, 30, 0.7), (1, 30, 0.9), (2, 40, 0.8)]]
    trial = _trial("t", "1_lr=0.002")
    analysis = SimpleNamespace(trials=[trial], trial_dataframes={"t": pd.DataFrame(rows)})
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}", "search.scope=all"])
    record = read_sweep_summary(analysis, sweep_name="s", sweep_path=str(tmp_path), job=job, space=space).trials[0]
    assert [(r["step"], r["eval_accuracy"]) for r in record.history] == [(10, 0.5), (20, 0.6), (30, 0.9), (40, 0.8)]
    assert record.scores["all"] == 0.9
