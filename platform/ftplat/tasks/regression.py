"""``regression``: one float target per text or text pair (STS-B similarity, star ratings)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.base import UNLABELLED_SPLIT_FIX, Task, column_list
from ftplat.tasks.serving import build_usage_inputs

#: Most quantile bins of the stratify key, and the fewest rows a bin keeps (smaller bins merge
#: into their neighbour: a stratified split needs at least two rows of every class).
MAX_BINS, ROWS_PER_BIN, MIN_BIN_ROWS = 10, 10, 2


def _significant(value: float, digits: int = 6) -> float:
    """``value`` rounded to ``digits`` significant digits (targets can be of any scale)."""
    return float(f"{value:.{digits}g}")


def _first_bad_row(values: list[Any]) -> tuple[int, Any] | None:
    """The first row whose value is not a finite real number (bools count as not numbers)."""
    for row, value in enumerate(values):
        if value is None or isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
            return row, value
        if not math.isfinite(float(value)):
            return row, value
    return None


def build_quantile_bins(labels: np.ndarray) -> np.ndarray:
    """A bin per row from the target's quantiles, so a stratified draw keeps its distribution.

    Up to ``MAX_BINS`` bins of about ``ROWS_PER_BIN`` rows or more; tied quantiles (a target
    with few distinct values) collapse into one edge, and bins under ``MIN_BIN_ROWS`` rows
    merge into the bin above (the last into the one below).
    """
    labels = np.asarray(labels, dtype=np.float64).reshape(-1)
    n = len(labels)
    bins = int(min(MAX_BINS, n // ROWS_PER_BIN))
    if bins < 2:
        return np.zeros(n, dtype=np.int64)
    edges = np.unique(np.quantile(labels, np.linspace(0, 1, bins + 1)[1:-1]))
    key = np.searchsorted(edges, labels, side="right")
    counts = np.bincount(key, minlength=len(edges) + 1)
    group, remap, filled = 0, np.zeros(len(counts), dtype=np.int64), 0
    for b, count in enumerate(counts):
        remap[b] = group
        filled += count
        if filled >= MIN_BIN_ROWS:
            group, filled = group + 1, 0
    if filled:  # the top bins hold fewer than MIN_BIN_ROWS rows: join the group below
        remap[remap == group] = max(group - 1, 0)
    return remap[key]


class Regression(Task):
    name = "regression"
    metrics = {"mse": "min", "mae": "min", "pearson": "max", "spearman": "max", "loss": "min"}
    default_metric = "mse"
    description = "Text regressor"
    problem_type = "regression"
    loss_name = "an MSE loss"

    # --- configuration -------------------------------------------------------------------
    def resolve_model_defaults(self, model: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        model = super().resolve_model_defaults(model, data)
        if model.get("num_labels") is None:
            model["num_labels"] = 1  # one output; id2label stays as given (None: HF's LABEL_0)
        return model

    def check_job(self, job: Any) -> None:
        self.check_inputs_and_loss(job)
        if job.model.num_labels != 1:
            raise ValueError(f"model.num_labels is {job.model.num_labels}; task.type regression predicts one float "
                             "(set model.num_labels: 1 or leave it out, and give model.id2label at most one name); "
                             "several labels per text are task.type multi-label-classification")
        if job.data.label_columns is not None:
            raise ValueError("data.label_columns (several 0/1 columns) is for task.type multi-label-classification; "
                             "task.type regression reads one float column, data.label_column")

    # --- data ----------------------------------------------------------------------------
    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        """The float targets (ints cast), float32 of shape (N,); UserError naming the column,
        the split and the first bad row for a missing, non-numeric, NaN or infinite value."""
        values = column_list(ds, data.label_column)
        where = f"data.label_column {data.label_column!r} of split {split!r}"
        try:
            array = np.asarray(values) if values else np.zeros(0, dtype=np.float32)
        except ValueError:  # lists of different lengths
            array = np.asarray(values, dtype=object)
        if array.ndim != 1:
            raise UserError(f"{where} holds a list per row (row 0: {values[0]!r}); task.type regression needs one "
                            "number per row (several labels per text are task.type multi-label-classification)")
        bad = None
        if array.dtype.kind not in "iuf" or not np.all(np.isfinite(array.astype(np.float64, copy=False))):
            bad = _first_bad_row(values)
            array = np.asarray(values, dtype=np.float64) if bad is None else array  # e.g. ints beyond int64
        if bad is not None:
            row, value = bad
            if value is None:
                problem = "has no value"
            elif isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
                problem = f"is {value!r}"
            else:
                problem = f"holds {value!r} ({type(value).__name__}), not a number"
            raise UserError(f"{where} {problem} at row {row}; task.type regression needs a finite number in every "
                            "row (fix or drop those rows, or point data.label_column at the numeric target)")
        if array.size > 1 and np.all(array == array[0]):
            fix = UNLABELLED_SPLIT_FIX if array[0] == -1 else ("point data.label_column at the target, or select "
                                                                 "and score on another split")
            raise UserError(f"{where} is {values[0]!r} in every row: a target that never varies gives no error or "
                            f"correlation to score; {fix}")
        too_large = np.abs(array) > np.finfo(np.float32).max
        if np.any(too_large):
            row = int(np.flatnonzero(too_large)[0])
            raise UserError(f"{where} is {values[row]!r} at row {row}, beyond float32; rescale the target")
        return array.astype(np.float32)

    def build_stratify_key(self, labels: np.ndarray) -> np.ndarray:
        return build_quantile_bins(labels)

    def build_label_stats(self, labels: np.ndarray) -> dict[str, Any]:
        labels = np.asarray(labels, dtype=np.float64).reshape(-1)
        if not labels.size:
            return {"count": 0, "mean": None, "std": None, "min": None, "max": None}
        return {"count": int(labels.size), "mean": _significant(labels.mean()), "std": _significant(labels.std()),
                "min": _significant(labels.min()), "max": _significant(labels.max())}

    # --- metrics -------------------------------------------------------------------------
    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        """MSE and MAE (scikit-learn), Pearson and Spearman correlations (SciPy). NaN where
        undefined: no rows, non-finite predictions (a diverged model), or a constant
        prediction or target (a correlation divides by its spread)."""
        from scipy.stats import pearsonr, spearmanr
        from sklearn.metrics import mean_absolute_error, mean_squared_error

        nan = float("nan")
        labels = np.asarray(labels, dtype=np.float64).reshape(-1)
        if not labels.size:
            return {"mse": nan, "mae": nan, "pearson": nan, "spearman": nan}
        preds = np.asarray(predictions, dtype=np.float64).reshape(len(labels), -1)
        if preds.shape[1] != 1:
            raise ValueError(f"regression predictions have {preds.shape[1]} outputs per row; model.num_labels must be 1")
        preds = preds[:, 0]
        if not np.all(np.isfinite(preds)):
            return {"mse": nan, "mae": nan, "pearson": nan, "spearman": nan}
        result = {"mse": float(mean_squared_error(labels, preds)), "mae": float(mean_absolute_error(labels, preds))}
        if labels.size < 2 or np.ptp(preds) == 0 or np.ptp(labels) == 0:
            result.update(pearson=nan, spearman=nan)
        else:
            result.update(pearson=float(pearsonr(preds, labels).statistic),
                          spearman=float(spearmanr(preds, labels).statistic))
        return result

    # --- serving -------------------------------------------------------------------------
    def build_pipeline_kwargs(self) -> dict[str, Any]:
        # The raw output: a one-output head otherwise gets a sigmoid unless its config says
        # problem_type regression.
        return {"function_to_apply": "none"}

    def format_prediction(self, result: Any) -> dict[str, Any]:
        if isinstance(result, list):  # top_k set: a list of one {"label", "score"}
            result = result[0]
        return {"value": _significant(float(result["score"]), 7)}

    def format_prediction_line(self, prediction: dict[str, Any]) -> str:
        return f"{prediction['value']:.4f}"

    def build_usage_example(self, text_pair: bool = False) -> list[str]:
        return ["from transformers import pipeline",
                f'pipe = pipeline("{self.pipeline_task}", model="<this directory>", function_to_apply="none")',
                f'pipe({build_usage_inputs(["A man is playing a guitar."], text_pair)}'
                f'{self.build_usage_truncation()})  '
                '# [{"label": "LABEL_0", "score": <the predicted value>}]']
