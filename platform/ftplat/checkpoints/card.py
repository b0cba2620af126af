"""An exported model's card: its text (selection, test, scores, data, use) and its Hugging
Face metadata, and the names it gives local paths.

A card is shared with the model (``--push-to-hub``), so it names a hub model or dataset by its
id as given and a local folder or file by its last path part only: the training machine's
paths say nothing to a reader and may say too much about the machine.
"""

from __future__ import annotations

import os
import posixpath
import re
from types import SimpleNamespace
from typing import Any

from huggingface_hub import EvalResult, ModelCardData
from huggingface_hub.errors import HFValidationError
from huggingface_hub.utils import validate_repo_id

from ftplat.checkpoints.task_file import build_task_settings
from ftplat.config.data_config import DataConfig
from ftplat.records import SweepSummary, TrialRecord
from ftplat.tasks import TASK_FILE, Task, build_task

#: An absolute path inside free text (an error message): from a '/' not preceded by a word
#: character, ':' or another '/', so ``and/or`` and ``s3://bucket`` stay as they are.
ABSOLUTE_PATH = re.compile(r"(?<![\w:/.~])(?:~)?/[^\s'\"`,;()\[\]]+")

#: How the model card names the columns a job reads (``Task.read_columns``' config fields).
COLUMN_ROLES = {"text_column": "text", "text_pair_column": "text pair", "tokens_column": "tokens",
                "label_column": "label", "prompt_column": "prompt", "completion_column": "completion"}
#: ``data`` defaults of the job config, for sweep configs that leave a column out: every
#: field of DataConfig, so a task's ``read_columns`` finds each it reads.
DATA_COLUMN_DEFAULTS = {name: f.get_default(call_default_factory=True) for name, f in DataConfig.model_fields.items()}


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


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "n/a" if value is None else str(value)


def build_column_lines(task: Task, data: dict[str, Any]) -> list[str]:
    """``text `review`, label `sentiment``` from the columns the task reads of this job."""
    values = {**DATA_COLUMN_DEFAULTS, **{k: v for k, v in data.items() if k in DATA_COLUMN_DEFAULTS}}
    try:
        columns = task.read_columns(SimpleNamespace(**values))
    except Exception:  # noqa: BLE001 - a card never fails on an odd stored config
        columns = {k: values[k] for k in ("text_column", "text_pair_column", "label_column") if values[k]}
    label_columns = [c for field, c in columns.items() if field.startswith("label_columns[")]
    parts = [f"{COLUMN_ROLES.get(field.split('[')[0], field)} `{column}`" for field, column in columns.items()
             if not field.startswith("label_columns[")]
    if label_columns:
        parts.append("labels " + ", ".join(f"`{c}`" for c in label_columns) + " (one 0/1 column each)")
    return parts


def build_role_line(role: str, stats: dict[str, Any], id2label: dict[Any, str] | None = None) -> str:
    """One role's split, rows and whatever label statistics its task recorded; class counts
    by the names of ``model.id2label`` when the job gave them."""
    name = "eval (selection)" if role == "eval" else role
    names = {str(k): v for k, v in (id2label or {}).items()}
    stats = {k: ({names.get(str(c), c): n for c, n in v.items()} if k == "label_counts" and isinstance(v, dict)
                 else v) for k, v in stats.items()}
    extras = [f"{k.replace('_', ' ')} {v}" for k, v in stats.items() if k not in ("split", "rows")]
    return f"- {name}: split `{stats.get('split', '?')}`, {stats.get('rows', '?')} rows" + \
        "".join(f", {e}" for e in extras)


def build_selection_lines(summary: SweepSummary, trial: TrialRecord) -> list[str]:
    """Where the winner was selected and its score there, beside its test score (or why none)."""
    metric, scope = summary.objective.metric, summary.scope
    stats, test = summary.data or {}, summary.test
    score = summary.winner.score if summary.winner and summary.winner.trial_id == trial.trial_id \
        else trial.scores.get(scope)
    ev = stats.get("eval") if isinstance(stats.get("eval"), dict) else None
    selection = build_public_text(stats["selection"]) if stats.get("selection") else None
    where = (f"split `{ev.get('split', '?')}` ({ev.get('rows', '?')} rows"
             + (f"; {selection}" if selection else "") + ")") if ev else \
        (selection or "the eval split (not recorded in this summary)")
    ckpt = trial.best_checkpoint
    best = f"; best checkpoint {summary.metric_for_best_model} = {_fmt(ckpt.value)}" if ckpt else ""
    lines = [f"- Selected on {where}: {metric}[{scope}] = {_fmt(score)}{best}"]
    if not test:
        lines.append("- Test: not recorded (the sweep predates test scoring)")
    elif test.get("metrics"):
        shown = ", ".join(f"{k} = {_fmt(v)}" for k, v in test["metrics"].items())
        lines.append(f"- Test on split `{test.get('split', '?')}` ({test.get('rows', '?')} rows, scored once after "
                     f"the sweep): {shown}")
        if test.get("trial_id") not in (None, trial.trial_id):
            lines.append(f"  (scored for trial {test['trial_id']}, not this one)")
    elif test.get("skipped"):
        lines.append(f"- Test: none: {build_public_text(test['skipped'])}")
    elif test.get("error"):
        lines.append(f"- Test: failed: {build_public_text(test['error'])}")
    else:
        lines.append("- Test: no metrics recorded")
    return lines


def build_model_card(summary: SweepSummary, trial: TrialRecord, sweep_config: dict[str, Any] | None) -> str:
    """The card's markdown (without its metadata block): every path in it is a hub id or a
    local folder's name, never the training machine's absolute path."""
    metric, scope = summary.objective.metric, summary.scope
    ckpt = trial.best_checkpoint
    job = (sweep_config or {}).get("job") or {}
    settings = build_task_settings(sweep_config, summary)
    task = build_task(settings)
    weights = (f" Weights: the trial's best checkpoint (`{posixpath.basename(ckpt.path.rstrip('/'))}`, epoch "
               f"{ckpt.epoch}, {summary.metric_for_best_model} = {ckpt.value}).") if ckpt else ""
    lines = [
        f"# {summary.sweep_name}: winner trial {trial.trial_id}",
        "",
        f"{task.description} (task `{task.name}`) fine-tuned by ftplat from "
        f"`{build_public_name((job.get('model') or {}).get('name_or_path', '?'))}`, the winner of sweep "
        f"`{summary.sweep_name}` under scope `{scope}` ({metric}, {summary.objective.mode}).{weights}",
        "",
        "## Selection and test",
        "",
        *build_selection_lines(summary, trial),
        "",
        "## Score under every scope",
        "",
        "| scope | " + metric + " |",
        "|---|---|",
        *[f"| {s} | {v} |" for s, v in trial.scores.items()],
        "",
        "## Hyperparameters",
        "",
        *[f"- `{k}`: {v}" for k, v in trial.hyperparameters.items()],
        "",
        "## Data",
        "",
    ]
    data = job.get("data") or {}
    stats = summary.data or {}
    source = f"- source: `{build_public_name(data.get('source', '?'))}`"
    if data.get("config_name"):
        source += f" (configuration `{data['config_name']}`)"
    lines.append(source + (f", max_length {data['max_length']}" if data.get("max_length") is not None else ""))
    lines.append("- columns: " + ", ".join(build_column_lines(task, data)))
    id2label = (job.get("model") or {}).get("id2label")
    lines += [build_role_line(role, stats[role], id2label) for role in ("train", "eval", "test")
              if isinstance(stats.get(role), dict)]
    if stats.get("selection"):
        lines.append(f"- selection split: {build_public_text(stats['selection'])}")
    if settings.get("threshold") is not None:
        lines.append(f"- threshold: a label is predicted from score {settings['threshold']}")
    if settings.get("prompt_columns"):
        names = " and ".join(f"`{c}`" for c in settings["prompt_columns"])
        lines.append(f"- prompt: the texts of {names}, a blank line apart (empty ones left out); give prompts so "
                     "(the MLflow model joins a table of those columns itself)")
    lines += ["", "## Evaluation history", "", "| epoch | step | " + metric + " | eval_loss |", "|---|---|---|---|"]
    lines += [f"| {r.get('epoch')} | {r.get('step')} | {r.get(metric)} | {r.get('eval_loss')} |" for r in trial.history]
    lines += ["", "## Versions", "", *[f"- {k}: {v}" for k, v in (summary.versions or {}).items()], ""]
    pair = " (a sentence pair: `TEXT<TAB>TEXT_PAIR`)" if data.get("text_pair_column") else ""
    if task.generates_text:
        defaults = task.generation_defaults
        pair = (f" (`--max-new-tokens N`, `--temperature T`: {defaults['max_new_tokens']} tokens, "
                f"{'greedy' if not defaults['temperature'] else 'temperature ' + str(defaults['temperature'])} by default)")
    usage = task.build_usage_example(text_pair=bool(data.get("text_pair_column")) and task.accepts_text_pair)
    lines += ["## Use", "", "```python", *usage, "```", "",
              f"Or `ftplat predict <this directory> TEXT ...`{pair}, which reads `{TASK_FILE}` for the task.", ""]
    return "\n".join(lines)


def build_weights_section(weights: dict[str, Any], auto_model: str) -> str:
    """The model card's words on a peft sweep's weights: merged, or an adapter and its base
    (loaded with the task's ``auto_model`` class)."""
    if weights.get("weights") not in ("merged", "adapter"):
        return ""
    peft = weights.get("peft") or {}
    shown = ", ".join(f"{k} {v}" for k, v in peft.items() if v is not None)
    base = build_public_name(weights["base_model"])
    # A local base model is named by its folder: the reader puts their own copy's path there.
    load_from = base if base == str(weights["base_model"]) else f"<path to {base}>"
    whole = weights.get("modules_to_save")
    trained_whole = (f"; {', '.join(f'`{m}`' for m in whole)} trained whole" if whole
                     else "; every weight outside the adapter is the base model's")
    lines = ["## Adapter", "", f"Trained as a peft adapter ({shown}) on the frozen base model `{base}`{trained_whole}."]
    if weights["weights"] == "merged":
        lines.append("This folder holds the base model with the adapter merged into its weights: it loads with "
                     "plain `from_pretrained` and needs neither peft nor the base model.")
    else:
        lines += ["This folder holds the adapter alone (and the config of the head); loading it needs `peft` and "
                  f"the base model `{base}`:", "", "```python", "from peft import PeftModel",
                  f"from transformers import AutoConfig, {auto_model}",
                  "config = AutoConfig.from_pretrained(\"<this directory>\")",
                  f"base = {auto_model}.from_pretrained(\"{load_from}\", config=config, ignore_mismatched_sizes=True)",
                  "model = PeftModel.from_pretrained(base, \"<this directory>\")", "```", "",
                  "`ftplat predict <this directory>` does this for you."]
    return "\n".join(["", *lines, ""])
