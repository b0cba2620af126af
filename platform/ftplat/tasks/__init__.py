"""The task registry: one module per task, one line here (see ``ftplat.tasks.base``)."""

from __future__ import annotations

import json
import os
from typing import Any

from ftplat.tasks.base import Task, TaskSettings
from ftplat.tasks.causal_lm import CausalLM
from ftplat.tasks.masked_lm import MaskedLM
from ftplat.tasks.multi_label import MultiLabelClassification
from ftplat.tasks.regression import Regression
from ftplat.tasks.text_classification import TextClassification
from ftplat.tasks.token_classification import TokenClassification

TASKS: dict[str, type[Task]] = {
    cls.name: cls for cls in (TextClassification, MultiLabelClassification, Regression, TokenClassification,
                              MaskedLM, CausalLM)
}
TASK_NAMES = tuple(TASKS)


def build_task(settings: Any) -> Task:
    """The task of a job: ``settings`` is a job config (its ``task`` section with the
    ``model.id2label`` names), a ``task`` section, a dict of one, or a type name."""
    if hasattr(settings, "task") and hasattr(settings, "model"):
        return TASKS[settings.task.type](TaskSettings(**{
            **{k: v for k, v in settings.task.model_dump().items() if v is not None},
            "id2label": dict(settings.model.id2label) if settings.model.id2label else None}))
    if isinstance(settings, dict):
        values = settings
    elif isinstance(settings, str):
        values = {"type": settings}
    else:
        values = settings.model_dump()
    values = {k: v for k, v in values.items() if v is not None}
    return TASKS[values["type"]](TaskSettings(**values))


def build_metric_mode(metric: str | None) -> str:
    """Whether a built-in metric (``eval_`` prefixed or bare) is maximised or minimised; the
    tasks agree on every name they share. Unknown names (a user's metric) count as maximised:
    the job config sets greater_is_better from task.metric_modes for those."""
    bare = (metric or "").removeprefix("eval_")
    for cls in TASKS.values():
        if bare in cls.metrics:
            return cls.metrics[bare]
    return "max"


#: Written beside an exported or registered model: the task that serves it (``type`` and its settings).
TASK_FILE = "ftplat_task.json"


def build_task_for_model_dir(model_dir: str) -> Task:
    """The task of a model folder: its ``ftplat_task.json`` (ftplat exports), else read from
    its ``config.json`` (any Hugging Face model: the head class and ``problem_type``)."""
    task_file = os.path.join(model_dir, TASK_FILE)
    if os.path.isfile(task_file):
        with open(task_file) as f:
            return build_task(json.load(f))
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    architectures = config.get("architectures") or []
    if any(a.endswith("ForTokenClassification") for a in architectures):
        return build_task("token-classification")
    if any(a.endswith("ForMaskedLM") for a in architectures):
        return build_task("masked-lm")
    # GPT-2 and its kin name their head LMHeadModel.
    if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in architectures):
        return build_task("causal-lm")
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        # A base model (BertModel): a head built here would be random, its predictions noise.
        raise ValueError(f"its config.json names {architectures}, a model without a task head (no "
                         "...ForSequenceClassification, ...ForTokenClassification, ...ForMaskedLM or ...ForCausalLM); "
                         "fine-tune it in a sweep and predict with the export")
    problem = config.get("problem_type")
    if problem == "regression" or (problem is None and config.get("num_labels", len(config.get("id2label") or {})) == 1):
        return build_task("regression")
    if problem == "multi_label_classification":
        return build_task("multi-label-classification")
    return build_task("text-classification")
