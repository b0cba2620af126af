"""The search space: which job-config fields a sweep varies, and how the winner is chosen.

Parameters are dotted paths into :class:`~ftplat.config.schema.JobConfig`
(``training.learning_rate``), each with a distribution. ``scope`` has Ray Tune's
``ExperimentAnalysis.get_best_trial(scope=...)`` meaning and is used everywhere: the searcher,
the scheduler and the final choice all see the same score.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from ftplat.config.hf_args import build_training_key_hint
from ftplat.config.peft_config import ALL_FIELDS
from ftplat.config.schema import JobConfig, StrictModel, check_task_metric, normalize_eval_metric
from ftplat.config.yaml_input import FLOAT_TEXT_RE
from ftplat.tasks import build_task

Scope = Literal["last", "avg", "last-5-avg", "last-10-avg", "all"]


def _describe_wrong_number(value: Any, kind: str) -> str:
    if isinstance(value, str) and FLOAT_TEXT_RE.match(value.strip()):
        return f"got the string {value!r}: write it as a YAML number such as 2.0e-5 (with a dot)"
    return f"must be {kind}, got {value!r}"


class _Range(StrictModel):
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self):
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        return self

    def describe_misfit(self, value: Any) -> str | None:
        """Why ``value`` is not one this parameter can take (a point to evaluate); None if it is."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return _describe_wrong_number(value, "a number")
        if not self.low <= value <= self.high:
            return f"{value!r} is outside the searched range [{self.low}, {self.high}]"
        return None


class LogUniformParam(_Range):
    type: Literal["loguniform"]

    @model_validator(mode="after")
    def _positive(self):
        if self.low <= 0:
            raise ValueError(f"loguniform needs low > 0, got {self.low}")
        return self


class UniformParam(_Range):
    type: Literal["uniform"]


class IntParam(StrictModel):
    type: Literal["int"]
    low: int
    high: int
    log: bool = False

    @model_validator(mode="after")
    def _ordered(self):
        if not self.low < self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.log and self.low < 1:
            raise ValueError(f"log: true needs low >= 1 (a log scale has no 0 or below), got low {self.low}")
        return self

    def describe_misfit(self, value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int):
            return _describe_wrong_number(value, "a whole number")
        if not self.low <= value <= self.high:
            return f"{value!r} is outside the searched range [{self.low}, {self.high}] (high included)"
        return None


class ChoiceParam(StrictModel):
    type: Literal["choice"]
    values: list[Any] = Field(min_length=1)

    def describe_misfit(self, value: Any) -> str | None:
        # True == 1 in Python; a choice of [0, 1] does not offer true.
        if any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in self.values):
            return None
        return f"{value!r} is not one of the choices {self.values}"


Param = Annotated[
    Union[LogUniformParam, UniformParam, IntParam, ChoiceParam], Field(discriminator="type")
]


class ObjectiveConfig(StrictModel):
    metric: str = "eval_accuracy"
    """A metric of the job's task (eval_accuracy, eval_f1, eval_loss, eval_mse...). Default:
    the job's training.metric_for_best_model, so trials and checkpoints are ranked alike."""
    mode: Literal["max", "min"] = "max"
    """The metric's natural direction (default: max for accuracy and f1, min for loss, mse, mae)."""

    @field_validator("metric")
    @classmethod
    def _eval_prefix(cls, value):
        return normalize_eval_metric(value)


class FifoSchedulerConfig(StrictModel):
    type: Literal["fifo"]


class AshaSchedulerConfig(StrictModel):
    type: Literal["asha"]
    """Asynchronous successive halving on the scope objective."""
    grace_period: int = Field(default=1, ge=1)
    """Evaluations every trial gets before it can be stopped."""
    reduction_factor: float = Field(default=2.0, gt=1)
    """Keep 1/reduction_factor of the trials at each rung."""
    max_t: int | None = Field(default=None, ge=1)
    """Evaluations of a full trial; default: the epoch count when evaluating per epoch, or
    ceil(max_steps / eval_steps) with eval_strategy steps (the Trainer also evaluates at the last step)."""


SchedulerConfig = Annotated[
    Union[FifoSchedulerConfig, AshaSchedulerConfig], Field(discriminator="type")
]


def _default_parameters() -> dict[str, Any]:
    return {
        "training.learning_rate": LogUniformParam(type="loguniform", low=1.0e-5, high=1.0e-4),
        "training.warmup_steps": UniformParam(type="uniform", low=0.0, high=0.2),
        "training.weight_decay": UniformParam(type="uniform", low=0.0, high=0.1),
    }


def build_default_parameter_data() -> dict[str, dict[str, Any]]:
    """The default parameters as YAML-shaped data, so overrides merge into them exactly as
    they merge into a file's ``parameters``."""
    return {path: param.model_dump() for path, param in _default_parameters().items()}


class SearchSpaceConfig(StrictModel):
    """A sweep: what varies, what is optimised, and how many trials run."""

    parameters: dict[str, Param] = Field(default_factory=_default_parameters)
    """``{dotted.job.path: distribution}``; default: training.learning_rate loguniform [1e-5, 1e-4], training.warmup_steps uniform [0, 0.2] (a ratio), training.weight_decay uniform [0, 0.1]. Only fields each trial applies itself: training.* (not metric_for_best_model, greater_is_better, save_total_limit), model.peft.*, model.trainable_patterns, model.config_overrides.* (a key the job sets), task.mlm_probability, resources.num_workers, use_gpu, cpus_per_worker, gpus_per_worker, max_failures."""
    objective: ObjectiveConfig = ObjectiveConfig()
    scope: Scope = "last"
    """How a trial's evaluations become one score: its last, the mean of all, of the last 5
    or 10, or its best ("all")."""
    num_samples: int = Field(default=8, ge=1)
    """Number of trials."""
    algorithm: Literal["optuna", "random"] = "optuna"
    """How trials are proposed: ``optuna`` (TPE, learns from finished trials) or ``random``
    (independent draws from the distributions, Tune's BasicVariantGenerator; a baseline)."""
    seed: int = 0
    """Seed of the proposer (Optuna's TPE sampler or the random draws): the same seed proposes the same trials."""
    startup_trials: int | None = Field(default=None, ge=1)
    """With ``algorithm: optuna``: trials TPE draws at random before it models the finished
    ones. Default: a quarter of num_samples, between 2 and 10 (Optuna's own default, 10,
    would make every sweep of up to 10 trials a plain random search)."""
    scheduler: SchedulerConfig = FifoSchedulerConfig(type="fifo")
    """``{type: fifo}`` runs every trial to the end; ``{type: asha, ...}`` stops weak trials early."""
    points_to_evaluate: list[dict[str, Any]] = []
    """Trials to run first, as {parameter path: value} (e.g. the recipe's own settings): every
    parameter, each a value it can take (inside its range, one of its choices)."""

    @field_validator("parameters")
    @classmethod
    def _not_empty(cls, value):
        if not value:
            raise ValueError("is empty; name at least one parameter, e.g. training.learning_rate")
        return value

    @model_validator(mode="after")
    def _startup_needs_optuna(self):
        if self.startup_trials is not None and self.algorithm != "optuna":
            raise ValueError(
                f"startup_trials applies to algorithm: optuna only (got algorithm: {self.algorithm}); "
                "remove startup_trials or set algorithm: optuna"
            )
        return self

    def build_startup_trials(self) -> int:
        """TPE's random start: ``startup_trials`` or a quarter of the trials, within [2, 10]."""
        if self.startup_trials is not None:
            return self.startup_trials
        return min(10, max(2, self.num_samples // 4))

    @model_validator(mode="after")
    def _points_cover_parameters(self):
        # Checked here, not by the searcher: Optuna refuses a value outside its distribution
        # only once Ray runs, and a value of the wrong type would fail its trial.
        for i, point in enumerate(self.points_to_evaluate):
            if set(point) != set(self.parameters):
                raise ValueError(
                    f"points_to_evaluate[{i}] must set exactly the parameters "
                    f"{sorted(self.parameters)}, got {sorted(point)}"
                )
            for path, value in point.items():
                misfit = self.parameters[path].describe_misfit(value)
                if misfit:
                    raise ValueError(f"points_to_evaluate[{i}].{path}: {misfit}")
        return self


_RANKING = ("the job's value ranks every trial's checkpoints (which one is best, loaded at the end and kept "
            "by retention), once per sweep")
_DATA = "the data is read and tokenized once per sweep, with the job's data section"
_MODEL = ("the data is tokenized and its labels encoded once per sweep, with the job's model's tokenizer and "
          "labels; a trial's own model would not match those token ids and labels")
#: Which paths a trial applies to its own copy of the job, first match wins (``x.`` covers a
#: section): None when it does, else why the value is read once for the whole sweep. A trial's
#: driver places its workers from its job (tune/trial.py), and each worker builds its
#: TrainingArguments, model and collator from it (train/worker.py); everything else is built
#: once, from the job config, before the first trial.
PER_TRIAL_RULES: tuple[tuple[str, str | None], ...] = (
    ("training.metric_for_best_model", _RANKING),
    ("training.greater_is_better", _RANKING),
    ("training.save_total_limit", "checkpoint retention applies the job's limit to every trial"),
    ("training.", None),
    ("model.peft.", None),
    ("model.peft", "a trial varies the adapter's fields (model.peft.r, ...), not whether there is one; set "
                   "model.peft in the job config"),
    ("model.trainable_patterns", None),
    ("model.config_overrides.", None),
    ("model.", _MODEL),
    ("data.", _DATA),
    ("task.mlm_probability", None),
    ("task.", "the task decides how the data is tokenized and how trials are scored, once per sweep; export "
              "and the test score use the job's task settings"),
    ("resources.num_workers", None),
    ("resources.use_gpu", None),
    ("resources.cpus_per_worker", None),
    ("resources.gpus_per_worker", None),
    ("resources.max_failures", None),
    ("resources.", "Tune reserves the trial drivers and runs the trials with the job's value, once per sweep"),
    ("storage.", "the sweep's storage folder and name are set once per sweep"),
    ("retention.", "one retention policy applies to the whole sweep"),
    ("tracking.", "the sweep's MLflow runs are set up once per sweep"),
)


def read_per_sweep_reason(path: str) -> str | None:
    """Why the job field ``path`` cannot vary per trial; None when a trial applies its own value."""
    for prefix, reason in PER_TRIAL_RULES:
        if path == prefix or (prefix.endswith(".") and path.startswith(prefix)):
            return reason
    return None


def check_against_job(space: SearchSpaceConfig, job: JobConfig) -> None:
    """Raise ``ValueError`` naming the parameter when a path or range does not fit ``job``."""
    job_dict = job.model_dump(context={ALL_FIELDS: True})  # every field a path may name
    for path, param in space.parameters.items():
        node: Any = job_dict
        parts = path.split(".")
        if parts[:2] == ["training", "hf_args"] and len(parts) == 3:
            continue  # any TrainingArguments field: its values are checked by check_parameter_values
        for depth, part in enumerate(parts):
            if node is None and depth > 0:
                where = ".".join(parts[:depth])
                raise ValueError(f"search space parameters.{path}: {where} is not set in the job config; set it "
                                 f"(e.g. model.peft: {{method: lora}}) to search its fields")
            if not isinstance(node, dict) or part not in node:
                where = ".".join(parts[:depth]) or "the job config"
                hint = build_training_key_hint(part, own_fields=set(node)) if parts[:depth] == ["training"] else None
                raise ValueError(
                    f"search space parameters.{path}: {part!r} is not a field of {where}"
                    + (f"; {hint.replace('training.hf_args.', 'parameters.training.hf_args.')}" if hint else "")
                )
            node = node[part]
        if isinstance(node, dict):
            raise ValueError(f"search space parameters.{path}: is a section, name one of its fields")
        reason = read_per_sweep_reason(path)
        if reason:
            raise ValueError(f"search space parameters.{path}: cannot vary per trial: {reason}; set it in the "
                             f"job config ({path}) and run one sweep per value")
        if path == "training.warmup_steps" and isinstance(param, (UniformParam, LogUniformParam)):
            if param.low < 1 <= param.high:
                raise ValueError(
                    f"search space parameters.{path}: range [{param.low}, {param.high}] mixes a "
                    "warmup ratio (< 1) with a step count (>= 1); keep both ends on one side of 1"
                )
            if param.low >= 1:  # a draw like 84.87 is no step count: every such trial was refused
                low, high = math.ceil(param.low), math.floor(param.high)
                steps = f"{{type: int, low: {low}, high: {high}}}" if low < high else "{type: int, low, high}"
                raise ValueError(
                    f"search space parameters.{path}: {param.type} range [{param.low}, {param.high}] draws "
                    f"fractional step counts; search steps with {steps}, or a ratio with a range below 1"
                )
    natural = check_task_metric(build_task(job), space.objective.metric, field="objective.metric")
    if space.objective.mode != natural:
        raise ValueError(
            f"objective.mode {space.objective.mode!r} for {space.objective.metric}: that metric is "
            f"{'minimised' if natural == 'min' else 'maximised'}; use mode: {natural}"
        )
