"""DeepSpeed ZeRO configs: the shipped presets, the user's own JSON, fitted to each trial and
checked against the training settings before any cluster work (``ftplat.zero.conflicts``).

Hugging Face fills every ``"auto"`` value of a DeepSpeed config from ``TrainingArguments``
(``HfTrainerDeepSpeedConfig``) and raises on an explicit value that differs, but only inside
the worker, after the cluster started and the data was tokenized. The same comparisons run
here on the driver, against the job config and the search space, so a sweep whose trials
would all fail never starts. Nothing here imports torch or DeepSpeed.
"""

from __future__ import annotations

import importlib.util
import itertools
import json
import os
from importlib import resources
from typing import Any

from ftplat.errors import UserError
from ftplat.zero.conflicts import SCHEDULER_EQUIVALENTS, build_conflicts, build_hardware_conflicts, get_dotted

PRESETS = ("zero2", "zero3", "zero3_offload")

#: Job fields whose trial value decides how a preset is fitted (its scheduler and optimizer) or
#: whether a config may run at all (offload, mixed precision), not only whether a key must be
#: "auto". None of them is numeric, so only a choice can search them: every combination of the
#: choices is fitted and checked before the sweep.
TRIAL_FIELDS = ("training.deepspeed", "training.lr_scheduler_type", "training.optim", "resources.use_gpu",
                "training.fp16", "training.bf16")


#: How to get DeepSpeed, which is an optional extra of ftplat.
DEEPSPEED_INSTALL = "pip install 'ftplat[deepspeed]'"


def check_deepspeed_installed(what: str, *, otherwise: str = "") -> None:
    """Refuse ``what`` (the field or command that needs DeepSpeed) when DeepSpeed is not
    installed, naming the install command (and ``otherwise``, the other fix); found without
    importing it (seconds, and CUDA probes)."""
    try:
        found = importlib.util.find_spec("deepspeed") is not None
    except (ImportError, ValueError):  # a module entry of None, or a broken install
        found = False
    if not found:
        raise UserError(f"{what} needs DeepSpeed, which is not installed; run {DEEPSPEED_INSTALL}"
                        + (f", or {otherwise}" if otherwise else ""))


def is_preset(spec: str) -> bool:
    return spec in PRESETS


def load_preset(name: str) -> dict[str, Any]:
    """A shipped preset (package data, so a non-editable install has it)."""
    text = resources.files("ftplat.zero").joinpath("presets", f"{name}.json").read_text()
    return json.loads(text)


def load_deepspeed_json(path: str, *, field: str = "training.deepspeed") -> dict[str, Any]:
    """Read a user's DeepSpeed JSON; every problem is a one-line ``UserError`` naming the path."""
    if not os.path.isfile(path):
        raise UserError(f"{field}: DeepSpeed config {path!r} does not exist; give a JSON file or one of the "
                         f"presets {', '.join(PRESETS)}")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except json.JSONDecodeError as exc:
        raise UserError(f"{field}: {path} is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"{field}: {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if not isinstance(data, dict):
        raise UserError(f"{field}: {path} must hold a JSON object at the top level, got {type(data).__name__}")
    return data


def build_fitted_preset(preset: dict[str, Any], job) -> dict[str, Any]:
    """A preset (as shipped) fitted to the job: its DeepSpeed scheduler (linear warmup and
    decay) and optimizer (AdamW) give way to the Trainer's own when the job asks for another
    schedule or optimizer, so every ``training.lr_scheduler_type`` and ``training.optim`` works.
    Offload keeps DeepSpeed's optimizer: ZeRO-Offload steps on the CPU with DeepSpeedCPUAdam."""
    dropped = set()
    if "scheduler" in preset and job.training.lr_scheduler_type != SCHEDULER_EQUIVALENTS[preset["scheduler"]["type"]]:
        dropped.add("scheduler")
    if job.training.optim != "adamw_torch" and get_dotted(preset, "zero_optimization.offload_optimizer") is None:
        dropped.add("optimizer")
    return {key: value for key, value in preset.items() if key not in dropped}


def load_deepspeed_spec(spec: str, job) -> dict[str, Any]:
    return build_fitted_preset(load_preset(spec), job) if is_preset(spec) else load_deepspeed_json(spec)


def build_deepspeed_config(job, searched: set[str] = frozenset(),
                           drawn: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The DeepSpeed config of a job (``None`` without one), checked against the job and the
    searched parameters. Raises one ``UserError`` listing every problem; ``drawn`` (the
    search-space values that made this job from the sweep's) is named in it."""
    spec = job.training.deepspeed
    if spec is None:
        return None
    check_deepspeed_installed(f"training.deepspeed {spec!r}",
                              otherwise="remove training.deepspeed to train without it")
    config = load_deepspeed_spec(spec, job)
    problems = build_conflicts(config, job, set(searched)) + build_hardware_conflicts(config, job)
    if problems:
        where = f"preset {spec!r}" if is_preset(spec) else spec
        if drawn:
            where += ", in trials where the search space draws " + ", ".join(f"{k}={v!r}" for k, v in drawn.items())
        raise UserError(f"training.deepspeed ({where}): " + "; ".join(problems))
    return config


def build_sweep_deepspeed_configs(job, parameters: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The DeepSpeed config of every spec a sweep's trials can use, by spec, each checked for
    every combination of the searched TRIAL_FIELDS values (``parameters`` is the search space's
    ``{dotted path: parameter}``). A preset is given as shipped and each trial fits it to its own
    values (``build_trial_deepspeed_config``); the driver reads a JSON once and hands trials the
    dict, so the file need not exist on the worker nodes.
    """
    searched = set(parameters)
    choices = {path: list(parameters[path].values) for path in TRIAL_FIELDS
               if path in parameters and getattr(parameters[path], "values", None)}
    configs: dict[str, dict[str, Any]] = {}
    for combination in itertools.product(*choices.values()):
        drawn = dict(zip(choices, combination))
        trial_job = build_job_with(job, drawn)
        spec = trial_job.training.deepspeed
        config = build_deepspeed_config(trial_job, searched, drawn)
        if spec is not None:
            configs.setdefault(spec, load_preset(spec) if is_preset(spec) else config)
    return configs


def build_trial_deepspeed_config(configs: dict[str, dict[str, Any]], job) -> dict[str, Any] | None:
    """One trial's DeepSpeed config from the sweep's (``build_sweep_deepspeed_configs``): a
    preset fitted to the trial's own schedule and optimizer, a JSON as the driver read it."""
    spec = job.training.deepspeed
    config = configs.get(spec)
    return build_fitted_preset(config, job) if config is not None and is_preset(spec) else config


def build_job_with(job, values: dict[str, Any]):
    """``job`` with ``{section.field: value}`` applied (TRIAL_FIELDS are all two-part paths)."""
    sections: dict[str, dict[str, Any]] = {}
    for path, value in values.items():
        section, name = path.split(".")
        sections.setdefault(section, {})[name] = value
    return job.model_copy(update={s: getattr(job, s).model_copy(update=u) for s, u in sections.items()})
