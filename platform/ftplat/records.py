"""The sweep summary as typed records: what ``summary.json`` holds, written and read here only.

``summary.json`` is the sweep's record for everything that comes after it: retention and
``ftplat checkpoints gc``, export, MLflow, the printed table, the benchmarks. Its JSON shape is
a stable format; these classes are the one place that knows it. Reading is lenient about
informational fields (a summary written by an older ftplat lacks some) and strict about the
ones decisions depend on.

An evaluation row (``TrialRecord.history``) stays a plain dict: its metric names depend on the
task (``eval_accuracy``, ``eval_loss``, ...); the keys every row has are named below.
"""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field
from typing import Any

from ftplat.errors import UnreadableSweepError, UserError
from ftplat.layout import build_summary_uri
from ftplat.storage import path_exists, read_json, write_json

#: Keys of each evaluation report (and so of each history row), besides the eval metrics.
OBJECTIVE_KEY = "objective"
CHECKPOINT_NAME_KEY = "checkpoint_name"
#: True in the report of a trial's last evaluation (its last step): trials may differ in
#: length (a searched epoch count), and a scheduler must not stop one there.
FINAL_EVALUATION_KEY = "final_evaluation"
#: What a history row keeps of a report.
HISTORY_KEYS = ("training_iteration", "step", "epoch", "num_evaluations", OBJECTIVE_KEY, "train_loss",
                CHECKPOINT_NAME_KEY)
#: Keys HF's evaluation logs that are timings, not metrics of the task.
EVAL_TIMING_KEYS = frozenset({"eval_runtime", "eval_samples_per_second", "eval_steps_per_second",
                              "eval_model_preparation_time"})


def is_history_metric(key: str) -> bool:
    """A task's evaluation metric (``eval_accuracy``, ``eval_mse``, ``eval_loss``...)."""
    return key.startswith("eval_") and key not in EVAL_TIMING_KEYS
#: Tune statuses after which a trial writes nothing more (PENDING and PAUSED ones come back).
FINISHED_STATUSES = frozenset({"TERMINATED", "ERROR"})
#: Trained to its end or stopped by the scheduler: ``--resume`` restarts only the others.
COMPLETED_STATUS = "TERMINATED"


def clean_value(value: Any) -> Any:
    """JSON-safe scalars: numpy types to Python, NaN/inf to None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    return value


@dataclass(frozen=True)
class Objective:
    metric: str
    mode: str


@dataclass(frozen=True)
class BestCheckpoint:
    """A trial's best checkpoint under ``metric_for_best_model`` (HF's rule)."""

    path: str
    exists: bool
    step: int | None
    epoch: float | None
    metric: str
    value: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "exists": self.exists, "step": self.step, "epoch": self.epoch,
                self.metric: self.value}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, metric: str) -> BestCheckpoint | None:
        if not data:
            return None
        return cls(path=data["path"], exists=bool(data.get("exists", True)), step=data.get("step"),
                   epoch=data.get("epoch"), metric=metric, value=data.get(metric))

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]


@dataclass
class TrialRecord:
    """One trial: its values, status, scores under every scope, best checkpoint, history."""

    trial_id: str
    status: str
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    scores: dict[str, float | None] = field(default_factory=dict)
    best_checkpoint: BestCheckpoint | None = None
    train_run_path: str | None = None
    train_result: dict[str, Any] | None = None
    error: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    #: Reserved ``cpus``/``gpus``, ``wall_s``, ``cpu_seconds``/``gpu_seconds`` and, after the
    #: final retention pass, ``storage_bytes`` (``ftplat.tune.accounting``).
    cost: dict[str, Any] | None = None

    @property
    def num_evaluations(self) -> int:
        return len(self.history)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    def to_dict(self) -> dict[str, Any]:
        return {
            "trial_id": self.trial_id,
            "status": self.status,
            "hyperparameters": self.hyperparameters,
            "num_evaluations": self.num_evaluations,
            "scores": self.scores,
            "best_checkpoint": self.best_checkpoint.to_dict() if self.best_checkpoint else None,
            "train_run_path": self.train_run_path,
            "train_result": self.train_result,
            "error": self.error,
            "history": self.history,
            "cost": self.cost,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], metric_for_best_model: str) -> TrialRecord:
        return cls(
            trial_id=data["trial_id"],
            status=data["status"],
            hyperparameters=data.get("hyperparameters") or {},
            scores=data.get("scores") or {},
            best_checkpoint=BestCheckpoint.from_dict(data.get("best_checkpoint"), metric_for_best_model),
            train_run_path=data.get("train_run_path"),
            train_result=data.get("train_result"),
            error=data.get("error"),
            history=list(data.get("history") or []),
            cost=data.get("cost"),
        )


@dataclass(frozen=True)
class Winner:
    trial_id: str
    score: float | None
    hyperparameters: dict[str, Any]
    best_checkpoint: BestCheckpoint | None

    def to_dict(self) -> dict[str, Any]:
        return {"trial_id": self.trial_id, "score": self.score, "hyperparameters": self.hyperparameters,
                "best_checkpoint": self.best_checkpoint.to_dict() if self.best_checkpoint else None}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None, metric_for_best_model: str) -> Winner | None:
        if not data:
            return None
        return cls(trial_id=data["trial_id"], score=data.get("score"),
                   hyperparameters=data.get("hyperparameters") or {},
                   best_checkpoint=BestCheckpoint.from_dict(data.get("best_checkpoint"), metric_for_best_model))


@dataclass
class SweepSummary:
    """A finished (or, for live retention, running) sweep."""

    sweep_name: str
    sweep_path: str
    objective: Objective
    scope: str
    metric_for_best_model: str
    greater_is_better: bool
    trials: list[TrialRecord]
    winner: Winner | None = None
    winners_by_scope: dict[str, str | None] = field(default_factory=dict)
    save_total_limit: int | None = None
    retention: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] | None = None
    wall_seconds: float | None = None
    versions: dict[str, str | None] | None = None
    mlflow: dict[str, str] | None = None
    checkpoint_gc: dict[str, int] | None = None
    #: The final retention pass and MLflow failing, one line each; summary.json is written anyway.
    retention_error: str | None = None
    tracking_error: str | None = None
    #: The job's task (``task.type``).
    task: str | None = None
    #: The winner's best checkpoint scored once on the test split after the sweep: ``split``,
    #: ``rows``, ``trial_id``, ``checkpoint``, ``metrics`` (``test_<name>``); or ``skipped``
    #: (why none was taken) or ``error`` (it failed: the sweep exits 1).
    test: dict[str, Any] | None = None
    #: The trials' compute-seconds summed and the sweep folder's bytes after retention.
    cost: dict[str, Any] | None = None
    #: The name of Tune's newest experiment-state file as the summary was written: a --resume
    #: saves under a new name, so a later one says the summary is stale (mtimes, which said it
    #: before, do not survive a copy of the folder).
    tune_state_file: str | None = None

    @property
    def status_counts(self) -> dict[str, int]:
        statuses = sorted({t.status for t in self.trials})
        return {s: sum(1 for t in self.trials if t.status == s) for s in statuses}

    def trial(self, trial_id: str) -> TrialRecord:
        for rec in self.trials:
            if rec.trial_id == trial_id:
                return rec
        raise KeyError(trial_id)

    def winner_trial(self) -> TrialRecord | None:
        return self.trial(self.winner.trial_id) if self.winner else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sweep_name": self.sweep_name,
            "sweep_path": self.sweep_path,
            "objective": {"metric": self.objective.metric, "mode": self.objective.mode},
            "scope": self.scope,
            "metric_for_best_model": self.metric_for_best_model,
            "greater_is_better": self.greater_is_better,
            "save_total_limit": self.save_total_limit,
            "retention": self.retention,
            "num_trials": len(self.trials),
            "status_counts": self.status_counts,
            "winner": self.winner.to_dict() if self.winner else None,
            "winners_by_scope": self.winners_by_scope,
            "trials": [t.to_dict() for t in self.trials],
            "data": self.data,
            "wall_seconds": self.wall_seconds,
            "versions": self.versions,
            "mlflow": self.mlflow,
            "checkpoint_gc": self.checkpoint_gc,
            "retention_error": self.retention_error,
            "tracking_error": self.tracking_error,
            "task": self.task,
            "test": self.test,
            "cost": self.cost,
            "tune_state_file": self.tune_state_file,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SweepSummary:
        metric = data["metric_for_best_model"]
        return cls(
            sweep_name=data.get("sweep_name", ""),
            sweep_path=data.get("sweep_path", ""),
            objective=Objective(metric=data["objective"].get("metric", ""), mode=data["objective"]["mode"]),
            scope=data["scope"],
            metric_for_best_model=metric,
            greater_is_better=data.get("greater_is_better", True),
            trials=[TrialRecord.from_dict(t, metric) for t in data["trials"]],
            winner=Winner.from_dict(data.get("winner"), metric),
            winners_by_scope=data.get("winners_by_scope") or {},
            save_total_limit=data.get("save_total_limit"),
            retention=data.get("retention") or {},
            data=data.get("data"),
            wall_seconds=data.get("wall_seconds"),
            versions=data.get("versions"),
            mlflow=data.get("mlflow"),
            checkpoint_gc=data.get("checkpoint_gc"),
            retention_error=data.get("retention_error"),
            tracking_error=data.get("tracking_error"),
            task=data.get("task"),
            tune_state_file=data.get("tune_state_file"),
            test=data.get("test"),
            cost=data.get("cost"),
        )

    @classmethod
    def read(cls, sweep_uri: str) -> SweepSummary:
        """The summary of the sweep folder ``sweep_uri``; ``UserError`` when it has none."""
        uri = build_summary_uri(sweep_uri)
        if not path_exists(uri):
            raise UserError(f"SWEEP {sweep_uri!r} has no summary.json: not a finished ftplat sweep folder")
        try:
            return cls.from_dict(read_json(uri))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:  # cut short, or not ftplat's
            first = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), None)
            raise UnreadableSweepError(sweep_uri, f"{posixpath.basename(uri)}: {type(exc).__name__}"
                                       + (f" ({first[:300]})" if first else "")) from None

    def write(self) -> str:
        """Write ``summary.json`` into the sweep folder; return its URI."""
        uri = build_summary_uri(self.sweep_path)
        write_json(uri, self.to_dict())
        return uri
