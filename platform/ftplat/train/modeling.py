"""Building the classification model from the model config, and its evaluation metrics."""

from __future__ import annotations

import logging
import re

import numpy as np
from transformers import AutoModelForSequenceClassification, PreTrainedModel

from ftplat.config.schema import ModelConfig
from ftplat.errors import UserError

logger = logging.getLogger(__name__)


def build_model(cfg: ModelConfig) -> PreTrainedModel:
    kwargs = {"num_labels": cfg.num_labels, "trust_remote_code": cfg.trust_remote_code}
    if cfg.id2label is not None:
        kwargs["id2label"] = dict(cfg.id2label)
        kwargs["label2id"] = {v: k for k, v in cfg.id2label.items()}
    model = AutoModelForSequenceClassification.from_pretrained(cfg.name_or_path, **kwargs)
    if cfg.trainable_patterns:
        apply_trainable_patterns(model, cfg.trainable_patterns)
    return model


def count_parameter(param) -> int:
    """Elements of a parameter; ZeRO-3 leaves an empty placeholder and keeps the true size in ``ds_numel``."""
    return getattr(param, "ds_numel", param.numel())


def apply_trainable_patterns(model: PreTrainedModel, patterns: list[str]) -> int:
    """Freeze every parameter whose name matches none of ``patterns``; return the trainable count."""
    compiled = [re.compile(p) for p in patterns]
    trainable = 0
    for name, param in model.named_parameters():
        param.requires_grad = any(p.search(name) for p in compiled)
        trainable += count_parameter(param) if param.requires_grad else 0
    if trainable == 0:
        raise UserError(
            f"model.trainable_patterns {patterns} match no parameter of {type(model).__name__}; "
            f"names look like {[n for n, _ in list(model.named_parameters())[:3]]}"
        )
    total = sum(count_parameter(p) for p in model.parameters())
    logger.info("Trainable parameters: %d of %d (%.2f%%)", trainable, total, 100 * trainable / total)
    return trainable


def compute_classification_metrics(eval_pred) -> dict[str, float]:
    """Accuracy and F1 (binary F1 of class 1 for two classes, macro F1 otherwise)."""
    logits, labels = eval_pred.predictions, eval_pred.label_ids
    if isinstance(logits, tuple):
        logits = logits[0]
    preds = np.asarray(logits).argmax(axis=-1)
    labels = np.asarray(labels)
    accuracy = float((preds == labels).mean()) if labels.size else float("nan")
    num_classes = int(max(np.asarray(logits).shape[-1], 2))
    classes = [1] if num_classes == 2 else list(range(num_classes))
    f1s = []
    for c in classes:
        tp = float(((preds == c) & (labels == c)).sum())
        fp = float(((preds == c) & (labels != c)).sum())
        fn = float(((preds != c) & (labels == c)).sum())
        f1s.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return {"accuracy": accuracy, "f1": float(np.mean(f1s))}
