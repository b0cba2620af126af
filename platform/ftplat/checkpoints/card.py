"""The Hugging Face metadata of an exported model's card, and the names it gives local paths.

A card is shared with the model (``--push-to-hub``), so it names a hub model or dataset by its
id as given and a local folder or file by its last path part only: the training machine's
paths say nothing to a reader and may say too much about the machine.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Any

from huggingface_hub import EvalResult, ModelCardData
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ftplat.records import SweepSummary, TrialRecord
from ftplat.tasks import Task

#: An absolute path inside free text (an error message): from a '/' not preceded by a word
#: character, ':' or another '/', so ``and/or`` and ``s3://bucket`` stay as they are.
ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~])(?:~)?/[^\s'\"`,;()\[\]]+")


def is_hub_id(value: str) -> bool:
    """Whether ``value`` names a hub repo (``bert-base-uncased``, ``org/name``) rather than a
    local path: an existing path, or one written as a path (absolute, ``./``, ``~``) is local."""
    if not value or "://" in value or value.startswith((".", "~", "/")) or os.path.exists(value):
        return False
    try:
        validate_repo_id(value)
    except HFValidationError:
        return False
    return True


def build_public_name(value: Any) -> str:
    """A hub id as given; a local path or URI by its folder (or file) name."""
    text = str(value)
    if is_hub_id(text):
        return text
    return posixpath.basename(text.replace("\\", "/").rstrip("/")) or text


def build_public_text(text: Any) -> str:
    """Free text (a recorded error, a selection note) with absolute paths cut to their last part."""
    return ABSOLUTE_PATH.sub(lambda m: build_public_name(m.group(0)), str(text))


def _metric_id(name: str) -> str:
    """``eval_accuracy``/``test_accuracy`` -> ``accuracy``: the hub's metric names carry no split."""
    for prefix in ("eval_", "test_"):
        if name.startswith(prefix):
            return name[len(prefix):]
    return name


def build_eval_results(summary: SweepSummary, trial: TrialRecord, task: Task,
                       data: dict[str, Any]) -> list[EvalResult]:
    """The model-index: the winner's score on the split it was selected on and, when the summary
    has one for this trial, each test metric."""
    source = data.get("source")
    dataset = build_public_name(source) if source else "unknown"
    config_name = data.get("config_name")
    stats = summary.data or {}
    common = {"task_type": task.pipeline_task, "dataset_type": dataset, "dataset_name": dataset,
              "dataset_config": config_name}
    results = []
    score = summary.winner.score if summary.winner and summary.winner.trial_id == trial.trial_id \
        else trial.scores.get(summary.scope)
    if isinstance(score, (int, float)):
        ev = stats.get("eval") if isinstance(stats.get("eval"), dict) else {}
        metric = summary.objective.metric
        results.append(EvalResult(**common, dataset_split=ev.get("split"), metric_type=_metric_id(metric),
                                  metric_name=f"{metric} (selection, scope {summary.scope})",
                                  metric_value=float(score)))
    test = summary.test or {}
    if test.get("metrics") and test.get("trial_id") in (None, trial.trial_id):
        for name, value in test["metrics"].items():
            if isinstance(value, (int, float)):
                results.append(EvalResult(**common, dataset_split=test.get("split"), metric_type=_metric_id(name),
                                          metric_name=name, metric_value=float(value)))
    return results


def build_card_data(summary: SweepSummary, trial: TrialRecord, task: Task, job: dict[str, Any],
                    weights: dict[str, Any]) -> ModelCardData:
    """The card's YAML front matter, as ``huggingface_hub.ModelCard`` reads it back."""
    model = (job.get("model") or {}).get("name_or_path")
    data = job.get("data") or {}
    adapter = weights.get("weights") == "adapter"
    # The hub refuses a card whose base_model is not a model on the hub, so a local base model
    # is left out here (the card's text names its folder).
    base_model = model if model and is_hub_id(str(model)) else None
    tags = ["ftplat", task.name]
    if weights.get("weights") in ("merged", "adapter"):
        method = ((weights.get("peft") or {}).get("method") or "lora")
        tags += ["peft", method] if adapter else [method]
    eval_results = build_eval_results(summary, trial, task, data)
    metrics = list(dict.fromkeys(r.metric_type for r in eval_results))
    return ModelCardData(
        library_name="peft" if adapter else "transformers",
        base_model=base_model,
        datasets=[build_public_name(data["source"])] if data.get("source") else None,
        metrics=metrics or None,
        pipeline_tag=task.pipeline_task,
        tags=tags,
        model_name=summary.sweep_name,
        eval_results=eval_results or None,
    )


def build_card_document(card_data: ModelCardData, body: str) -> str:
    """The README.md text: the metadata block, then the card's markdown."""
    return f"---\n{card_data.to_yaml()}\n---\n\n{body}"
