"""Applying the retention policy while the sweep runs, so storage stays bounded as it goes.

A Tune callback in the sweep driver re-plans after every reported evaluation and every trial
end, with the same pure policy and the same planner as ``ftplat checkpoints gc``; the only
difference is that it also deletes what the policy drops from *running* trials (HF rotation:
their best plus the newest). That is safe because every trial driver repairs its Train run's
snapshot before it fits (``run_repair_snapshot``): Ray's controller keeps listing the deleted
folders until then, and would otherwise refuse to restore the run.

The policy is defined over each trial's complete history of reported checkpoints. Tune's
results of a trial restarted by ``--resume`` begin where it resumed, so the earlier
evaluations are read back from the Trainer state of its newest checkpoint, as the summary does.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from ray.tune import Callback
from ray.tune.experiment import Trial

from ftplat.checkpoints.gc import DELETE, FINISHED_STATUSES, build_gc_plan, run_gc_plan
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.storage import join_uri
from ftplat.train.reporting import CHECKPOINT_NAME_KEY
from ftplat.tune.scope import compute_scope_stats, scope_score, sort_trials_by_creation
from ftplat.tune.summary import build_complete_history, read_trainer_state_evals
from ftplat.tune.trial import build_train_run_name

logger = logging.getLogger(__name__)

_ROW_KEYS = ("training_iteration", "step", "num_evaluations", CHECKPOINT_NAME_KEY)


def build_live_trial_record(trial_id: str, status: str, rows: list[dict], trainer_evals: list[dict] | None, *,
                            objective_metric: str, mode: str, scope: str) -> dict[str, Any]:
    """One trial of the in-progress summary ``build_gc_plan`` plans from.

    ``rows`` are the Tune results this driver saw; ``trainer_evals`` the evaluations of the
    newest checkpoint's Trainer state, needed only when the rows do not start at the first
    evaluation (a resumed trial), else None.
    """
    history = build_complete_history(rows, trainer_evals) if trainer_evals else rows
    values = ((r["training_iteration"], r.get(objective_metric)) for r in history)
    stats = compute_scope_stats((i, math.nan if v is None else v) for i, v in values)
    return {"trial_id": trial_id, "status": status, "history": history,
            "scores": {scope: scope_score(stats, scope, mode)}}


def is_history_incomplete(rows: list[dict]) -> bool:
    """True when the first row this driver saw is not the trial's first evaluation."""
    return not rows or int(rows[0].get("num_evaluations") or 1) > 1


class LiveRetentionCallback(Callback):
    """Deletes, after each evaluation and trial end, the checkpoints the sweep's policy drops.

    Holds plain data only: Tune pickles its callbacks into the experiment state, and
    ``--resume`` unpickles them in a new driver.
    """

    def __init__(self, *, sweep_path: str, policy: RetentionPolicy, objective: dict[str, str],
                 metric_for_best_model: str, greater_is_better: bool):
        self.sweep_path = sweep_path
        self.policy = policy
        self.objective = dict(objective)
        self.metric_for_best_model = metric_for_best_model
        self.greater_is_better = greater_is_better
        self._rows: dict[str, list[dict]] = {}
        self._finished_records: dict[str, dict] = {}
        self._warned: set[str] = set()
        self.deleted_total = 0

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info):
        if result.get(CHECKPOINT_NAME_KEY):
            keep = (*_ROW_KEYS, self.objective["metric"], self.metric_for_best_model)
            self._rows.setdefault(trial.trial_id, []).append({k: result.get(k) for k in keep})
            self._apply(trials, finishing=None)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info):
        # Tune calls this before it marks the trial TERMINATED.
        self._apply(trials, finishing=(trial.trial_id, Trial.TERMINATED))

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info):
        self._apply(trials, finishing=(trial.trial_id, Trial.ERROR))

    def _record(self, trial: Trial, status: str) -> dict[str, Any]:
        if trial.trial_id in self._finished_records:
            return self._finished_records[trial.trial_id]
        rows = self._rows.get(trial.trial_id, [])
        evals = None
        if status != Trial.PENDING and is_history_incomplete(rows):
            run_uri = join_uri(self.sweep_path, build_train_run_name(trial.trial_id))
            evals = read_trainer_state_evals(run_uri, self.objective["metric"])
        record = build_live_trial_record(trial.trial_id, status, rows, evals, objective_metric=self.objective["metric"],
                                         mode=self.objective["mode"], scope=self.objective["scope"])
        if status in FINISHED_STATUSES:
            self._finished_records[trial.trial_id] = record
        return record

    def _apply(self, trials: list[Trial], finishing: tuple[str, str] | None) -> None:
        try:
            trials = sort_trials_by_creation(trials)
            statuses = {t.trial_id: t.status for t in trials}
            if finishing:
                statuses[finishing[0]] = finishing[1]
            summary = {
                "metric_for_best_model": self.metric_for_best_model,
                "scope": self.objective["scope"],
                "objective": {"mode": self.objective["mode"]},
                "winner": None,
                "trials": [self._record(t, statuses[t.trial_id]) for t in trials],
            }
            plan = build_gc_plan(self.sweep_path, self.policy, self.greater_is_better, summary=summary,
                                 delete_running=True)
            applied = run_gc_plan(plan, dry_run=False)
        except Exception as exc:  # noqa: BLE001
            # Storage hiccups must not kill the sweep: the policy runs again at the next
            # event and once more when the sweep ends.
            message = f"{type(exc).__name__}: {exc}"
            if message not in self._warned:
                self._warned.add(message)
                logger.warning("Checkpoint retention during the sweep failed (will retry): %s", message)
            return
        deleted = [a for a in applied if a.action == DELETE]
        if deleted:
            self.deleted_total += len(deleted)
            logger.info("Retention: deleted %d checkpoint(s) (%d so far this run): %s", len(deleted),
                        self.deleted_total, ", ".join(a.path.rsplit("/", 2)[-2] + "/" + a.path.rsplit("/", 1)[-1]
                                                      for a in deleted))
