"""Where a sweep's Optuna study lives, and that the searcher writes it there."""

from __future__ import annotations

import os
import tempfile

import optuna

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.spaces import build_param_space, build_search_alg
from ftplat.tune.study import (build_dashboard_command, build_local_study_path, run_open_study_storage,
                               run_download_study, run_upload_study)


def test_a_local_sweep_keeps_its_study_in_the_sweep_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert build_local_study_path("results/sweep-a") == str(tmp_path / "results/sweep-a/optuna_study.db")
    assert build_dashboard_command("results/sweep-a") == (
        f"optuna-dashboard sqlite:///{tmp_path}/results/sweep-a/optuna_study.db")
    run_upload_study("results/sweep-a")  # nothing to copy: the file is already there
    run_download_study("results/sweep-a")
    assert not (tmp_path / "results").exists()


def test_an_object_store_sweep_keeps_its_study_in_a_local_folder_named_after_it():
    a, b = build_local_study_path("s3://bucket/x/sweep-a"), build_local_study_path("s3://other/x/sweep-a")
    assert a.startswith(os.path.join(tempfile.gettempdir(), "ftplat-optuna", "sweep-a-"))
    assert a.endswith("/optuna_study.db") and a != b  # two buckets' sweeps of one name never share a file
    assert a == build_local_study_path("s3://bucket/x/sweep-a")  # a resumed sweep finds it again
    assert "after downloading s3://bucket/x/sweep-a/optuna_study.db" in build_dashboard_command("s3://bucket/x/sweep-a")


def test_the_searcher_tells_the_study_in_the_file(tmp_path):
    _, space = load_sweep_configs(None, None, ["search.num_samples=2", "search.seed=3"])
    searcher = build_search_alg(space, 1, study_name="sweep-a", study_storage=run_open_study_storage(str(tmp_path)))
    searcher.set_search_properties("objective", "max", build_param_space(space))
    proposed = searcher.suggest("t1")
    searcher.on_trial_complete("t1", {"objective": 0.75, **proposed})
    study = optuna.load_study(study_name="sweep-a", storage=f"sqlite:///{tmp_path}/optuna_study.db")
    [trial] = study.trials
    assert trial.value == 0.75 and trial.params == proposed
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE


def test_a_new_object_store_sweep_starts_a_new_study(tmp_path, monkeypatch, caplog):
    """A sweep deleted from the bucket and run again under the same URI: the file the earlier
    one left on this driver is removed, or Optuna would load its trials into the new study."""
    from ftplat.tune.study import run_clear_stale_study

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    uri = "s3://bucket/x/sweep-a"
    old = optuna.create_study(study_name="sweep-a", storage=run_open_study_storage(uri))
    old.add_trial(optuna.trial.create_trial(value=0.5))
    caplog.set_level("INFO", logger="ftplat")
    run_clear_stale_study(uri)
    assert not os.path.exists(build_local_study_path(uri))
    assert "earlier sweep of s3://bucket/x/sweep-a" in caplog.text
    fresh = optuna.create_study(study_name="sweep-a", storage=run_open_study_storage(uri), load_if_exists=True)
    assert fresh.trials == []

    local = tmp_path / "results" / "sweep-b"
    local.mkdir(parents=True)
    (local / "optuna_study.db").write_text("")
    run_clear_stale_study(str(local))  # a local sweep folder is the sweep's own: never touched here
    assert (local / "optuna_study.db").exists()
