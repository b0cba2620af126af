"""MLflow tracking against a real `mlflow server` on 127.0.0.1: one parent run per sweep, one
child per trial written from rank 0 only, the winner registered."""

from __future__ import annotations

import sys

import pytest
from live_actors import LiveActors, list_live_actors
from local_servers import find_free_port, run_server_process
from mlflow import MlflowClient

from ftplat.config.loading import load_sweep_configs
from ftplat.tune.sweep import run_sweep

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("mlflow-server")
    port = find_free_port()
    argv = [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
            "--backend-store-uri", f"sqlite:///{root}/mlflow.db", "--artifacts-destination", str(root / "artifacts"),
            "--workers", "1"]
    with run_server_process(argv, port, root / "server.log", start_timeout_s=90, health_path="/health") as uri:
        yield uri


@pytest.fixture(scope="module")
def tracked_sweep_run(ray_cluster, mlflow_server, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    storage = tmp_path_factory.mktemp("storage")
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}",
        f"storage.storage_path={storage}", "storage.sweep_name=tracked",
        f"tracking.tracking_uri={mlflow_server}", "tracking.experiment_name=ftplat-test",
        "tracking.registered_model_name=tiny-sentiment",
        "data.max_length=48", "data.train_size=512", "data.eval_size=128",
        "training.num_train_epochs=2.0", "training.per_device_train_batch_size=8", "training.logging_steps=8",
        "resources.num_workers=2", "resources.max_concurrent_trials=1",
        "search.num_samples=2", "search.seed=3",
        "search.parameters.training.learning_rate={type: loguniform, low: 3.0e-4, high: 1.0e-2}",
        "search.parameters.training.warmup_steps={type: uniform, low: 0.0, high: 0.2}",
        "search.parameters.training.weight_decay={type: uniform, low: 0.0, high: 0.1}",
    ])
    with LiveActors() as live:
        summary = run_sweep(job, space).to_dict()
    return MlflowClient(mlflow_server), summary, live


@pytest.fixture(scope="module")
def tracked_sweep(tracked_sweep_run):
    client, summary, _ = tracked_sweep_run
    return client, summary


def test_one_parent_and_one_child_per_trial(tracked_sweep):
    client, summary = tracked_sweep
    exp = client.get_experiment_by_name("ftplat-test")
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    assert len(parents) == 1 and len(children) == 2  # 2 workers per trial, still one run each
    parent = parents[0]
    assert parent.info.run_id == summary["mlflow"]["parent_run_id"]
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
    assert {c.data.tags["ftplat.trial_id"] for c in children} == {t["trial_id"] for t in summary["trials"]}
    assert parent.info.status == "FINISHED" and {c.info.status for c in children} == {"FINISHED"}
    assert parent.data.tags["version.ray"].startswith("2.60") and parent.data.tags["ftplat.sweep"] == "tracked"
    assert parent.data.params["search.scope"] == "last"
    assert parent.data.params["search.training.learning_rate"] == "loguniform(0.0003, 0.01)"
    assert "job.training.learning_rate" not in parent.data.params
    assert parent.data.params["job.training.num_train_epochs"] == "2.0"


def test_one_actor_made_the_trials_calls_and_left_with_the_sweep(tracked_sweep_run):
    """The trials' drivers and rank 0s call the sweep's TrialRuns actor (they never import
    MLflow); the sweep kills it at its end, so a process running many sweeps keeps none."""
    _, _, live = tracked_sweep_run
    assert len(live.named("TrialRuns")) == 1 and live.named("ImplicitFunc"), live.seen
    assert list_live_actors(class_name="TrialRuns") == []


def test_child_runs_hold_params_and_step_metrics(tracked_sweep):
    client, summary = tracked_sweep
    for trial in summary["trials"]:
        run = next(r for r in client.search_runs([client.get_experiment_by_name("ftplat-test").experiment_id])
                   if r.data.tags.get("ftplat.trial_id") == trial["trial_id"])
        p = run.data.params
        assert float(p["training.learning_rate"]) == pytest.approx(trial["hyperparameters"]["training.learning_rate"])
        # searched values once, under their own names; no per-trial scratch path to compare on
        assert not {"hf.learning_rate", "hf.warmup_steps", "hf.weight_decay"} & set(p)
        assert not {"hf.output_dir", "hf.logging_dir", "hf.run_name", "hf.save_steps"} & set(p)
        assert p["hf.eval_strategy"] == "epoch" and p["hf.logging_steps"] == "8"
        # 2 workers x 8 rows: trials of other worker counts or accumulation show it here
        assert p["train.global_batch_size"] == "16" and p["train.optimizer_steps"] == str(trial["history"][-1]["step"])
        assert len([k for k in p if k.startswith("hf.")]) < 30
        assert (run.data.tags.get("ftplat.winner") == "true") == (trial["trial_id"] == summary["winner"]["trial_id"])
        history = client.get_metric_history(run.info.run_id, "eval_accuracy")
        assert [h.value for h in history] == [r["eval_accuracy"] for r in trial["history"]]
        assert [h.step for h in history] == [r["step"] for r in trial["history"]]
        assert len(client.get_metric_history(run.info.run_id, "loss")) >= 2
        assert len(client.get_metric_history(run.info.run_id, "learning_rate")) >= 2
        for scope, value in trial["scores"].items():
            assert run.data.metrics[f"score.{scope}"] == pytest.approx(value)


def test_parent_holds_winner_plot_and_registered_model(tracked_sweep):
    client, summary = tracked_sweep
    parent = client.get_run(summary["mlflow"]["parent_run_id"])
    winner = summary["winner"]
    assert parent.data.params["winner.trial_id"] == winner["trial_id"]
    assert parent.data.metrics["winner.eval_accuracy.last"] == pytest.approx(winner["score"])
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"sweep_report.png", "summary.json", "sweep_config.json"} <= artifacts
    versions = client.search_model_versions("name='tiny-sentiment'")
    assert len(versions) == 1
    assert versions[0].tags["ftplat.trial_id"] == winner["trial_id"]
    assert float(versions[0].tags["eval_accuracy.last"]) == pytest.approx(winner["score"])
    winner_run = client.get_run(versions[0].tags["ftplat.winner_run_id"])
    assert winner_run.data.tags["ftplat.trial_id"] == winner["trial_id"]
    assert winner_run.data.tags["ftplat.winner"] == "true"
    assert (winner_run.data.tags["ftplat.registered_model"], winner_run.data.tags["ftplat.registered_model_version"]) \
        == ("tiny-sentiment", versions[0].version)


def test_registered_model_predicts(tracked_sweep):
    import mlflow

    from ftplat.tracking.report import scoped_tracking_uri

    client, _ = tracked_sweep
    with scoped_tracking_uri(client.tracking_uri):  # the server stops after this module
        model = mlflow.pyfunc.load_model("models:/tiny-sentiment/1")
        signature = mlflow.models.get_model_info("models:/tiny-sentiment/1").signature
    assert signature is not None and {"label", "score"} <= set(signature.outputs.input_names())
    out = model.predict(["i love this movie", "i hate this movie"])
    assert len(out) == 2 and {o["label"] for o in out} <= {"neg", "pos"}


def test_a_two_worker_eval_loss_is_the_loss_of_one_process(tracked_sweep, tmp_path):
    """Two workers evaluate shards of the eval split; their eval_loss is what one process
    reports for the same weights (it was x2: BERT's head takes **kwargs and returns a mean,
    which the Trainer scaled by the workers, huggingface/transformers#47688)."""
    import transformers

    from ftplat.config.loading import build_trial_job
    from ftplat.config.schema import JobConfig
    from ftplat.data.preparation import build_tokenized_tables
    from ftplat.layout import build_sweep_config_uri
    from ftplat.storage import read_json
    from ftplat.train.worker import build_trainer

    _, summary = tracked_sweep
    winner = summary["winner"]
    trial = next(t for t in summary["trials"] if t["trial_id"] == winner["trial_id"])
    row = next(r for r in trial["history"] if r["step"] == winner["best_checkpoint"]["step"])
    job = JobConfig.model_validate(build_trial_job(read_json(build_sweep_config_uri(summary["sweep_path"]))["job"],
                                                   winner["hyperparameters"]))
    tables = build_tokenized_tables(job).tables
    model = transformers.AutoModelForSequenceClassification.from_pretrained(winner["best_checkpoint"]["path"])
    metrics = build_trainer(job, train_table=None, eval_table=tables["eval"], output_dir=str(tmp_path),
                            model=model).evaluate()
    assert metrics["eval_accuracy"] == pytest.approx(row["eval_accuracy"])
    assert metrics["eval_loss"] == pytest.approx(row["eval_loss"], rel=1e-3)
