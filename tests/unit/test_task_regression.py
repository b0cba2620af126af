"""The regression task: config defaults and refusals, float labels, quantile strata, metrics
against independently computed numbers, a tiny BERT's loss, and the serving pipeline."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from tiny_assets import write_tiny_headless_bert

from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.tasks import build_task
from ftplat.tasks.base import Examples
from ftplat.tasks.regression import Regression, build_quantile_bins

WORDS = ["a", "man", "is", "playing", "guitar", "woman", "the", "dog", "runs", "cat", "sleeps", "."]


@pytest.fixture(scope="module")
def base_model_dir(tmp_path_factory):
    """A 1-layer BERT without a head and a WordPiece tokenizer of WORDS."""
    return write_tiny_headless_bert(tmp_path_factory.mktemp("tiny-bert-regression"), WORDS)


def job_of(**sections) -> JobConfig:
    return JobConfig.model_validate({"task": {"type": "regression"}, **sections})


def dataset(**columns):
    from datasets import Dataset

    return Dataset.from_dict(columns)


# --- configuration -------------------------------------------------------------------------
def test_defaults_resolve_to_one_output_and_mse():
    job = job_of()
    assert job.model.num_labels == 1 and job.model.id2label is None
    assert job.training.metric_for_best_model == "eval_mse" and job.training.greater_is_better is False
    assert isinstance(build_task(job.task), Regression)


def test_a_named_output_and_a_text_pair_are_accepted():
    job = job_of(model={"id2label": {0: "similarity"}}, data={"text_pair_column": "sentence2"})
    assert job.model.num_labels == 1 and job.model.id2label == {0: "similarity"}
    assert build_task(job.task).read_columns(job.data) == {
        "text_column": "text", "text_pair_column": "sentence2", "label_column": "label"}
    job = job_of(training={"metric_for_best_model": "spearman"})
    assert job.training.metric_for_best_model == "eval_spearman" and job.training.greater_is_better is True


@pytest.mark.parametrize("sections, message", [
    ({"model": {"num_labels": 2}}, r"model\.num_labels is 2.*num_labels: 1"),
    ({"model": {"id2label": {0: "a", 1: "b"}}}, r"model\.num_labels is 2"),
    ({"training": {"hf_args": {"label_smoothing_factor": 0.1}}}, r"training\.hf_args\.label_smoothing_factor.*remove"),
    ({"data": {"label_columns": ["a", "b"]}}, r"data\.label_columns.*data\.label_column"),
    ({"training": {"metric_for_best_model": "accuracy"}}, r"training\.metric_for_best_model.*eval_mse"),
])
def test_refusals_name_the_field(sections, message):
    with pytest.raises(ValueError, match=message):
        job_of(**sections)


def test_zero_label_smoothing_is_fine():
    assert job_of(training={"hf_args": {"label_smoothing_factor": 0.0}}).training.hf_args


# --- labels --------------------------------------------------------------------------------
def build(values, split="train"):
    job = job_of(data={"label_column": "score"})
    return build_task(job.task).build_labels(dataset(text=["x"] * len(values), score=values), job.data,
                                             job.model, split)


def test_floats_and_ints_become_float32():
    labels = build([0.5, 4.25, 3.0])
    assert labels.dtype == np.float32 and labels.shape == (3,)
    np.testing.assert_array_equal(labels, [0.5, 4.25, 3.0])
    ints = build([1, 5, 3])
    assert ints.dtype == np.float32 and ints.tolist() == [1.0, 5.0, 3.0]


@pytest.mark.parametrize("values, message", [
    ([1.0, None, 2.0], r"data\.label_column 'score' of split 'validation' has no value at row 1"),
    ([1.0, float("nan"), 2.0], r"data\.label_column 'score' of split 'validation' is nan at row 1"),
    ([1.0, 2.0, float("inf")], r"is inf at row 2"),
    (["1.5", "good"], r"holds '1\.5' \(str\), not a number.*row 0"),
    ([True, False], r"holds True \(bool\), not a number.*row 0"),
    ([[1.0, 2.0], [3.0]], r"holds \[1\.0, 2\.0\] \(list\), not a number.*row 0"),
    ([[1.0], [3.0]], r"holds a list per row"),
    # STS-B's test split: its scores hidden as -1 (mse and correlations were reported on them)
    ([-1.0, -1.0, -1.0], r"is -1\.0 in every row: a target that never varies gives no error or correlation to "
                         r"score; -1 marks a row without a label .*data\.test_split: validation, or null"),
    ([2.0, 2.0], r"is 2\.0 in every row.*point data\.label_column at the target"),
])
def test_bad_labels_name_the_column_split_and_row(values, message):
    with pytest.raises(UserError, match=message):
        build(values, split="validation")


def test_values_beyond_float32_are_refused():
    with pytest.raises(UserError, match=r"row 1, beyond float32"):
        build([1.0, 1e300])


# --- strata and stats ----------------------------------------------------------------------
def test_quantile_bins_split_a_continuous_target_into_tenths():
    labels = np.random.default_rng(0).normal(size=200).astype(np.float32)
    key = build_quantile_bins(labels)
    assert sorted(np.bincount(key)) == [20] * 10
    # bins follow the target's order: every value of a bin is below every value of the next
    assert all(labels[key == b].max() < labels[key == b + 1].min() for b in range(9))


def test_quantile_bins_handle_ties_and_few_rows():
    assert build_quantile_bins(np.full(50, 3.0)).tolist() == [0] * 50  # one value: one bin
    assert build_quantile_bins(np.arange(15.0)).tolist() == [0] * 15  # too few rows for two bins of 10
    # a star rating: five values, heavily tied; one bin per value, every bin of two rows or more
    stars = np.repeat([1.0, 2.0, 3.0, 4.0, 5.0], [40, 5, 10, 30, 15])
    key = build_quantile_bins(stars)
    assert len(np.unique(key)) == 5
    assert all(len(np.unique(stars[key == b])) == 1 for b in np.unique(key))
    # a lone top value merges into the bin below instead of a class of one row
    skewed = np.append(np.repeat([0.0, 1.0], 50), 100.0)
    key = build_quantile_bins(skewed)
    assert np.bincount(key).min() >= 2 and key[-1] == key[-2]


def test_stratified_holdout_keeps_the_target_distribution():
    from sklearn.model_selection import train_test_split

    labels = np.random.default_rng(1).exponential(size=500).astype(np.float32)
    task = build_task({"type": "regression"})
    _, held = train_test_split(np.arange(500), test_size=0.1, random_state=0, stratify=task.build_stratify_key(labels))
    # every tenth of the target (deciles computed here) gives exactly a tenth of the 50 held rows;
    # a random draw would not (each count varies by about +-2)
    deciles = np.quantile(labels, np.linspace(0, 1, 11)[1:-1])
    assert np.bincount(np.searchsorted(deciles, labels[held], side="right"), minlength=10).tolist() == [5] * 10


def test_label_stats():
    stats = build_task({"type": "regression"}).build_label_stats(np.asarray([1.0, 2.0, 3.0, 4.0], np.float32))
    # mean 2.5; population std sqrt(((1.5**2)*2 + (0.5**2)*2) / 4) = sqrt(1.25)
    assert stats == {"count": 4, "mean": 2.5, "std": 1.11803, "min": 1.0, "max": 4.0}
    assert build_task({"type": "regression"}).build_label_stats(np.zeros(0, np.float32))["count"] == 0


# --- metrics -------------------------------------------------------------------------------
def test_metrics_against_hand_computed_values():
    task = build_task({"type": "regression"})
    preds = np.asarray([[1.0], [2.0], [3.0], [5.0]], np.float32)
    labels = np.asarray([1.0, 2.0, 4.0, 4.0], np.float32)
    m = task.compute_task_metrics(preds, labels)
    assert m["mse"] == pytest.approx(0.5)  # errors 0, 0, -1, 1
    assert m["mae"] == pytest.approx(0.5)
    # Pearson: preds mean 2.75, labels mean 2.75; deviations p=(-1.75,-.75,.25,2.25) l=(-1.75,-.75,1.25,1.25)
    # cov = 3.0625 + .5625 + .3125 + 2.8125 = 6.75; |p|^2 = 8.75, |l|^2 = 6.75
    assert m["pearson"] == pytest.approx(6.75 / np.sqrt(8.75 * 6.75))
    # Spearman: ranks p=(1,2,3,4), l=(1,2,3.5,3.5); deviations (-1.5,-.5,.5,1.5) and (-1.5,-.5,1,1)
    # cov = 2.25 + .25 + .5 + 1.5 = 4.5; |rp|^2 = 5, |rl|^2 = 4.5
    assert m["spearman"] == pytest.approx(4.5 / np.sqrt(5 * 4.5))


def test_spearman_is_one_for_a_monotonic_but_nonlinear_fit():
    m = build_task({"type": "regression"}).compute_task_metrics(np.asarray([[1.0], [2.0], [3.0], [100.0]]),
                                                                np.asarray([1.0, 2.0, 3.0, 4.0]))
    assert m["spearman"] == pytest.approx(1.0) and m["pearson"] < 0.9
    assert m["mse"] == pytest.approx(96.0**2 / 4)


def test_constant_or_diverged_predictions_give_nan_without_warnings():
    task = build_task({"type": "regression"})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = task.compute_task_metrics(np.full((4, 1), 2.0), np.asarray([1.0, 2.0, 3.0, 4.0]))
        assert m["mse"] == pytest.approx(1.5) and np.isnan(m["pearson"]) and np.isnan(m["spearman"])
        m = task.compute_task_metrics(np.asarray([[1.0], [np.nan]]), np.asarray([1.0, 2.0]))
        assert all(np.isnan(v) for v in m.values())
        assert all(np.isnan(v) for v in task.compute_task_metrics(np.zeros((0, 1)), np.zeros(0)).values())


def test_compute_metrics_takes_the_trainers_eval_prediction():
    from transformers import EvalPrediction

    m = build_task({"type": "regression"}).compute_metrics(
        EvalPrediction(predictions=np.asarray([[0.0], [1.0]]), label_ids=np.asarray([1.0, 1.0])))
    assert set(m) == {"mse", "mae", "pearson", "spearman"} and m["mse"] == pytest.approx(0.5)


# --- model and serving ---------------------------------------------------------------------
def test_tokenize_collate_and_forward_with_mse_loss(base_model_dir):
    import datasets
    import pyarrow as pa
    import torch
    from transformers import AutoTokenizer

    job = job_of(model={"name_or_path": str(base_model_dir)}, data={"text_pair_column": "sentence2"})
    task = build_task(job.task)
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    examples = Examples({"text": ["a man is playing a guitar", "the dog runs"], "text_pair": ["a woman is playing", "the cat sleeps"]},
                        np.asarray([4.5, 1.25], np.float32))
    columns = task.tokenize(tokenizer, examples, job.data)
    assert columns["labels"] == [4.5, 1.25]
    rows = datasets.Dataset(pa.table(columns))  # as the workers get them
    batch = task.build_collator(tokenizer)([rows[i] for i in range(len(rows))])
    assert batch["labels"].dtype == torch.float32 and batch["labels"].shape == (2,)
    model = task.build_model(job.model)
    assert model.config.num_labels == 1 and model.config.problem_type == "regression"
    out = model(**batch)
    expected = torch.nn.functional.mse_loss(out.logits.squeeze(-1), batch["labels"])
    assert out.logits.shape == (2, 1) and out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_pipeline_serves_the_raw_value(base_model_dir, tmp_path):
    import torch
    import transformers

    job = job_of(model={"name_or_path": str(base_model_dir)})
    task = build_task(job.task)
    model = task.build_model(job.model).eval()
    # No problem_type in the saved config (older exports): without function_to_apply="none"
    # the pipeline would apply a sigmoid to a one-output head.
    model.config.problem_type = None
    model.save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(base_model_dir).save_pretrained(tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    texts = ["a man is playing a guitar", "the cat sleeps"]
    with torch.no_grad():
        raw = model(**tokenizer(texts, padding=True, return_tensors="pt")).logits[:, 0].tolist()

    pipe = transformers.pipeline(task.pipeline_task, model=str(tmp_path), **task.build_pipeline_kwargs())
    results = pipe(texts, **task.build_predict_call_kwargs())
    predictions = [task.format_prediction(r) for r in results]
    assert [set(p) for p in predictions] == [{"value"}, {"value"}]
    assert [p["value"] for p in predictions] == pytest.approx(raw, abs=1e-5)
    assert task.format_prediction_line({"value": 3.14159}) == "3.1416"
    pair = pipe([{"text": "a man is playing", "text_pair": "a woman is playing"}], **task.build_predict_call_kwargs())
    assert isinstance(task.format_prediction(pair[0])["value"], float)
    assert any("function_to_apply=\"none\"" in line for line in task.build_usage_example())
