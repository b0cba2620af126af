"""Security defaults (README "Security defaults"): loopback-only services, Ray token auth left
on, no remote code unless asked, no secret values in logs or MLflow."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
SECRET = "hunter2-s3cr3t"


def test_local_cluster_dashboard_binds_loopback_and_keeps_auth(monkeypatch):
    import ray

    from ftplat.config.schema import ResourcesConfig
    from ftplat.runtime import run_ray_init

    calls = []

    class Ctx:
        dashboard_url = "127.0.0.1:8265"

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **kw: calls.append(kw) or Ctx())
    assert run_ray_init(ResourcesConfig()) is True
    (kwargs,) = calls
    assert kwargs["address"] == "local" and kwargs["dashboard_host"] == "127.0.0.1"
    assert "_system_config" not in kwargs
    import os

    assert "RAY_AUTH_MODE" not in os.environ  # ftplat never turns Ray's token auth off


def test_the_package_never_turns_token_auth_off_or_binds_all_interfaces():
    """The library and the jobs; the cluster recipes (where a pod must serve its cluster) are
    checked in test_cluster_recipes (token auth everywhere, loopback unless documented)."""
    offenders = []
    for path in [*(REPO / "platform").rglob("*.py"), *(REPO / "jobs").rglob("*")]:
        if path.is_file() and "__pycache__" not in path.parts:
            text = path.read_text(errors="replace")
            if re.search(r"RAY_AUTH_MODE|0\.0\.0\.0|trust_remote_code\s*[:=]\s*(True|true)", text):
                offenders.append(str(path))
    assert not offenders, offenders


def test_mlflow_commands_in_the_docs_bind_loopback():
    commands = []
    for path in [REPO / "README.md", REPO / "cluster" / "README.md", REPO / "BENCHMARKS.md"]:
        commands += re.findall(r"mlflow (?:ui|server)\b[^\n`]*", path.read_text())
    assert commands
    assert all("--host 127.0.0.1" in c for c in commands if "--backend-store-uri" in c or "--host" in c), commands
    screenshot = (REPO / "docs" / "screenshots.py").read_text()
    assert '"127.0.0.1"' in screenshot and "0.0.0.0" not in screenshot


def test_remote_code_is_off_unless_set(monkeypatch, tiny_model_dir):
    import transformers

    from ftplat.config.loading import load_sweep_configs
    from ftplat.config.schema import JobConfig, ModelConfig
    from ftplat.data.tokenizer import build_tokenizer
    from ftplat.train.modeling import build_model

    assert JobConfig().model.trust_remote_code is False
    for name in ("imdb.yaml", "imdb_cpu.yaml"):
        job, _ = load_sweep_configs(REPO / "jobs" / "configs" / name, None, [])
        assert job.model.trust_remote_code is False, name
    seen = []
    real_tok, real_model = transformers.AutoTokenizer.from_pretrained, transformers.AutoModelForSequenceClassification.from_pretrained
    monkeypatch.setattr("ftplat.data.tokenizer.AutoTokenizer.from_pretrained",
                        lambda *a, **kw: seen.append(kw["trust_remote_code"]) or real_tok(*a, **kw))
    monkeypatch.setattr("transformers.AutoModelForSequenceClassification.from_pretrained",
                        lambda *a, **kw: seen.append(kw["trust_remote_code"]) or real_model(*a, **kw))
    cfg = ModelConfig(name_or_path=str(tiny_model_dir))
    build_tokenizer(cfg), build_model(JobConfig(model=cfg))
    assert seen == [False, False]


def test_no_secret_values_reach_mlflow_or_the_log(tmp_path, caplog):
    from mlflow import MlflowClient

    from ftplat.config.schema import TrackingConfig
    from ftplat.tracking.runs import run_start_parent, run_start_trial

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    storage = f"s3://AKIAEXAMPLE:{SECRET}@bucket/sweeps"
    config_json = {"job": {"storage": {"storage_path": storage}, "hf": {"hub_token": SECRET}},
                   "search_space": {"parameters": {}}}
    params = {"storage.storage_path": storage, "hf.hub_token": SECRET, "training.learning_rate": 2e-5}
    with caplog.at_level(logging.DEBUG):
        ids = run_start_parent(TrackingConfig(tracking_uri=uri), sweep_name="s", sweep_path=str(tmp_path / "sweep"),
                               params=params, config_json=config_json, dashboard_url=None)
        child = run_start_trial(ids, trial_id="t1", run_uri=str(tmp_path / "sweep" / "train-t1"), params=params)
    client = MlflowClient(uri)
    for run_id in (ids["parent_run_id"], child):
        run = client.get_run(run_id)
        assert SECRET not in json.dumps({**run.data.params, **run.data.tags})
        assert run.data.params["training.learning_rate"] == "2e-05"
        assert run.data.params["storage.storage_path"] == "s3://***@bucket/sweeps"
    artifact = Path(client.download_artifacts(ids["parent_run_id"], "sweep_config.json", str(tmp_path)))
    assert SECRET not in artifact.read_text() and "s3://***@bucket/sweeps" in artifact.read_text()
    assert SECRET not in caplog.text


def test_errors_about_a_uri_do_not_print_its_password(tmp_path, capsys, tiny_model_dir, sentiment_data_dir):
    from ftplat.cli.main import main

    code = main(["sweep", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir), "--storage",
                 str(tmp_path / "s"), f"tracking.tracking_uri=http://ftplat:{SECRET}@127.0.0.1:9"])
    err = capsys.readouterr().err
    assert code == 2 and "http://***@127.0.0.1:9" in err and SECRET not in err
