"""The ``training`` section: the Hugging Face ``TrainingArguments`` of every trial."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from ftplat.config.base import StrictModel, looks_like_local_path, normalize_eval_metric
from ftplat.tasks import build_metric_mode


class TrainingConfig(StrictModel):
    """The Hugging Face ``TrainingArguments`` a trial uses (built in one place:
    ``ftplat.train.arguments.build_training_arguments``)."""

    num_train_epochs: float = Field(default=3.0, gt=0)
    """Epochs per trial."""
    max_steps: int = Field(default=-1, ge=-1)
    """Positive: total optimizer steps, overriding num_train_epochs."""
    per_device_train_batch_size: int = Field(default=16, ge=1)
    """Batch size of each worker (the global batch is this x num_workers x accumulation)."""
    per_device_eval_batch_size: int = Field(default=16, ge=1)
    """Evaluation batch size of each worker."""
    gradient_accumulation_steps: int = Field(default=1, ge=1)
    """Micro-batches per optimizer step. The loss and its gradient are the global batch's: a head
    whose loss is a mean (classifiers, BERT-style masked LMs) is divided by the steps, a causal
    LM sums over the label tokens of all micro-batches and workers, as the Trainer does
    (transformers 5 scaled the first kind by the steps and the workers:
    huggingface/transformers#47688)."""
    learning_rate: float = Field(default=2.0e-5, gt=0, lt=1)
    """Peak AdamW learning rate (searched by default)."""
    weight_decay: float = Field(default=0.01, ge=0, lt=1)
    """AdamW weight decay, not applied to biases and LayerNorm (searched by default)."""
    warmup_steps: float = Field(default=0.0, ge=0)
    """Below 1: a fraction of the total steps (transformers 5 dropped ``warmup_ratio``);
    1 or more: a number of steps."""
    lr_scheduler_type: Literal[
        "linear", "cosine", "cosine_with_restarts", "polynomial", "constant", "constant_with_warmup"
    ] = "linear"
    """Learning-rate schedule after warmup."""
    optim: str = "adamw_torch"
    """HF optimizer name (a value of ``transformers.training_args.OptimizerNames``)."""
    max_grad_norm: float = Field(default=1.0, ge=0)
    """Gradient clipping norm (0 disables)."""
    eval_strategy: Literal["epoch", "steps"] = "epoch"
    """Every evaluation is reported to Tune and followed by a checkpoint."""
    eval_steps: int | None = Field(default=None, ge=1)
    """Steps between evaluations when eval_strategy is steps."""
    save_strategy: Literal["epoch", "steps"] = "epoch"
    """Must equal eval_strategy."""
    save_steps: int | None = Field(default=None, ge=1)
    """Must equal eval_steps when set."""
    logging_strategy: Literal["epoch", "steps", "no"] = "steps"
    """When training loss and learning rate are logged."""
    logging_steps: int = Field(default=50, ge=1)
    """Steps between training-loss logs."""
    save_total_limit: int = Field(default=2, ge=1)
    """Checkpoints kept per trial: the best by metric_for_best_model plus the most recent."""
    load_best_model_at_end: bool = True
    """End each trial with its best checkpoint's weights (the trainer's final model). Either way
    a trial's best checkpoint (by metric_for_best_model) is what the sweep scores on the test
    split, exports and registers, and HF keeps it beside the newest (save_total_limit 1 keeps 2)."""
    metric_for_best_model: str | None = None
    """A metric of the task (with or without eval_) that ranks a trial's checkpoints; default:
    the task's main metric (accuracy for text-classification)."""
    greater_is_better: bool | None = None
    """Default: the metric's natural direction (False for loss, mse, mae); the other one is refused
    (it would keep and export each trial's worst checkpoint)."""
    fp16: bool = False
    """Mixed precision float16 (GPU)."""
    bf16: bool = False
    """Mixed precision bfloat16."""
    seed: int = 42
    """Seed of model init and data order."""
    dataloader_num_workers: int = Field(default=0, ge=0)
    """Data-loading processes per worker."""
    deepspeed: str | None = None
    """DeepSpeed ZeRO: a shipped preset (``zero2``, ``zero3``, ``zero3_offload``) or the path of
    your own DeepSpeed JSON, whose "auto" values are filled from these training settings (see
    "DeepSpeed ZeRO" in README.md). null: plain data parallelism."""

    hf_args: dict[str, Any] = {}
    """Any other ``TrainingArguments`` field, passed through as given (``label_smoothing_factor:
    0.1``, ``gradient_checkpointing: true``, ``torch_compile: true``, ``eval_accumulation_steps:
    8``, ``group_by_length: true``, which transformers 5 spells ``train_sampling_strategy:
    group_by_length``...): checked against the installed transformers; the fields ftplat sets
    itself are refused with the reason, and those above with their own setting are named.
    Searchable as ``training.hf_args.<field>``."""

    @field_validator("metric_for_best_model")
    @classmethod
    def _eval_prefix(cls, value):
        return None if value is None else normalize_eval_metric(value)

    @field_validator("hf_args")
    @classmethod
    def _known_hf_args(cls, value):
        from ftplat.config.hf_args import check_hf_args

        return check_hf_args(value, own_fields=set(cls.model_fields))

    @field_validator("optim")
    @classmethod
    def _known_optimizer(cls, value):
        # The default is HF's own; looking a name up imports transformers (and torch, seconds),
        # so only a name the user chose pays for it, and a typo fails here, not in a worker.
        if value == "adamw_torch":
            return value
        import difflib

        from transformers.training_args import OptimizerNames

        known = [o.value for o in OptimizerNames]
        if value not in known:
            close = difflib.get_close_matches(value, known, n=4, cutoff=0.5) or known[:4]
            raise ValueError(f"{value!r} is not an optimizer transformers knows; closest: {', '.join(close)} "
                             f"(all {len(known)} names: transformers.training_args.OptimizerNames)")
        return value

    @field_validator("deepspeed")
    @classmethod
    def _preset_or_json_path(cls, value):
        from ftplat.zero.config import PRESETS

        if value is None or value in PRESETS or value.endswith(".json") or looks_like_local_path(value):
            return value
        raise ValueError(f"unknown DeepSpeed preset {value!r}; choose {', '.join(PRESETS)}, "
                         "or give the path of a DeepSpeed JSON file")

    @field_validator("warmup_steps")
    @classmethod
    def _warmup_integral_above_one(cls, value):
        if value >= 1 and value != int(value):
            raise ValueError(f"is a step count when >= 1 and must be a whole number, got {value}")
        return value

    @model_validator(mode="after")
    def _eval_and_save_together(self):
        # Each evaluation's report carries the checkpoint saved right after it, so Tune, the
        # scope statistics and checkpoint ranking all see the same rows.
        if self.eval_strategy != self.save_strategy:
            raise ValueError(
                f"eval_strategy ({self.eval_strategy!r}) and save_strategy ({self.save_strategy!r}) "
                "must match: every evaluation is reported with the checkpoint saved after it"
            )
        if self.eval_strategy == "steps":
            if self.eval_steps is None:
                raise ValueError("eval_steps is required when eval_strategy is 'steps'")
            if self.save_steps not in (None, self.eval_steps):
                raise ValueError(f"save_steps ({self.save_steps}) must equal eval_steps ({self.eval_steps})")
        if self.fp16 and self.bf16:
            raise ValueError("fp16 and bf16 cannot both be true; pick one")
        return self

    @property
    def resolved_greater_is_better(self) -> bool:
        if self.greater_is_better is not None:
            return self.greater_is_better
        return build_metric_mode(self.metric_for_best_model) == "max"
