"""Building a trial's model through its task (a local model folder is checked before, from its
files alone: ``ftplat.config.model_files``)."""

from __future__ import annotations

import logging
import re

from transformers import PreTrainedModel

from ftplat.adapters import run_wrap_peft
from ftplat.config.schema import JobConfig
from ftplat.errors import UserError
from ftplat.tasks import build_task
from ftplat.tasks.base import NEW_WEIGHTS_ATTR

logger = logging.getLogger(__name__)


def build_model(job: JobConfig, tokenizer=None) -> PreTrainedModel:
    """The pretrained model with the head of the job's task, with its trainable parameters
    set: a peft adapter (``model.peft``), or the parameters ``model.trainable_patterns`` name.
    ``tokenizer``: the task's (its padding id goes to a model config that has none)."""
    task = build_task(job)
    model = task.build_model(job.model, tokenizer)
    if job.model.peft is not None:
        return run_wrap_peft(model, job.model.peft, task_type=task.peft_task_type,
                             new_weights=getattr(model, NEW_WEIGHTS_ATTR, ()))
    if job.model.trainable_patterns:
        apply_trainable_patterns(model, job.model.trainable_patterns)
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
