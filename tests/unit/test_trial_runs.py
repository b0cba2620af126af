"""The trials' MLflow calls made by the sweep's ``TrialRuns`` (an actor in a sweep, in-process
here): the child run is created once and found again after a restart, rank 0 waits for the
run's id in its logging thread only, and neither a trial's driver nor its worker imports MLflow."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from types import SimpleNamespace

import pytest

from ftplat.config.schema import TrackingConfig
from ftplat.layout import build_tracking_uri
from ftplat.storage import read_json
from ftplat.tracking.callback import MlflowTrialCallback, read_tracking_errors
from ftplat.tracking.runs import build_client, run_start_parent
from ftplat.tracking.trial_runs import TrialRuns


def test_a_trials_run_is_created_once_logged_into_and_ended(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = run_start_parent(TrackingConfig(tracking_uri=uri, experiment_name="e"), sweep_name="s",
                                sweep_path=str(tmp_path / "s"), params={}, config_json={}, dashboard_url=None)
    runs = TrialRuns(tracking)
    run_uri = str(tmp_path / "s" / "train-t1")
    run_id = runs.call("start_trial", trial_id="t1", run_uri=run_uri, params={"training.learning_rate": 1e-3})
    # A restarted trial continues the same run (its id is kept in the run's storage folder).
    assert runs.call("start_trial", trial_id="t1", run_uri=run_uri, params={}) == run_id
    assert read_json(build_tracking_uri(run_uri)) == {"run_id": run_id}
    runs.call("log_params", run_id, {"hf.eval_strategy": "epoch"})
    runs.call("log_metrics", run_id, [("eval_accuracy", 0.5, 1000, 4), ("eval_accuracy", 0.75, 2000, 8)])
    runs.call("set_terminated", run_id, "FINISHED")

    client = build_client(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "trial-t1"
    assert run.data.tags["mlflow.parentRunId"] == tracking["parent_run_id"]
    assert run.data.params == {"training.learning_rate": "0.001", "hf.eval_strategy": "epoch"}
    history = client.get_metric_history(run_id, "eval_accuracy")
    assert [(m.step, m.value) for m in history] == [(4, 0.5), (8, 0.75)]


ARGS = SimpleNamespace(to_dict=lambda: {"learning_rate": 1e-3})
STATE = SimpleNamespace(is_world_process_zero=True, global_step=5)


def test_rank0_waits_for_the_runs_id_beside_training_and_keeps_the_order():
    created = threading.Event()
    made = []
    runs = SimpleNamespace(get=lambda ref: created.wait(10) and f"run-of-{ref}",
                           call=lambda method, run_id, values: made.append((method, run_id)))
    callback = MlflowTrialCallback(runs=runs, run_ref=["t1"])
    started = time.monotonic()
    callback.on_train_begin(ARGS, STATE, None)
    for step in range(3):
        callback.on_log(ARGS, STATE, None, logs={"loss": 0.5 - step / 10})
    assert time.monotonic() - started < 0.5 and made == []  # the driver has not created the run yet
    created.set()
    callback.on_train_end(ARGS, STATE, None)
    assert made == [("log_params", "run-of-t1")] + [("log_metrics", "run-of-t1")] * 3
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[callback]))
    assert read_tracking_errors(trainer) == {"count": 0, "first_error": None}


def test_a_run_the_driver_could_not_create_costs_rank0_nothing_and_is_counted_once():
    """The trial driver gets the same failed call and counts it; rank 0 drops its calls."""
    made = []

    def failed(ref):
        raise ConnectionError("tracking server gone")

    callback = MlflowTrialCallback(runs=SimpleNamespace(get=failed, call=lambda *a: made.append(a)), run_ref=["t1"])
    callback.on_train_begin(ARGS, STATE, None)
    callback.on_log(ARGS, STATE, None, logs={"loss": 0.5})
    callback.on_train_end(ARGS, STATE, None)
    trainer = SimpleNamespace(callback_handler=SimpleNamespace(callbacks=[callback]))
    assert made == [] and read_tracking_errors(trainer) == {"count": 0, "first_error": None}


RANK0_LOGS = """
import sys, tempfile, os
from types import SimpleNamespace

import pytest
import ftplat.tune.trial
from ftplat.tracking.callback import MlflowTrialCallback, read_tracking_errors
made = []
callback = MlflowTrialCallback(runs=SimpleNamespace(get=lambda ref: "r1", call=lambda *a: made.append(a[0])),
                               run_ref=["ref"], searched=["training.learning_rate"])
out = tempfile.mkdtemp()
os.makedirs(os.path.join(out, "checkpoint-5"))
args = SimpleNamespace(to_dict=lambda: {"learning_rate": 1e-3}, output_dir=out)
state = SimpleNamespace(is_world_process_zero=True, global_step=5)
callback.on_train_begin(args, state, None)
callback.on_log(args, state, None, logs={"loss": 0.5})
callback.on_save(args, state, None)
callback.on_train_end(args, state, None)
assert made == ["log_params", "log_metrics", "log_metrics"], made
print(sorted(m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")))
"""


def test_neither_a_trials_driver_nor_its_rank0_imports_mlflow():
    """Each trial's processes are fresh: importing MLflow and opening the store there cost
    seconds a trial, which the sweep's one ``TrialRuns`` process pays once. Rank 0's hooks
    run here as in training; their calls go to the actor as plain values."""
    out = subprocess.run([sys.executable, "-c", RANK0_LOGS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_a_trial_restarted_after_its_params_failed_to_log_keeps_one_run_with_its_params(tmp_path, monkeypatch):
    from ftplat.tracking import runs as runs_module
    from ftplat.tracking.runs import run_start_trial

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = run_start_parent(TrackingConfig(tracking_uri=uri, experiment_name="e"), sweep_name="s",
                                sweep_path=str(tmp_path / "s"), params={}, config_json={}, dashboard_url=None)
    run_uri = str(tmp_path / "s" / "train-t1")
    logged = runs_module.log_params

    def refused(*args, **kwargs):
        raise ConnectionError("the server went away")

    monkeypatch.setattr(runs_module, "log_params", refused)
    with pytest.raises(ConnectionError):
        run_start_trial(tracking, trial_id="t1", run_uri=run_uri, params={"training.learning_rate": 1e-3})
    monkeypatch.setattr(runs_module, "log_params", logged)
    run_id = run_start_trial(tracking, trial_id="t1", run_uri=run_uri, params={"training.learning_rate": 1e-3})
    client = build_client(uri)
    children = client.search_runs([tracking["experiment_id"]], f"tags.mlflow.parentRunId = '{tracking['parent_run_id']}'")
    assert [r.info.run_id for r in children] == [run_id]
    assert client.get_run(run_id).data.params == {"training.learning_rate": "0.001"}


def test_steps_trained_again_after_a_restart_are_not_logged_twice(tmp_path):
    """A trial restarted from an earlier checkpoint (a retry; a --resume with a new driver and
    actor) logs those steps again: the run's history held two points at each."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tracking = run_start_parent(TrackingConfig(tracking_uri=uri, experiment_name="e"), sweep_name="s",
                                sweep_path=str(tmp_path / "s"), params={}, config_json={}, dashboard_url=None)
    run_uri = str(tmp_path / "s" / "train-t1")
    first = TrialRuns(tracking)
    run_id = first.call("start_trial", trial_id="t1", run_uri=run_uri, params={})
    first.call("log_metrics", run_id, [("loss", 0.9, 1000, 10), ("epoch", 0.5, 1000, 10)])
    first.call("log_metrics", run_id, [("loss", 0.8, 2000, 20), ("eval_accuracy", 0.6, 2000, 20)])
    first.call("log_metrics", run_id, [("loss", 0.85, 3000, 10)])  # a retry from step 0, same actor
    resumed = TrialRuns(tracking)  # --resume: a new driver, a new actor
    assert resumed.call("start_trial", trial_id="t1", run_uri=run_uri, params={}) == run_id
    resumed.call("log_metrics", run_id, [("loss", 0.79, 4000, 20), ("eval_accuracy", 0.61, 4000, 20),
                                         ("loss", 0.7, 5000, 30), ("eval_accuracy", 0.7, 5000, 30)])
    client = build_client(uri)
    assert [(m.step, m.value) for m in client.get_metric_history(run_id, "loss")] == [(10, 0.9), (20, 0.8),
                                                                                     (30, 0.7)]
    assert [m.step for m in client.get_metric_history(run_id, "eval_accuracy")] == [20, 30]
