"""The job configuration: one strict schema for everything a sweep's trials share.

Every section is a frozen pydantic model that rejects unknown keys and refuses to coerce
strings into numbers (PyYAML reads ``1e-5`` as a string; ``1.0e-5`` is a number). Defaults
follow the IMDB recipe in the user's notes: bert-base-uncased, max_length 160, lr 2e-5,
batch 16, weight decay 0.01, evaluation and saving once per epoch, save_total_limit 2, best
model by accuracy.
"""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

#: Metrics the worker's ``compute_metrics`` produces (plus the Trainer's own loss).
EVAL_METRICS = ("accuracy", "f1", "loss")


class StrictModel(BaseModel):
    """Base for every config section: unknown keys are errors, no str->number coercion."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, strict=True, validate_default=True, use_attribute_docstrings=True
    )


def normalize_eval_metric(name: str, *, field: str) -> str:
    """Map ``accuracy`` or ``eval_accuracy`` to the key HF logs (``eval_accuracy``)."""
    bare = name[len("eval_") :] if name.startswith("eval_") else name
    if bare not in EVAL_METRICS:
        allowed = ", ".join(f"eval_{m}" for m in EVAL_METRICS)
        raise ValueError(f"{field} {name!r} is not produced by evaluation; allowed: {allowed}")
    return f"eval_{bare}"


def looks_like_local_path(source: str) -> bool:
    """True when ``source`` is meant as a filesystem path rather than a hub id."""
    return source.startswith(("/", "./", "../", "~")) or os.path.exists(source)


class ModelConfig(StrictModel):
    """Which pretrained model to fine-tune and which of its weights train."""

    name_or_path: str = "bert-base-uncased"
    """Hub id (``bert-base-uncased``) or a local model directory."""
    num_labels: int = Field(default=2, ge=2)
    """Number of classes of the classification head."""
    id2label: dict[int, str] | None = {0: "neg", 1: "pos"}
    """Class names written into the model config (exported models show them)."""
    trainable_patterns: list[str] | None = None
    """Regexes over parameter names; when set, only matching parameters train (the recipe's
    partial fine-tuning is ``["pooler", "classifier"]``). ``None`` trains everything."""
    trust_remote_code: bool = False
    """Run code shipped with a hub model. Off unless you trust the model's author."""

    @field_validator("id2label", mode="before")
    @classmethod
    def _int_keys(cls, value):
        # JSON and some YAML writers turn integer keys into strings.
        if isinstance(value, dict):
            return {int(k) if isinstance(k, str) and k.isdigit() else k: v for k, v in value.items()}
        return value

    @field_validator("trainable_patterns")
    @classmethod
    def _valid_regexes(cls, value):
        for pattern in value or []:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"{pattern!r} is not a valid regular expression ({exc})") from None
        if value is not None and not value:
            raise ValueError("must name at least one pattern, or be null to train everything")
        return value

    @model_validator(mode="after")
    def _labels_match(self):
        if self.id2label is not None and sorted(self.id2label) != list(range(self.num_labels)):
            raise ValueError(
                f"id2label keys must be 0..{self.num_labels - 1} to match num_labels="
                f"{self.num_labels}, got {sorted(self.id2label)}"
            )
        return self


class DataConfig(StrictModel):
    """Where the text classification data comes from and how much of it is used."""

    source: str = "stanfordnlp/imdb"
    """Hub id, a local directory of parquet/CSV/JSON files named after their splits
    (``train.parquet``, ``test-00000-of-00001.parquet``...), or an ``aclImdb/`` folder."""
    train_split: str = "train"
    """Split to train on."""
    eval_split: str = "test"
    """Split to evaluate on after every epoch (or eval_steps); it selects models and trials."""
    text_column: str = "text"
    """Column holding the text."""
    label_column: str = "label"
    """Column holding class ids 0..num_labels-1 (or names from model.id2label)."""
    max_length: int = Field(default=160, ge=8, le=8192)
    """Tokens per example; longer texts are truncated."""
    pad_to_max_length: bool = False
    """Pad every example to max_length (the recipe) instead of per batch (faster)."""
    train_size: int | None = Field(default=None, ge=2)
    """Stratified subset of the train split; ``None`` uses all of it."""
    eval_size: int | None = Field(default=None, ge=2)
    """Stratified subset of the eval split; ``None`` uses all of it."""
    subset_seed: int = 42
    """Seed of the stratified subsets."""
    empty_texts: Literal["error", "drop"] = "error"
    """Rows whose text is empty, whitespace-only or missing: ``error`` refuses the data and
    names the split and the count; ``drop`` leaves them out (the count is logged) before the
    subsets are drawn."""


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
    """Micro-batches per optimizer step."""
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
    """End each trial with its best checkpoint's weights."""
    metric_for_best_model: str = "eval_accuracy"
    """accuracy, f1 or loss (with or without eval_): ranks a trial's checkpoints."""
    greater_is_better: bool | None = None
    """Defaults to False for loss, True otherwise."""
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

    @field_validator("metric_for_best_model")
    @classmethod
    def _known_metric(cls, value):
        return normalize_eval_metric(value, field="metric_for_best_model")

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
        return self.metric_for_best_model != "eval_loss"


class ResourcesConfig(StrictModel):
    """How each trial is placed on the Ray cluster."""

    num_workers: int = Field(default=1, ge=1)
    """Data-parallel Ray Train workers per trial."""
    use_gpu: bool = False
    """One GPU per worker (gpus_per_worker) and CUDA training."""
    cpus_per_worker: float = Field(default=1.0, gt=0)
    """Also the torch thread count of each worker."""
    gpus_per_worker: float = Field(default=1.0, ge=0)
    """Only used when use_gpu is true."""
    trial_driver_cpus: float = Field(default=0.25, gt=0)
    """CPUs reserved for each trial's driver (it only waits on its workers)."""
    max_concurrent_trials: int = Field(default=1, ge=1)
    """Trials running at once (each needs trial_driver_cpus + num_workers x cpus_per_worker)."""
    max_failures: int = Field(default=0, ge=-1)
    """Worker-group restarts per trial, from the latest checkpoint (-1: unlimited)."""
    local_num_cpus: int | None = Field(default=None, ge=1)
    """Logical CPUs of the local cluster started when no RAY_ADDRESS is set (default:
    enough for max_concurrent_trials, at least the machine's cores)."""

    @property
    def cpus_per_trial(self) -> float:
        return self.trial_driver_cpus + self.num_workers * self.cpus_per_worker


class StorageConfig(StrictModel):
    """Where checkpoints, Tune state and the sweep summary go."""

    storage_path: str = "~/ftplat_results"
    """Local path, NFS mount or ``s3://bucket/prefix``; shared by every node of the cluster."""
    sweep_name: str | None = None
    """Folder of this sweep under storage_path; default ``<prefix>-<UTC timestamp>``."""

    @field_validator("storage_path")
    @classmethod
    def _no_uri_query(cls, value):
        # Sweep, trial and checkpoint folders are appended to the path, which would land them
        # inside a query (s3://b/p?endpoint_override=h&scheme=http/sweep); the environment
        # carries the same settings to pyarrow on every node.
        if "://" in value and "?" in value:
            raise ValueError(
                f"query parameters are not supported, got {value!r}; give the bucket and prefix only "
                "and set the endpoint and credentials in the environment of every node: "
                "AWS_ENDPOINT_URL=http://host:port, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_DEFAULT_REGION"
            )
        return value

    @field_validator("sweep_name")
    @classmethod
    def _safe_name(cls, value):
        if value is not None and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
            raise ValueError(f"must be letters, digits, '.', '_' or '-' (no slashes), got {value!r}")
        return value


class RetentionConfig(StrictModel):
    """Which checkpoints a sweep keeps in storage (per trial: training.save_total_limit with
    HF semantics, the best always kept). Applied after every evaluation while the sweep runs,
    when it ends, and by ``ftplat checkpoints gc``. Never deleted: the winner's best
    checkpoint, and the latest checkpoint of a running trial."""

    keep_top_k_trials: int | None = Field(default=None, ge=0)
    """Trials (by scope score) that keep their save_total_limit checkpoints; the others keep
    only their best and/or latest. null: every trial keeps its save_total_limit set."""
    keep_trial_best: bool = True
    """Trials outside the top K keep their best checkpoint."""
    keep_trial_latest: bool = True
    """Trials outside the top K keep their latest checkpoint (to resume them)."""
    apply_during_sweep: bool = True
    """Delete what the policy does not keep after every evaluation, so storage stays bounded
    while the sweep runs (running trials included: their best plus the newest)."""
    apply_at_end: bool = True
    """Delete what the policy does not keep when the sweep ends (false: only report it)."""


class TrackingConfig(StrictModel):
    """MLflow: one parent run per sweep, one child run per trial."""

    enabled: bool = True
    """Track the sweep in MLflow."""
    tracking_uri: str | None = None
    """MLflow tracking URI; default ``$MLFLOW_TRACKING_URI``, else ``sqlite:///<cwd>/mlflow.db``
    (absolute, because Ray workers run in other directories). Use an ``http://`` server when
    the cluster has more than one node."""
    experiment_name: str = "ftplat"
    """MLflow experiment that holds the sweep's runs."""
    registered_model_name: str | None = "ftplat-imdb-sentiment"
    """Model Registry name the sweep's winner is registered under; null skips registration."""


class JobConfig(StrictModel):
    """Everything the trials of one sweep share; the search space varies parts of it."""

    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    training: TrainingConfig = TrainingConfig()
    resources: ResourcesConfig = ResourcesConfig()
    storage: StorageConfig = StorageConfig()
    retention: RetentionConfig = RetentionConfig()
    tracking: TrackingConfig = TrackingConfig()

    @model_validator(mode="after")
    def _fp16_needs_gpu(self):
        # Accelerate runs fp16 on CPU as plain float32 without a word; bf16 does run on CPU.
        if self.training.fp16 and not self.resources.use_gpu:
            raise ValueError("training.fp16 is true but resources.use_gpu is false: float16 mixed precision "
                             "needs GPU workers; set resources.use_gpu: true, or training.fp16: false "
                             "(training.bf16 runs on CPU)")
        return self
