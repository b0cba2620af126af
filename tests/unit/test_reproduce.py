"""``ftplat reproduce``: the one-trial sweep built from a sweep's records, and the comparison."""

from __future__ import annotations

import pytest

from ftplat.cli.main import main as ftplat_main
from ftplat.config.loading import load_sweep_configs
from ftplat.errors import UserError
from ftplat.records import Objective, SweepSummary, TrialRecord, Winner
from ftplat.tune.reproduce import (Comparison, build_reproduce_configs, compare_trials, format_comparison,
                                   format_version_changes, select_trial)
from ftplat.storage import write_json

LR, WD = "training.learning_rate", "training.weight_decay"


def recorded_config(*overrides):
    job, space = load_sweep_configs(None, None, ["data.max_length=32", "search.scheduler={type: asha}",
                                                 "training.num_train_epochs=2.0", *overrides])
    return {"job": job.model_dump(mode="json"), "search_space": space.model_dump(mode="json")}


def trial(tid, values, history=(), status="TERMINATED"):
    return TrialRecord(trial_id=tid, status=status, hyperparameters=values,
                       history=[{"eval_accuracy": v, "step": i} for i, v in enumerate(history, 1)])


def summary(trials, winner=None):
    return SweepSummary(sweep_name="orig", sweep_path="/x/orig", objective=Objective("eval_accuracy", "max"),
                        scope="last", metric_for_best_model="eval_accuracy", greater_is_better=True, trials=trials,
                        winner=Winner(trial_id=winner, score=None, hyperparameters={}, best_checkpoint=None)
                        if winner else None)


def test_the_trial_runs_alone_with_its_values_seed_and_config():
    config = recorded_config("training.seed=123", "search.num_samples=6")
    values = {LR: 3.3e-5, "training.warmup_steps": 0.05, WD: 0.01}
    job, space = build_reproduce_configs(config, trial("t1", values, [0.5]), sweep_name="orig-reproduce-t1")
    assert job.storage.sweep_name == "orig-reproduce-t1" and job.training.seed == 123
    assert job.data.max_length == 32 and job.training.num_train_epochs == 2.0
    assert space.num_samples == 1 and space.points_to_evaluate == [values]
    assert space.scheduler.type == "fifo"  # the original's ASHA would have nothing to compare with
    assert space.parameters.keys() == values.keys()
    # tracked as the original was, but no new version of the original's registered model
    assert config["job"]["tracking"]["registered_model_name"] == "ftplat-imdb-sentiment"
    assert job.tracking.enabled and job.tracking.registered_model_name is None


def test_overrides_come_last():
    config = recorded_config()
    values = {LR: 3.3e-5, "training.warmup_steps": 0.05, WD: 0.01}
    job, _ = build_reproduce_configs(config, trial("t1", values, [0.5]), sweep_name="r",
                                     overrides=["tracking.enabled=false", "storage.storage_path=/tmp/elsewhere"])
    assert not job.tracking.enabled and job.storage.storage_path == "/tmp/elsewhere"
    job, _ = build_reproduce_configs(config, trial("t1", values, [0.5]), sweep_name="r",
                                     overrides=["tracking.registered_model_name=imdb-check"])
    assert job.tracking.registered_model_name == "imdb-check"


def test_select_trial_defaults_to_the_winner_and_refuses_what_cannot_be_compared():
    s = summary([trial("a", {}, [0.5]), trial("b", {}, [0.6]), trial("c", {}, [], status="ERROR")], winner="b")
    assert select_trial(s, None).trial_id == "b" and select_trial(s, "a").trial_id == "a"
    with pytest.raises(UserError, match="--trial zz: not a trial of sweep orig; its trials: a, b, c"):
        select_trial(s, "zz")
    with pytest.raises(UserError, match="--trial c: the trial made no evaluation"):
        select_trial(s, "c")
    with pytest.raises(UserError, match="has no winner: name a trial with --trial ID"):
        select_trial(summary(s.trials), None)


def test_comparison_matches_within_the_tolerance_at_every_evaluation_the_original_made():
    original = trial("a", {}, [0.5, 0.625])
    assert compare_trials(original, trial("r", {}, [0.5, 0.625]), "eval_accuracy", 0.0).matched
    assert compare_trials(original, trial("r", {}, [0.5, 0.62505]), "eval_accuracy", 1e-4).matched
    off = compare_trials(original, trial("r", {}, [0.5, 0.6]), "eval_accuracy", 1e-4)
    assert not off.matched and off.largest_difference == pytest.approx(0.025)
    # A trial ASHA stopped after one evaluation is compared on that one.
    assert compare_trials(trial("a", {}, [0.5]), trial("r", {}, [0.5, 0.7]), "eval_accuracy", 0.0).matched
    short = compare_trials(original, trial("r", {}, [0.5]), "eval_accuracy", 1.0)
    assert not short.matched
    lines = format_comparison(short, trial_id="a", sweep_name="orig", new_sweep="orig-reproduce-a")
    assert lines[-1].endswith("n/a (evaluations missing) (tolerance 1): did NOT match")


def test_comparison_text():
    c = Comparison("eval_accuracy", [0.5, 0.625], [0.5, 0.625], 1e-4)
    assert format_comparison(c, trial_id="a", sweep_name="orig", new_sweep="orig-reproduce-a") == [
        "Trial a of sweep orig, run again as sweep orig-reproduce-a:",
        "  eval_accuracy at each of 2 evaluation(s)",
        "    original    0.5 0.625",
        "    reproduced  0.5 0.625",
        "  largest difference 0 (tolerance 0.0001): matched"]


def test_version_changes_name_each_library():
    assert format_version_changes({"torch": "2.12.0", "ray": "2.60.0"}, {"torch": "2.13.0", "ray": "2.60.0"}) == [
        "torch 2.12.0 -> 2.13.0"]
    assert format_version_changes(None, {"ray": "2.60.0"}) == ["ray None -> 2.60.0"]


def test_cli_refuses_a_folder_that_is_no_sweep_and_an_unended_sweep(tmp_path, capsys):
    assert ftplat_main(["reproduce", str(tmp_path)]) == 2
    assert "holds no sweep_config.json: not an ftplat sweep folder" in capsys.readouterr().err
    write_json(str(tmp_path / "sweep_config.json"), recorded_config())
    assert ftplat_main(["reproduce", str(tmp_path)]) == 2
    assert "has no summary.json yet: reproduce a trial once its sweep has ended" in capsys.readouterr().err
    assert ftplat_main(["reproduce", str(tmp_path), "--tolerance", "-1"]) == 2
    assert "--tolerance -1.0: must be >= 0" in capsys.readouterr().err


def test_the_comparison_names_data_that_changed_under_the_same_source(tmp_path, capsys, monkeypatch):
    """A source rewritten (or a hub dataset updated) since the sweep: "did NOT match" alone
    sent the user looking at library versions."""
    import ftplat.tune.plan
    import ftplat.tune.sweep

    values = {LR: 1e-4, "training.warmup_steps": 0.1, WD: 0.01}
    original = summary([trial("t1", values, [0.5, 0.6])], winner="t1")
    original.data = {"fingerprints": {"train": {"rows": 40, "blake2b": "a"}, "eval": {"rows": 5, "blake2b": "b"}}}
    write_json(str(tmp_path / "sweep_config.json"), recorded_config())
    original.sweep_path = str(tmp_path)
    original.write()

    def rerun(job, space):
        again = summary([trial("r1", values, [0.5, 0.7])])
        again.data = {"fingerprints": {"train": {"rows": 40, "blake2b": "a"}, "eval": {"rows": 6, "blake2b": "c"}}}
        return again

    monkeypatch.setattr(ftplat.tune.plan, "check_dry_run", lambda job, space, *, resume: None)
    monkeypatch.setattr(ftplat.tune.sweep, "run_sweep", rerun)
    assert ftplat_main(["reproduce", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "did NOT match" in out and "  the tokenized data differ from the original's: eval (5 -> 6 rows)" in out
