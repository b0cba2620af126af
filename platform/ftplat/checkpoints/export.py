"""Exporting a sweep's winner as a ready Hugging Face model directory with a model card."""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any

import pyarrow.fs as pafs

from ftplat.errors import UserError
from ftplat.layout import build_sweep_config_uri
from ftplat.records import SweepSummary, TrialRecord
from ftplat.storage import path_exists, read_json, resolve_storage
from ftplat.zero.consolidate import has_whole_weights, is_zero_checkpoint, run_consolidate_zero_checkpoint

#: Files of a HF checkpoint that make up the model (not optimizer, scheduler or RNG state).
MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".txt", ".model")
EXCLUDED_FILES = {"trainer_state.json"}
EXPORT_RECORD = "ftplat_export.json"


def run_copy_model_files(checkpoint_uri: str, dest: str) -> list[str]:
    """Copy the model, config and tokenizer files of a checkpoint (any storage) to ``dest``;
    a ZeRO checkpoint without whole weights gets them consolidated from its shards."""
    fs, path = resolve_storage(checkpoint_uri)
    os.makedirs(dest, exist_ok=True)
    copied = []
    for info in fs.get_file_info(pafs.FileSelector(path)):
        name = posixpath.basename(info.path)
        if info.type == pafs.FileType.File and name.endswith(MODEL_FILE_SUFFIXES) and name not in EXCLUDED_FILES:
            with fs.open_input_stream(info.path) as src, open(os.path.join(dest, name), "wb") as out:
                out.write(src.read())
            copied.append(name)
    if "config.json" not in copied:
        raise UserError(f"{checkpoint_uri} holds no config.json: not a Hugging Face checkpoint")
    if not has_whole_weights(copied):
        if not is_zero_checkpoint(checkpoint_uri):
            raise UserError(f"{checkpoint_uri} holds neither model weights nor a DeepSpeed ZeRO checkpoint")
        # ZeRO-3 without stage3_gather_16bit_weights_on_model_save: only per-rank shards.
        copied += run_consolidate_zero_checkpoint(checkpoint_uri, dest)
    return copied


def build_model_card(summary: SweepSummary, trial: TrialRecord, sweep_config: dict[str, Any] | None) -> str:
    metric, scope = summary.objective.metric, summary.scope
    ckpt = trial.best_checkpoint
    job = (sweep_config or {}).get("job", {})
    lines = [
        f"# {summary.sweep_name}: winner trial {trial.trial_id}",
        "",
        f"Text classifier fine-tuned by ftplat from `{job.get('model', {}).get('name_or_path', '?')}`, "
        f"the winner of sweep `{summary.sweep_name}` under scope `{scope}` "
        f"({metric}, {summary.objective.mode}). Weights: the trial's best checkpoint "
        f"(`{posixpath.basename(ckpt.path)}`, epoch {ckpt.epoch}, "
        f"{summary.metric_for_best_model} = {ckpt.value}).",
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
    data = job.get("data", {})
    stats = summary.data or {}
    lines += [f"- source: `{data.get('source', '?')}`, text column `{data.get('text_column')}`, "
              f"label column `{data.get('label_column')}`, max_length {data.get('max_length')}"]
    for role in ("train", "eval"):
        if role in stats:
            lines.append(f"- {role}: split `{stats[role]['split']}`, {stats[role]['rows']} rows, "
                         f"label counts {stats[role]['label_counts']}")
    lines += ["", "## Evaluation history", "", "| epoch | step | " + metric + " | eval_loss |", "|---|---|---|---|"]
    lines += [f"| {r.get('epoch')} | {r.get('step')} | {r.get(metric)} | {r.get('eval_loss')} |" for r in trial.history]
    lines += ["", "## Versions", "", *[f"- {k}: {v}" for k, v in (summary.versions or {}).items()], ""]
    lines += ["## Use", "", "```python", "from transformers import pipeline",
              'clf = pipeline("text-classification", model="<this directory>")',
              'clf(["I hate this movie", "i love this movie"])', "```", ""]
    return "\n".join(lines)


def run_export(sweep_uri: str, out_dir: str) -> dict[str, Any]:
    """Write the winner of a finished sweep to ``out_dir``; return the exported trial record."""
    summary = SweepSummary.read(sweep_uri)
    trial = summary.winner_trial()
    if trial is None or trial.best_checkpoint is None:
        raise UserError(f"sweep {sweep_uri!r} has no winner with a checkpoint to export")
    if os.path.exists(out_dir) and os.listdir(out_dir):
        raise UserError(f"OUT_DIR {out_dir!r} exists and is not empty; choose a new folder")
    config_uri = build_sweep_config_uri(sweep_uri)
    sweep_config = read_json(config_uri) if path_exists(config_uri) else None
    run_copy_model_files(trial.best_checkpoint.path, out_dir)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(build_model_card(summary, trial, sweep_config))
    trial_dict = trial.to_dict()
    record = {"sweep": summary.sweep_name, "scope": summary.scope,
              "objective": {"metric": summary.objective.metric, "mode": summary.objective.mode},
              "trial": {k: trial_dict[k] for k in ("trial_id", "hyperparameters", "scores", "best_checkpoint")}}
    with open(os.path.join(out_dir, EXPORT_RECORD), "w") as f:
        json.dump(record, f, indent=2)
    return record
