"""Exporting and registering a winner of any task: ``ftplat_task.json`` beside the model files,
a model card that the task describes (its data, the split it was selected on, its test score),
and the MLflow model and parent run that carry the task and the test score."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from ftplat.checkpoints.card import build_model_card
from ftplat.checkpoints.export import run_export
from ftplat.cli.main import main as ftplat_main
from ftplat.records import SweepSummary
from ftplat.tasks import TASK_FILE, build_task

WORDS = "the a movie film great awful man is playing guitar song mary sings john lives in paris".split()
TOPICS = {0: "music", 1: "film", 2: "travel"}


def write_tiny_checkpoint(root: Path, kind: str) -> Path:
    """A 1-layer BERT of ``kind`` saved like a trial's checkpoint (with trainer files export skips)."""
    from transformers import BertConfig, BertForMaskedLM, BertForSequenceClassification, BertTokenizerFast

    root.mkdir(parents=True)
    (root / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *WORDS]) + "\n")
    BertTokenizerFast(str(root / "vocab.txt")).save_pretrained(root)
    head = {"masked-lm": {}, "regression": dict(num_labels=1, problem_type="regression"),
            "multi-label-classification": dict(num_labels=3, id2label=TOPICS, problem_type="multi_label_classification",
                                               label2id={v: k for k, v in TOPICS.items()})}[kind]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=5 + len(WORDS), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=64, initializer_range=0.5, **head)
    (BertForMaskedLM if kind == "masked-lm" else BertForSequenceClassification)(config).save_pretrained(root)
    (root / "optimizer.pt").write_bytes(b"optimizer state")
    (root / "trainer_state.json").write_text("{}")
    return root


def build_summary_dict(sweep_path: Path, *, metric="eval_mse", mode="min", task=None, data=None, test=None) -> dict:
    ckpt = {"path": str(sweep_path / "train-t1" / "checkpoint-20"), "exists": True, "step": 20, "epoch": 2.0,
            metric: 0.25}
    summary = {
        "sweep_name": "sts", "sweep_path": str(sweep_path), "objective": {"metric": metric, "mode": mode},
        "scope": "last", "metric_for_best_model": metric, "greater_is_better": mode == "max",
        "trials": [{"trial_id": "t1", "status": "TERMINATED", "hyperparameters": {"training.learning_rate": 3e-4},
                    "scores": {"last": 0.25, "best": 0.25, "avg": 0.3}, "best_checkpoint": ckpt,
                    "history": [{"training_iteration": 1, "step": 10, "epoch": 1.0, metric: 0.35, "eval_loss": 0.35},
                                {"training_iteration": 2, "step": 20, "epoch": 2.0, metric: 0.25, "eval_loss": 0.25}]}],
        "winner": {"trial_id": "t1", "score": 0.25, "hyperparameters": {"training.learning_rate": 3e-4},
                   "best_checkpoint": ckpt},
        "versions": {"transformers": "5.23"},
    }
    for key, value in {"task": task, "data": data, "test": test}.items():
        if value is not None:
            summary[key] = value
    return summary


def build_sweep_config(task: dict | None, **data) -> dict:
    job = {"model": {"name_or_path": "tiny-bert"},
           "data": {"source": "./sts", "text_column": "text", "label_column": "label", "max_length": 64, **data}}
    if task is not None:
        job["task"] = task
    return {"job": job, "search_space": {}}


REGRESSION_DATA = {
    "selection": "the data's validation split",
    "train": {"split": "train", "rows": 90, "target_mean": 2.5},
    "eval": {"split": "validation", "rows": 12, "target_mean": 2.4},
    "test": {"split": "test", "rows": 40, "target_mean": 2.6},
}


def card_of(summary: dict, sweep_config: dict | None) -> str:
    s = SweepSummary.from_dict(summary)
    return build_model_card(s, s.winner_trial(), sweep_config)


def test_the_card_is_the_tasks_with_selection_and_test(tmp_path):
    test = {"split": "test", "rows": 40, "trial_id": "t1", "checkpoint": "x",
            "metrics": {"test_mse": 0.3125, "test_pearson": 0.75}}
    config = build_sweep_config({"type": "regression", "metric_fn": None, "metric_modes": {}},
                                text_column="sentence1", text_pair_column="sentence2", label_column="score")
    card = card_of(build_summary_dict(tmp_path, task="regression", data=REGRESSION_DATA, test=test), config)
    task = build_task({"type": "regression", "max_length": 64})  # the job's data.max_length
    intro = card.split("\n\n")[1]
    assert intro.startswith(f"{task.description} (task `regression`)") and "Text classifier" not in card
    section = card.split("## Selection and test\n\n")[1].split("\n\n")[0].splitlines()
    assert section[0] == ("- Selected on split `validation` (12 rows; the data's validation split): "
                          "eval_mse[last] = 0.25; best checkpoint eval_mse = 0.25")
    assert section[1] == ("- Test on split `test` (40 rows, scored once after the sweep): test_mse = 0.3125, "
                          "test_pearson = 0.75")
    data = card.split("## Data\n\n")[1].split("\n\n")[0]
    assert "- columns: text `sentence1`, text pair `sentence2`, label `score`" in data
    assert "- eval (selection): split `validation`, 12 rows, target mean 2.4" in data
    assert "- test: split `test`, 40 rows, target mean 2.6" in data
    # A pair model's example passes pairs: a list of two texts would be two single texts
    assert "\n".join(task.build_usage_example(text_pair=True)) in card
    assert 'pipe([{"text": "A man is playing a guitar.", "text_pair": "A man plays music."}], truncation=True' in card


@pytest.mark.parametrize("test, expected", [
    ({"skipped": "data.test_split is null"}, "- Test: none: data.test_split is null"),
    ({"error": "RuntimeError: out of memory"}, "- Test: failed: RuntimeError: out of memory"),
    (None, "- Test: not recorded"),
])
def test_the_card_says_why_there_is_no_test_score(tmp_path, test, expected):
    config = build_sweep_config({"type": "regression"})
    card = card_of(build_summary_dict(tmp_path, data=REGRESSION_DATA, test=test), config)
    assert expected in card and "test_mse" not in card


def test_a_card_of_an_older_summary_does_not_fail(tmp_path):
    """No task, data or test in the summary and no sweep_config.json: the IMDB text classifier."""
    summary = build_summary_dict(tmp_path, metric="eval_accuracy", mode="max")
    card = card_of(summary, None)
    assert card.split("\n\n")[1].startswith("Text classifier (task `text-classification`)")
    assert "- Selected on the eval split (not recorded in this summary): eval_accuracy[last] = 0.25" in card
    assert "- Test: not recorded" in card
    old_stats = {"train": {"split": "train", "rows": 100}, "eval": {"split": "test", "rows": 50}}
    assert "- eval (selection): split `test`, 50 rows\n" in card_of({**summary, "data": old_stats}, None)


def test_multi_label_card_names_its_label_columns_and_stats(tmp_path):
    data = {"selection": "held out of the train split",
            "train": {"split": "train", "rows": 90, "positives": {"a": 30, "b": 12}, "labels_per_row": 0.47},
            "eval": {"split": "train (held out)", "rows": 10, "positives": {"a": 3, "b": 1}, "labels_per_row": 0.4}}
    config = build_sweep_config({"type": "multi-label-classification", "threshold": 0.7}, label_columns=["a", "b"])
    card = card_of(build_summary_dict(tmp_path, metric="eval_micro_f1", mode="max", data=data), config)
    assert card.startswith("# sts: winner trial t1\n\nMulti-label text classifier")
    assert "- columns: text `text`, labels `a`, `b` (one 0/1 column each)" in card
    assert "label `label`" not in card
    assert "- train: split `train`, 90 rows, positives {'a': 30, 'b': 12}, labels per row 0.47" in card
    assert "Selected on split `train (held out)` (10 rows; held out of the train split)" in card
    assert "- threshold: a label is predicted from score 0.7" in card


def write_sweep(root: Path, kind: str, *, sweep_config: dict | None, **summary_fields) -> Path:
    sweep = root / "sweep"
    write_tiny_checkpoint(sweep / "train-t1" / "checkpoint-20", kind)
    summary = build_summary_dict(sweep, **summary_fields)
    (sweep / "summary.json").write_text(json.dumps(summary))
    if sweep_config is not None:
        (sweep / "sweep_config.json").write_text(json.dumps(sweep_config))
    return sweep


def test_export_writes_the_task_and_predict_serves_it(tmp_path, capsys):
    config = build_sweep_config({"type": "multi-label-classification", "threshold": 0.3,
                                 "metric_fn": "my_metrics:compute", "metric_modes": {"hamming": "min"}})
    test = {"split": "test", "rows": 40, "trial_id": "t1", "checkpoint": "x", "metrics": {"test_micro_f1": 0.5}}
    sweep = write_sweep(tmp_path, "multi-label-classification", sweep_config=config, metric="eval_micro_f1",
                        mode="max", task="multi-label-classification", test=test)
    out = tmp_path / "export"
    assert ftplat_main(["export", str(sweep), str(out)]) == 0
    printed = capsys.readouterr().out
    assert "test_micro_f1 = 0.5" in printed and "as a multi-label-classification model" in printed
    assert json.loads((out / TASK_FILE).read_text()) == {"type": "multi-label-classification", "threshold": 0.3,
                                                         "max_length": 64, "text_pair": False}
    assert not (out / "optimizer.pt").exists() and not (out / "trainer_state.json").exists()
    assert "Multi-label text classifier" in (out / "README.md").read_text()
    record = json.loads((out / "ftplat_export.json").read_text())
    assert record["task"]["type"] == "multi-label-classification" and record["test"] == test

    assert ftplat_main(["predict", str(out), "--json", "great movie", "mary sings a song", "john lives in paris"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    scores = [s for r in rows for s in r["scores"].values()]
    assert any(0.3 <= s < 0.5 for s in scores), "the check below needs a score only the job's threshold predicts"
    assert all(sorted(r["labels"]) == sorted(k for k, v in r["scores"].items() if v >= 0.3) for r in rows)


@pytest.mark.parametrize("sweep_config, summary_task, expected", [
    (None, None, "text-classification"),
    (None, "regression", "regression"),
    (build_sweep_config(None), None, "text-classification"),
    (build_sweep_config({"type": "regression"}), "text-classification", "regression"),
])
def test_the_exported_task_defaults(tmp_path, sweep_config, summary_task, expected):
    sweep = write_sweep(tmp_path, "regression", sweep_config=sweep_config, task=summary_task)
    run_export(str(sweep), str(tmp_path / "export"))
    # the job's data.max_length, and that the model reads single texts
    recorded = {"max_length": 64, "text_pair": False} if sweep_config is not None else {}
    assert json.loads((tmp_path / "export" / TASK_FILE).read_text()) == {"type": expected, **recorded}


def test_registered_winner_serves_its_task_and_the_parent_has_the_test_score(tmp_path):
    import mlflow

    from ftplat.config.schema import TrackingConfig
    from ftplat.tracking.report import run_finish_sweep, scoped_tracking_uri
    from ftplat.tracking.runs import build_client, run_start_parent

    test = {"split": "test", "rows": 40, "trial_id": "t1", "checkpoint": "x",
            "metrics": {"test_micro_f1": 0.625, "test_macro_f1": None}}
    config = build_sweep_config({"type": "multi-label-classification", "threshold": 0.3})
    sweep = write_sweep(tmp_path, "multi-label-classification", sweep_config=config, metric="eval_micro_f1",
                        mode="max", task="multi-label-classification", data=REGRESSION_DATA, test=test)
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment_name="tasks")
    tracking = run_start_parent(cfg, sweep_name="sts", sweep_path=str(sweep), params={"a": 1}, config_json={},
                                dashboard_url=None)
    summary = SweepSummary.from_dict(json.loads((sweep / "summary.json").read_text()))
    assert run_finish_sweep(tracking, summary, registered_model_name="topics") is None

    client = build_client(tracking["tracking_uri"])
    parent = client.get_run(tracking["parent_run_id"])
    assert parent.data.metrics["winner.test_micro_f1"] == 0.625 and "winner.test_macro_f1" not in parent.data.metrics
    assert parent.data.tags["ftplat.selection"] == "validation"
    assert client.get_model_version("topics", "1").tags["ftplat.task"] == "multi-label-classification"
    with scoped_tracking_uri(tracking["tracking_uri"]):
        model = mlflow.pyfunc.load_model("models:/topics/1")
    rows = model.predict(["great movie", "mary sings a song", "john lives in paris"])
    assert [set(r) for r in rows] == [{"labels", "scores"}] * 3
    scores = [s for r in rows for s in r["scores"].values()]
    assert any(0.3 <= s < 0.5 for s in scores), "the check below needs a score only the job's threshold predicts"
    # the registered folder's ftplat_task.json carries the job's threshold (config.json knows none)
    assert all(sorted(r["labels"]) == sorted(k for k, v in r["scores"].items() if v >= 0.3) for r in rows)


def test_export_and_predict_take_paths_relative_to_the_current_directory(tmp_path, monkeypatch, capsys):
    """The main command stores under ./ftplat_results; `ftplat export ftplat_results/<sweep> out`
    must work as typed (pyarrow alone refuses a relative path: "URI has empty scheme")."""
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    monkeypatch.chdir(tmp_path)
    assert ftplat_main(["export", "sweep", "out"]) == 0
    assert (tmp_path / "out" / TASK_FILE).is_file() and (tmp_path / "out" / "README.md").is_file()
    capsys.readouterr()
    assert ftplat_main(["predict", "out", "--json", "a good film"]) == 0
    assert set(json.loads(capsys.readouterr().out.splitlines()[-1])) == {"text", "value"}
    assert ftplat_main(["checkpoints", "gc", "sweep", "--dry-run"]) == 0


def test_export_predict_and_gc_expand_a_quoted_home(tmp_path, monkeypatch, capsys):
    """A quoted ``~/...`` reaches the command unexpanded by the shell."""
    write_sweep(tmp_path, "regression", sweep_config=None, task="regression")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path / "sweep")  # a literal ./~ folder must not be what is read or written
    assert ftplat_main(["export", "~/sweep", "~/out"]) == 0
    assert (tmp_path / "out" / TASK_FILE).is_file() and not (tmp_path / "sweep" / "~").exists()
    capsys.readouterr()
    assert ftplat_main(["predict", "~/out", "--json", "a good film"]) == 0
    assert set(json.loads(capsys.readouterr().out.splitlines()[-1])) == {"text", "value"}
    assert ftplat_main(["checkpoints", "gc", "~/sweep", "--dry-run"]) == 0
    assert "sweep" in capsys.readouterr().out


def test_a_masked_lm_winner_is_registered_with_an_example_holding_its_mask_token(tmp_path):
    """The registered model's example and signature come from predicting on the task's own
    example texts: a masked-lm model refuses a text without its mask token, so a fixed
    sentiment example made every masked-lm sweep with MLflow on end in exit 1, unregistered."""
    import mlflow

    from ftplat.config.schema import TrackingConfig
    from ftplat.tracking.report import run_finish_sweep, scoped_tracking_uri
    from ftplat.tracking.runs import build_client, run_start_parent

    sweep = write_sweep(tmp_path, "masked-lm", sweep_config=build_sweep_config({"type": "masked-lm"}),
                        metric="eval_loss", mode="min", task="masked-lm")
    cfg = TrackingConfig(tracking_uri=f"sqlite:///{tmp_path}/mlflow.db", experiment_name="mlm")
    tracking = run_start_parent(cfg, sweep_name="mlm", sweep_path=str(sweep), params={"a": 1}, config_json={},
                                dashboard_url=None)
    summary = SweepSummary.from_dict(json.loads((sweep / "summary.json").read_text()))
    assert run_finish_sweep(tracking, summary, registered_model_name="domain-mlm") is None
    assert build_client(tracking["tracking_uri"]).get_model_version("domain-mlm", "1").tags["ftplat.task"] == "masked-lm"
    with scoped_tracking_uri(tracking["tracking_uri"]):
        model = mlflow.pyfunc.load_model("models:/domain-mlm/1")
    [row] = model.predict(["the movie was [MASK]"])
    assert set(row) == {"predictions"} and row["predictions"]
