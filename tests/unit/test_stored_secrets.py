"""Credentials in the tracking URI never reach a file of the sweep folder (sweep_config.json,
mlflow_runs.json, summary.json), while the drivers and workers still get the live URI, on a new
sweep and on --resume."""

from __future__ import annotations

import types
from pathlib import Path

import pyarrow as pa
import pytest

from ftplat.errors import UserError

SECRET = "hunter2-s3cr3t"
LIVE = f"http://ftplat:{SECRET}@mlflow.example:5000"
MASKED = "http://***@mlflow.example:5000"


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    """Every MLflow client, whatever URI it is given, talks to one local sqlite store; the URIs
    it was asked for are recorded."""
    from mlflow import MlflowClient

    import ftplat.tracking.runs as runs

    asked: list[str] = []
    store = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setattr(runs, "build_client", lambda uri: asked.append(uri) or MlflowClient(store))
    return asked


def files_holding(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text in p.read_text(errors="replace")]


def test_mlflow_runs_json_is_masked_and_a_resumed_parent_gets_the_live_uri(tmp_path, mlflow_store):
    from ftplat.config.schema import TrackingConfig
    from ftplat.tracking.runs import run_start_parent

    sweep = tmp_path / "sweep"
    kwargs = dict(sweep_name="s", sweep_path=str(sweep), params={}, config_json={"job": {}}, dashboard_url=None)
    first = run_start_parent(TrackingConfig(tracking_uri=LIVE), **kwargs)
    assert first["tracking_uri"] == LIVE
    assert not files_holding(sweep, SECRET) and files_holding(sweep, MASKED)
    resumed = run_start_parent(TrackingConfig(tracking_uri=LIVE), **kwargs)
    assert resumed == first  # the live URI, not the masked one that was stored
    assert set(mlflow_store) == {LIVE}
    with pytest.raises(UserError, match=r"--resume: the sweep's MLflow runs are in 'http://\*\*\*@mlflow.example:5000' "
                                        r"but tracking.tracking_uri is now 'http://\*\*\*@other:5000'") as err:
        run_start_parent(TrackingConfig(tracking_uri=f"http://ftplat:{SECRET}@other:5000"), **kwargs)
    assert SECRET not in str(err.value)


def test_masked_values_are_taken_back_from_the_config_given_now():
    from ftplat.tracking.runs import build_unmasked_config, redact_config

    given = {"tracking": {"tracking_uri": LIVE, "experiment_name": "e"}, "hf": {"hub_token": SECRET}, "n": 3}
    stored = redact_config(given)
    assert SECRET not in str(stored)
    assert build_unmasked_config(stored, given) == given
    # A URI given by MLFLOW_TRACKING_URI stays None in the config, as on the first run.
    from_env = {**given, "tracking": {"tracking_uri": None, "experiment_name": "e"}}
    env = {"tracking.tracking_uri": LIVE}
    assert build_unmasked_config(stored, from_env, fallbacks=env)["tracking"]["tracking_uri"] is None
    # Values never masked stay as stored: the stored config is the one a resumed sweep keeps.
    assert build_unmasked_config(stored, {**given, "n": 4})["n"] == 3
    for wrong in ("http://mlflow.example:5000", f"http://ftplat:{SECRET}@elsewhere:5000", None):
        with pytest.raises(UserError, match=r"--resume: tracking.tracking_uri is stored masked as "
                                            r"'http://\*\*\*@mlflow.example:5000'; give it again") as err:
            build_unmasked_config(stored, {**given, "tracking": {"tracking_uri": wrong, "experiment_name": "e"}})
        assert SECRET not in str(err.value)


@pytest.fixture
def fake_sweep(tmp_path, monkeypatch, mlflow_store):
    """``run_sweep`` with its storage and MLflow writers real, and Ray, the model and data checks,
    tokenizing and the trials replaced: what the tuner and the MLflow close-out were given is
    recorded."""
    import ftplat.tune.preflight as preflight_mod
    import ftplat.tune.sweep as sweep_mod
    from ftplat.config.loading import load_sweep_configs
    from ftplat.data.preparation import TokenizedData
    from ftplat.records import Objective, SweepSummary

    seen: dict[str, list] = {"tuner": [], "finish": []}
    table = pa.table({"input_ids": [[1, 2]], "attention_mask": [[1, 1]], "labels": [0]})
    monkeypatch.setattr(preflight_mod, "build_sweep_data", lambda job: TokenizedData({"train": table, "eval": table}, {}))
    monkeypatch.setattr(preflight_mod, "read_missing_tune_state", lambda sweep_path: None)  # no Tune ran
    monkeypatch.setattr(sweep_mod, "run_ray_init", lambda res: False)
    monkeypatch.setattr(sweep_mod, "check_cluster_fits", lambda job: None)
    monkeypatch.setattr(sweep_mod, "read_dashboard_url", lambda: None)
    monkeypatch.setattr(sweep_mod.ray, "put", lambda value: "ref")
    # The trials' MLflow calls go through this actor: it is given the parent run's ids.
    monkeypatch.setattr(sweep_mod, "run_start_trial_runs_actor", lambda tracking: ("trial_runs", tracking))
    monkeypatch.setattr(sweep_mod.ray, "kill", lambda actor: None)
    grid = types.SimpleNamespace(experiment_path=str(tmp_path), filesystem=None)
    monkeypatch.setattr(sweep_mod, "build_tuner", lambda job, space, **kw: seen["tuner"].append((job, kw)) or
                        types.SimpleNamespace(fit=lambda: grid))
    # Every trial of the default space (8) ended: the sweep closes as finished.
    ended = [types.SimpleNamespace(trial_id=f"t{i}", status="TERMINATED") for i in range(8)]
    monkeypatch.setattr(sweep_mod.tune, "ExperimentAnalysis", lambda *a, **kw: types.SimpleNamespace(trials=ended))
    monkeypatch.setattr(sweep_mod, "read_sweep_summary", lambda analysis, **kw: SweepSummary(
        sweep_name=kw["sweep_name"], sweep_path=kw["sweep_path"], objective=Objective("eval_accuracy", "max"),
        scope="last", metric_for_best_model="eval_accuracy", greater_is_better=True, trials=[],
        mlflow=kw["mlflow"]))
    monkeypatch.setattr(sweep_mod, "run_sweep_retention", lambda *a: {})
    monkeypatch.setattr(sweep_mod, "run_finish_sweep", lambda tracking, *a, **kw: seen["finish"].append(tracking))
    monkeypatch.setattr(sweep_mod, "format_summary_table", lambda summary: "")
    (tmp_path / "model").mkdir()

    def run(*overrides: str, resume: bool = False):
        job, space = load_sweep_configs(None, None, [
            f"model.name_or_path={tmp_path / 'model'}", f"storage.storage_path={tmp_path / 'storage'}",
            "storage.sweep_name=s", *overrides])
        sweep_mod.run_sweep(job, space, resume=resume)
        return tmp_path / "storage" / "s"

    return run, seen


def test_no_file_of_the_sweep_folder_holds_the_tracking_password(fake_sweep, monkeypatch):
    run, seen = fake_sweep
    folder = run(f"tracking.tracking_uri={LIVE}")
    assert {p.name for p in folder.iterdir()} >= {"sweep_config.json", "mlflow_runs.json", "summary.json"}
    assert files_holding(folder, SECRET) == []
    assert len(files_holding(folder, MASKED)) == 3
    job, kw = seen["tuner"][-1]
    assert job.tracking.tracking_uri == LIVE and kw["trial_runs"][1]["tracking_uri"] == LIVE
    assert seen["finish"][-1]["tracking_uri"] == LIVE

    # --resume with the URI given again: the stored (masked) config continues with the live URI.
    run(f"tracking.tracking_uri={LIVE}", resume=True)
    job, kw = seen["tuner"][-1]
    assert kw["resume"] and job.tracking.tracking_uri == LIVE and kw["trial_runs"][1]["tracking_uri"] == LIVE
    # ... or given by MLFLOW_TRACKING_URI.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", LIVE)
    run(resume=True)
    job, kw = seen["tuner"][-1]
    assert job.tracking.tracking_uri is None and kw["trial_runs"][1]["tracking_uri"] == LIVE
    assert seen["finish"][-1]["tracking_uri"] == LIVE
    assert files_holding(folder, SECRET) == []

    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    with pytest.raises(UserError, match=r"tracking.tracking_uri is stored masked as 'http://\*\*\*@mlflow"):
        run("tracking.tracking_uri=http://mlflow.example:5000", resume=True)
