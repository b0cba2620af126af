"""The job configuration: one strict schema for everything a sweep's trials share.

Every section is a frozen pydantic model that rejects unknown keys and refuses to coerce
strings into numbers (PyYAML reads ``1e-5`` as a string; ``1.0e-5`` is a number). Defaults
follow the IMDB recipe in the user's notes: bert-base-uncased, max_length 160, lr 2e-5,
batch 16, weight decay 0.01, evaluation and saving once per epoch, save_total_limit 2, best
model by accuracy. What depends on the task (its head, metrics, columns) is checked against
the task (``ftplat.tasks``) once the whole job is read.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from ftplat.config.base import StrictModel, looks_like_local_path, normalize_eval_metric
from ftplat.config.data_config import DataConfig, ValidationConfig
from ftplat.config.peft_config import PeftConfig
from ftplat.config.training_config import TrainingConfig
from ftplat.tasks import TASK_NAMES, build_task

__all__ = ["DataConfig", "JobConfig", "ModelConfig", "PeftConfig", "ResourcesConfig", "RetentionConfig", "StorageConfig",
           "StrictModel", "TaskConfig", "TrackingConfig", "TrainingConfig", "ValidationConfig",
           "looks_like_local_path", "normalize_eval_metric"]


class TaskConfig(StrictModel):
    """What the sweep fine-tunes for: the head, the columns read, the metrics (``ftplat.tasks``)."""

    type: Literal[TASK_NAMES] = "text-classification"
    """text-classification, multi-label-classification, regression, token-classification,
    masked-lm or causal-lm."""
    threshold: float | None = Field(default=None, gt=0, lt=1)
    """multi-label-classification: the sigmoid score from which a label is predicted (default 0.5)."""
    mlm_probability: float = Field(default=0.15, gt=0, lt=1)
    """masked-lm: the share of tokens masked for the model to predict (run_mlm.py's 0.15);
    searchable as ``task.mlm_probability``. Evaluation masks at the same rate, once per trial
    (seeded by data.validation.seed): every evaluation scores the same tokens."""
    line_by_line: bool = False
    """masked-lm: each text is one sequence, truncated to data.max_length. false (run_mlm.py's
    default): the texts are concatenated and cut into data.max_length blocks."""
    packing: bool = False
    """causal-lm: concatenate the examples (each ending with EOS) and cut them into
    data.max_length blocks; false: each example is one sequence, truncated to data.max_length."""
    chat_template: bool | None = None
    """causal-lm with data.prompt_column: render each prompt as a user turn of the tokenizer's
    chat template (the completion follows as the answer). null: when the tokenizer has one;
    true: require it; false: never. ``predict`` renders its inputs the same way."""
    metric_fn: str | None = None
    """``module:function`` computing more metrics from the Trainer's EvalPrediction (a dict of
    floats), importable by the driver and the workers; name each in metric_modes. For masked-lm
    and causal-lm its predictions are the predicted token ids, not the logits."""
    metric_modes: dict[str, Literal["max", "min"]] = {}
    """The names metric_fn returns (bare, no eval_) and whether each is maximised or minimised."""

    @model_validator(mode="after")
    def _metric_fn_imports(self):
        if self.threshold is not None and self.type != "multi-label-classification":
            raise ValueError(f"threshold applies to multi-label-classification only, not {self.type}; remove it")
        # Refused when changed from the default only: every dumped job config (sweep_config.json,
        # each trial's) carries the defaults of every task's settings.
        only = {"mlm_probability": "masked-lm", "line_by_line": "masked-lm", "packing": "causal-lm",
                "chat_template": "causal-lm"}
        for name, task_type in only.items():
            if self.type != task_type and getattr(self, name) != type(self).model_fields[name].default:
                raise ValueError(f"{name} applies to task.type {task_type} only, not {self.type}; remove it")
        if bool(self.metric_fn) != bool(self.metric_modes):
            raise ValueError("metric_fn and metric_modes go together: metric_modes names what metric_fn returns")
        if self.metric_fn:
            from ftplat.tasks.base import build_user_metric_fn

            build_user_metric_fn(self.metric_fn)
        return self


#: Model config fields ftplat sets itself (the task's head), and from where.
FTPLAT_CONFIG_FIELDS = {"num_labels": "model.num_labels", "id2label": "model.id2label",
                        "label2id": "model.id2label", "problem_type": "task.type", "dtype": "model.dtype",
                        "torch_dtype": "model.dtype"}


class ModelConfig(StrictModel):
    """Which pretrained model to fine-tune and which of its weights train."""

    name_or_path: str = "bert-base-uncased"
    """Hub id (``bert-base-uncased``) or a local model directory."""
    num_labels: int | None = Field(default=None, ge=1)
    """Outputs of the task's head: classes, labels or tags (1 for regression). Default: the
    size of id2label; text-classification without either: 2 (neg, pos), the IMDB recipe."""
    id2label: dict[int, str] | None = None
    """Class, label or tag names written into the model config (exported models show them)."""
    trainable_patterns: list[str] | None = None
    """Regexes over parameter names; when set, only matching parameters train (the recipe's
    partial fine-tuning is ``["pooler", "classifier"]``). ``None`` trains everything."""
    peft: PeftConfig | None = None
    """Train a peft adapter (LoRA, DoRA, IA3) on the frozen model instead of every weight;
    checkpoints then hold the adapter and the head, not the base model."""
    dtype: Literal["float32", "bfloat16", "auto"] = "float32"
    """The dtype the weights load and train in. float32: full-precision weights and optimizer
    state whatever the checkpoint holds, with training.bf16/fp16 as mixed precision, as HF's
    examples train (a bfloat16 checkpoint trained in its own dtype, transformers 5's default,
    rounds most small updates away). bfloat16: for model.peft, a frozen bfloat16 base (half
    its memory) under an adapter and head that train in float32; without peft every weight
    trains in bfloat16 and loses most small updates (warned). auto: the checkpoint's own dtype."""
    trust_remote_code: bool = False
    """Run code shipped with a hub model. Off unless you trust the model's author."""
    config_overrides: dict[str, Any] = {}
    """Fields of the model's config set before it is built, as run_mlm.py's
    ``--config_overrides``: ``{attention_window: 256}`` (Longformer), ``{hidden_dropout_prob:
    0.2}``. Each must be a field of the model's config (checked before any work for a local
    model); searchable per trial as ``model.config_overrides.<field>`` when set here."""

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

    @field_validator("config_overrides")
    @classmethod
    def _overrides_not_ftplats(cls, value):
        for name in value:
            if name in FTPLAT_CONFIG_FIELDS:
                raise ValueError(f"{name} is set by ftplat from {FTPLAT_CONFIG_FIELDS[name]}; set it there")
        return value

    @model_validator(mode="after")
    def _one_way_to_choose_trainable(self):
        if self.peft is not None and self.trainable_patterns is not None:
            raise ValueError("trainable_patterns and peft both choose what trains; keep one (with peft the "
                             "adapter and the head train: add modules to peft.modules_to_save to train them whole)")
        return self

    @model_validator(mode="after")
    def _labels_match(self):
        if self.id2label is not None and self.num_labels is not None and sorted(self.id2label) != list(range(self.num_labels)):
            raise ValueError(
                f"id2label keys must be 0..{self.num_labels - 1} to match num_labels="
                f"{self.num_labels}, got {sorted(self.id2label)}"
            )
        return self


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
    trial_driver_cpus: float = Field(default=0.25, ge=0)
    """CPUs reserved for each trial's driver (it only waits on its workers); 0 reserves
    memory only, so the drivers of packed trials never split a node's CPUs."""
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
    keep_optimizer_state: bool = False
    """Completed trials keep the optimizer state in their checkpoints. false: it is deleted
    when a trial completes (nothing resumes a completed trial; export and scoring read only
    the model), so a completed trial keeps about its model's size, not three times it.
    Running and failed trials, and DeepSpeed checkpoints, always keep it."""
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
    (absolute, because Ray workers run in other directories). Every call goes through the sweep
    driver's node, so sqlite serves any cluster; use an ``http://`` server when that node goes
    away with the cluster (a KubeRay RayJob, ``ray down``)."""
    experiment_name: str = "ftplat"
    """MLflow experiment that holds the sweep's runs."""
    registered_model_name: str | None = "ftplat-imdb-sentiment"
    """Model Registry name the sweep's winner is registered under; null skips registration."""


class JobConfig(StrictModel):
    """Everything the trials of one sweep share; the search space varies parts of it."""

    task: TaskConfig = TaskConfig()
    model: ModelConfig = ModelConfig()
    data: DataConfig = DataConfig()
    training: TrainingConfig = TrainingConfig()
    resources: ResourcesConfig = ResourcesConfig()
    storage: StorageConfig = StorageConfig()
    retention: RetentionConfig = RetentionConfig()
    tracking: TrackingConfig = TrackingConfig()

    @model_validator(mode="before")
    @classmethod
    def _task_defaults(cls, data: Any):
        # The head's size and the checkpoint metric depend on the task; filled in here so the
        # resolved job (summary, sweep_config.json, every trial) states them.
        if not isinstance(data, dict):
            return data
        data = {k: (v.model_dump(exclude_unset=True) if isinstance(v, BaseModel) else v) for k, v in data.items()}
        task_section = data.get("task") or {}
        task_type = task_section.get("type", "text-classification") if isinstance(task_section, dict) else None
        if task_type not in TASK_NAMES:
            return data  # the field's own error names the choices
        task = build_task({**task_section, "type": task_type} if isinstance(task_section, dict) else task_type)
        if isinstance(data.get("model", {}), dict):
            data_section = data.get("data", {})
            data["model"] = task.resolve_model_defaults(data.get("model", {}),
                                                        data_section if isinstance(data_section, dict) else {})
        training = data.get("training", {})
        if isinstance(training, dict) and training.get("metric_for_best_model") is None:
            data["training"] = {**training, "metric_for_best_model": f"eval_{task.default_metric}"}
        training = data.get("training", {})
        if isinstance(training, dict) and training.get("greater_is_better") is None:
            bare = str(training["metric_for_best_model"]).removeprefix("eval_")
            modes = task.build_metric_modes()
            if bare in modes:
                data["training"] = {**training, "greater_is_better": modes[bare] == "max"}
        return data

    @model_validator(mode="after")
    def _fits_task(self):
        task = build_task(self)
        task.check_job(self)
        natural = check_task_metric(task, self.training.metric_for_best_model, field="training.metric_for_best_model")
        # Checkpoints are ranked, kept and loaded by this direction: the wrong one keeps each
        # trial's worst checkpoint and exports it.
        if self.training.greater_is_better is not None and self.training.greater_is_better != (natural == "max"):
            raise ValueError(
                f"training.greater_is_better is {str(self.training.greater_is_better).lower()} for "
                f"{self.training.metric_for_best_model}: that metric is "
                f"{'minimised' if natural == 'min' else 'maximised'}; set training.greater_is_better: "
                f"{str(natural == 'max').lower()}, or leave it out")
        if self.training.fp16 and self.model.dtype == "bfloat16":
            raise ValueError("training.fp16 is true with model.dtype bfloat16: float16 mixed precision's gradient "
                             "scaler refuses bfloat16 weights; set training.bf16: true instead, or model.dtype: float32")
        if self.training.fp16 and not self.resources.use_gpu:
            # Accelerate runs fp16 on CPU as plain float32 without a word; bf16 does run on CPU.
            raise ValueError("training.fp16 is true but resources.use_gpu is false: float16 mixed precision "
                             "needs GPU workers; set resources.use_gpu: true, or training.fp16: false "
                             "(training.bf16 runs on CPU)")
        return self


def check_task_metric(task: Any, metric: str, *, field: str) -> str:
    """``metric`` (eval_ prefixed) must be one the task's evaluation logs; its natural mode."""
    modes = task.build_metric_modes()
    bare = metric.removeprefix("eval_")
    if bare not in modes:
        allowed = ", ".join(f"eval_{m}" for m in modes)
        raise ValueError(f"{field} {metric!r} is not a metric of task.type {task.name}; allowed: {allowed} "
                         "(or add your own with task.metric_fn and task.metric_modes)")
    return modes[bare]
