"""What the MLflow runs of a sweep show as params: a child run's ``TrainingArguments`` kept to
what tells trials apart, the parent's fixed config and searched ranges.

The compare view of the MLflow UI plots every param that differs between the selected runs, so
a per-trial scratch path there is a useless axis, and a value logged twice (``hf.learning_rate``
beside ``training.learning_rate``) is a duplicate one.
"""

from __future__ import annotations

import functools
from typing import Any, Iterable

from ftplat.scoring import SCOPES

#: Per-trial paths and names: they differ in every trial and say nothing about it.
SCRATCH_ARGS = frozenset({"output_dir", "logging_dir", "run_name", "resume_from_checkpoint", "hub_model_id",
                          "push_to_hub_model_id", "push_to_hub_organization", "hub_token", "deepspeed"})
#: Logged even at transformers' default value: they are what a reader of a trial looks for.
KEY_ARGS = ("learning_rate", "num_train_epochs", "per_device_train_batch_size", "per_device_eval_batch_size",
            "gradient_accumulation_steps", "weight_decay", "warmup_steps", "lr_scheduler_type", "optim", "seed",
            "eval_strategy", "save_strategy", "metric_for_best_model", "bf16", "fp16", "max_grad_norm")
#: A step count only matters when its strategy counts steps (``save_steps`` with per-epoch saving
#: would read as if checkpoints were taken every 500 steps).
STEP_ARGS = {"save_steps": "save_strategy", "eval_steps": "eval_strategy", "logging_steps": "logging_strategy"}
#: Distributions whose values are spread on a log scale (the sweep report's axes).
LOG_DISTRIBUTIONS = frozenset({"loguniform", "qloguniform"})


@functools.lru_cache(maxsize=1)
def build_default_training_args() -> dict[str, Any]:
    """``TrainingArguments``' field defaults, as ``to_dict`` writes them (enums as their values).

    Read from the dataclass, not from an instance: building one resets accelerate's process
    state, which breaks the Trainer that is training in this process."""
    import dataclasses
    import enum

    from transformers import TrainingArguments

    defaults: dict[str, Any] = {}
    for f in dataclasses.fields(TrainingArguments):
        if f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            continue
        defaults[f.name] = value.value if isinstance(value, enum.Enum) else value
    return defaults


def build_hf_params(resolved: dict[str, Any], defaults: dict[str, Any], searched: Iterable[str]) -> dict[str, Any]:
    """The ``hf.*`` params of a child run from ``TrainingArguments.to_dict()``: the values that
    differ from ``defaults`` or are in ``KEY_ARGS``, without scratch paths, step counts of a
    strategy that does not count steps, nested values, and the fields a sweep searched (their
    value is logged once, under the searched name: ``training.learning_rate``)."""
    searched_args = {path.rsplit(".", 1)[-1] for path in searched if path.startswith("training.")}
    params: dict[str, Any] = {}
    for key, value in resolved.items():
        if key in SCRATCH_ARGS or key in searched_args or isinstance(value, (dict, list)):
            continue
        strategy = STEP_ARGS.get(key)
        if strategy and str(resolved.get(strategy)) != "steps":
            continue
        if key in KEY_ARGS or key not in defaults or value != defaults[key]:
            params[f"hf.{key}"] = value
    return params


def build_distribution_text(dist: dict[str, Any]) -> str:
    """A searched range as one param value: ``loguniform(2e-05, 0.0002)``, ``choice([8, 16])``."""
    kind = dist["type"]
    if kind == "choice":
        return f"choice({dist['values']!r})"
    if kind == "int" and dist.get("log"):
        return f"int({dist['low']}, {dist['high']}, log)"
    return f"{kind}({dist['low']!r}, {dist['high']!r})"


def build_axis_scale(dist: dict[str, Any] | None) -> str:
    """How the sweep report draws a parameter: ``log`` for a distribution sampled on a log scale,
    ``categorical`` for a choice, ``linear`` otherwise (and when the space is unknown)."""
    if not dist:
        return "linear"
    if dist.get("type") == "choice":
        return "categorical"
    if dist.get("type") in LOG_DISTRIBUTIONS or (dist.get("type") == "int" and dist.get("log")):
        return "log"
    return "linear"


def build_parent_params(job_dump: dict[str, Any], space_dump: dict[str, Any]) -> dict[str, Any]:
    """Flat params of the parent run: the fixed job config (a searched field's base value is
    never used, so it is left out), the scope, the objective and each searched range."""
    searched = {f"job.{path}" for path in space_dump["parameters"]}
    params: dict[str, Any] = {}

    def flatten(prefix: str, node: Any) -> None:
        if prefix in searched:
            return
        if isinstance(node, dict) and node and all(isinstance(k, str) for k in node):
            for k, v in node.items():
                flatten(f"{prefix}.{k}" if prefix else k, v)
        else:
            params[prefix] = node

    flatten("job", job_dump)
    params["search.scope"] = space_dump["scope"]
    params["search.objective"] = f"{space_dump['objective']['metric']} ({space_dump['objective']['mode']})"
    params["search.num_samples"] = space_dump["num_samples"]
    params["search.seed"] = space_dump["seed"]
    params["search.scheduler"] = space_dump["scheduler"]["type"]
    for path, dist in space_dump["parameters"].items():
        params[f"search.{path}"] = build_distribution_text(dist)
    params["scopes"] = ",".join(SCOPES)
    return params
