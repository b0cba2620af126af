"""What ``masked-lm`` and ``causal-lm`` share: raw text without labels, blocks of tokens, and
metrics over tokens (accuracy, perplexity) computed from argmax ids, never from whole logits.

A language model's evaluation logits are batch x length x vocabulary (a 30k vocabulary, 128
tokens and 1000 rows are 15 GB of float32), so the Trainer's ``preprocess_logits_for_metrics``
keeps, per row, the argmax id of each position and the summed negative log-likelihood of its
label tokens and their count (:func:`reduce_logits_to_token_nll`). Perplexity is the exponential
of the mean NLL per label token over the whole split: the same at any evaluation batch size and
worker count. ``eval_loss`` is the Trainer's, a mean of batch means, which moves with the
batching when rows hold different numbers of label tokens (prompts and completions of any length).
"""

from __future__ import annotations

import functools
import math
from itertools import chain
from typing import Any, ClassVar

import numpy as np

from ftplat.errors import UserError
from ftplat.tasks.base import IGNORED_LABEL, Task

#: The tokenizer outputs a language model takes (a tokenizer may return more).
MODEL_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def group_into_blocks(columns: dict[str, list[list[Any]]], block_size: int) -> dict[str, list[list[Any]]]:
    """Every column's rows concatenated and cut into ``block_size`` pieces (``run_mlm.py``'s
    and ``run_clm.py``'s ``group_texts``). Unlike those, the last, shorter block is kept: the
    collator pads it, and a split smaller than one block still gives one."""
    flat = {k: list(chain.from_iterable(rows)) for k, rows in columns.items()}
    total = len(flat["input_ids"])
    assert all(len(v) == total for v in flat.values()), "columns of one split differ in length"
    return {k: [v[i:i + block_size] for i in range(0, total, block_size)] for k, v in flat.items()}


def reduce_logits_to_ids(logits: Any, labels: Any) -> Any:
    """The predicted token id per position."""
    if isinstance(logits, tuple):  # extra outputs (hidden states, past key values) follow the logits
        logits = logits[0]
    return logits.argmax(dim=-1)


def reduce_logits_to_token_nll(logits: Any, labels: Any, *, shift: bool) -> tuple[Any, Any, Any]:
    """The Trainer's ``preprocess_logits_for_metrics``: ``(ids, nll, count)``, the predicted id
    per position, and per row the summed NLL of its label tokens (float32) and their count.
    ``shift``: a causal model's logits at position i score the token at i + 1."""
    import torch

    if isinstance(logits, tuple):
        logits = logits[0]
    ids = logits.argmax(dim=-1)
    scored, targets = (logits[:, :-1], labels[:, 1:]) if shift else (logits, labels)
    nll = torch.nn.functional.cross_entropy(scored.float().transpose(1, 2), targets, ignore_index=IGNORED_LABEL,
                                            reduction="none")
    return ids, nll.sum(dim=1), (targets != IGNORED_LABEL).sum(dim=1)


def compute_token_accuracy(predictions: np.ndarray, labels: np.ndarray, *, shift: bool) -> float:
    """The share of labelled tokens predicted right (``IGNORED_LABEL`` positions left out).
    ``shift``: a causal model's prediction at position i is of the token at i + 1. Predicted
    ids (N, L), or logits (N, L, V) whose argmax is taken."""
    preds, labels = np.asarray(predictions), np.asarray(labels)
    if preds.ndim == labels.ndim + 1:
        preds = preds.argmax(axis=-1)
    if shift:
        preds, labels = preds[:, :-1], labels[:, 1:]
    keep = labels != IGNORED_LABEL
    if not keep.any():
        return float("nan")
    return float((preds[keep] == labels[keep]).mean())


def compute_perplexity(nll: Any, count: Any) -> float:
    """exp of the mean NLL per label token (``nll`` summed per row, ``count`` label tokens per
    row); inf beyond exp's range, NaN without label tokens."""
    total = float(np.asarray(count, dtype=np.float64).sum())
    if not total:
        return float("nan")
    try:
        return math.exp(float(np.asarray(nll, dtype=np.float64).sum()) / total)
    except OverflowError:
        return math.inf


def check_text_inputs(task: Task, inputs: list[Any]) -> None:
    """A language model takes one text per input; UserError naming the first pair."""
    for number, item in enumerate(inputs, start=1):
        if not isinstance(item, str):
            raise UserError(f"input {number} is a sentence pair (a TAB, or a JSON line's text_pair) but the model "
                            f"is a {task.name} model, which takes one text per input")


class LanguageModelTask(Task):
    """Base of the language-model tasks: no labels column (the targets are the text's own
    tokens), no classification head, token-level metrics."""

    metrics = {"loss": "min", "perplexity": "min", "accuracy": "max"}
    default_metric = "loss"
    accepts_text_pair = False
    #: Whether the prediction at position i is of the token at i + 1 (causal) or at i (masked).
    shift_labels: ClassVar[bool] = False
    #: Blocks of data.max_length tokens span rows (and the warnings count the whole split).
    tokenizes_rows = False
    truncates_inputs = False

    # --- configuration -------------------------------------------------------------------
    def resolve_model_defaults(self, model: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
        """Nothing to fill: the head is the model's vocabulary."""
        return dict(model)

    def check_job(self, job: Any) -> None:
        self.check_inputs_and_loss(job)
        for name in ("num_labels", "id2label"):
            if getattr(job.model, name) is not None:
                raise ValueError(f"model.{name} is for classification heads; task.type {self.name} predicts tokens of "
                                 f"the model's vocabulary (its language-model head); remove model.{name}")
        if job.data.label_columns is not None:
            raise ValueError(f"data.label_columns is for task.type multi-label-classification; task.type {self.name} "
                             f"reads raw text without labels ({self.describe_columns(job.data)}); remove it")

    def describe_columns(self, data: Any) -> str:
        return ", ".join(f"data.{field} {column!r}" for field, column in self.read_columns(data).items())

    # --- data ----------------------------------------------------------------------------
    def build_labels(self, ds: Any, data: Any, model: Any, split: str) -> np.ndarray:
        """A placeholder per row: the targets are made from the tokens (by the tokenizing or
        the collator), and ``Examples`` counts its rows by its labels."""
        return np.zeros(len(ds), dtype=np.int8)

    def build_stratify_key(self, labels: np.ndarray) -> None:
        return None

    # --- model ---------------------------------------------------------------------------
    def build_model_kwargs(self, model: Any) -> dict[str, Any]:
        return {}

    # --- training ------------------------------------------------------------------------
    def build_logits_reducer(self) -> Any:
        return functools.partial(reduce_logits_to_token_nll, shift=self.shift_labels)

    # --- metrics -------------------------------------------------------------------------
    def compute_task_metrics(self, predictions: np.ndarray, labels: np.ndarray) -> dict[str, float]:
        return {"accuracy": compute_token_accuracy(predictions, labels, shift=self.shift_labels)}

    def compute_metrics(self, eval_pred: Any) -> dict[str, float]:
        """Perplexity from the rows' NLL sums, then accuracy and the user's metrics (which get
        the predicted ids, as run_mlm.py's ``preprocess_logits_for_metrics`` gives them)."""
        from transformers import EvalPrediction

        ids, nll, count = eval_pred.predictions
        return {"perplexity": compute_perplexity(nll, count),
                **super().compute_metrics(EvalPrediction(
                    predictions=ids, label_ids=eval_pred.label_ids, inputs=eval_pred.inputs, losses=eval_pred.losses))}
