"""The multi-label task: config defaults and refusals, multi-hot labels from lists of classes
or from 0/1 columns, label stats, metrics against hand-computed values, a tiny BERT's loss,
and the serving pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from tiny_assets import write_tiny_headless_bert

from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.tasks import build_task
from ftplat.tasks.base import Examples
from ftplat.tasks.multi_label import MultiLabelClassification

WORDS = ["the", "match", "ended", "in", "a", "draw", "minister", "speech", "new", "phone", "goal", "vote", "."]
TOPICS = {0: "sports", 1: "politics", 2: "tech"}


@pytest.fixture(scope="module")
def base_model_dir(tmp_path_factory):
    """A 1-layer BERT without a head and a WordPiece tokenizer of WORDS."""
    return write_tiny_headless_bert(tmp_path_factory.mktemp("tiny-bert-multi-label"), WORDS)


def job_of(task=None, **sections) -> JobConfig:
    return JobConfig.model_validate({"task": {"type": "multi-label-classification", **(task or {})}, **sections})


def dataset(features=None, **columns):
    from datasets import Dataset

    return Dataset.from_dict(columns, features=features)


# --- configuration -------------------------------------------------------------------------
def test_label_columns_name_the_labels():
    job = job_of(data={"label_columns": ["sports", "politics", "tech"]})
    assert job.model.id2label == TOPICS and job.model.num_labels == 3
    assert job.training.metric_for_best_model == "eval_micro_f1" and job.training.greater_is_better is True
    task = build_task(job.task)
    assert isinstance(task, MultiLabelClassification) and task.settings.threshold == 0.5
    assert task.read_columns(job.data) == {"text_column": "text", "label_columns[0]": "sports",
                                           "label_columns[1]": "politics", "label_columns[2]": "tech"}


def test_id2label_sets_num_labels_and_threshold_reaches_the_task():
    job = job_of(task={"threshold": 0.3}, model={"id2label": TOPICS}, data={"label_column": "topics"})
    assert job.model.num_labels == 3
    task = build_task(job.task)
    assert task.settings.threshold == 0.3
    assert task.read_columns(job.data) == {"text_column": "text", "label_column": "topics"}
    # names given by the user win over the column names
    job = job_of(model={"id2label": {0: "Sports", 1: "Politics"}}, data={"label_columns": ["s", "p"]})
    assert job.model.id2label == {0: "Sports", 1: "Politics"}


@pytest.mark.parametrize("sections, message", [
    ({}, r"model\.num_labels is required.*model\.id2label.*data\.label_columns"),
    ({"model": {"id2label": {0: "only"}}}, r"model\.num_labels is 1.*at least 2"),
    ({"model": {"num_labels": 2}, "data": {"label_columns": ["a", "b", "c"]}},
     r"model\.num_labels is 2 but data\.label_columns names 3 columns.*set model\.num_labels to 3"),
    ({"data": {"label_columns": ["a", "b", "a"]}}, r"data\.label_columns names \['a'\] more than once"),
    # The same names in another order: column toxic would train and serve as label obscene.
    ({"model": {"id2label": {0: "obscene", 1: "toxic"}}, "data": {"label_columns": ["toxic", "obscene"]}},
     r"model\.id2label names label 0 'obscene', but data\.label_columns\[0\] is 'toxic' \(column 'obscene' is "
     r"data\.label_columns\[1\]\); columns are labels in order: list data\.label_columns in model\.id2label's "
     r"order \(\['obscene', 'toxic'\]\)"),
    ({"model": {"id2label": TOPICS}, "training": {"hf_args": {"label_smoothing_factor": 0.1}}},
     r"training\.hf_args\.label_smoothing_factor is 0\.1.*remove it"),
    ({"model": {"id2label": TOPICS}, "training": {"metric_for_best_model": "accuracy"}},
     r"training\.metric_for_best_model.*eval_micro_f1"),
])
def test_refusals_name_the_field(sections, message):
    with pytest.raises(ValueError, match=message):
        job_of(**sections)


# --- labels --------------------------------------------------------------------------------
def from_lists(rows, *, features=None, split="train", id2label=TOPICS):
    job = job_of(model={"id2label": id2label}, data={"label_column": "topics"})
    task = build_task(job.task)
    return task, task.build_labels(dataset(features, text=["x"] * len(rows), topics=rows), job.data, job.model, split)


EXPECTED = [[1, 1, 0], [0, 0, 0], [0, 0, 1]]


def test_lists_of_names_or_ids_become_multi_hot():
    _, by_name = from_lists([["sports", "politics"], [], ["tech"]])
    assert by_name.dtype == np.float32 and by_name.tolist() == EXPECTED
    _, by_id = from_lists([[1, 0], [], [2, 2]])
    assert by_id.tolist() == EXPECTED


def test_a_classlabel_list_is_read_by_name():
    from datasets import ClassLabel, Features, List, Value

    # The dataset's ids mean its own names (0 is "tech"), not model.id2label's order.
    features = Features({"text": Value("string"), "topics": List(ClassLabel(names=["tech", "sports", "politics"]))})
    _, labels = from_lists([[1, 2], [], [0]], features=features)
    assert labels.tolist() == EXPECTED


@pytest.mark.parametrize("rows, message", [
    ([["sports"], ["cooking"]], r"data\.label_column 'topics' of split 'test' holds labels \['cooking'\]"),
    ([[0], [3]], r"data\.label_column 'topics' of split 'test' has label 3 outside 0\.\.2 at row 1;"),
    # Rows hold several labels: the row named is the row, not the label's place among all labels
    ([[0, 1, 2], [1, 2], [0, 7]], r"has label 7 outside 0\.\.2 at row 2;"),
    ([[0, 1, 2], [1, 2], [-1]], r"has label -1 at row 2 \(1 of 6 labels\)"),
    (["sports", "politics"], r"data\.label_column 'topics' of split 'test' holds 'sports', not a list at row 0.*"
                             r"text-classification"),
    ([["sports"], None], r"has no value at row 1.*\[\] for none"),
    ([[0.5], [1.0]], r"is not integer class ids"),
])
def test_bad_label_lists_name_the_column_and_split(rows, message):
    with pytest.raises(UserError, match=message):
        from_lists(rows, split="test")


def from_columns(split="train", **columns):
    job = job_of(data={"label_columns": list(columns)})
    task = build_task(job.task)
    n = len(next(iter(columns.values())))
    return task, task.build_labels(dataset(text=["x"] * n, **columns), job.data, job.model, split)


def test_label_columns_of_0_1_or_bools():
    _, labels = from_columns(sports=[1, 0, 0], politics=[True, False, False], tech=[0.0, 0.0, 1.0])
    assert labels.dtype == np.float32 and labels.shape == (3, 3) and labels.tolist() == EXPECTED


@pytest.mark.parametrize("bad, message", [
    ([0, 2, 1], r"data\.label_columns\[1\] 'politics' of split 'validation' holds 2 at row 1"),
    ([0, None, 1], r"data\.label_columns\[1\] 'politics' of split 'validation' has no value at row 1"),
    (["no", "yes", "no"], r"data\.label_columns\[1\] 'politics' of split 'validation' holds 'no' at row 0"),
])
def test_bad_label_columns_name_the_field_split_and_row(bad, message):
    with pytest.raises(UserError, match=message):
        from_columns(split="validation", sports=[1, 0, 0], politics=bad)


def test_no_strata_and_label_stats_by_name():
    task, labels = from_lists([["sports", "politics"], [], ["tech"], ["sports"]])
    assert task.build_stratify_key(labels) is None
    assert task.build_label_stats(labels) == {"positives": {"sports": 2, "politics": 1, "tech": 1},
                                              "labels_per_row": 1.0, "rows_without_labels": 1}
    _, labels = from_columns(a=[1, 1, 0], b=[1, 0, 0])
    assert build_task({"type": "multi-label-classification"}).build_label_stats(labels) == {
        "positives": {"0": 2, "1": 1}, "labels_per_row": 1.0, "rows_without_labels": 1}


# --- metrics -------------------------------------------------------------------------------
LABELS = np.asarray([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 0]], np.float32)
# sigmoid >= 0.5 gives [[1,0,0],[0,1,0],[1,1,1],[0,0,0]]; the 0.3 logit (sigmoid 0.574) is the
# only one a 0.6 threshold turns off.
LOGITS = np.asarray([[2.0, -3.0, -1.0], [-2.0, 4.0, -5.0], [1.0, 2.0, 0.3], [-1.0, -1.0, -0.5]], np.float32)


def test_metrics_against_hand_computed_values():
    m = build_task({"type": "multi-label-classification"}).compute_task_metrics(LOGITS, LABELS)
    # label 0: tp 2; label 1: tp 2; label 2: tp 0, fp 1 (row 2), fn 1 (row 0)
    assert m["micro_f1"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 1))  # 0.8
    assert m["macro_f1"] == pytest.approx((1 + 1 + 0) / 3)
    assert m["subset_accuracy"] == pytest.approx(2 / 4)  # rows 1 and 3 exactly right


def test_threshold_moves_the_predictions():
    m = build_task({"type": "multi-label-classification", "threshold": 0.6}).compute_task_metrics(LOGITS, LABELS)
    # row 2 now predicts [1,1,0], exactly right; label 2 has only the fn of row 0 (f1 0)
    assert m["micro_f1"] == pytest.approx(2 * 4 / (2 * 4 + 0 + 1))
    assert m["macro_f1"] == pytest.approx(2 / 3)
    assert m["subset_accuracy"] == pytest.approx(3 / 4)


def test_compute_metrics_takes_the_trainers_eval_prediction():
    from transformers import EvalPrediction

    m = build_task({"type": "multi-label-classification"}).compute_metrics(
        EvalPrediction(predictions=LOGITS, label_ids=LABELS))
    assert set(m) == {"micro_f1", "macro_f1", "subset_accuracy"} and m["micro_f1"] == pytest.approx(0.8)
    empty = build_task({"type": "multi-label-classification"}).compute_task_metrics(np.zeros((0, 3)), np.zeros((0, 3)))
    assert all(np.isnan(v) for v in empty.values())


# --- model and serving ---------------------------------------------------------------------
def test_tokenize_collate_and_forward_with_bce_loss(base_model_dir):
    import datasets
    import pyarrow as pa
    import torch
    from transformers import AutoTokenizer

    job = job_of(model={"name_or_path": str(base_model_dir)}, data={"label_columns": ["sports", "politics", "tech"]})
    task = build_task(job.task)
    tokenizer = AutoTokenizer.from_pretrained(base_model_dir)
    examples = Examples({"text": ["the match ended in a draw", "the minister speech", "a new phone"]},
                        np.asarray(EXPECTED, np.float32))
    columns = task.tokenize(tokenizer, examples, job.data)
    rows = datasets.Dataset(pa.table(columns))  # as the workers get them
    batch = task.build_collator(tokenizer)([rows[i] for i in range(len(rows))])
    assert batch["labels"].dtype == torch.float32 and batch["labels"].tolist() == EXPECTED
    model = task.build_model(job.model)
    assert model.config.problem_type == "multi_label_classification" and model.config.id2label == TOPICS
    out = model(**batch)
    expected = torch.nn.functional.binary_cross_entropy_with_logits(out.logits, batch["labels"])
    assert out.logits.shape == (3, 3) and out.loss.item() == pytest.approx(expected.item(), rel=1e-5)


def test_pipeline_gives_labels_over_the_threshold_and_every_score(base_model_dir, tmp_path):
    import torch
    import transformers

    job = job_of(task={"threshold": 0.5}, model={"name_or_path": str(base_model_dir), "id2label": TOPICS})
    task = build_task(job.task)
    model = task.build_model(job.model).eval()
    with torch.no_grad():  # spread the scores so some labels pass the threshold and some do not
        model.classifier.bias.copy_(torch.tensor([3.0, -3.0, 0.0]))
    model.save_pretrained(tmp_path)
    transformers.AutoTokenizer.from_pretrained(base_model_dir).save_pretrained(tmp_path)
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path)
    texts = ["the match ended in a draw", "the minister speech"]
    with torch.no_grad():
        probs = torch.sigmoid(model(**tokenizer(texts, padding=True, return_tensors="pt")).logits).tolist()

    pipe = transformers.pipeline(task.pipeline_task, model=str(tmp_path), **task.build_pipeline_kwargs())
    results = pipe(texts, **task.build_predict_call_kwargs())
    for row, result in zip(probs, results):
        prediction = task.format_prediction(result)
        assert set(prediction) == {"labels", "scores"}
        assert prediction["scores"] == pytest.approx({TOPICS[i]: p for i, p in enumerate(row)}, abs=1e-5)
        assert sorted(prediction["labels"]) == sorted(TOPICS[i] for i, p in enumerate(row) if p >= 0.5)
        assert "sports" in prediction["labels"] and "politics" not in prediction["labels"]
    line = task.format_prediction_line({"labels": ["sports", "tech"], "scores": {"sports": 0.95, "tech": 0.5, "politics": 0.1}})
    assert line == "sports,tech\t0.9500,0.5000"
    assert task.format_prediction_line({"labels": [], "scores": {"sports": 0.1}}) == "-\t-"
    assert any("top_k=None" in line for line in task.build_usage_example())
