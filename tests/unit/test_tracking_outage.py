"""A tracking server that fails costs MLflow runs, never trials or the summary: the probe's
fail-fast settings stay in the probe, rank 0's logging survives a dead server, a sweep whose
trials all failed has no winner, and the summary is written whatever retention and MLflow do."""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from types import SimpleNamespace

import pytest
from local_servers import find_free_port
from ray.tune.experiment import Trial

from ftplat.cli.sweep import main
from ftplat.config.loading import load_sweep_configs
from ftplat.config.schema import TrackingConfig
from ftplat.errors import UserError
from ftplat.records import BestCheckpoint, Objective, SweepSummary, TrialRecord, Winner
from ftplat.scoring import SCOPES
from ftplat.tracking.callback import MlflowTrialCallback
from ftplat.tracking.report import run_finish_sweep, run_write_report_figure
from ftplat.tracking.runs import build_client, check_tracking_reachable, run_start_parent
from ftplat.tracking.trial_runs import TrialRuns
from ftplat.tune.summary import read_sweep_summary

HTTP_SETTINGS = ("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "MLFLOW_HTTP_REQUEST_TIMEOUT")


@pytest.fixture
def dead_server(monkeypatch) -> str:
    """A tracking URI nothing listens on, with the user's knob for one quick attempt per call
    (MLflow's default retries would take minutes per call)."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    return f"http://127.0.0.1:{find_free_port()}"


def build_summary(sweep_path, trials, winner_id=None) -> SweepSummary:
    winner = None
    if winner_id:
        rec = next(t for t in trials if t.trial_id == winner_id)
        winner = Winner(trial_id=rec.trial_id, score=rec.scores["last"], hyperparameters=rec.hyperparameters,
                        best_checkpoint=rec.best_checkpoint)
    return SweepSummary(sweep_name="s", sweep_path=str(sweep_path), objective=Objective("eval_accuracy", "max"),
                        scope="last", metric_for_best_model="eval_accuracy", greater_is_better=True,
                        trials=trials, winner=winner, winners_by_scope={s: winner_id for s in SCOPES})


def scored_trial(sweep_path, trial_id="t1", **fields) -> TrialRecord:
    ckpt = sweep_path / f"train-{trial_id}" / "checkpoint-10"
    ckpt.mkdir(parents=True)
    return TrialRecord(trial_id=trial_id, status="TERMINATED", hyperparameters={"training.learning_rate": 1e-3},
                       scores={s: 0.75 for s in SCOPES},
                       best_checkpoint=BestCheckpoint(path=str(ckpt), exists=True, step=10, epoch=1.0,
                                                      metric="eval_accuracy", value=0.75),
                       train_run_path=str(sweep_path / f"train-{trial_id}"),
                       history=[{"training_iteration": 1, "step": 10, "epoch": 1.0, "eval_accuracy": 0.75,
                                 "checkpoint_name": "checkpoint-10"}], **fields)


def failed_trial(trial_id: str, error="RuntimeError: boom") -> TrialRecord:
    return TrialRecord(trial_id=trial_id, status="ERROR", hyperparameters={"training.learning_rate": 1e-3},
                       scores={s: None for s in SCOPES}, train_run_path=f"/nonexistent/train-{trial_id}", error=error)


def test_the_probe_fails_fast_and_leaves_the_environment_as_it_was(monkeypatch):
    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")  # the user's own setting is kept
    started = time.monotonic()
    with pytest.raises(UserError, match="tracking.tracking_uri"):
        check_tracking_reachable(TrackingConfig(tracking_uri=f"http://127.0.0.1:{find_free_port()}"))
    assert time.monotonic() - started < 60
    # Left set, these would reach the private cluster's workers: one 5xx would fail a call.
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == "1"
    assert "MLFLOW_HTTP_REQUEST_TIMEOUT" not in os.environ


def test_rank0_logging_survives_a_dead_server_and_warns_once(dead_server, monkeypatch, caplog):
    callback = MlflowTrialCallback(runs=TrialRuns({"tracking_uri": dead_server}), run_id="r1")
    attempts = []
    real_log_batch = callback.runs.client.log_batch
    monkeypatch.setattr(callback.runs.client, "log_batch",
                        lambda *a, **k: attempts.append(1) or real_log_batch(*a, **k))
    args = SimpleNamespace(to_dict=lambda: {"learning_rate": 1e-3, "output_dir": "/tmp/x"})
    state = SimpleNamespace(is_world_process_zero=True, global_step=5)
    with caplog.at_level(logging.WARNING):
        callback.on_train_begin(args, state, None)
        for step in range(3):
            callback.on_log(args, state, None, logs={"loss": 0.5 - step / 10})
        callback.on_train_end(args, state, None)  # the calls go in the background; the end waits for them
    warnings = [r for r in caplog.records if "MLflow tracking failed" in r.getMessage()]
    assert len(warnings) == 1 and "r1" in warnings[0].getMessage()
    assert len(attempts) == 1, "after a failure (MLflow's retries spent) no more calls are made"
    from ftplat.tracking.callback import read_tracking_errors

    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[object(), callback]))
    lost = read_tracking_errors(trainer)
    assert lost["count"] == 4 and "127.0.0.1" in lost["first_error"]


def test_rank0_logging_never_waits_for_the_store_and_keeps_the_order():
    """A slow store: each call takes 0.2 s, the training loop's callbacks return at once, the
    calls are made in order, and training's end waits for them."""
    made = []

    def slow_call(method, run_id, values):
        time.sleep(0.2)
        made.append([m[0] for m in values] if method == "log_metrics" else list(values))

    callback = MlflowTrialCallback(runs=SimpleNamespace(call=slow_call), run_id="r1")
    args = SimpleNamespace(to_dict=lambda: {"learning_rate": 1e-3})
    state = SimpleNamespace(is_world_process_zero=True, global_step=5)
    started = time.monotonic()
    callback.on_train_begin(args, state, None)
    for step in range(3):
        callback.on_log(args, state, None, logs={f"m{step}": 0.5})
    assert time.monotonic() - started < 0.6 and len(made) < 4  # made one by one, 0.8 s in all
    callback.on_train_end(args, state, None)
    assert made == [["hf.learning_rate"], ["m0"], ["m1"], ["m2"]]
    from ftplat.tracking.callback import read_tracking_errors

    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[callback]))
    assert read_tracking_errors(trainer) == {"count": 0, "first_error": None}


def test_training_end_waits_a_bounded_time_and_counts_what_was_not_sent(caplog):
    release = threading.Event()
    callback = MlflowTrialCallback(runs=SimpleNamespace(call=lambda *a: release.wait(10)), run_id="r1",
                                   flush_timeout_s=0.3)
    args, state = SimpleNamespace(), SimpleNamespace(is_world_process_zero=True, global_step=5)
    for step in range(3):
        callback.on_log(args, state, None, logs={"loss": 0.5})
    started = time.monotonic()
    with caplog.at_level(logging.WARNING):
        callback.on_train_end(args, state, None)
    assert 0.3 <= time.monotonic() - started < 5
    assert any("3 MLflow call(s)" in r.getMessage() for r in caplog.records)
    callback.on_log(args, state, None, logs={"loss": 0.4})  # after giving up: counted, not queued
    release.set()
    from ftplat.tracking.callback import read_tracking_errors

    lost = read_tracking_errors(SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[callback])))
    assert lost["count"] == 4 and "still queued 0.3 s" in lost["first_error"]


def test_a_lone_failed_trial_is_no_winner(tmp_path):
    trial = Trial("fn", trial_id="lone", experiment_tag="1_lr=0.002", stub=True,
                  config={"training.learning_rate": 2.0e-3})
    trial.set_status(Trial.ERROR)
    analysis = SimpleNamespace(trials=[trial], trial_dataframes={})
    job, space = load_sweep_configs(None, None, [
        "search.parameters.training.learning_rate={type: loguniform, low: 1.0e-4, high: 3.0e-2}"])
    summary = read_sweep_summary(analysis, sweep_name="s", sweep_path=str(tmp_path), job=job, space=space)
    assert summary.winner is None
    assert summary.winners_by_scope == {s: None for s in SCOPES}
    assert [t.status for t in summary.trials] == ["ERROR"]


def test_closing_a_sweep_without_a_winner_ends_the_parent_failed(tmp_path):
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment_name="outage")
    tracking = run_start_parent(cfg, sweep_name="s", sweep_path=str(tmp_path / "s"), params={"a": 1},
                                config_json={}, dashboard_url=None)
    summary = build_summary(tmp_path / "s", [failed_trial("a"), failed_trial("b")])
    assert run_finish_sweep(tracking, summary, registered_model_name="m") is None
    parent = build_client(tracking["tracking_uri"]).get_run(tracking["parent_run_id"])
    assert parent.info.status == "FAILED" and "ftplat.winner" not in parent.data.tags


def test_calls_the_trials_lost_make_the_sweep_fail(tmp_path):
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment_name="outage")
    tracking = run_start_parent(cfg, sweep_name="s", sweep_path=str(tmp_path / "s"), params={"a": 1},
                                config_json={}, dashboard_url=None)
    lost = {"tracking_errors": {"count": 3, "first_error": "MlflowException: connection refused"}}
    summary = build_summary(tmp_path / "s", [scored_trial(tmp_path / "s", train_result=lost)], winner_id="t1")
    error = run_finish_sweep(tracking, summary, registered_model_name=None)
    assert error == "3 MLflow call(s) failed or skipped in trial(s) t1 (first error: MlflowException: connection refused)"
    parent = build_client(tracking["tracking_uri"]).get_run(tracking["parent_run_id"])
    assert parent.info.status == "FAILED" and parent.data.tags["ftplat.winner"] == "t1"


def test_report_figure_of_a_sweep_whose_trials_all_failed(tmp_path):
    summary = build_summary(tmp_path, [failed_trial("f"), failed_trial("g")])
    run_write_report_figure(summary, str(tmp_path / "plot.png"))
    assert (tmp_path / "plot.png").stat().st_size > 0


def _job():
    return load_sweep_configs(None, None, ["retention.apply_at_end=true"])[0]


def test_a_failing_retention_pass_still_leaves_a_summary(tmp_path, monkeypatch):
    from ftplat.tune import sweep

    def s3_down(job, sweep_path, summary):
        raise OSError("When deleting key 'train-t1/checkpoint-10': AWS Error NETWORK_CONNECTION")

    monkeypatch.setattr(sweep, "run_sweep_retention", s3_down)
    summary = sweep.run_close_sweep(_job(), build_summary(tmp_path, [scored_trial(tmp_path)], "t1"), None)
    on_disk = SweepSummary.read(str(tmp_path))
    assert "NETWORK_CONNECTION" in summary.retention_error and on_disk.retention_error == summary.retention_error
    assert on_disk.winner.trial_id == "t1"


def test_best_checkpoints_are_read_again_after_retention(tmp_path, monkeypatch):
    from ftplat.tune import sweep

    def delete_best(job, sweep_path, summary):
        shutil.rmtree(tmp_path / "train-t1" / "checkpoint-10")
        return {"delete": 1}

    monkeypatch.setattr(sweep, "run_sweep_retention", delete_best)
    sweep.run_close_sweep(_job(), build_summary(tmp_path, [scored_trial(tmp_path)], "t1"), None)
    on_disk = SweepSummary.read(str(tmp_path))
    assert on_disk.checkpoint_gc == {"delete": 1}
    assert on_disk.trials[0].best_checkpoint.exists is False
    assert on_disk.winner.best_checkpoint.exists is False


def test_a_dead_tracking_server_at_the_end_still_leaves_a_summary(tmp_path, monkeypatch, dead_server, caplog):
    from ftplat.tune import sweep

    monkeypatch.setattr(sweep, "run_sweep_retention", lambda job, sweep_path, summary: {"keep": 1})
    tracking = {"tracking_uri": dead_server, "experiment_id": "1", "parent_run_id": "p1"}
    with caplog.at_level(logging.WARNING):
        summary = sweep.run_close_sweep(_job(), build_summary(tmp_path, [scored_trial(tmp_path)], "t1"), tracking)
    on_disk = SweepSummary.read(str(tmp_path))
    assert summary.tracking_error.startswith("closing the sweep: ") and "127.0.0.1" in summary.tracking_error
    assert on_disk.tracking_error == summary.tracking_error and on_disk.winner.trial_id == "t1"
    assert on_disk.checkpoint_gc == {"keep": 1}
    assert len([r for r in caplog.records if r.getMessage().startswith("MLflow tracking failed")]) == 1


@pytest.mark.parametrize("fields, expected", [
    ({"tracking_error": "closing the sweep: MlflowException: refused"},
     "error: MLflow tracking failed: closing the sweep: MlflowException: refused; summary.json and the "
     "checkpoints are complete, the MLflow runs are not"),
    ({"retention_error": "OSError: S3 down"}, "error: checkpoint retention failed: OSError: S3 down; "),
    ({"winner": None}, "error: no trial produced a score (eval_accuracy, scope last): 2 of 3 failed "
                       "(first error: RuntimeError: boom)"),
])
def test_a_sweep_that_failed_at_its_end_exits_1_with_one_line(fields, expected, tmp_path, monkeypatch, capsys):
    from ftplat.tune import sweep

    trials = [failed_trial("a", error=None), failed_trial("b"), scored_trial(tmp_path, "c")]
    summary = build_summary(tmp_path, trials, winner_id="c")
    monkeypatch.setattr(sweep, "run_sweep", lambda job, space, resume: summary)
    assert main(["--storage", str(tmp_path)]) == 0 and "error:" not in capsys.readouterr().err
    for key, value in fields.items():
        setattr(summary, key, value)
    code = main(["--storage", str(tmp_path)])
    errors = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error: ")]
    assert code == 1 and len(errors) == 1 and errors[0].startswith(expected)
