"""``model.peft`` in real sweeps on a local Ray cluster (tiny BERT, synthetic sentiment data).

- A 2-trial LoRA sweep with the rank searched, tracked to MLflow: checkpoints in storage hold
  the adapter and the head, not the base; the summary and MLflow record trainable parameters
  and checkpoint bytes; the winner is scored on the test split, registered, exported merged
  and adapter-only, and both exports predict the same labels.
- ``--resume`` after the sweep driver (and with it the trial driver) was killed mid-trial: the
  interrupted adapter run continues from its checkpoint in storage.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ftplat.adapters import ADAPTER_CONFIG, is_adapter_dir
from ftplat.config.loading import load_sweep_configs
from ftplat.tune.sweep import run_sweep

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RANKS = [2, 8]
TEXTS = ["great fun and brilliant, loved it", "awful boring mess, hated it"]


@pytest.fixture(scope="module")
def lora_sweep(ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path_factory):
    storage = tmp_path_factory.mktemp("peft-storage")
    mlflow_uri = f"sqlite:///{tmp_path_factory.mktemp('peft-mlflow')}/mlflow.db"
    job, space = load_sweep_configs(None, None, [
        f"model.name_or_path={tiny_model_dir}", f"data.source={sentiment_data_dir}",
        f"storage.storage_path={storage}", "storage.sweep_name=lora",
        "model.peft={method: lora, lora_alpha: 16.0}",
        "data.max_length=32", "data.train_size=512", "data.test_size=128",
        "training.num_train_epochs=2.0", "training.per_device_train_batch_size=16",
        "training.per_device_eval_batch_size=64", "training.logging_steps=10",
        "resources.max_concurrent_trials=2",
        "tracking.enabled=true", f"tracking.tracking_uri={mlflow_uri}", "tracking.experiment_name=ftplat-peft",
        "tracking.registered_model_name=ftplat-peft-test",
        "search.num_samples=2", "search.seed=3",
        # The whole space (a one-parameter override would merge into the default's three).
        f"search.parameters={{model.peft.r: {{type: choice, values: {RANKS}}}, "
        "training.learning_rate: {type: loguniform, low: 3.0e-3, high: 1.0e-2}}",
        f"search.points_to_evaluate=[{{model.peft.r: {RANKS[0]}, training.learning_rate: 5.0e-3}}, "
        f"{{model.peft.r: {RANKS[1]}, training.learning_rate: 5.0e-3}}]",
    ])
    summary = run_sweep(job, space).to_dict()
    return summary, Path(storage) / "lora", mlflow_uri


def full_model_bytes(model_dir: Path) -> int:
    return (model_dir / "model.safetensors").stat().st_size


def test_lora_sweep_keeps_adapters_and_records_their_economics(lora_sweep, tiny_model_dir):
    summary, sweep_dir, _ = lora_sweep
    assert summary["status_counts"] == {"TERMINATED": 2}
    assert sorted(t["hyperparameters"]["model.peft.r"] for t in summary["trials"]) == RANKS
    fractions = {}
    for trial in summary["trials"]:
        result = trial["train_result"]
        assert 0 < result["trainable_parameters"] < result["total_parameters"]
        fractions[trial["hyperparameters"]["model.peft.r"]] = result["trainable_fraction"]
        # the checkpoint holds the adapter and the head: smaller than the base's weights alone
        assert 0 < result["checkpoint_bytes"]["model"] < full_model_bytes(tiny_model_dir)
        assert result["checkpoint_bytes"]["total"] > result["checkpoint_bytes"]["model"]  # + optimizer state
        # storage and scratch share tmp_path's filesystem: every checkpoint was hard-linked, none copied
        assert result["checkpoint_persist"] == {"linked": trial["num_evaluations"], "copied": 0, "copy_reason": None}
        checkpoints = list(Path(trial["train_run_path"]).glob("checkpoint-*"))
        assert checkpoints
        for ckpt in checkpoints:
            names = {p.name for p in ckpt.iterdir()}
            assert is_adapter_dir(names) and "model.safetensors" not in names, names
        assert json.loads((checkpoints[0] / ADAPTER_CONFIG).read_text())["r"] == trial["hyperparameters"]["model.peft.r"]
    assert fractions[RANKS[0]] < fractions[RANKS[1]]  # a higher rank trains more
    test = summary["test"]
    assert "error" not in test and "skipped" not in test, test
    assert 0 <= test["metrics"]["test_accuracy"] <= 1  # learning is shown on real data (BENCHMARKS.md)


def test_lora_sweep_in_mlflow(lora_sweep):
    from mlflow import MlflowClient

    summary, _, mlflow_uri = lora_sweep
    assert summary["tracking_error"] is None
    client = MlflowClient(mlflow_uri)
    experiment = client.get_experiment_by_name("ftplat-peft")
    children = [r for r in client.search_runs([experiment.experiment_id]) if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2
    for run in children:
        assert 0 < float(run.data.params["model.trainable_fraction"]) < 1
        assert int(run.data.params["model.trainable_parameters"]) < int(run.data.params["model.total_parameters"])
        assert run.data.metrics["checkpoint_model_bytes"] < run.data.metrics["checkpoint_bytes"]


def test_lora_export_merged_and_adapter_only_predict_alike(lora_sweep, tiny_model_dir, tmp_path, capsys):
    """Both exports, and the registered MLflow model (the winner merged), give the same
    predictions: the adapter and the trained head survived every path."""
    import mlflow.pyfunc
    from mlflow import MlflowClient

    from ftplat.cli.export import main as export_main
    from ftplat.cli.predict import main as predict_main
    from ftplat.tasks import build_task

    _, sweep_dir, mlflow_uri = lora_sweep
    merged, adapter = tmp_path / "merged", tmp_path / "adapter"
    assert export_main([str(sweep_dir), str(merged)]) == 0
    assert "adapter merged into its base model" in capsys.readouterr().out
    assert export_main([str(sweep_dir), str(adapter), "--adapter-only"]) == 0
    merged_names = {p.name for p in merged.iterdir()}
    adapter_names = {p.name for p in adapter.iterdir()}
    assert "model.safetensors" in merged_names and not is_adapter_dir(merged_names)
    assert is_adapter_dir(adapter_names) and "model.safetensors" not in adapter_names
    adapter_bytes = (adapter / "adapter_model.safetensors").stat().st_size
    assert adapter_bytes < full_model_bytes(merged)
    card = (adapter / "README.md").read_text()
    assert "## Adapter" in card and tiny_model_dir.name in card and "PeftModel.from_pretrained" in card
    assert str(tiny_model_dir) not in card  # no path of the training machine
    assert "merged into its weights" in (merged / "README.md").read_text()
    assert json.loads((adapter / "ftplat_export.json").read_text())["weights"]["weights"] == "adapter"

    outputs = {}
    for name, folder in (("merged", merged), ("adapter", adapter)):
        capsys.readouterr()
        assert predict_main([str(folder), *TEXTS, "--json"]) == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
        assert len(lines) == len(TEXTS)
        outputs[name] = [(p["label"], round(p["score"], 4)) for p in lines]
    assert outputs["merged"] == outputs["adapter"]
    task = build_task("text-classification")
    untrained = [(p["label"], round(p["score"], 4)) for p in task.run_predict(task.build_pipeline(str(tiny_model_dir)), TEXTS)]
    assert untrained != outputs["merged"]  # the trained adapter and head are in both exports
    version = MlflowClient(mlflow_uri).get_latest_versions("ftplat-peft-test")[0].version
    previous = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(mlflow_uri)
    try:
        registered = mlflow.pyfunc.load_model(f"models:/ftplat-peft-test/{version}").predict(TEXTS)
    finally:
        mlflow.set_tracking_uri(previous)
    assert [(p["label"], round(p["score"], 4)) for p in registered] == outputs["merged"]


def test_killed_sweep_resumes_the_adapter_run(tiny_model_dir, sentiment_data_dir, tmp_path):
    storage = tmp_path / "storage"
    sweep = storage / "lora-resume"
    # Trials run one at a time and train in seconds: the data is sized so that the second
    # trial's time between its first checkpoint and its end outlasts the poll below.
    train_size = 1536
    command = [
        sys.executable, "jobs/imdb_sweep.py", "--model", str(tiny_model_dir), "--dataset", str(sentiment_data_dir),
        "--storage", str(storage), "--name", "lora-resume", "--search-space", "search_spaces/smoke.yaml",
        "model.peft={method: lora, r: 4}", "search.num_samples=2", "data.max_length=32",
        f"data.train_size={train_size}", "data.eval_size=128", "training.num_train_epochs=3.0",
        "training.per_device_train_batch_size=16", "tracking.enabled=false", "resources.local_num_cpus=3",
    ]
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    log = open(tmp_path / "first.log", "w")
    first = subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        def second_trial_checkpointed():
            done = list(sweep.glob("train-*/trial_result.json"))
            started = [d for d in sweep.glob("train-*") if list(d.glob("checkpoint-*"))]
            return len(done) == 1 and len(started) == 2
        deadline = time.time() + 600
        while not second_trial_checkpointed():
            assert time.time() < deadline, "timed out waiting for trial 1 to finish and trial 2 to checkpoint"
            assert first.poll() is None, (tmp_path / "first.log").read_text()[-3000:]
            time.sleep(0.1)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    interrupted = next(d for d in sweep.glob("train-*") if not (d / "trial_result.json").exists())
    saved = sorted(p.name for p in interrupted.glob("checkpoint-*"))
    assert saved and all(is_adapter_dir({f.name for f in (interrupted / n).iterdir()}) for n in saved)

    second = subprocess.run([*command, "--resume"], cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert "Resuming from" in second.stdout + second.stderr  # the adapter run continued, not restarted
    summary = json.loads((sweep / "summary.json").read_text())
    assert summary["status_counts"] == {"TERMINATED": 2}
    steps = train_size // 16
    for trial in summary["trials"]:
        assert [r["epoch"] for r in trial["history"]] == [1.0, 2.0, 3.0], "no duplicated or missing epochs"
        assert trial["train_result"]["global_step"] == 3 * steps
        assert trial["train_result"]["trainable_fraction"] < 0.5


@pytest.mark.parametrize("preset", [None, "zero2"], ids=["ddp", "zero2"])
def test_lora_with_two_workers(preset, ray_cluster, tiny_model_dir, sentiment_data_dir, tmp_path):
    """An adapter trains data-parallel (2 workers: DDP, or DeepSpeed ZeRO-2), and the winner
    exports merged from the checkpoint they saved."""
    from ftplat.checkpoints.export import run_export
    from sweep_overrides import build_tiny_overrides

    storage = tmp_path / "storage"
    name = f"lora-{preset or 'ddp'}"
    job, space = load_sweep_configs(None, None, build_tiny_overrides(
        tiny_model_dir, sentiment_data_dir, storage, name,
        "model.peft={method: lora, r: 4}", "data.train_size=128", "data.eval_size=64",
        "training.num_train_epochs=1.0", "training.per_device_train_batch_size=16", "training.logging_steps=2",
        *([f"training.deepspeed={preset}"] if preset else []),
        "resources.num_workers=2", "resources.cpus_per_worker=0.5", "tracking.enabled=false",
        "search.num_samples=1", "search.parameters={training.learning_rate: {type: loguniform, low: 1.0e-3, high: 1.0e-2}}",
    ))
    summary = run_sweep(job, space).to_dict()
    (trial,) = summary["trials"]
    assert trial["status"] == "TERMINATED", trial["error"]
    result = trial["train_result"]
    assert result["world_size"] == 2 and result["global_step"] == 128 // (16 * 2)
    assert result["trainable_fraction"] < 0.5
    if preset:
        assert result["deepspeed"]["zero_stage"] == 2
    ckpt = Path(trial["best_checkpoint"]["path"])
    assert is_adapter_dir({p.name for p in ckpt.iterdir()})
    record = run_export(str(storage / name), str(tmp_path / "export"))
    assert record["weights"]["weights"] == "merged"
    assert (tmp_path / "export" / "model.safetensors").is_file()
