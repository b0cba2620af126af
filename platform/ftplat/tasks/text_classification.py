"""``text-classification``: one class per text or text pair (sentiment, NLI, paraphrase)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.base import UNLABELLED_SPLIT_FIX, Task, column_list, is_missing_value

logger = logging.getLogger(__name__)


def build_class_label_ids(values: np.ndarray, feature: Any, data: Any, model: Any, split: str) -> np.ndarray:
    """Ids of a ``datasets.ClassLabel`` column in ``model.id2label``'s order.

    A ClassLabel id means its name (``names=["pos", "neg"]``: 0 is "pos"); taking it as an id
    of ``model.id2label`` would train and export a model whose labels are swapped.
    """
    names = getattr(feature, "names", None) if type(feature).__name__ == "ClassLabel" else None
    if not names or model.id2label is None or names == [model.id2label[i] for i in sorted(model.id2label)]:
        return values
    label2id = {v: k for k, v in model.id2label.items()}
    if sorted(names) != sorted(label2id) or len(set(names)) != len(names):
        raise UserError(
            f"data.label_column {data.label_column!r} of split {split!r} is a ClassLabel with names {names} "
            f"but model.id2label is {model.id2label}; set model.id2label to "
            f"{dict(enumerate(names))} (the dataset's order)"
        )
    logger.info("data.label_column %r of split %r: ClassLabel names %s mapped to model.id2label %s",
                data.label_column, split, names, model.id2label)
    remap = np.asarray([label2id[name] for name in names], dtype=np.int64)
    known = (values >= 0) & (values < len(names))  # ClassLabel's -1 (no label) stays and is refused
    return np.where(known, remap[np.clip(values, 0, len(names) - 1)], values)


def build_class_ids(values: list[Any], *, feature: Any, column: str, data: Any, model: Any, split: str,
                    rows: np.ndarray | None = None) -> np.ndarray:
    """Class ids 0..num_labels-1 from ids or from names ``model.id2label`` gives; UserError
    naming the column otherwise. Shared by every task whose labels are classes; ``rows`` gives
    each value's row when a row holds several (multi-label lists), so errors name the row."""
    row_of = (lambda i: int(rows[i])) if rows is not None else int
    missing = [i for i, value in enumerate(values) if is_missing_value(value)]
    if missing:  # one None made the column read as names, and the fix offered was to name None
        raise UserError(f"data.{column} of split {split!r} has no label at row {row_of(missing[0])} ({len(missing)} "
                        f"of {len(values)} {'labels' if rows is not None else 'rows'}); fix or drop those rows")
    array = np.asarray(values)
    if array.dtype.kind == "b":  # a CSV's True/False (pandas reads them as booleans), a bool column
        array = array.astype(np.int64)
    if array.dtype.kind in "OUS":
        label2id = {v: k for k, v in (model.id2label or {}).items()}
        unknown = sorted({str(v) for v in values} - {str(k) for k in label2id})
        if (unknown and len(unknown) == len({str(v) for v in values})
                and all(isinstance(v, str) and v.strip().isdigit() for v in values)):
            # Ids written as text ("0", "1" in JSON): no value is a name, so none is read as one.
            array = np.asarray([int(v) for v in values])
            unknown = []
        if unknown:
            raise UserError(f"data.{column} of split {split!r} holds labels {unknown[:5]} that model.id2label "
                            f"{model.id2label} does not name; add them to model.id2label")
    if array.dtype.kind in "OUS":
        return np.asarray([label2id[v] for v in values], dtype=np.int64)
    if array.dtype.kind not in "iu" and not (array.dtype.kind == "f" and np.all(array == np.round(array))):
        raise UserError(f"data.{column} of split {split!r} is not integer class ids (dtype {array.dtype}); "
                        "give ids 0..num_labels-1 or names from model.id2label")
    ids = build_class_label_ids(array.astype(np.int64), feature, data, model, split)
    bad = ids[(ids < 0) | (ids >= model.num_labels)]
    if bad.size and np.any(bad == -1):
        row = row_of(int(np.flatnonzero(ids == -1)[0]))
        raise UserError(f"data.{column} of split {split!r} has label -1 at row {row} ({int(np.sum(ids == -1))} of "
                        f"{len(ids)} {'labels' if rows is not None else 'rows'}); {UNLABELLED_SPLIT_FIX}")
    if bad.size:
        row = row_of(int(np.flatnonzero((ids < 0) | (ids >= model.num_labels))[0]))
        raise UserError(f"data.{column} of split {split!r} has label {int(bad[0])} outside "
                        f"0..{model.num_labels - 1} at row {row}; set model.num_labels (and model.id2label) to match")
    return ids


class TextClassification(Task):
    name = "text-classification"
    metrics = {"accuracy": "max", "f1": "max", "loss": "min"}
    default_metric = "accuracy"
    description = "Text classifier"
    problem_type = "single_label_classification"

    def resolve_model_defaults(self, model: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        model = dict(model)
        if model.get("num_labels") is None and "id2label" not in model:
            # The IMDB recipe's labels, the platform's first workload.
            model["num_labels"], model["id2label"] = 2, {0: "neg", 1: "pos"}
        return super().resolve_model_defaults(model, data)

    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        return build_class_ids(column_list(ds, data.label_column), feature=ds.features.get(data.label_column),
                               column=f"label_column {data.label_column!r}", data=data, model=model, split=split)

    def build_stratify_key(self, labels: np.ndarray) -> np.ndarray:
        return labels

    def build_label_stats(self, labels: np.ndarray) -> dict[str, Any]:
        return {"label_counts": {int(c): int(n) for c, n in zip(*np.unique(labels, return_counts=True))}}

    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """Accuracy and F1: of class 1 with two classes, macro over the classes otherwise."""
        from sklearn.metrics import accuracy_score, f1_score

        if not labels.size:
            return {"accuracy": float("nan"), "f1": float("nan")}
        preds = predictions.argmax(axis=-1)
        num_classes = max(predictions.shape[-1], 2)
        if num_classes == 2:
            f1 = f1_score(labels, preds, pos_label=1, average="binary", zero_division=0)
        else:
            f1 = f1_score(labels, preds, labels=list(range(num_classes)), average="macro", zero_division=0)
        return {"accuracy": float(accuracy_score(labels, preds)), "f1": float(f1)}

    def build_predict_call_kwargs(self) -> dict[str, Any]:
        return {"truncation": True}

    def format_prediction(self, result: Any) -> dict[str, Any]:
        return {"label": result["label"], "score": round(float(result["score"]), 6)}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        return f"{prediction['label']}\t{prediction['score']:.4f}"
