"""``ftplat_task.json``: the task a sweep trained and the settings serving needs, read from
the sweep's recorded config (``sweep_config.json``)."""

from __future__ import annotations

import json
import os
from typing import Any

from ftplat.config.schema import TaskConfig
from ftplat.errors import UserError
from ftplat.layout import build_sweep_config_uri
from ftplat.records import SweepSummary
from ftplat.storage import path_exists, read_json
from ftplat.tasks import TASK_FILE, TASKS

#: The task of a sweep whose config names none (an ftplat from before tasks: IMDB sentiment).
DEFAULT_TASK = "text-classification"
#: Settings of the job's ``task`` section that only training uses (the user's metric function).
TRAINING_ONLY_TASK_KEYS = ("metric_fn", "metric_modes")


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
