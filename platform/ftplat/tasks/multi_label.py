"""``multi-label-classification``: any number of labels per text (tagging, topics).

The labels come either from ``data.label_column`` holding a list of class ids or names per
row (``["sports", "politics"]``, ``[0, 3]``, ``[]``), or from ``data.label_columns`` naming one
0/1 (or boolean) column per label, in ``model.id2label``'s order. Either way the model trains
on a float multi-hot matrix (N, num_labels) with HF's ``multi_label_classification`` head
(a sigmoid and binary cross-entropy per label), and a label is predicted from
``task.threshold``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.base import Task, column_list
from ftplat.tasks.serving import build_usage_inputs
from ftplat.tasks.text_classification import build_class_ids


def _is_row_list(value: Any) -> bool:
    return isinstance(value, (list, tuple, np.ndarray))


class MultiLabelClassification(Task):
    name = "multi-label-classification"
    metrics = {"micro_f1": "max", "macro_f1": "max", "subset_accuracy": "max", "loss": "min"}
    default_metric = "micro_f1"
    description = "Multi-label text classifier"
    problem_type = "multi_label_classification"
    loss_name = "a sigmoid and binary cross-entropy per label"

    def __init__(self, settings: Any) -> None:
        super().__init__(settings)
        # The label names (``build_task(job)`` passes model.id2label; build_labels sets them too).
        self._label_names: list[str] | None = (
            [str(settings.id2label[k]) for k in sorted(settings.id2label)] if settings.id2label else None)

    # --- configuration -------------------------------------------------------------------
    def resolve_model_defaults(self, model: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        model = dict(model)
        columns = data.get("label_columns")
        if (model.get("id2label") is None and isinstance(columns, list) and columns
                and all(isinstance(c, str) for c in columns) and model.get("num_labels") in (None, len(columns))):
            # One label per 0/1 column, named after it. A num_labels that disagrees is left for
            # check_job to name (an id2label here would fail ModelConfig with a vaguer message).
            model["id2label"] = dict(enumerate(columns))
        return super().resolve_model_defaults(model, data)

    def check_job(self, job: Any) -> None:
        self.check_inputs_and_loss(job)
        data, model = job.data, job.model
        if model.num_labels is None:
            raise ValueError(f"model.num_labels is required for task.type {self.name}: give model.id2label "
                             "(names the labels and sets num_labels) or data.label_columns (one 0/1 column per label)")
        if model.num_labels < 2:
            raise ValueError(f"model.num_labels is {model.num_labels}; task.type {self.name} needs at least 2 labels "
                             "(one yes/no label is task.type text-classification with 2 classes)")
        if data.label_columns is not None:
            twice = sorted({c for c in data.label_columns if data.label_columns.count(c) > 1})
            if twice:
                raise ValueError(f"data.label_columns names {twice} more than once; name each 0/1 column once")
            if model.num_labels != len(data.label_columns):
                raise ValueError(f"model.num_labels is {model.num_labels} but data.label_columns names "
                                 f"{len(data.label_columns)} columns (one per label); set model.num_labels to "
                                 f"{len(data.label_columns)} (and model.id2label to one name per column) or leave "
                                 "both out to name the labels after the columns")
            # Columns map to labels by position; a label named after another column is a swap.
            names = [model.id2label[i] for i in sorted(model.id2label)] if model.id2label else []
            swapped = [(i, name) for i, name in enumerate(names)
                       if name in data.label_columns and data.label_columns[i] != name]
            if swapped:
                i, name = swapped[0]
                raise ValueError(f"model.id2label names label {i} {name!r}, but data.label_columns[{i}] is "
                                 f"{data.label_columns[i]!r} (column {name!r} is data.label_columns"
                                 f"[{data.label_columns.index(name)}]); columns are labels in order: list "
                                 f"data.label_columns in model.id2label's order ({names}), or leave model.id2label "
                                 "out to name the labels after the columns")

    def read_columns(self, data: Any) -> dict[str, str]:
        columns = super().read_columns(data)
        if data.label_columns is not None:  # the 0/1 columns instead of label_column
            del columns["label_column"]
            columns.update({f"label_columns[{i}]": column for i, column in enumerate(data.label_columns)})
        return columns

    # --- data ----------------------------------------------------------------------------
    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        """A float32 multi-hot matrix (N, num_labels); UserError naming the column otherwise."""
        num_labels = model.num_labels
        id2label = model.id2label or {}
        self._label_names = [str(id2label.get(i, i)) for i in range(num_labels)]
        if data.label_columns is not None:
            return self._build_from_columns(ds, data, num_labels, split)
        return self._build_from_lists(ds, data, model, split)

    def _build_from_lists(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        rows = column_list(ds, data.label_column)
        where = f"data.label_column {data.label_column!r} of split {split!r}"
        for row, value in enumerate(rows):
            if not _is_row_list(value):
                what = "has no value" if value is None else f"holds {value!r}, not a list"
                raise UserError(f"{where} {what} at row {row}; task.type {self.name} needs a list of class ids or "
                                "names per row ([] for none), or several 0/1 columns in data.label_columns "
                                "(one class per text is task.type text-classification)")
        lengths = np.asarray([len(value) for value in rows], dtype=np.int64)
        flat = [v.item() if isinstance(v, np.generic) else v for value in rows for v in value]
        if any(v is None for v in flat):
            row = next(i for i, value in enumerate(rows) if any(v is None for v in value))
            raise UserError(f"{where} has a missing label in row {row} ({rows[row]!r}); give class ids or names only")
        feature = ds.features.get(data.label_column) if getattr(ds, "features", None) is not None else None
        row_of_label = np.repeat(np.arange(len(rows)), lengths)
        ids = build_class_ids(flat, feature=getattr(feature, "feature", None), column=f"label_column "
                              f"{data.label_column!r}", data=data, model=model, split=split, rows=row_of_label)
        labels = np.zeros((len(rows), model.num_labels), dtype=np.float32)
        labels[row_of_label, ids] = 1.0
        return labels

    def _build_from_columns(self, ds: Any, data: Any, num_labels: int, split: str) -> np.ndarray:
        columns = []
        for i, column in enumerate(data.label_columns):
            values = column_list(ds, column)
            try:
                array = np.asarray(values) if values else np.zeros(0, dtype=np.float32)
            except ValueError:  # lists of different lengths
                array = np.asarray(values, dtype=object)
            if array.ndim != 1 or array.dtype.kind not in "biuf" or not np.all((array == 0) | (array == 1)):
                row, value = next(((r, v) for r, v in enumerate(values)
                                   if isinstance(v, str) or np.ndim(v) != 0 or v not in (0, 1)), (0, values[0]))
                what = "has no value" if value is None else f"holds {value!r}"
                raise UserError(f"data.label_columns[{i}] {column!r} of split {split!r} {what} at row {row}; each of "
                                "data.label_columns must be 0/1 (or true/false) in every row")
            columns.append(array.astype(np.float32))
        return np.stack(columns, axis=1) if columns else np.zeros((0, num_labels), dtype=np.float32)

    def build_stratify_key(self, labels: np.ndarray) -> None:
        # Random draws, on purpose. A row has any number of labels, so one class per row (its
        # most frequent or rarest label) stratifies that label only and skews the others, and
        # rare label combinations would make classes of one row that a stratified split refuses.
        # A random hold-out keeps every label's rate in expectation.
        return None

    def build_label_stats(self, labels: np.ndarray) -> dict[str, Any]:
        labels = np.asarray(labels)
        positives = labels.sum(axis=0).astype(np.int64) if labels.size else np.zeros(labels.shape[-1], np.int64)
        names = self._label_names if self._label_names and len(self._label_names) == len(positives) \
            else [str(i) for i in range(len(positives))]
        per_row = labels.sum(axis=1) if labels.size else np.zeros(0)
        return {"positives": {name: int(n) for name, n in zip(names, positives)},
                "labels_per_row": round(float(per_row.mean()), 4) if per_row.size else None,
                "rows_without_labels": int((per_row == 0).sum())}

    # --- metrics -------------------------------------------------------------------------
    def predict_indicators(self, logits: np.ndarray) -> np.ndarray:
        """0/1 per label: sigmoid(logit) >= task.threshold."""
        from scipy.special import expit

        return (expit(np.asarray(logits, dtype=np.float64)) >= self.settings.threshold).astype(np.int64)

    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Micro and macro F1 over the labels and the subset accuracy (every label of a row
        right), scikit-learn on the 0/1 indicator matrices."""
        from sklearn.metrics import accuracy_score, f1_score

        if not labels.size:
            return {"micro_f1": float("nan"), "macro_f1": float("nan"), "subset_accuracy": float("nan")}
        preds, truth = self.predict_indicators(predictions), (np.asarray(labels) >= 0.5).astype(np.int64)
        if preds.shape != truth.shape:
            raise ValueError(f"multi-label predictions {preds.shape} and labels {truth.shape} differ in shape")
        return {"micro_f1": float(f1_score(truth, preds, average="micro", zero_division=0)),
                "macro_f1": float(f1_score(truth, preds, average="macro", zero_division=0)),
                "subset_accuracy": float(accuracy_score(truth, preds))}

    # --- serving -------------------------------------------------------------------------
    def build_pipeline_kwargs(self) -> dict[str, Any]:
        return {"top_k": None, "function_to_apply": "sigmoid"}

    def format_prediction(self, result: Any) -> dict[str, Any]:
        """``{"labels": [names scoring >= task.threshold, best first], "scores": {name: score}}``."""
        scores = [result] if isinstance(result, dict) else list(result)
        scores = sorted(scores, key=lambda s: s["score"], reverse=True)
        return {"labels": [s["label"] for s in scores if s["score"] >= self.settings.threshold],
                "scores": {s["label"]: round(float(s["score"]), 6) for s in scores}}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        """Two cells: the predicted labels and their scores (``-`` for none)."""
        labels = prediction["labels"]
        if not labels:
            return "-\t-"
        return ",".join(labels) + "\t" + ",".join(f"{prediction['scores'][name]:.4f}" for name in labels)

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        inputs = build_usage_inputs(["The match ended in a draw after the minister's speech"], text_pair)
        return ["from transformers import pipeline",
                f'pipe = pipeline("{self.pipeline_task}", model="<this directory>", top_k=None, '
                'function_to_apply="sigmoid")',
                f"pipe({inputs}{self.build_usage_truncation()})  "
                f"# every label's score; those >= {self.settings.threshold} are predicted"]
