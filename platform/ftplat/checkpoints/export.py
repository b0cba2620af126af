"""Exporting a sweep's winner as a ready Hugging Face model directory with a model card.

Beside the model files, ``ftplat_task.json`` (``ftplat.tasks.TASK_FILE``) names the job's task
and its settings, so ``ftplat predict`` and the MLflow model serve the export as the task it
was trained for; the model card asks that task for its description and usage example.
"""

from __future__ import annotations

import json
import os
import posixpath
from types import SimpleNamespace
from typing import Any

from ftplat.checkpoints.card import build_card_data, build_card_document, build_public_name, build_public_text
from ftplat.checkpoints.model_dir import run_write_model_dir
from ftplat.config.loading import build_trial_job
from ftplat.config.data_config import DataConfig
from ftplat.config.schema import TaskConfig
from ftplat.errors import UserError
from ftplat.layout import build_sweep_config_uri, build_train_run_uri
from ftplat.records import SweepSummary, TrialRecord
from ftplat.storage import join_uri, path_exists, read_json
from ftplat.tasks import TASK_FILE, TASKS, Task, build_task

EXPORT_RECORD = "ftplat_export.json"
#: The task of a sweep whose config names none (an ftplat from before tasks: IMDB sentiment).
DEFAULT_TASK = "text-classification"
#: Settings of the job's ``task`` section that only training uses (the user's metric function).
TRAINING_ONLY_TASK_KEYS = ("metric_fn", "metric_modes")
#: How the model card names the columns a job reads (``Task.read_columns``' config fields).
COLUMN_ROLES = {"text_column": "text", "text_pair_column": "text pair", "tokens_column": "tokens",
                "label_column": "label", "prompt_column": "prompt", "completion_column": "completion"}
#: ``data`` defaults of the job config, for sweep configs that leave a column out: every
#: field of DataConfig, so a task's ``read_columns`` finds each it reads.
DATA_COLUMN_DEFAULTS = {name: f.get_default(call_default_factory=True) for name, f in DataConfig.model_fields.items()}


def read_sweep_config(sweep_uri: str) -> dict[str, Any] | None:
    """The sweep's ``sweep_config.json`` (``{"job", "search_space"}``), None when it has none."""
    uri = build_sweep_config_uri(sweep_uri)
    return read_json(uri) if path_exists(uri) else None


def build_task_settings(sweep_config: dict[str, Any] | None, summary: SweepSummary | None = None) -> dict[str, Any]:
    """What ``ftplat_task.json`` holds: the job's ``task`` section without what only training
    uses (``metric_fn``, ``metric_modes``) and unset values, plus ``data.max_length``
    (``max_length``). A sweep config without a task
    section falls back to the summary's task, then to text-classification (older sweeps)."""
    job = (sweep_config or {}).get("job") or {}
    task = job.get("task") or {}
    # Settings left at their defaults stay out (a dumped config carries every task's).
    defaults = {name: f.default for name, f in TaskConfig.model_fields.items() if name != "type"}
    settings = {k: v for k, v in task.items() if k not in TRAINING_ONLY_TASK_KEYS and v is not None
                and (k not in defaults or v != defaults[k])}
    max_length = (job.get("data") or {}).get("max_length")
    if max_length is not None:
        # Serving reads no more tokens than training and test scoring did (the task decides
        # where that applies); the tokenizer's own limit is often longer.
        settings["max_length"] = int(max_length)
    if not settings.get("type"):
        settings["type"] = (summary.task if summary is not None and summary.task else DEFAULT_TASK)
    if settings["type"] not in TASKS:
        raise UserError(f"the sweep's task.type {settings['type']!r} is not one this ftplat serves "
                        f"({', '.join(TASKS)}); export it with the ftplat version that ran it")
    settings.update(TASKS[settings["type"]].build_serving_settings(job.get("data") or {}))
    if TASKS[settings["type"]].accepts_text_pair and sweep_config is not None:
        # Serving reads a TAB as a pair separator only for a pair model (a review may hold one).
        settings["text_pair"] = bool((job.get("data") or {}).get("text_pair_column"))
    return settings


def run_write_task_file(dest: str, settings: dict[str, Any]) -> str:
    """Write ``ftplat_task.json`` into the model folder ``dest``; return its path."""
    path = os.path.join(dest, TASK_FILE)
    with open(path, "w") as f:
        json.dump(settings, f, indent=2)
    return path


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


def run_export(sweep_uri: str, out_dir: str, *, adapter_only: bool = False) -> dict[str, Any]:
    """Write the winner of a finished sweep to ``out_dir``; return the exported trial record.
    A peft sweep's winner is merged into its base model, or with ``adapter_only`` exported
    as the adapter alone (the card names the base model it needs)."""
    out_dir = os.path.expanduser(out_dir)
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise UserError(f"OUT_DIR {out_dir!r} is a file; give a new or empty folder")
    summary = SweepSummary.read(sweep_uri)
    trial = summary.winner_trial()
    if trial is None or trial.best_checkpoint is None:
        raise UserError(f"sweep {sweep_uri!r} has no winner with a checkpoint to export")
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise UserError(f"OUT_DIR {out_dir!r} exists and is not empty; choose a new folder")
    # Under SWEEP as given: the recorded path is where the driver saw the sweep, which another
    # machine (another mount, a copied folder) does not have.
    checkpoint_uri = join_uri(build_train_run_uri(sweep_uri, trial.trial_id), trial.best_checkpoint.name)
    if not path_exists(checkpoint_uri):
        raise UserError(f"the winner's best checkpoint {trial.best_checkpoint.name} (trial {trial.trial_id}) is not "
                        f"in {sweep_uri!r}: {checkpoint_uri!r} does not exist (deleted, or a copy without it); "
                        "give the sweep folder that holds it")
    sweep_config = read_sweep_config(sweep_uri)
    settings = build_task_settings(sweep_config, summary)
    card = build_model_card(summary, trial, sweep_config)  # before copying: a failure leaves OUT_DIR empty
    job = (sweep_config or {}).get("job")
    # The winner's own job: its searched values (model.peft.r...) are what the card must name.
    winner_job = build_trial_job(job, trial.hyperparameters) if job else job
    weights = run_write_model_dir(checkpoint_uri, out_dir, winner_job,
                                  adapter_only=adapter_only)
    if weights["weights"] != "adapter" and winner_job:
        build_task(settings).run_complete_export(out_dir, winner_job)
    card += build_weights_section(weights, build_task(settings).auto_model)
    card_data = build_card_data(summary, trial, build_task(settings), (sweep_config or {}).get("job") or {}, weights)
    run_write_task_file(out_dir, settings)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(build_card_document(card_data, card))
    trial_dict = trial.to_dict()
    record = {"sweep": summary.sweep_name, "scope": summary.scope, "task": settings,
              "objective": {"metric": summary.objective.metric, "mode": summary.objective.mode},
              "trial": {k: trial_dict[k] for k in ("trial_id", "hyperparameters", "scores", "best_checkpoint")},
              "weights": weights}
    record["trial"]["best_checkpoint"] = {**record["trial"]["best_checkpoint"], "path": checkpoint_uri}
    if summary.test is not None:
        record["test"] = summary.test
    with open(os.path.join(out_dir, EXPORT_RECORD), "w") as f:
        json.dump(record, f, indent=2)
    return record


def run_push_to_hub(out_dir: str, repo_id: str, *, private: bool = False) -> str:
    """Upload the export folder ``out_dir`` to the hub model repo ``repo_id`` (created if
    missing); return the commit's URL. The token comes from huggingface_hub's usual sources
    (HF_TOKEN, ``hf auth login``). An unreachable hub or a refused token is a UserError."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi()
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        # The export record names this machine's checkpoint paths: it stays local.
        commit = api.upload_folder(repo_id=repo_id, folder_path=os.path.expanduser(out_dir), repo_type="model",
                                   commit_message="ftplat export", ignore_patterns=[EXPORT_RECORD])
    except OfflineModeIsEnabled as exc:
        raise UserError(f"the hub is offline (HF_HUB_OFFLINE=1): {exc}") from exc
    except HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        hint = " (log in with `hf auth login` or set HF_TOKEN to a token that may write there)" \
            if status in (401, 403) else ""
        raise UserError(f"the hub answered {status}: {str(exc).splitlines()[0]}{hint}") from exc
    except _hub_transport_error() as exc:
        raise UserError(f"the hub cannot be reached at {api.endpoint}: {type(exc).__name__}: {exc}") from exc
    except OSError as exc:  # huggingface_hub's own errors for a missing token or an unreadable folder
        raise UserError(f"{type(exc).__name__}: {exc}") from exc
    return commit.commit_url


def _hub_transport_error() -> type[Exception]:
    """The HTTP client's base error that huggingface_hub lets through on a refused connection
    (``ConnectError``): httpx2 in the huggingface_hub releases that depend on it, httpx before."""
    try:
        from httpx2 import HTTPError
    except ImportError:
        from httpx import HTTPError
    return HTTPError
