"""``training.hf_args``: any other ``TrainingArguments`` field, checked against the installed
transformers before any cluster work."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from typing import Any

#: Fields ftplat sets itself, with the reason a user value would break the sweep.
OWNED_FIELDS = {
    "output_dir": "each trial writes to node-local scratch and Ray storage holds the checkpoints "
                  "(set storage.storage_path)",
    "eval_strategy": "use training.eval_strategy",
    "save_strategy": "use training.save_strategy (it must equal eval_strategy)",
    "eval_steps": "use training.eval_steps",
    "save_steps": "use training.save_steps",
    "do_train": "every trial trains",
    "do_eval": "every trial evaluates on the selection split",
    "do_predict": "the winner is scored on data.test_split after the sweep",
    "report_to": "ftplat reports to Ray Tune and MLflow itself (tracking section)",
    "load_best_model_at_end": "use training.load_best_model_at_end",
    "metric_for_best_model": "use training.metric_for_best_model",
    "greater_is_better": "use training.greater_is_better",
    "save_total_limit": "use training.save_total_limit (retention keeps HF's semantics)",
    "use_cpu": "follows resources.use_gpu",
    "deepspeed": "use training.deepspeed (a preset or a JSON path)",
    "local_rank": "Ray Train sets the distributed ranks",
    "ddp_backend": "Ray Train sets up the process group",
    "disable_tqdm": "progress goes to the Ray logs as lines, not bars",
    "resume_from_checkpoint": "resuming is ftplat's (`ftplat sweep --resume`, Ray restores the checkpoint)",
    "push_to_hub": "export the winner (`ftplat export`) and push that",
    "hub_model_id": "export the winner (`ftplat export`) and push that",
    "hub_token": "export the winner (`ftplat export`) and push that",
    "hub_strategy": "export the winner (`ftplat export`) and push that",
    "save_only_model": "resuming needs the optimizer state in the latest checkpoint",
    "overwrite_output_dir": "each trial writes to its own scratch folder",
    "run_name": "trial runs are named after their trial id",
    "logging_dir": "logs go to the Ray logs and MLflow",
    "data_seed": "follows training.seed",
    "eval_delay": "every checkpoint save must follow an evaluation, which scores it for retention and the "
                  "objective; evaluate less often with training.eval_steps",
    "eval_on_start": "the untrained model's evaluation would count in the trial's scope objective (avg, "
                     "last-N-avg) though no checkpoint holds that model",
    "prediction_loss_only": "every evaluation computes the task's metrics, which training.metric_for_best_model "
                            "and the objective read",
    "batch_eval_metrics": "the task's metrics (and task.metric_fn) take the whole evaluation's predictions",
}

#: TrainingArguments names from guides and notebooks that transformers 5 removed or ftplat
#: spells otherwise, with where the setting lives now.
HF_SPELLINGS = {
    "evaluation_strategy": "use training.eval_strategy (transformers renamed it)",
    "warmup_ratio": "use training.warmup_steps, where a value below 1 is a fraction of the training steps",
    "save_safetensors": "leave it out: transformers 5 always saves safetensors",
    "fp16_opt_level": "use training.fp16 or training.bf16 (transformers 5 removed apex)",
    "half_precision_backend": "use training.fp16 or training.bf16 (transformers 5 removed apex)",
    "jit_mode_eval": "leave it out: transformers 5 removed it",
    "no_cuda": "use resources.use_gpu",
    "use_cpu": "use resources.use_gpu",
    "ray_scope": "use the search space's scope (search.scope=last-5-avg)",
    "per_gpu_train_batch_size": "use training.per_device_train_batch_size",
    "per_gpu_eval_batch_size": "use training.per_device_eval_batch_size",
}


def build_training_key_hint(name: str, *, own_fields: set[str]) -> str | None:
    """Where a ``training.<name>`` that the schema does not know lives, for a name users know
    from TrainingArguments: ``training.hf_args.<name>``, a field ftplat sets, a renamed or
    removed one; None for other names. Imports transformers (an error path only)."""
    if name in HF_SPELLINGS:
        return HF_SPELLINGS[name]
    if name in OWNED_FIELDS:
        return f"set by ftplat: {OWNED_FIELDS[name]}"
    from transformers import TrainingArguments

    if name in {f.name for f in dataclasses.fields(TrainingArguments) if f.init} and name not in own_fields:
        return f"a TrainingArguments field without a setting of its own: give it as training.hf_args.{name}"
    return None

#: Fields transformers 5 replaced, as ``{old name: (new field, value meaning the old True)}``:
#: the old spelling (in every guide and notebook) is translated when the installed version lacks it.
RENAMED_FIELDS = {"group_by_length": ("train_sampling_strategy", "group_by_length")}


def _simple_type(annotation: Any) -> tuple[type, ...] | None:
    """The Python types a value of ``annotation`` may have, when it is plain (bool, int,
    float, str, optionally None); None for anything richer (left to transformers)."""
    if isinstance(annotation, str):
        return None
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation) if origin in (typing.Union, types.UnionType) else (annotation,)
    allowed: list[type] = []
    for arg in args:
        if arg is type(None):
            allowed.append(type(None))
        elif arg in (bool, int, float, str):
            allowed.append(arg)
        else:
            return None
    return tuple(allowed)


def _type_ok(value: Any, allowed: tuple[type, ...]) -> bool:
    if isinstance(value, bool):
        return bool in allowed
    if isinstance(value, int):
        return int in allowed or float in allowed
    return isinstance(value, allowed)


def check_hf_args(values: dict[str, Any], *, own_fields: set[str]) -> dict[str, Any]:
    """``values`` when every name is a ``TrainingArguments`` field ftplat does not set, with a
    value of the field's type; ValueError naming the field (and the closest name) otherwise.

    Importing transformers costs seconds, so an empty ``hf_args`` is not checked.
    """
    if not values:
        return values
    from transformers import TrainingArguments

    fields = {f.name: f for f in dataclasses.fields(TrainingArguments) if f.init}
    hints = typing.get_type_hints(TrainingArguments)
    values = build_renamed_fields(values, fields)
    for name, value in values.items():
        if name in OWNED_FIELDS:
            raise ValueError(f"{name!r} is set by ftplat and cannot be passed through: {OWNED_FIELDS[name]}")
        if name not in fields and name in HF_SPELLINGS:
            raise ValueError(f"{name!r} is not a TrainingArguments field of transformers 5: {HF_SPELLINGS[name]}")
        if name in own_fields:
            raise ValueError(f"{name!r} has its own setting: use training.{name} instead of training.hf_args.{name}")
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{name!r} is not a TrainingArguments field of the installed transformers{hint}")
        allowed = _simple_type(hints.get(name))
        if allowed is not None and not _type_ok(value, allowed):
            kinds = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise ValueError(f"{name} must be {kinds}, got {type(value).__name__} {value!r}")
        choices = fields[name].metadata.get("choices")
        if choices and value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}, got {value!r}")
    return values


def build_renamed_fields(values: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
    """``values`` with old field names the installed transformers replaced written the new way."""
    out = dict(values)
    for old, (new, meaning) in RENAMED_FIELDS.items():
        if old in out and old not in fields and new in fields:
            if new in out:
                raise ValueError(f"{old!r} and {new!r} both given; {old} is the old spelling of {new}: {meaning}")
            if not isinstance(out[old], bool):
                raise ValueError(f"{old} must be bool, got {type(out[old]).__name__} {out[old]!r}")
            if out.pop(old):
                out[new] = meaning
    return out
