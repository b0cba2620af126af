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

from ray.tune import Callback
from ray.tune.experiment import Trial

from ftplat.checkpoints.gc import DELETE, build_trial_checkpoints, read_trials_gc_plan, run_gc_plan
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.layout import build_train_run_uri
from ftplat.ray_internals import sort_trials_by_creation
from ftplat.records import CHECKPOINT_NAME_KEY, TrialRecord
from ftplat.scoring import compute_history_stats, scope_score
from ftplat.tune.summary import build_complete_history, read_trainer_state_evals

logger = logging.getLogger(__name__)

_ROW_KEYS = ("training_iteration", "step", "num_evaluations", CHECKPOINT_NAME_KEY)


def build_live_trial_record(trial_id: str, status: str, rows: list[dict], trainer_evals: list[dict] | None, *,
                            objective_metric: str, mode: str, scope: str) -> TrialRecord:
    """One trial as the sweep stands now: its history so far and its score under ``scope``.

    ``rows`` are the Tune results this driver saw; ``trainer_evals`` the evaluations of the
    newest checkpoint's Trainer state, needed only when the rows do not start at the first
    evaluation (a resumed trial), else None.
    """
    history = build_complete_history(rows, trainer_evals) if trainer_evals else rows
    stats = compute_history_stats(history, objective_metric)
    return TrialRecord(trial_id=trial_id, status=status, history=history,
                       scores={scope: scope_score(stats, scope, mode)})


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
        self._finished_records: dict[str, TrialRecord] = {}
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

    def _record(self, trial: Trial, status: str) -> TrialRecord:
        if trial.trial_id in self._finished_records:
            return self._finished_records[trial.trial_id]
        rows = self._rows.get(trial.trial_id, [])
        evals = None
        if status != Trial.PENDING and is_history_incomplete(rows):
            evals = read_trainer_state_evals(build_train_run_uri(self.sweep_path, trial.trial_id),
                                             self.objective["metric"])
        record = build_live_trial_record(trial.trial_id, status, rows, evals, objective_metric=self.objective["metric"],
                                         mode=self.objective["mode"], scope=self.objective["scope"])
        if record.finished:
            self._finished_records[trial.trial_id] = record
        return record

    def _apply(self, trials: list[Trial], finishing: tuple[str, str] | None) -> None:
        try:
            trials = sort_trials_by_creation(trials)
            statuses = {t.trial_id: t.status for t in trials}
            if finishing:
                statuses[finishing[0]] = finishing[1]
            checkpoints = [build_trial_checkpoints(self._record(t, statuses[t.trial_id]),
                                                   metric_for_best_model=self.metric_for_best_model,
                                                   scope=self.objective["scope"]) for t in trials]
            # No winner yet: the policy guards the leading finished trial and every running one.
            plan = read_trials_gc_plan(self.sweep_path, checkpoints, self.policy, mode=self.objective["mode"],
                                       greater_is_better=self.greater_is_better, winner_trial_id=None,
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
