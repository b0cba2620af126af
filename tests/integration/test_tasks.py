"""One real 2-trial sweep per task on a local Ray cluster (tiny BERT, synthetic data written
here), under the default protocol: trials are selected on the data's validation split or a
hold-out of train, and the winner's best checkpoint is scored once on the test split. Each
winner is then exported and served by ``ftplat predict --json``.

- text-classification: sentence pairs, 3 classes given by name, JSON lines with train,
  validation and test splits; gradient checkpointing and label smoothing in the workers;
  trial drivers that reserve no CPU.
- regression: a float target from CSV with train and test only (selection on a hold-out);
  tracked to MLflow (a local sqlite store), whose parent run gets the winner's test metrics.
- multi-label-classification: one 0/1 column per label (data.label_columns) from parquet;
  length-grouped sampling and eval_accumulation_steps in the workers.
- token-classification: CoNLL-style words and tag ids (IOB2 names in model.id2label) from parquet.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.tasks import TASK_FILE, TASKS
from ftplat.tune.sweep import run_sweep
from task_assets import (
    MULTI_LABEL_COLUMNS,
    NER_ID2LABEL,
    PAIR_ID2LABEL,
    write_multi_label_parquet,
    write_ner_parquet,
    write_pair_jsonl,
    write_regression_csv,
)

pytestmark = pytest.mark.integration

EPOCHS = 2


def build_task_overrides(model_dir, data_dir, storage, name, *extra):
    """A 2-trial sweep of the tiny model that searches the learning rate only; no MLflow
    (unless ``extra`` turns it on); no data.eval_split, so the validation protocol selects."""
    return [
        f"model.name_or_path={model_dir}",
        f"data.source={data_dir}",
        f"storage.storage_path={storage}",
        f"storage.sweep_name={name}",
        "data.max_length=32",
        f"training.num_train_epochs={float(EPOCHS)}",
        "training.per_device_train_batch_size=8",
        "training.per_device_eval_batch_size=64",
        "training.logging_steps=10",
        "resources.max_concurrent_trials=2",
        "tracking.enabled=false",
        "search.num_samples=2",
        "search.seed=7",
        "search.parameters={training.learning_rate: {type: loguniform, low: 3.0e-4, high: 2.0e-2}}",
        *extra,
    ]


def run_task_sweep(tmp_path_factory, model_dir, data_dir, name, *extra):
    storage = tmp_path_factory.mktemp(f"storage-{name}")
    job, space = load_sweep_configs(None, None, build_task_overrides(model_dir, data_dir, storage, name, *extra))
    assert list(space.parameters) == ["training.learning_rate"]
    summary = run_sweep(job, space).to_dict()
    return job, summary, Path(storage) / name


def is_finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_sweep(summary, sweep_dir: Path, task_name: str) -> None:
    """What every task's sweep must give: 2 finished trials, a winner on the task's main
    metric, the task's metrics in every evaluation, and the winner's test score."""
    task = TASKS[task_name]
    metric = f"eval_{task.default_metric}"
    assert json.loads((sweep_dir / "summary.json").read_text())["winner"] == summary["winner"]
    assert summary["task"] == task_name
    assert summary["num_trials"] == 2 and summary["status_counts"] == {"TERMINATED": 2}
    assert summary["objective"] == {"metric": metric, "mode": task.metrics[task.default_metric]}
    assert summary["metric_for_best_model"] == metric
    assert summary["greater_is_better"] == (task.metrics[task.default_metric] == "max")
    trial_ids = [t["trial_id"] for t in summary["trials"]]
    winner = summary["winner"]
    assert winner is not None and winner["trial_id"] in trial_ids and is_finite(winner["score"])
    assert len({t["hyperparameters"]["training.learning_rate"] for t in summary["trials"]}) == 2
    for trial in summary["trials"]:
        assert trial["error"] is None and trial["best_checkpoint"]["exists"], trial["trial_id"]
        assert 3.0e-4 <= trial["hyperparameters"]["training.learning_rate"] <= 2.0e-2
        assert [r["epoch"] for r in trial["history"]] == [float(e) for e in range(1, EPOCHS + 1)]
        for row in trial["history"]:
            missing = {f"eval_{m}" for m in task.metrics} - set(row)
            assert not missing, (trial["trial_id"], missing)
            assert is_finite(row[metric]) and is_finite(row["eval_loss"])
    test = summary["test"]
    assert "skipped" not in test and "error" not in test, test
    assert test["split"] == "test" and test["rows"] == summary["data"]["test"]["rows"]
    assert test["trial_id"] == winner["trial_id"]
    assert test["checkpoint"] == winner["best_checkpoint"]["path"]
    expected = {f"test_{m}" for m in task.metrics}
    assert expected <= set(test["metrics"]), sorted(test["metrics"])
    for name in expected:
        assert is_finite(test["metrics"][name]), (name, test["metrics"][name])


def run_export_and_predict(sweep_dir: Path, out: Path, task_name: str, texts: list[str], capsys) -> list[dict]:
    """Export the winner to ``out`` and return ``ftplat predict --json``'s objects for ``texts``."""
    from ftplat.checkpoints.export import run_export
    from ftplat.cli.predict import main as predict_main

    record = run_export(str(sweep_dir), str(out))
    assert record["task"]["type"] == task_name
    names = {p.name for p in out.iterdir()}
    assert {TASK_FILE, "README.md", "config.json", "model.safetensors", "tokenizer.json"} <= names, names
    assert not (out / "optimizer.pt").exists()
    assert json.loads((out / TASK_FILE).read_text())["type"] == task_name
    assert f"(task `{task_name}`)" in (out / "README.md").read_text()  # the model card names the task
    capsys.readouterr()
    assert predict_main([str(out), *texts, "--json"]) == 0
    # Ray forwards its workers' output to this process's stdout: keep predict's JSON lines.
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert len(lines) == len(texts), lines
    return [json.loads(line) for line in lines]


def read_training_args(checkpoint: str):
    """The TrainingArguments a worker trained with (HF saves them in every checkpoint)."""
    import torch

    return torch.load(Path(checkpoint) / "training_args.bin", weights_only=False)


# --- text-classification: sentence pairs, 3 named classes, a validation split ----------------
@pytest.fixture(scope="module")
def pair_sweep(ray_cluster, tiny_model_dir, tmp_path_factory):
    data_dir = write_pair_jsonl(tmp_path_factory.mktemp("pair-data"))
    return run_task_sweep(
        tmp_path_factory, tiny_model_dir, data_dir, "pair",
        "task.type=text-classification",
        "data.text_column=premise",
        "data.text_pair_column=hypothesis",
        "model.id2label={0: negative, 1: neutral, 2: positive}",
        "training.hf_args={gradient_checkpointing: true, label_smoothing_factor: 0.1}",
        # drivers that reserve memory only (Tune refuses a trial reserving nothing)
        "resources.trial_driver_cpus=0",
    )


def test_text_classification_pairs_select_on_the_validation_split(pair_sweep):
    job, summary, sweep_dir = pair_sweep
    assert job.model.num_labels == 3
    check_sweep(summary, sweep_dir, "text-classification")
    data = summary["data"]
    assert data["eval"]["split"] == "validation" and data["selection"] == "the data's validation split"
    assert (data["train"]["rows"], data["eval"]["rows"], data["test"]["rows"]) == (300, 90, 90)
    # labels were given as names: every class is counted under its id
    counts = {int(k): v for k, v in data["train"]["label_counts"].items()}
    assert set(counts) == {0, 1, 2} and sum(counts.values()) == 300
    assert set(summary["test"]["metrics"]) >= {"test_accuracy", "test_f1", "test_loss"}
    # the cue words decide the class: the winner learned them (3 classes: chance is 1/3)
    assert summary["test"]["metrics"]["test_accuracy"] > 0.6
    # the hf_args reached the workers' TrainingArguments
    args = read_training_args(summary["winner"]["best_checkpoint"]["path"])
    assert args.gradient_checkpointing is True and args.label_smoothing_factor == pytest.approx(0.1)
    # each trial reserved its worker's CPU and no CPU for its driver
    assert {t["cost"]["cpus"] for t in summary["trials"]} == {1.0}


def test_text_classification_pair_export_predicts_a_named_label(pair_sweep, tmp_path, capsys):
    _, _, sweep_dir = pair_sweep
    out = tmp_path / "export"
    predictions = run_export_and_predict(sweep_dir, out, "text-classification",
                                         ["the plot was great fun\tthis movie was brilliant",
                                          "the story was awful\tand the cast was boring"], capsys)
    config = json.loads((out / "config.json").read_text())
    assert {int(k): v for k, v in config["id2label"].items()} == PAIR_ID2LABEL
    first = predictions[0]
    assert (first["text"], first["text_pair"]) == ("the plot was great fun", "this movie was brilliant")
    for p in predictions:
        assert set(p) == {"text", "text_pair", "label", "score"}
        assert p["label"] in PAIR_ID2LABEL.values() and 0.0 <= p["score"] <= 1.0
    # the names came through training and export in model.id2label's order: each is the name of
    # the class the exported weights score highest (what the tiny model learned is checked by
    # the test accuracy above, not by two sentences)
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model, tokenizer = AutoModelForSequenceClassification.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    with torch.no_grad():
        logits = model(**tokenizer([p["text"] for p in predictions], [p["text_pair"] for p in predictions],
                                   padding=True, return_tensors="pt")).logits
    assert [p["label"] for p in predictions] == [PAIR_ID2LABEL[int(i)] for i in logits.argmax(-1)]


def test_checkpoints_gc_on_a_task_sweep(pair_sweep, capsys):
    from ftplat.cli.checkpoints import main as checkpoints_main

    _, summary, sweep_dir = pair_sweep
    before = sorted(p.relative_to(sweep_dir) for p in sweep_dir.glob("train-*/checkpoint-*"))
    assert checkpoints_main(["gc", str(sweep_dir), "--dry-run"]) == 0
    assert "dry run: nothing deleted" in capsys.readouterr().out
    assert sorted(p.relative_to(sweep_dir) for p in sweep_dir.glob("train-*/checkpoint-*")) == before
    assert checkpoints_main(["gc", str(sweep_dir)]) == 0
    assert "applied" in capsys.readouterr().out
    assert Path(summary["winner"]["best_checkpoint"]["path"]).is_dir()  # never deleted


# --- regression: CSV, train + test only (hold-out selection), tracked to MLflow --------------
@pytest.fixture(scope="module")
def regression_sweep(ray_cluster, tiny_model_dir, tmp_path_factory):
    data_dir = write_regression_csv(tmp_path_factory.mktemp("regression-data"))
    mlflow_dir = tmp_path_factory.mktemp("regression-mlflow")
    job, summary, sweep_dir = run_task_sweep(
        tmp_path_factory, tiny_model_dir, data_dir, "regression",
        "task.type=regression",
        "data.label_column=score",
        "tracking.enabled=true",
        f"tracking.tracking_uri=sqlite:///{mlflow_dir}/mlflow.db",
        "tracking.experiment_name=ftplat-tasks",
        "tracking.registered_model_name=null",
    )
    return job, summary, sweep_dir, data_dir, f"sqlite:///{mlflow_dir}/mlflow.db"


def test_regression_selects_on_a_hold_out_of_train(regression_sweep):
    job, summary, sweep_dir, data_dir, _ = regression_sweep
    assert job.model.num_labels == 1
    check_sweep(summary, sweep_dir, "regression")
    assert summary["objective"] == {"metric": "eval_mse", "mode": "min"} and summary["greater_is_better"] is False
    for trial in summary["trials"]:
        assert all("eval_pearson" in r and "eval_spearman" in r and "eval_mae" in r for r in trial["history"])
    data = summary["data"]
    assert data["eval"]["split"] == "train (held out)" and "held out" in data["selection"]
    train_rows = sum(1 for _ in open(data_dir / "train.csv")) - 1  # minus the header
    assert data["train"]["rows"] + data["eval"]["rows"] == train_rows == 320
    assert data["eval"]["rows"] == 32  # validation.holdout 0.1
    assert data["test"]["split"] == "test" and data["test"]["rows"] == 80
    assert set(summary["test"]["metrics"]) >= {"test_mse", "test_mae", "test_pearson", "test_spearman"}
    assert summary["test"]["metrics"]["test_pearson"] > 0.3  # the cue words drive the target


def test_regression_mlflow_parent_run_has_the_winner_test_metrics(regression_sweep):
    from mlflow import MlflowClient

    _, summary, _, _, tracking_uri = regression_sweep
    assert summary["tracking_error"] is None
    client = MlflowClient(tracking_uri)
    parent = client.get_run(summary["mlflow"]["parent_run_id"])
    assert parent.info.status == "FINISHED"
    metrics = parent.data.metrics
    test_mse = summary["test"]["metrics"]["test_mse"]
    assert metrics["winner.test_mse"] == pytest.approx(test_mse, rel=1e-6)
    assert parent.data.tags.get("ftplat.selection") == "train (held out)"


def test_regression_export_predicts_a_value(regression_sweep, tmp_path, capsys):
    _, _, sweep_dir, _, _ = regression_sweep
    out = tmp_path / "export"
    predictions = run_export_and_predict(sweep_dir, out, "regression",
                                         ["great fun and brilliant", "awful boring mess"], capsys)
    for p in predictions:
        assert set(p) == {"text", "value"} and is_finite(p["value"])


# --- multi-label-classification: one 0/1 column per label, parquet ----------------------------
@pytest.fixture(scope="module")
def multi_label_sweep(ray_cluster, tiny_model_dir, tmp_path_factory):
    data_dir = write_multi_label_parquet(tmp_path_factory.mktemp("multi-label-data"))
    return run_task_sweep(
        tmp_path_factory, tiny_model_dir, data_dir, "multi-label",
        "task.type=multi-label-classification",
        f"data.label_columns=[{', '.join(MULTI_LABEL_COLUMNS)}]",
        # the guides' spelling; transformers 5 has it as train_sampling_strategy: group_by_length
        "training.hf_args={group_by_length: true, eval_accumulation_steps: 2}",
    )


def test_multi_label_from_label_columns(multi_label_sweep):
    job, summary, sweep_dir = multi_label_sweep
    assert job.model.num_labels == 3 and job.model.id2label == dict(enumerate(MULTI_LABEL_COLUMNS))
    check_sweep(summary, sweep_dir, "multi-label-classification")
    assert summary["objective"]["metric"] == "eval_micro_f1"
    data = summary["data"]
    assert data["eval"]["split"] == "train (held out)"
    assert set(data["train"]["positives"]) == set(MULTI_LABEL_COLUMNS)
    assert set(summary["test"]["metrics"]) >= {"test_micro_f1", "test_macro_f1", "test_subset_accuracy"}
    args = read_training_args(summary["winner"]["best_checkpoint"]["path"])
    assert str(getattr(args.train_sampling_strategy, "value", args.train_sampling_strategy)) == "group_by_length"
    assert args.eval_accumulation_steps == 2


def test_multi_label_export_predicts_labels_and_scores(multi_label_sweep, tmp_path, capsys):
    _, _, sweep_dir = multi_label_sweep
    predictions = run_export_and_predict(sweep_dir, tmp_path / "export", "multi-label-classification",
                                         ["the actor was brilliant", "a boring film"], capsys)
    for p in predictions:
        assert set(p) == {"text", "labels", "scores"}
        assert set(p["scores"]) == set(MULTI_LABEL_COLUMNS)
        assert all(0.0 <= s <= 1.0 for s in p["scores"].values())
        assert set(p["labels"]) <= set(MULTI_LABEL_COLUMNS)
        assert all(p["scores"][name] >= 0.5 for name in p["labels"])  # task.threshold's default


# --- token-classification: CoNLL-style words and tag ids, parquet -----------------------------
@pytest.fixture(scope="module")
def ner_sweep(ray_cluster, tiny_model_dir, tmp_path_factory):
    data_dir = write_ner_parquet(tmp_path_factory.mktemp("ner-data"))
    id2label = ", ".join(f"{k}: {v}" for k, v in NER_ID2LABEL.items())
    return run_task_sweep(
        tmp_path_factory, tiny_model_dir, data_dir, "ner",
        "task.type=token-classification",
        "data.tokens_column=tokens",
        "data.label_column=ner_tags",
        f"model.id2label={{{id2label}}}",
    )


def test_token_classification_from_tag_ids(ner_sweep):
    job, summary, sweep_dir = ner_sweep
    assert job.model.num_labels == 5
    check_sweep(summary, sweep_dir, "token-classification")
    assert summary["objective"] == {"metric": "eval_f1", "mode": "max"}
    data = summary["data"]
    assert data["eval"]["split"] == "train (held out)"
    assert set(data["train"]["label_counts"]) == set(NER_ID2LABEL.values())
    assert data["train"]["entity_count"] > 0
    assert set(summary["test"]["metrics"]) >= {"test_precision", "test_recall", "test_f1", "test_accuracy"}
    assert summary["test"]["metrics"]["test_f1"] > 0.3  # entities follow their cue words


def test_token_classification_export_predicts_entities(ner_sweep, tmp_path, capsys):
    _, _, sweep_dir = ner_sweep
    predictions = run_export_and_predict(sweep_dir, tmp_path / "export", "token-classification",
                                         ["the film was fun with anna smith in paris",
                                          "the cast met paul in new delhi"], capsys)
    for p in predictions:
        assert set(p) == {"text", "entities"} and isinstance(p["entities"], list)
        for entity in p["entities"]:
            assert set(entity) == {"entity", "word", "start", "end", "score"}
            assert entity["entity"] in {"PER", "LOC"}
            assert isinstance(entity["word"], str) and 0 <= entity["start"] < entity["end"] <= len(p["text"])
            assert 0.0 <= entity["score"] <= 1.0
