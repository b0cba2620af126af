"""A sweep whose MLflow parent run has started never leaves it RUNNING: a failure after the
start, outside ``tuner.fit()`` (the object store refusing the data, Tune's restore, the
study's download), ends it FAILED, and the sweep's own error is the one raised. No cluster:
the steps around the failure are stood in for; the parent run is a real MLflow run."""

from __future__ import annotations

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.tune import sweep as sweep_module


class ObjectStoreFull(RuntimeError):
    pass


@pytest.fixture
def job_and_space(tmp_path, tiny_model_dir, sentiment_data_dir):
    return load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}", "data.train_size=64",
        "data.eval_size=32", "data.test_size=32", f"storage.storage_path={tmp_path / 'storage'}",
        "storage.sweep_name=parent-fails", f"tracking.tracking_uri=sqlite:///{tmp_path / 'mlflow.db'}",
        "tracking.registered_model_name=null", "search.num_samples=1"])


def test_a_failure_after_the_parent_run_starts_ends_it_failed(job_and_space, monkeypatch):
    import mlflow

    job, space = job_and_space
    monkeypatch.setattr(sweep_module, "run_ray_init", lambda resources: False)
    monkeypatch.setattr(sweep_module, "check_largest_trial_fits", lambda *a, **k: None)
    monkeypatch.setattr(sweep_module, "run_start_autoscaling_coordinator", lambda: None)
    monkeypatch.setattr(sweep_module, "run_start_trial_runs_actor", lambda tracking: None)
    monkeypatch.setattr(sweep_module, "read_dashboard_url", lambda: None)

    def refuse(tables):
        raise ObjectStoreFull("the object store is full")

    monkeypatch.setattr(sweep_module.ray, "put", refuse)
    with pytest.raises(ObjectStoreFull):
        sweep_module.run_sweep(job, space)
    client = mlflow.MlflowClient(tracking_uri=job.tracking.tracking_uri)
    [experiment] = [e for e in client.search_experiments() if e.name == job.tracking.experiment_name]
    runs = client.search_runs([experiment.experiment_id])
    assert [(r.info.run_name, r.info.status) for r in runs] == [("parent-fails", "FAILED")]
