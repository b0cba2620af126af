"""Ray's ``OptunaSearch`` for a sweep that ``--resume`` continues with its failed trials.

Ray tells Optuna a trial failed (``FAIL`` in the study) and marks it finished; when the resumed
sweep runs that trial again (``resume_errored``), Ray then drops every result of it ("already
finished"), so the study keeps the failure and TPE never learns the trial's score, which may be
the sweep's best. Here a result of a trial the study holds as failed opens a new Optuna trial
with the same values, and that one gets the results. Tune's ``ConcurrencyLimiter`` around it
forgot the trial when it failed and would drop its completion: it counts the trial as running
again. The fields read are ``OptunaSearch``'s private state (``_completed_trials``,
``_ot_trials``, ``_ot_study``, ``_space``), checked in ``tests/unit/test_optuna_resume.py``
against the installed Ray.
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from optuna.trial import TrialState
from ray.tune.search import ConcurrencyLimiter
from ray.tune.result import TRAINING_ITERATION
from ray.tune.search.optuna import OptunaSearch

#: The report field counting a trial's evaluations across resumes (``train/reporting.py``).
NUM_EVALUATIONS = "num_evaluations"


def build_finite_objective(result: dict[str, Any] | None, metric: str, mode: str) -> dict[str, Any] | None:
    """``result`` with a NaN ``metric`` (a diverged trial) as the worst value there is: Ray's
    ASHA compares NaN with nothing (the trial is never stopped) and Optuna refuses it (Ray
    logs the refusal and the trial stays RUNNING in the study, so TPE never learns the region
    is bad). The summary and the scope scores keep NaN (ranked last)."""
    value = (result or {}).get(metric)
    if isinstance(value, float) and math.isnan(value):
        return {**result, metric: -math.inf if mode == "max" else math.inf}
    return result


class ResumableOptunaSearch(OptunaSearch):
    """``OptunaSearch`` that gives a failed trial run again a new Optuna trial of its values."""

    def is_failed(self, trial_id: str) -> bool:
        """Whether the study holds ``trial_id`` as a failed trial Ray counts as finished."""
        if trial_id not in self._completed_trials:
            return False
        old = self._ot_trials.get(trial_id)
        if old is None:
            return False
        return self._ot_study._storage.get_trial(old._trial_id).state == TrialState.FAIL

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if self.is_failed(trial_id):
            self._reopen(trial_id)
        # Ray reports at training_iteration, which restarts at 1 when --resume restores a
        # trial: Optuna keeps the first value of a step, so the evaluations after a resume
        # were dropped or filed under earlier ones. num_evaluations counts them all.
        if NUM_EVALUATIONS in result:
            result = {**result, TRAINING_ITERATION: result[NUM_EVALUATIONS]}
        super().on_trial_result(trial_id, build_finite_objective(result, self.metric, self.mode))

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        result = build_finite_objective(result, self.metric, self.mode)
        if result is not None and not error:
            self._report_last(trial_id, result)
        super().on_trial_complete(trial_id, result, error)

    def _report_last(self, trial_id: str, result: dict[str, Any]) -> None:
        """The evaluation a trial ended at, as an intermediate value when the study lacks it:
        Tune passes the result ASHA stopped a trial at to ``on_trial_complete`` only, so every
        stopped trial's curve ended one evaluation early (a trial stopped at its first had none)."""
        ot_trial = self._ot_trials.get(trial_id)
        step = result.get(NUM_EVALUATIONS, result.get(TRAINING_ITERATION))
        if ot_trial is None or step is None or result.get(self.metric) is None:
            return
        stored = self._ot_study._storage.get_trial(ot_trial._trial_id)
        if stored.state == TrialState.RUNNING and step not in stored.intermediate_values:
            ot_trial.report(result[self.metric], step)

    def _reopen(self, trial_id: str) -> None:
        """A new RUNNING Optuna trial of the failed one's values, made directly: a queued one
        would come back from ask() after any points_to_evaluate still queued, and the study
        would file this trial's score under another point's values."""
        old = self._ot_study._storage.get_trial(self._ot_trials[trial_id]._trial_id)
        template = optuna.trial.create_trial(state=TrialState.RUNNING, params=old.params,
                                             distributions=old.distributions)
        number = self._ot_study._storage.create_new_trial(self._ot_study._study_id, template_trial=template)
        self._ot_trials[trial_id] = optuna.Trial(self._ot_study, number)
        self._completed_trials.discard(trial_id)


class ResumableConcurrencyLimiter(ConcurrencyLimiter):
    """Tune's ``ConcurrencyLimiter``, counting a failed trial that ``--resume`` runs again as
    running, so that its completion reaches the searcher (and its slot is freed again)."""

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        searcher = self.searcher
        if (self._limit_concurrency and trial_id not in self.live_trials
                and isinstance(searcher, ResumableOptunaSearch) and searcher.is_failed(trial_id)):
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        super().on_trial_result(trial_id, result)
