"""Real 2-trial sweeps of the language-model tasks on a local Ray cluster (tiny models and
offline data made here), each winner exported and served by ``ftplat predict --json``:

- masked-lm: domain-adaptive pretraining of the tiny BERT on review texts (blocks of
  data.max_length tokens), searching the learning rate and ``task.mlm_probability``; the export
  fills in a mask token, then seeds a text-classification sweep (``model.name_or_path``: the
  export), the platform's "pretrain, then classify" path.
- causal-lm: a LoRA adapter on the tiny Llama (its rank searched) learns prompt/completion pairs
  (the color of a thing), packed into blocks with the prompts masked out of the loss; the
  merged export and the adapter-only export generate the same continuations.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ftplat.config.loading import load_sweep_configs
from ftplat.tasks import TASK_FILE, TASKS
from ftplat.tune.sweep import run_sweep
from tiny_assets import build_color_rows, build_sentiment_rows, write_sentiment_dataset, write_tiny_llama

pytestmark = pytest.mark.integration

EPOCHS = 2
LR_RANGE = (3.0e-4, 2.0e-2)
LORA_RANKS = [2, 8]


def build_overrides(model_dir, data_dir, storage, name, *extra) -> list[str]:
    """A small 2-trial sweep searching the learning rate (and what ``extra`` adds); no MLflow."""
    return [
        f"model.name_or_path={model_dir}",
        f"data.source={data_dir}",
        f"storage.storage_path={storage}",
        f"storage.sweep_name={name}",
        "data.max_length=32",
        f"training.num_train_epochs={float(EPOCHS)}",
        "training.per_device_train_batch_size=8",
        "training.per_device_eval_batch_size=32",
        "training.logging_steps=5",
        "resources.max_concurrent_trials=2",
        "tracking.enabled=false",
        "search.num_samples=2",
        "search.seed=7",
        # The whole space: the tests below add to it (a lone override would merge into the default's three).
        f"search.parameters={{training.learning_rate: {{type: loguniform, low: {LR_RANGE[0]}, high: {LR_RANGE[1]}}}}}",
        *extra,
    ]


def run_lm_sweep(tmp_path_factory, model_dir, data_dir, name, *extra):
    storage = tmp_path_factory.mktemp(f"storage-{name}")
    job, space = load_sweep_configs(None, None, build_overrides(model_dir, data_dir, storage, name, *extra))
    summary = run_sweep(job, space).to_dict()
    return job, space, summary, Path(storage) / name


def is_finite(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_sweep(summary, sweep_dir: Path, task_name: str) -> None:
    """2 finished trials, a winner on the task's default metric (eval_loss for the language
    models), every metric in every evaluation, and the winner's test score."""
    task = TASKS[task_name]
    metric = f"eval_{task.default_metric}"
    mode = task.metrics[task.default_metric]
    assert json.loads((sweep_dir / "summary.json").read_text())["winner"] == summary["winner"]
    assert summary["task"] == task_name
    assert summary["num_trials"] == 2 and summary["status_counts"] == {"TERMINATED": 2}
    assert summary["objective"] == {"metric": metric, "mode": mode} and summary["metric_for_best_model"] == metric
    winner = summary["winner"]
    assert winner is not None and is_finite(winner["score"])
    for trial in summary["trials"]:
        assert trial["error"] is None and trial["best_checkpoint"]["exists"], trial["trial_id"]
        assert LR_RANGE[0] <= trial["hyperparameters"]["training.learning_rate"] <= LR_RANGE[1]
        assert [r["epoch"] for r in trial["history"]] == [float(e) for e in range(1, EPOCHS + 1)]
        for row in trial["history"]:
            assert {f"eval_{m}" for m in task.metrics} <= set(row), trial["trial_id"]
            assert all(is_finite(row[f"eval_{m}"]) for m in task.metrics), row
    test = summary["test"]
    assert "skipped" not in test and "error" not in test, test
    assert test["trial_id"] == winner["trial_id"] and test["rows"] == summary["data"]["test"]["rows"]
    for name in (f"test_{m}" for m in task.metrics):
        assert is_finite(test["metrics"][name]), (name, test["metrics"])


def run_export_and_predict(sweep_dir: Path, out: Path, task_name: str, args: list[str], capsys) -> list[dict]:
    """Export the winner to ``out``; ``ftplat predict --json``'s objects for ``args``."""
    from ftplat.checkpoints.export import run_export
    from ftplat.cli.predict import main as predict_main

    assert run_export(str(sweep_dir), str(out))["task"]["type"] == task_name
    names = {p.name for p in out.iterdir()}
    assert {TASK_FILE, "README.md", "config.json", "model.safetensors", "tokenizer.json"} <= names, names
    assert f"(task `{task_name}`)" in (out / "README.md").read_text()
    capsys.readouterr()
    assert predict_main([str(out), "--json", *args]) == 0
    # Ray forwards its workers' output to this process's stdout: keep predict's JSON lines.
    return [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]


# --- masked-lm: pretrain the tiny BERT on reviews, then classify with the export -------------
@pytest.fixture(scope="module")
def mlm_sweep(ray_cluster, tiny_model_dir, tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("mlm-data")
    for split, n, seed in (("train", 72, 51), ("test", 24, 52)):
        pq.write_table(pa.table({"text": build_sentiment_rows(n, seed=seed)["text"]}), data_dir / f"{split}.parquet")
    return run_lm_sweep(tmp_path_factory, tiny_model_dir, data_dir, "mlm", "task.type=masked-lm",
                        "search.parameters.task.mlm_probability={type: uniform, low: 0.1, high: 0.3}")


def test_masked_lm_sweep_searches_the_masking_rate(mlm_sweep):
    job, space, summary, sweep_dir = mlm_sweep
    assert list(space.parameters) == ["training.learning_rate", "task.mlm_probability"]
    assert job.model.num_labels is None and job.training.greater_is_better is False
    check_sweep(summary, sweep_dir, "masked-lm")
    probabilities = [t["hyperparameters"]["task.mlm_probability"] for t in summary["trials"]]
    assert len(set(probabilities)) == 2 and all(0.1 <= p <= 0.3 for p in probabilities)
    for trial in summary["trials"]:
        for row in trial["history"]:
            assert row["eval_perplexity"] == pytest.approx(math.exp(row["eval_loss"]), rel=1e-3)
            assert 0.0 <= row["eval_accuracy"] <= 1.0
    data = summary["data"]
    # rows: the texts read (a 10% hold-out selects); sequences: the 32-token blocks cut from them
    assert (data["train"]["rows"], data["eval"]["rows"], data["test"]["rows"]) == (65, 7, 24)
    assert 0 < data["train"]["sequences"] < data["train"]["rows"]


def test_masked_lm_export_fills_in_the_mask(mlm_sweep, tmp_path, capsys):
    _, _, _, sweep_dir = mlm_sweep
    out = tmp_path / "export"
    predictions = run_export_and_predict(sweep_dir, out, "masked-lm", ["the movie was [MASK] fun", "a [MASK] film"],
                                         capsys)
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    assert [p["text"] for p in predictions] == ["the movie was [MASK] fun", "a [MASK] film"]
    for p in predictions:
        assert set(p) == {"text", "predictions"} and len(p["predictions"]) == 5
        assert all(isinstance(c["token"], str) and 0.0 <= c["score"] <= 1.0 for c in p["predictions"])


def test_the_masked_lm_export_seeds_a_classification_sweep(mlm_sweep, tmp_path_factory):
    from ftplat.checkpoints.export import run_export

    _, _, _, sweep_dir = mlm_sweep
    seed = tmp_path_factory.mktemp("mlm-seed") / "export"
    run_export(str(sweep_dir), str(seed))
    data_dir = write_sentiment_dataset(tmp_path_factory.mktemp("seeded-data"), n_train=96, n_eval=32)
    job, _, summary, cls_dir = run_lm_sweep(tmp_path_factory, seed, data_dir, "seeded", "task.type=text-classification")
    assert job.model.name_or_path == str(seed) and job.model.num_labels == 2
    check_sweep(summary, cls_dir, "text-classification")
    config = json.loads((Path(summary["winner"]["best_checkpoint"]["path"]) / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"] and len(config["id2label"]) == 2


# --- causal-lm: prompt/completion pairs, packed, on the tiny Llama ---------------------------
@pytest.fixture(scope="module")
def clm_sweep(ray_cluster, tmp_path_factory):
    model_dir = write_tiny_llama(tmp_path_factory.mktemp("tiny-llama") / "llama", pad_token=False)
    data_dir = tmp_path_factory.mktemp("clm-data")
    for split, n, seed in (("train", 64, 61), ("test", 16, 62)):
        pq.write_table(pa.table(build_color_rows(n, seed)), data_dir / f"{split}.parquet")
    return run_lm_sweep(tmp_path_factory, model_dir, data_dir, "clm", "task.type=causal-lm", "task.packing=true",
                        "data.prompt_column=prompt", "data.completion_column=completion",
                        "model.peft={method: lora, lora_alpha: 16.0}",
                        f"search.parameters.model.peft.r={{type: choice, values: {LORA_RANKS}}}",
                        f"search.points_to_evaluate=[{{training.learning_rate: 5.0e-3, model.peft.r: {LORA_RANKS[0]}}}, "
                        f"{{training.learning_rate: 5.0e-3, model.peft.r: {LORA_RANKS[1]}}}]")


def test_causal_lm_sweep_on_packed_prompt_completion_pairs(clm_sweep):
    job, _, summary, sweep_dir = clm_sweep
    assert job.task.packing is True and job.data.prompt_column == "prompt"
    check_sweep(summary, sweep_dir, "causal-lm")
    fractions = {t["hyperparameters"]["model.peft.r"]: t["train_result"]["trainable_fraction"] for t in summary["trials"]}
    assert sorted(fractions) == LORA_RANKS and 0 < fractions[LORA_RANKS[0]] < fractions[LORA_RANKS[1]] < 0.5
    for trial in summary["trials"]:
        ckpt = Path(trial["best_checkpoint"]["path"])
        assert (ckpt / "adapter_model.safetensors").is_file() and not (ckpt / "model.safetensors").exists()
    data = summary["data"]
    assert (data["train"]["rows"], data["eval"]["rows"], data["test"]["rows"]) == (58, 6, 16)
    # about 16 tokens per example, packed into 32-token blocks
    assert 0 < data["train"]["sequences"] < data["train"]["rows"]


def test_causal_lm_export_generates(clm_sweep, tmp_path, capsys):
    _, _, _, sweep_dir = clm_sweep
    out = tmp_path / "export"
    prompts = [f"question : what is the color of the {thing} ? answer :" for thing in ("sky", "snow")]
    predictions = run_export_and_predict(sweep_dir, out, "causal-lm", ["--max-new-tokens", "5", *prompts], capsys)
    assert [p["text"] for p in predictions] == prompts
    for p in predictions:
        assert set(p) == {"text", "generated_text"} and isinstance(p["generated_text"], str)
        assert len(p["generated_text"].split()) <= 5  # a word-level vocabulary: a word per token
    # the worker's tokenizer (padding with EOS) is the one exported
    assert json.loads((out / "tokenizer_config.json").read_text())["pad_token"] == "</s>"
    # the adapter alone, on its base model, generates what the merged export generates (greedy)
    from ftplat.checkpoints.export import run_export
    from ftplat.cli.predict import main as predict_main

    adapter = tmp_path / "adapter"
    assert run_export(str(sweep_dir), str(adapter), adapter_only=True)["weights"]["weights"] == "adapter"
    assert (adapter / "adapter_model.safetensors").is_file() and not (adapter / "model.safetensors").exists()
    capsys.readouterr()
    assert predict_main([str(adapter), "--json", "--max-new-tokens", "5", *prompts]) == 0
    from_adapter = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [p["generated_text"] for p in from_adapter] == [p["generated_text"] for p in predictions]
