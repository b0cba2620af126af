"""Applying the retention policy while the sweep runs, so storage stays bounded as it goes.

A Tune callback in the sweep driver re-plans after every reported evaluation and every trial
end, with the same pure policy and the same planner as ``ftplat checkpoints gc``; the only
difference is that it also deletes what the policy drops from *running* trials (HF rotation:
their best plus the newest). That is safe because every trial driver repairs its Train run's
snapshot before it fits (``run_repair_snapshot``): Ray's controller keeps listing the deleted
folders until then, and would otherwise refuse to restore the run.

The policy is defined over each trial's complete history of reported checkpoints, the history
the summary scores (``summary.build_trial_history``). The rows this callback saw are kept in
Tune's experiment state (``get_state``), so ``--resume`` brings them back; rows a driver saw
after Tune last saved its state are read back from the trial's ``result.json``, and
evaluations no Tune row holds from the Trainer state of the run's registered latest
checkpoint. A trial whose history still has gaps (unreadable storage) loses nothing until a
later event can read it.
"""

from __future__ import annotations

import logging

from ray.tune import Callback
from ray.tune.experiment import Trial

from ftplat.checkpoints.gc import DELETE, STRIP_STATE, build_trial_checkpoints, read_trials_gc_plan, run_gc_plan
from ftplat.checkpoints.retention import RetentionPolicy
from ftplat.layout import build_train_run_uri, build_trial_history_uri, parse_train_run_name
from ftplat.ray_internals import read_trial_result_rows, sort_trials_by_creation
from ftplat.records import CHECKPOINT_NAME_KEY, FINISHED_STATUSES, TrialRecord
from ftplat.scoring import compute_history_stats, scope_score
from ftplat.storage import write_json
from ftplat.tune.run_history import read_stored_history, read_trainer_state_evals
from ftplat.tune.summary import build_history_row, build_trial_history

logger = logging.getLogger(__name__)


def build_live_trial_record(trial_id: str, status: str, rows: list[dict], trainer_evals: list[dict] | None, *,
                            objective_metric: str, mode: str, scope: str) -> TrialRecord:
    """One trial as the sweep stands now: its history so far and its score under ``scope``.

    ``rows`` are the Tune results known for the trial; ``trainer_evals`` the evaluations of its
    latest checkpoint's Trainer state, needed only when the rows do not start at the first
    evaluation (a resumed trial), else None.
    """
    history = build_trial_history(rows, trainer_evals or [])
    stats = compute_history_stats(history, objective_metric)
    return TrialRecord(trial_id=trial_id, status=status, history=history,
                       scores={scope: scope_score(stats, scope, mode)})


def is_history_incomplete(rows: list[dict]) -> bool:
    """True when the first row known is not the trial's first evaluation, or a later one is
    missing (a report counts the trial's evaluations so far in ``num_evaluations``)."""
    if not rows:
        return True
    counts = [int(r.get("num_evaluations") or 0) for r in rows]
    return int(rows[0].get("num_evaluations") or 1) > 1 or len({r.get("step") for r in rows}) < max(counts)


def hold_strips_of(plan: list, trial_id: str) -> list:
    """``plan`` without the optimizer-state strips of ``trial_id``'s checkpoints.

    Tune calls ``on_trial_complete`` before it marks the trial TERMINATED and saves that
    status at the end of the step. Until then a driver that dies leaves a state in which the
    trial still runs, and ``--resume`` would restart it (one ASHA stopped, included) from a
    checkpoint without its optimizer and scheduler: HF's Trainer would then train on with a
    fresh Adam and the schedule back at its start, saying nothing. The next event's plan, or
    the sweep's final gc, strips them once the status is saved.
    """
    return [a for a in plan if not (a.action == STRIP_STATE
                                    and parse_train_run_name(a.path.rstrip("/").rsplit("/", 2)[-2]) == trial_id)]


class LiveRetentionCallback(Callback):
    """Deletes, after each evaluation and trial end, the checkpoints the sweep's policy drops.

    Holds plain data only: Tune pickles its callbacks with the experiment, and saves
    ``get_state`` with its experiment state, which ``--resume`` restores.
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
        # Trials whose every evaluation this driver saw (not kept in the saved state: a new
        # driver has seen none of them).
        self._observed: set[str] = set()
        self._warned: set[str] = set()
        self.deleted_total = 0

    def get_state(self) -> dict:
        return {"rows": self._rows, "deleted_total": self.deleted_total}

    def set_state(self, state: dict) -> None:
        self._rows = {tid: list(rows) for tid, rows in state.get("rows", {}).items()}
        self._observed = set()
        self.deleted_total = state.get("deleted_total", 0)

    def _metrics(self) -> tuple[str, str]:
        return self.objective["metric"], self.metric_for_best_model

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info):
        if result.get(CHECKPOINT_NAME_KEY):
            if trial.trial_id not in self._rows and int(result.get("num_evaluations") or 0) == 1:
                self._observed.add(trial.trial_id)
            self._rows.setdefault(trial.trial_id, []).append(build_history_row(result, self._metrics()))
            self._apply(trials, finishing=None)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info):
        # Tune calls this before it marks the trial TERMINATED.
        self._apply(trials, finishing=(trial.trial_id, Trial.TERMINATED))

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info):
        self._apply(trials, finishing=(trial.trial_id, Trial.ERROR))

    def _record(self, trial: Trial, status: str) -> tuple[TrialRecord, bool]:
        """The trial's record and whether its history is known to be complete.

        Rows this driver saw from the trial's first evaluation on are complete. Any other
        trial (one restored from Tune's saved state, or resumed mid-way) may miss rows at its
        head or its tail, so its history is rebuilt as the summary builds it: the trial's
        ``history.json``, Tune's result file and the Trainer state of its registered latest
        checkpoint, each one input only (``history.json`` of a failed trial that ``--resume``
        runs again stops where the failure did). The merge must pass the same gap check
        whatever its sources; when it does not, or a source cannot be read, the history is not
        known and nothing of the trial is deleted.
        """
        if trial.trial_id in self._finished_records:
            if status in FINISHED_STATUSES:
                return self._finished_records[trial.trial_id], True
            del self._finished_records[trial.trial_id]  # run again: its record grows
        rows = self._rows.get(trial.trial_id, [])
        evals, known, stored = None, True, None
        observed = trial.trial_id in self._observed and not is_history_incomplete(rows)
        run_uri = build_train_run_uri(self.sweep_path, trial.trial_id)
        if status != Trial.PENDING and not observed:
            stored = read_stored_history(run_uri)
            tune_rows = [build_history_row(r, self._metrics()) for r in read_trial_result_rows(trial) or []
                         if r.get(CHECKPOINT_NAME_KEY)]
            # Oldest first: of two rows of one step the later wins (a restarted trial reports
            # again what a crash rolled back).
            rows = build_trial_history([*(stored.rows or []), *tune_rows, *rows])
            evals = read_trainer_state_evals(run_uri, self.objective["metric"])
            known = ((evals is not None or stored.rows is not None) and not stored.unreadable
                     and (not rows or not is_history_incomplete(build_trial_history(rows, evals or []))))
        record = build_live_trial_record(trial.trial_id, status, rows, evals, objective_metric=self.objective["metric"],
                                         mode=self.objective["mode"], scope=self.objective["scope"])
        if record.finished and known:
            if stored is None or stored.rows != record.history:
                # Before any of its checkpoints can go: they hold the Trainer states that
                # the summary would otherwise rebuild evaluations Tune's rows lack from.
                write_json(build_trial_history_uri(run_uri), record.history)
            self._finished_records[trial.trial_id] = record
        return record, known

    def _apply(self, trials: list[Trial], finishing: tuple[str, str] | None) -> None:
        try:
            trials = sort_trials_by_creation(trials)
            statuses = {t.trial_id: t.status for t in trials}
            if finishing:
                statuses[finishing[0]] = finishing[1]
            checkpoints = []
            for t in trials:
                record, known = self._record(t, statuses[t.trial_id])
                checkpoints.append(build_trial_checkpoints(record, metric_for_best_model=self.metric_for_best_model,
                                                           scope=self.objective["scope"], history_known=known))
            # No winner yet: the policy guards the leading finished trial and every running one.
            plan = read_trials_gc_plan(self.sweep_path, checkpoints, self.policy, mode=self.objective["mode"],
                                       greater_is_better=self.greater_is_better, winner_trial_id=None,
                                       delete_running=True)
            if finishing:
                plan = hold_strips_of(plan, finishing[0])
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
